//! `GET /search`: Karpor's patterns (`sql`, the default, optionally narrowed by a
//! `keyword` on name and namespace; `dsl`; `nl`, a question the model service turns into
//! a query, checked by karpor's parser and run within the caller's scope, whose answer
//! shows the query that ran) and karpor's own keyword search (`pattern=keyword`), paged;
//! objects as stored or as Karpor's `custom-columns`.

use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use karpor_ai::prompt::{self, Catalog};
use karpor_ai::{Ai, ModelError, NlError, RunError};
use karpor_search::Field;
use karpor_storage::{SearchResult, SearchStorage, StorageError};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::access::{Permission, Routes};
use crate::auth::Principal;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::{ErrorEnvelope, Errors};
use crate::scope::Visible;
use crate::types::{Envelope, SearchItem, SearchPage, TotalRelation};
use crate::AppState;
use karpor_kube::redact;

/// Largest page.
pub(crate) const MAX_PAGE_SIZE: u64 = 1000;
/// Matches a search counts before its total becomes a lower bound: an exact count of a
/// quarter of a million matches costs more than the page (Elasticsearch's default too).
pub(crate) const COUNT_UP_TO: u64 = 10_000;
/// A page's size when none (or one Karpor would not take) is given.
const DEFAULT_PAGE_SIZE: u64 = 10;

pub(crate) fn routes() -> Routes {
    Routes::new().route(Permission::Read, routes!(search))
}

/// Karpor's parameters, read leniently as Karpor reads them (unknown ones ignored).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct SearchParams {
    /// `select * from resources where ...` (`pattern=sql`), `key=value,...` (`dsl`), or a
    /// keyword (`pattern=keyword`).
    #[param(example = "select * from resources where kind='ConfigMap'")]
    pub query: Option<String>,
    /// `sql` (default), `dsl`, `keyword`, or `nl` (a question in `query`; needs `ai` in the
    /// config).
    pub pattern: Option<String>,
    /// With `sql`: only matches whose name or namespace holds it. Alone: a keyword
    /// search of names, namespaces, labels and content. Empty: ignored.
    pub keyword: Option<String>,
    /// From 1 (default 1; anything else below is 1).
    pub page: Option<String>,
    /// 1 to 1000 (default 10, as for anything that is not a number).
    pub page_size: Option<String>,
    /// `origin` (default): the objects; `custom-columns=TITLE:.path,...`: each object
    /// becomes `{fields: {TITLE: value}, titles: [TITLE...]}`.
    pub format: Option<String>,
}

#[utoipa::path(get, path = "/search", operation_id = "search", tag = "search", params(SearchParams),
    responses((status = 200, body = inline(Envelope<SearchPage>)),
        (status = 429, description = "`pattern=nl`: over the caller's or the server's share of generations", body = ErrorEnvelope),
        Errors))]
pub(crate) async fn search(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    visible: Visible,
    Query(params): Query<SearchParams>,
) -> Response {
    // A natural-language search holds its place in the model service throughout.
    let natural = match (params.pattern.as_deref(), &state.ai) {
        (Some(NATURAL), Some(ai)) => match ai.enter(&caller.name) {
            Ok(permit) => Some((ai, permit)),
            Err(busy) => return crate::ai::busy(busy),
        },
        _ => None,
    };
    page(&visible, params, natural.as_ref().map(|(ai, _)| *ai))
        .await
        .into_response()
}

/// `pattern=nl`.
const NATURAL: &str = "nl";

/// `page` and `pageSize` as Karpor reads them: from 1, and 1 to 1000 (10 for anything
/// that is not a number or is below 1); above 1000 is refused.
pub(crate) fn page_and_size(
    page: &Option<String>,
    page_size: &Option<String>,
) -> Result<(u64, u64), ApiError> {
    let page = number(page).filter(|p| *p >= 1).unwrap_or(1);
    let page_size = number(page_size)
        .filter(|s| *s >= 1)
        .unwrap_or(DEFAULT_PAGE_SIZE);
    if page_size > MAX_PAGE_SIZE {
        return Err(ApiError::bad_request(format!(
            "pageSize must be 1 to {MAX_PAGE_SIZE}"
        )));
    }
    Ok((page, page_size))
}

async fn page(visible: &Visible, params: SearchParams, ai: Option<&Ai>) -> ApiResult<SearchPage> {
    let (page, page_size) = page_and_size(&params.page, &params.page_size)?;
    let columns = columns(params.format.as_deref())?;
    let query_text = params.query.as_deref().filter(|q| !q.trim().is_empty());
    let keyword = params.keyword.as_deref().filter(|k| !k.trim().is_empty());
    let from = (page - 1).saturating_mul(page_size);
    let bad = |e: karpor_search::SearchError| ApiError::bad_request(e.to_string());
    let (query, shown) = match (params.pattern.as_deref(), query_text, keyword) {
        (Some(NATURAL), question, _) => {
            let Some(ai) = ai else {
                return Err(ApiError::bad_request(
                    "pattern nl (natural language) needs a model service (`ai` in the config), which this server does not have: use sql, dsl or keyword",
                ));
            };
            let question = question
                .ok_or_else(|| ApiError::bad_request("query (the question) is required"))?;
            let (result, sql) = natural(ai, visible, question, from, page_size).await?;
            return Ok(Reply::ok(answer(result, sql, &columns, page, page_size)));
        }
        (Some("keyword"), Some(word), None) | (Some("keyword") | None, None, Some(word)) => {
            (karpor_search::keyword(word).map_err(bad)?, word.to_owned())
        }
        (Some("keyword"), Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "give the keyword as query or as keyword, not both",
            ))
        }
        (None | Some("sql"), Some(sql), keyword) => {
            let mut query = karpor_search::parse(sql).map_err(bad)?;
            let mut shown = sql.to_owned();
            if let Some(word) = keyword {
                query = karpor_search::narrow(query, word);
                let word: String = word.chars().filter(|c| !c.is_whitespace()).collect();
                // As Karpor shows it (appended), with WHERE when the query had none.
                let joiner = if sql.to_ascii_lowercase().contains(" where ") {
                    "AND"
                } else {
                    "WHERE"
                };
                shown.push_str(&format!(
                    " {joiner} (name LIKE '%{word}%' OR namespace LIKE '%{word}%')"
                ));
            }
            (query, shown)
        }
        (Some("dsl"), text, _) => {
            let text = text.unwrap_or_default();
            (karpor_search::dsl(text).map_err(bad)?, text.to_owned())
        }
        (Some(other), ..) if !matches!(other, "sql" | "keyword") => {
            return Err(ApiError::bad_request(format!(
                "pattern {other:?}: use sql, dsl, keyword or nl"
            )))
        }
        _ => return Err(ApiError::bad_request("query (or keyword) is required")),
    };
    let result = visible
        .search_counted(&query, from, page_size, Some(COUNT_UP_TO))
        .await?;
    Ok(Reply::ok(answer(result, shown, &columns, page, page_size)))
}

fn answer(
    result: SearchResult,
    shown: String,
    columns: &Option<Vec<Column>>,
    page: u64,
    page_size: u64,
) -> SearchPage {
    SearchPage {
        items: result
            .items
            .into_iter()
            .map(|d| SearchItem {
                cluster: d.cluster,
                object: match columns {
                    Some(columns) => custom_columns(&redact::object(d.object), columns),
                    None => redact::object(d.object),
                },
                sync_at: d.sync_at,
                deleted: d.deleted,
                issues: d.issues,
            })
            .collect(),
        sql_query: shown,
        total: result.total,
        total_relation: TotalRelation::of(result.exact),
        current_page: page,
        page_size,
    }
}

/// Clusters, kinds and namespaces a search prompt names: the most common the caller may
/// see.
async fn catalog(visible: &Visible) -> Result<Catalog, ApiError> {
    let everything = karpor_search::parse("select * from resources")
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut values = Vec::new();
    for field in [Field::Cluster, Field::Kind, Field::Namespace] {
        let buckets = visible
            .terms(&field, &everything, prompt::MAX_CATALOG_VALUES)
            .await?;
        values.push(buckets.into_iter().map(|b| b.key).collect::<Vec<_>>());
    }
    let namespaces = values.pop().unwrap_or_default();
    let kinds = values.pop().unwrap_or_default();
    let clusters = values.pop().unwrap_or_default();
    Ok(Catalog {
        clusters,
        kinds,
        namespaces,
    })
}

/// A question answered by the model's query, run within the caller's scope.
async fn natural(
    ai: &Ai,
    visible: &Visible,
    question: &str,
    from: u64,
    size: u64,
) -> Result<(SearchResult, String), ApiError> {
    let catalog = catalog(visible).await?;
    let found = ai
        .search(question, &catalog, |query| async move {
            visible
                .search_counted(&query, from, size, Some(COUNT_UP_TO))
                .await
                .map_err(|e| match e {
                    StorageError::Invalid(reason) => RunError::Query(reason),
                    other => RunError::Failed(other),
                })
        })
        .await;
    match found {
        Ok(found) => Ok((found.result, found.sql)),
        Err(NlError::Invalid { sql, reason }) => Err(ApiError::bad_request(format!(
            "the model's query could not be run: {reason}; sqlQuery: {sql}"
        ))),
        Err(NlError::Failed(e)) => Err(e.into()),
        Err(NlError::Model(e)) => {
            let status = match e {
                ModelError::Timeout(_) | ModelError::Unreachable(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                _ => StatusCode::BAD_GATEWAY,
            };
            Err(ApiError::new(status, e.to_string()))
        }
    }
}

/// A whole number, or nothing for anything else (as Karpor's `Atoi` with a default).
fn number(text: &Option<String>) -> Option<u64> {
    text.as_deref().and_then(|t| t.trim().parse().ok())
}

/// A custom column: its title and the path of keys to its value.
type Column = (String, Vec<String>);

/// `custom-columns=TITLE:.path,...` as columns; `None` for `origin`.
fn columns(format: Option<&str>) -> Result<Option<Vec<Column>>, ApiError> {
    let format = match format {
        None | Some("") | Some("origin") => return Ok(None),
        Some(f) => f,
    };
    let Some(spec) = format.strip_prefix("custom-columns=") else {
        return Err(ApiError::bad_request(format!(
            "unsupported format: {format} (origin or custom-columns=TITLE:.path,...)"
        )));
    };
    let mut columns = Vec::new();
    for column in spec.split(',').filter(|c| !c.is_empty()) {
        let Some((title, path)) = column.split_once(':') else {
            return Err(ApiError::bad_request(format!(
                "custom column {column:?} is not TITLE:.path"
            )));
        };
        let path = path.trim_start_matches('{').trim_end_matches('}');
        let segments = path
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        columns.push((title.to_owned(), segments));
    }
    Ok(Some(columns))
}

fn custom_columns(object: &Value, columns: &[Column]) -> Value {
    let mut fields = Map::new();
    for (title, path) in columns {
        let value = path
            .iter()
            .try_fold(object, |at, key| at.get(key))
            .cloned()
            .unwrap_or(Value::Null);
        fields.insert(title.clone(), value);
    }
    let titles: Vec<Value> = columns
        .iter()
        .map(|(t, _)| Value::String(t.clone()))
        .collect();
    serde_json::json!({"fields": fields, "titles": titles})
}
