//! Access policies stored as records, beside the config file's (`auth.policies`):
//! `GET /access-policies` (both, the config file's marked), `GET|POST|PUT|DELETE
//! /access-policy/{name}`. Writes are versioned (`PUT ?version=` compare-and-swap), an
//! admin's; a stored policy may not take a configured one's name. Every server reads the
//! stored ones every few seconds (a write here is in force on this server at once).

use std::sync::Arc;
use std::time::Duration;

use crate::access::{Permission, Routes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use karpor_core::access::AccessPolicy;
use karpor_core::model::Record;
use karpor_metastore::{Metastore, Stored};
use serde::Deserialize;
use tokio::sync::watch;
use tracing::Instrument;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::body::NamedBody;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::{Errors, NamePath};
use crate::policy::StoredPolicies;
use crate::types::{AccessPolicyView, Envelope};
use crate::AppState;

/// How often every server reads the stored policies again.
const REREAD_EVERY: Duration = Duration::from_secs(5);
/// Longest one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Admin, routes!(list))
        .route(Permission::Admin, routes!(read))
        .route(Permission::Write, routes!(create))
        .route(Permission::Write, routes!(replace))
        .route(Permission::Write, routes!(remove))
}

/// The stored policies as every request reads them, and the side that writes them.
pub(crate) struct PolicyFeed {
    sender: watch::Sender<Arc<Vec<AccessPolicy>>>,
}

impl PolicyFeed {
    /// Reads the stored policies now and every [`REREAD_EVERY`], until every reader is
    /// gone (the router dropped).
    pub(crate) fn start(metastore: Metastore) -> (Arc<PolicyFeed>, StoredPolicies) {
        let (sender, receiver) = watch::channel(Arc::new(Vec::new()));
        let feed = Arc::new(PolicyFeed { sender });
        let reader = feed.clone();
        let task = async move {
            let mut failing = false;
            loop {
                match reader.reread(&metastore).await {
                    Ok(()) if failing => {
                        tracing::info!("stored access policies read again");
                        failing = false;
                    }
                    Ok(()) => {}
                    Err(e) if !failing => {
                        tracing::warn!(error = %e.message, "cannot read the stored access policies: the last ones read stay in force");
                        failing = true;
                    }
                    Err(_) => {}
                }
                tokio::select! {
                    () = reader.sender.closed() => return,
                    () = tokio::time::sleep(REREAD_EVERY) => {}
                }
            }
        };
        tokio::spawn(task.instrument(tracing::info_span!("access_policies")));
        (feed, receiver)
    }

    async fn reread(&self, metastore: &Metastore) -> Result<(), ApiError> {
        let stored = tokio::time::timeout(READ_TIMEOUT, metastore.list_all::<AccessPolicy>())
            .await
            .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "timed out"))??;
        let policies = stored.into_iter().map(|s| s.record).collect();
        self.sender.send_replace(Arc::new(policies));
        Ok(())
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct VersionParam {
    /// Write only if the stored policy is at this version (409 otherwise).
    pub version: Option<i64>,
}

fn view(policy: AccessPolicy, stored: Option<&Stored<AccessPolicy>>) -> AccessPolicyView {
    AccessPolicyView {
        configured: stored.is_none(),
        version: stored.map(|s| s.version),
        updated_at: stored.map(|s| s.updated_at),
        policy,
    }
}

/// Refuses a policy the record's own checks refuse, or one of a configured name.
fn checked(state: &AppState, policy: AccessPolicy) -> Result<AccessPolicy, ApiError> {
    policy.validate().map_err(ApiError::bad_request)?;
    if state.configured.iter().any(|c| c.name == policy.name) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "policy {:?} is in the config file (auth.policies): change it there",
                policy.name
            ),
        ));
    }
    Ok(policy)
}

/// After a write: in force on this server before the answer.
async fn written(state: &AppState) -> Result<(), ApiError> {
    state.policies.reread(&state.metastore).await
}

#[utoipa::path(get, path = "/access-policies", operation_id = "listAccessPolicies", tag = "auth",
    responses((status = 200, body = inline(Envelope<Vec<AccessPolicyView>>)), Errors))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult<Vec<AccessPolicyView>> {
    let stored = state.metastore.list_all::<AccessPolicy>().await?;
    let mut views: Vec<AccessPolicyView> = state
        .configured
        .iter()
        .map(|c| view(c.clone(), None))
        .collect();
    views.extend(stored.iter().map(|s| view(s.record.clone(), Some(s))));
    Ok(Reply::ok(views))
}

#[utoipa::path(get, path = "/access-policy/{name}", operation_id = "getAccessPolicy", tag = "auth",
    params(NamePath), responses((status = 200, body = inline(Envelope<AccessPolicyView>)), Errors))]
pub(crate) async fn read(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<AccessPolicyView> {
    if let Some(configured) = state.configured.iter().find(|c| c.name == *name) {
        return Ok(Reply::ok(view(configured.clone(), None)));
    }
    match state.metastore.get::<AccessPolicy>(&name).await? {
        Some(stored) => Ok(Reply::ok(view(stored.record.clone(), Some(&stored)))),
        None => Err(ApiError::not_found(format!(
            "access policy {name:?} not found"
        ))),
    }
}

#[utoipa::path(post, path = "/access-policy/{name}", operation_id = "createAccessPolicy", tag = "auth",
    params(NamePath), request_body(content = AccessPolicy,
        description = "the policy; `name` may be left out (the path's)"),
    responses((status = 201, body = inline(Envelope<AccessPolicyView>)), Errors))]
pub(crate) async fn create(
    State(state): State<AppState>,
    NamedBody(policy): NamedBody<AccessPolicy>,
) -> ApiResult<AccessPolicyView> {
    let policy = checked(&state, policy)?;
    let stored = state.metastore.create(policy).await?;
    written(&state).await?;
    tracing::info!(policy = stored.record.name, "access policy created");
    Ok(Reply::created(view(stored.record.clone(), Some(&stored))))
}

#[utoipa::path(put, path = "/access-policy/{name}", operation_id = "putAccessPolicy", tag = "auth",
    params(NamePath, VersionParam), request_body(content = AccessPolicy,
        description = "the policy; `name` may be left out (the path's)"),
    responses((status = 200, body = inline(Envelope<AccessPolicyView>),
        description = "created or replaced (kubectl-apply style); `version` makes it a compare-and-swap"),
        Errors))]
pub(crate) async fn replace(
    State(state): State<AppState>,
    Query(params): Query<VersionParam>,
    NamedBody(policy): NamedBody<AccessPolicy>,
) -> ApiResult<AccessPolicyView> {
    let policy = checked(&state, policy)?;
    let current = state.metastore.get::<AccessPolicy>(&policy.name).await?;
    let stored = match (current, params.version) {
        (None, Some(version)) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "no stored access policy {:?} at version {version}",
                    policy.name
                ),
            ))
        }
        (None, None) => state.metastore.create(policy).await?,
        (Some(current), version) => {
            state
                .metastore
                .update(policy, version.unwrap_or(current.version))
                .await?
        }
    };
    written(&state).await?;
    tracing::info!(policy = stored.record.name, "access policy written");
    Ok(Reply::ok(view(stored.record.clone(), Some(&stored))))
}

#[utoipa::path(delete, path = "/access-policy/{name}", operation_id = "deleteAccessPolicy", tag = "auth",
    params(NamePath, VersionParam), responses((status = 200, body = inline(Envelope<String>)), Errors))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
    Query(params): Query<VersionParam>,
) -> ApiResult<&'static str> {
    let Some(current) = state.metastore.get::<AccessPolicy>(&name).await? else {
        return Err(ApiError::not_found(format!(
            "no stored access policy {name:?}"
        )));
    };
    state
        .metastore
        .delete::<AccessPolicy>(&name, Some(params.version.unwrap_or(current.version)))
        .await?;
    written(&state).await?;
    tracing::info!(policy = %name, "access policy deleted");
    Ok(Reply::ok("AccessPolicy deleted"))
}
