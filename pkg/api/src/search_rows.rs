//! `GET /search/rows`: a search answered as rows and columns: chosen columns of each
//! matching document (paged as `/search` pages), a count of documents by one column's
//! values, or one count. Within the caller's scope; a value is what the document as
//! answered holds (kubectl's last-applied copy never is).

use axum::extract::Query;
use karpor_search::{Field, Shape, TableQuery};
use karpor_storage::{ResourceDocument, SearchStorage};
use serde::Deserialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::access::{Permission, Routes};
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::Errors;
use crate::scope::Visible;
use crate::search::{page_and_size, COUNT_UP_TO};
use crate::types::{Envelope, SearchRows, TotalRelation};
use karpor_kube::redact::LAST_APPLIED;

pub(crate) fn routes() -> Routes {
    Routes::new().route(Permission::Read, routes!(rows))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct RowsParams {
    /// `select COLUMN, ... from resources [where ...] [order by ...]`,
    /// `select COLUMN, count(*) from resources [where ...] group by COLUMN [limit n]` or
    /// `select count(*) from resources [where ...]`.
    #[param(
        example = "select namespace, count(*) from resources where kind = 'Pod' group by namespace"
    )]
    pub query: Option<String>,
    /// Columns only: from 1 (default 1).
    pub page: Option<String>,
    /// Columns only: 1 to 1000 (default 10).
    pub page_size: Option<String>,
}

#[utoipa::path(get, path = "/search/rows", operation_id = "searchRows", tag = "search",
    params(RowsParams),
    responses((status = 200, body = inline(Envelope<SearchRows>)), Errors))]
pub(crate) async fn rows(
    visible: Visible,
    Query(params): Query<RowsParams>,
) -> ApiResult<SearchRows> {
    let sql = params
        .query
        .as_deref()
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("query is required"))?;
    let table =
        karpor_search::parse_table(sql).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let TableQuery {
        query,
        shape,
        titles,
    } = table;
    let answer = |rows: Vec<Vec<Value>>, total, exact| SearchRows {
        columns: titles.clone(),
        rows,
        total,
        total_relation: TotalRelation::of(exact),
        sql_query: sql.to_owned(),
    };
    match shape {
        Shape::Columns(fields) => {
            let (page, size) = page_and_size(&params.page, &params.page_size)?;
            let from = (page - 1).saturating_mul(size);
            let found = visible
                .search_counted(&query, from, size, Some(COUNT_UP_TO))
                .await?;
            let rows = found
                .items
                .iter()
                .map(|d| fields.iter().map(|f| value(d, f)).collect())
                .collect();
            Ok(Reply::ok(answer(rows, found.total, found.exact)))
        }
        Shape::Count => {
            let found = visible.search(&query, 0, 0).await?;
            Ok(Reply::ok(answer(vec![vec![found.total.into()]], 1, true)))
        }
        Shape::Groups {
            by,
            limit,
            count_first,
        } => {
            if by == Field::Annotation(LAST_APPLIED.to_owned()) {
                return Err(ApiError::bad_request(format!(
                    "{LAST_APPLIED} holds a copy of the object (a Secret's values too) and is never answered"
                )));
            }
            let size = usize::try_from(limit).unwrap_or(usize::MAX);
            let buckets = visible.terms(&by, &query, size).await?;
            let rows: Vec<Vec<Value>> = buckets
                .into_iter()
                .map(|b| {
                    let (key, count) = (Value::from(b.key), Value::from(b.count));
                    if count_first {
                        vec![count, key]
                    } else {
                        vec![key, count]
                    }
                })
                .collect();
            let total = rows.len() as u64;
            Ok(Reply::ok(answer(rows, total, true)))
        }
    }
}

/// A document's value of `field`, as answered.
fn value(d: &ResourceDocument, field: &Field) -> Value {
    let time = |t: Option<time::OffsetDateTime>| {
        t.and_then(|t| t.format(&Rfc3339).ok())
            .map_or(Value::Null, Value::from)
    };
    match field {
        Field::Cluster => d.cluster.clone().into(),
        Field::ApiVersion => d.api_version.clone().into(),
        Field::Kind => d.kind.clone().into(),
        Field::Namespace => d.namespace.clone().into(),
        Field::Name => d.name.clone().into(),
        Field::Uid => d.uid.clone().into(),
        Field::ResourceVersion => d.resource_version.clone().into(),
        Field::CreationTimestamp => time(d.creation_timestamp),
        Field::DeletionTimestamp => time(d.deletion_timestamp),
        Field::SyncAt => time(Some(d.sync_at)),
        Field::Deleted => d.deleted.into(),
        Field::Label(key) => d.labels.get(key).cloned().map_or(Value::Null, Value::from),
        Field::Annotation(key) if key == LAST_APPLIED => Value::Null,
        Field::Annotation(key) => d
            .annotations
            .get(key)
            .cloned()
            .map_or(Value::Null, Value::from),
        Field::Issue => d.issues.iter().map(|f| f.rule.clone()).collect(),
        Field::Severity => d
            .issues
            .iter()
            .map(|f| f.severity.as_str().to_owned())
            .collect(),
        Field::Score => d.score().into(),
        // Not a column of the dialect: the parser never gives it.
        Field::Ref => Value::Null,
    }
}
