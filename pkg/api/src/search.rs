//! `GET /search`: Karpor's SQL dialect (`pattern=sql`, the default) or a keyword, paged.

use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{ApiError, ApiResult, Envelope, Reply};
use crate::openapi::Errors;
use crate::AppState;

/// Largest page.
pub const MAX_PAGE_SIZE: u64 = 1000;

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// `select * from resources where ...` (with `pattern=sql`), or the keyword (with
    /// `pattern=keyword`).
    #[param(example = "select * from resources where kind='ConfigMap'")]
    pub query: Option<String>,
    /// `sql` (default) or `keyword`.
    pub pattern: Option<String>,
    /// A keyword, anywhere in name, namespace, labels or content (instead of `query`).
    pub keyword: Option<String>,
    /// From 1 (default 1).
    pub page: Option<u64>,
    /// 1 to 1000 (default 10).
    pub page_size: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchItem {
    pub cluster: String,
    /// The object as stored.
    #[schema(value_type = Object)]
    pub object: Value,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub sync_at: OffsetDateTime,
    pub deleted: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchPage {
    pub items: Vec<SearchItem>,
    pub total: u64,
    pub current_page: u64,
    pub page_size: u64,
}

#[utoipa::path(get, path = "/search", operation_id = "search", tag = "search", params(SearchParams),
    responses((status = 200, body = inline(Envelope<SearchPage>)),
        Errors))]
pub(crate) async fn search(
    State(state): State<AppState>,
    Query(params): Query<SearchParams>,
) -> ApiResult {
    let page = params.page.unwrap_or(1);
    let page_size = params.page_size.unwrap_or(10);
    if page == 0 {
        return Err(ApiError::bad_request("page starts at 1"));
    }
    if page_size == 0 || page_size > MAX_PAGE_SIZE {
        return Err(ApiError::bad_request(format!(
            "pageSize must be 1 to {MAX_PAGE_SIZE}"
        )));
    }
    let keyword_mode = match (params.pattern.as_deref(), &params.keyword) {
        (None | Some("keyword"), Some(_)) | (Some("keyword"), None) => true,
        (None | Some("sql"), None) => false,
        (Some("sql"), Some(_)) => {
            return Err(ApiError::bad_request(
                "keyword is a keyword search: drop pattern=sql, or give query",
            ))
        }
        (Some(other), _) => {
            return Err(ApiError::bad_request(format!(
                "pattern {other:?}: use sql or keyword"
            )))
        }
    };
    let text = match (&params.query, &params.keyword) {
        (Some(_), Some(_)) => return Err(ApiError::bad_request("give query or keyword, not both")),
        (Some(text), None) | (None, Some(text)) => text,
        (None, None) => return Err(ApiError::bad_request("query (or keyword) is required")),
    };
    let parsed = if keyword_mode {
        karpor_search::keyword(text)
    } else {
        karpor_search::parse(text)
    };
    let query = parsed.map_err(|e| ApiError::bad_request(e.to_string()))?;
    let from = (page - 1).saturating_mul(page_size);
    let result = state.storage.search(&query, from, page_size).await?;
    Ok(Reply::ok(SearchPage {
        items: result
            .items
            .into_iter()
            .map(|d| SearchItem {
                cluster: d.cluster,
                object: d.object,
                sync_at: d.sync_at,
                deleted: d.deleted,
            })
            .collect(),
        total: result.total,
        current_page: page,
        page_size,
    }))
}
