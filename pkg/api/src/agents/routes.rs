//! The agent routes' handlers. Each acts on the cluster of the caller's certificate.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Extension;
use karpor_agent::identity::AgentIdentity;
use karpor_agent::token::JoinToken;
use karpor_agent::wire::{
    Certified, JoinRequest, RenewRequest, VersionsRequest, WriteBatch, Written,
};
use karpor_agent::AgentError;
use karpor_syncer::SyncPlan;

use super::{agent_cluster, certified, checked_batch, refused, AgentState};
use crate::access::ACCESS_LOG;
use crate::body::Body;
use crate::envelope::{ApiError, ApiResult, Reply};

/// A first certificate, for the token's cluster, over the request's key.
pub(super) async fn join(
    State(state): State<AgentState>,
    Body(body): Body<JoinRequest>,
) -> ApiResult<Certified> {
    let token: JoinToken = body.token.parse().map_err(refused)?;
    let cluster = token.cluster().to_string();
    // Tokens are issued for agent clusters alone, so another cluster's is no token: the
    // same refusal, not one telling an unauthenticated caller which clusters exist.
    agent_cluster(&state.metastore, &cluster)
        .await
        .map_err(|e| match e.status {
            StatusCode::FORBIDDEN => refused(AgentError::JoinRefused(
                "it is not the cluster's current token",
            )),
            _ => e,
        })?;
    let joined = state.enrollment.join(&token, &body.request).await;
    let outcome = if joined.is_ok() { "allowed" } else { "refused" };
    tracing::info!(target: ACCESS_LOG, who = %format!("agent:{cluster}"),
        permission = "agent-join", outcome, "agent join");
    let joined = joined.map_err(refused)?;
    Ok(Reply::ok(certified(
        joined.certificate,
        joined.authority_pem,
    )))
}

/// The next certificate, for the same cluster and generation.
pub(super) async fn renew(
    State(state): State<AgentState>,
    Extension(identity): Extension<AgentIdentity>,
    Body(body): Body<RenewRequest>,
) -> ApiResult<Certified> {
    let issued = state
        .enrollment
        .renew(&identity, &body.request)
        .await
        .map_err(refused)?;
    let authority = state.enrollment.authority().await.map_err(refused)?;
    tracing::info!(target: ACCESS_LOG, who = %format!("agent:{}", identity.cluster),
        permission = "agent", outcome = "allowed", "agent certificate renewed");
    Ok(Reply::ok(certified(
        issued,
        authority.certificate_pem().to_owned(),
    )))
}

/// What the agent syncs, as the hub's own syncer would.
pub(super) async fn plan(
    State(state): State<AgentState>,
    Extension(identity): Extension<AgentIdentity>,
) -> ApiResult<SyncPlan> {
    let cluster = identity.cluster.to_string();
    karpor_syncer::plan(&state.metastore, &cluster, &state.audit, state.history)
        .await?
        .map(Reply::ok)
        .ok_or_else(|| ApiError::new(StatusCode::FORBIDDEN, "the cluster is not registered"))
}

/// A batch of writes, each into the certificate's cluster, answered once storage holds
/// them all (the writer then moves on); a refused batch writes nothing.
pub(super) async fn writes(
    State(state): State<AgentState>,
    Extension(identity): Extension<AgentIdentity>,
    Body(batch): Body<WriteBatch>,
) -> ApiResult<Written> {
    let cluster = identity.cluster.to_string();
    let writes = checked_batch(batch, &cluster)?;
    let mut removed = 0;
    for write in &writes {
        removed +=
            karpor_syncer::apply(state.storage.as_ref(), &cluster, write, &state.audit).await?;
    }
    Ok(Reply::ok(Written { removed }))
}

/// The digest of what storage holds of one type of the certificate's cluster: a
/// restarted agent sends a type's list again only when its own digest differs.
pub(super) async fn versions(
    State(state): State<AgentState>,
    Extension(identity): Extension<AgentIdentity>,
    Body(scope): Body<VersionsRequest>,
) -> ApiResult<karpor_storage::VersionDigest> {
    let _turn = state.load.scan(&identity.cluster).await;
    let cluster = identity.cluster.to_string();
    let digest = state
        .storage
        .versions(
            &cluster,
            &scope.api_version,
            &scope.kind,
            scope.namespace.as_deref(),
        )
        .await?;
    Ok(Reply::ok(digest))
}
