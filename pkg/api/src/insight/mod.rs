//! Insight over stored documents, in Karpor's shapes: overall counts (`stats`), a scope's
//! summary (a cluster's capacity and use, a namespace's or a type's counts, one resource),
//! one object (`detail`, as the object itself or YAML, now or as it was), and history
//! (an object's revisions, what changed in a scope).

mod audit;
mod detail;
mod history;
mod summary;

use crate::access::{Permission, Routes};
use axum::extract::State;
use karpor_core::model::{Cluster, ResourceGroupRule};
use karpor_storage::{ResourceDocument, SearchStorage};
use utoipa_axum::routes;

use crate::envelope::{ApiError, ApiResult, Reply};
use crate::locator::Locator;
use crate::openapi::Errors;
use crate::scope::Visible;
use crate::types::{Envelope, Stats};
use crate::AppState;

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(stats))
        .route(Permission::Read, routes!(summary::summary))
        .route(Permission::Read, routes!(detail::detail))
        .route(Permission::Read, routes!(history::history))
        .route(Permission::Read, routes!(history::changes))
        .route(Permission::Read, routes!(audit::audit))
        .route(Permission::Read, routes!(audit::score))
}

#[utoipa::path(get, path = "/insight/stats", operation_id = "insightStats", tag = "insight",
    responses((status = 200, body = inline(Envelope<Stats>)),
        Errors))]
pub(crate) async fn stats(State(state): State<AppState>, visible: Visible) -> ApiResult<Stats> {
    let clusters = state.metastore.list_all::<Cluster>().await?;
    let clusters = clusters
        .iter()
        .filter(|c| visible.cluster(&c.record.name))
        .count();
    let rules = state.metastore.list_all::<ResourceGroupRule>().await?.len();
    let resources = visible.count(None).await?;
    Ok(Reply::ok(Stats {
        cluster_count: clusters,
        resource_count: resources,
        resource_group_rule_count: rules,
    }))
}

/// The one document a locator names (kind and name required); deleted ones too, newest
/// first, as Karpor falls back to what storage kept.
pub(crate) async fn one(visible: &Visible, at: &Locator) -> Result<ResourceDocument, ApiError> {
    if at.kind().is_none() || at.name().is_none() || at.cluster().is_none() {
        return Err(ApiError::bad_request(
            "a resource needs cluster, kind and name",
        ));
    }
    let found = visible.search(&at.query(false), 0, 2).await?;
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

/// Every document of a query, page by page, up to `cap`.
async fn every(
    storage: &Visible,
    query: &karpor_search::Query,
    cap: u64,
) -> Result<Vec<ResourceDocument>, ApiError> {
    const PAGE: u64 = 500;
    let mut all = Vec::new();
    let mut from = 0;
    loop {
        let page = storage.search(query, from, PAGE).await?;
        from += page.items.len() as u64;
        let done = page.items.is_empty() || from >= page.total || from >= cap;
        all.extend(page.items);
        if done {
            return Ok(all);
        }
    }
}

/// Whether the cluster is registered and the caller sees it (a 404 otherwise).
pub(crate) async fn registered(
    state: &AppState,
    visible: &Visible,
    cluster: &str,
) -> Result<(), ApiError> {
    match state.metastore.get::<Cluster>(cluster).await? {
        Some(_) if visible.cluster(cluster) => Ok(()),
        _ => Err(ApiError::not_found(format!(
            "cluster {cluster:?} not found"
        ))),
    }
}
