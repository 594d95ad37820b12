//! Insight from storage: counts overall, a cluster's or namespace's resources by kind,
//! and one stored object.

use axum::extract::{Query as QueryParams, State};
use karpor_core::model::{Cluster, ResourceGroupRule};
use karpor_search::{Expr, Field, Op, Query, Value as SearchValue};
use karpor_storage::ResourceDocument;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{ApiError, ApiResult, Envelope, Reply};
use crate::openapi::Errors;
use crate::AppState;

/// Most buckets listed per count.
const BUCKETS: usize = 100;

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(stats))
        .routes(routes!(summary))
        .routes(routes!(detail))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub cluster_count: usize,
    pub resource_count: u64,
    pub resource_group_rule_count: usize,
}

#[utoipa::path(get, path = "/insight/stats", operation_id = "insightStats", tag = "insight",
    responses((status = 200, body = inline(Envelope<Stats>)),
        Errors))]
pub(crate) async fn stats(State(state): State<AppState>) -> ApiResult {
    let clusters = state.metastore.list_all::<Cluster>().await?.len();
    let rules = state.metastore.list_all::<ResourceGroupRule>().await?.len();
    let resources = state.storage.count(None).await?;
    Ok(Reply::ok(Stats {
        cluster_count: clusters,
        resource_count: resources,
        resource_group_rule_count: rules,
    }))
}

/// Which cluster, namespace or resource.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct Locator {
    pub cluster: String,
    pub namespace: Option<String>,
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
}

/// A term and how many documents have it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Count {
    pub key: String,
    pub count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummaryView {
    pub cluster: String,
    pub namespace: Option<String>,
    pub resource_count: u64,
    /// `apiVersion/kind` buckets, most first.
    pub count_by_kind: Vec<Count>,
    pub count_by_namespace: Vec<Count>,
    /// The resource, when the locator names one.
    pub resource: Option<ResourceSummary>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSummary {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: std::collections::BTreeMap<String, String>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub creation_timestamp: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub sync_at: OffsetDateTime,
}

#[utoipa::path(get, path = "/insight/summary", operation_id = "insightSummary", tag = "insight", params(Locator),
    responses((status = 200, body = inline(Envelope<SummaryView>)),
        Errors))]
pub(crate) async fn summary(
    State(state): State<AppState>,
    QueryParams(at): QueryParams<Locator>,
) -> ApiResult {
    if state.metastore.get::<Cluster>(&at.cluster).await?.is_none() {
        return Err(ApiError::not_found(format!(
            "cluster {:?} not found",
            at.cluster
        )));
    }
    if at.kind.is_some() || at.name.is_some() {
        let document = one(&state, &at).await?;
        return Ok(Reply::ok(SummaryView {
            cluster: at.cluster,
            namespace: at.namespace,
            resource_count: 1,
            count_by_kind: Vec::new(),
            count_by_namespace: Vec::new(),
            resource: Some(ResourceSummary {
                api_version: document.api_version,
                kind: document.kind,
                namespace: document.namespace,
                name: document.name,
                uid: document.uid,
                labels: document.labels,
                creation_timestamp: document.creation_timestamp,
                sync_at: document.sync_at,
            }),
        }));
    }
    let query = matching(&at);
    let counted = state.storage.search(&query, 0, 0).await?.total;
    if counted == 0 && at.namespace.is_some() {
        return Err(ApiError::not_found(format!(
            "namespace {:?} of cluster {:?} has no resources",
            at.namespace.unwrap_or_default(),
            at.cluster
        )));
    }
    let count = |field: Field| {
        let (storage, query) = (state.storage.clone(), query.clone());
        async move {
            storage.terms(&field, &query, BUCKETS).await.map(|buckets| {
                buckets
                    .into_iter()
                    .map(|b| Count {
                        key: b.key,
                        count: b.count,
                    })
                    .collect::<Vec<_>>()
            })
        }
    };
    let count_by_kind = count(Field::Kind).await?;
    let count_by_namespace = if at.namespace.is_none() {
        count(Field::Namespace).await?
    } else {
        Vec::new()
    };
    Ok(Reply::ok(SummaryView {
        cluster: at.cluster,
        namespace: at.namespace,
        resource_count: counted,
        count_by_kind,
        count_by_namespace,
        resource: None,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Detail {
    pub cluster: String,
    /// The object as stored.
    #[schema(value_type = Object)]
    pub object: Value,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub sync_at: OffsetDateTime,
    pub deleted: bool,
}

#[utoipa::path(get, path = "/insight/detail", operation_id = "insightDetail", tag = "insight", params(Locator),
    responses((status = 200, body = inline(Envelope<Detail>)),
        Errors))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    QueryParams(at): QueryParams<Locator>,
) -> ApiResult {
    let document = one(&state, &at).await?;
    Ok(Reply::ok(Detail {
        cluster: document.cluster,
        object: document.object,
        sync_at: document.sync_at,
        deleted: document.deleted,
    }))
}

/// The one document a locator names (kind and name required).
async fn one(state: &AppState, at: &Locator) -> Result<ResourceDocument, ApiError> {
    if at.kind.is_none() || at.name.is_none() {
        return Err(ApiError::bad_request("a resource needs kind and name"));
    }
    let found = state.storage.search(&matching(at), 0, 2).await?;
    let mut items = found.items.into_iter();
    match (items.next(), items.next()) {
        (None, _) => Err(ApiError::not_found("no such resource")),
        (Some(document), None) => Ok(document),
        (Some(_), Some(_)) => Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "more than one resource matches: name the namespace and apiVersion",
        )),
    }
}

/// The documents a locator covers, not marked deleted.
fn matching(at: &Locator) -> Query {
    let eq = |field, value: &str| Expr::Compare {
        field,
        op: Op::Eq,
        value: SearchValue::Text(value.to_owned()),
    };
    let mut all = vec![
        eq(Field::Cluster, &at.cluster),
        Expr::Compare {
            field: Field::Deleted,
            op: Op::Eq,
            value: SearchValue::Bool(false),
        },
    ];
    for (field, value) in [
        (Field::Namespace, &at.namespace),
        (Field::ApiVersion, &at.api_version),
        (Field::Kind, &at.kind),
        (Field::Name, &at.name),
    ] {
        if let Some(v) = value {
            all.push(eq(field, v));
        }
    }
    Query {
        filter: Expr::And(all),
        order_by: Vec::new(),
        limit: None,
        offset: None,
    }
}
