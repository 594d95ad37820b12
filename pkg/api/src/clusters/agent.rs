//! A cluster's agent: a join token issued for it (the install line with it), where it
//! stands (joined, connected, a join waiting), a held join approved, and its
//! certificates revoked. Both need agent mode configured on this hub (`agents:`).

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Extension;
use karpor_core::model::ClusterMode;
use karpor_core::names::ClusterName;
use time::format_description::well_known::Rfc3339;

use super::find;
use crate::agents::refused;
use crate::auth::Principal;
use crate::body::Body;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::{Errors, NamePath};
use crate::types::{
    AgentApproveBody, AgentRevokedView, AgentStatusView, AgentTokenBody, AgentTokenView, Envelope,
    PendingJoinView,
};
use crate::{AgentHub, AppState};

#[utoipa::path(post, path = "/cluster/{name}/agent-token", operation_id = "issueAgentToken",
    tag = "clusters", params(NamePath), request_body = AgentTokenBody,
    responses((status = 200, body = inline(Envelope<AgentTokenView>)), Errors))]
pub(crate) async fn issue_token(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
    Body(body): Body<AgentTokenBody>,
) -> ApiResult<AgentTokenView> {
    let hub = agent_hub(&state)?;
    let cluster = agent_cluster(&state, &name).await?;
    let ttl = body
        .ttl_seconds
        .map_or(karpor_agent::DEFAULT_JOIN_TTL, Duration::from_secs);
    let (token, pin) = hub
        .enrollment
        .issue_token(&cluster, ttl)
        .await
        .map_err(refused)?;
    let expires_at = (time::OffsetDateTime::now_utc() + ttl)
        .format(&Rfc3339)
        .unwrap_or_default();
    tracing::info!(cluster = %cluster, by = %by.name, ttl = ?ttl, "agent join token issued");
    Ok(Reply::ok(AgentTokenView {
        cluster: cluster.to_string(),
        install: format!(
            "KARPOR_AGENT__TOKEN=<token> karpor agent --hub {} --pin {pin}",
            hub.advertised
        ),
        token: token.reveal(),
        pin: pin.to_string(),
        hub: hub.advertised.clone(),
        expires_at,
    }))
}

#[utoipa::path(delete, path = "/cluster/{name}/agent", operation_id = "revokeAgent",
    tag = "clusters", params(NamePath),
    responses((status = 200, body = inline(Envelope<AgentRevokedView>)), Errors))]
pub(crate) async fn revoke(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<AgentRevokedView> {
    let hub = agent_hub(&state)?;
    let cluster = agent_cluster(&state, &name).await?;
    let generation = hub.enrollment.revoke(&cluster).await.map_err(refused)?;
    hub.sessions.close_everywhere(&cluster).await;
    tracing::info!(cluster = %cluster, by = %by.name, generation, "agent revoked");
    Ok(Reply::ok(AgentRevokedView {
        cluster: cluster.to_string(),
        generation,
    }))
}

#[utoipa::path(get, path = "/cluster/{name}/agent", operation_id = "agentStatus",
    tag = "clusters", params(NamePath),
    responses((status = 200, body = inline(Envelope<AgentStatusView>)), Errors))]
pub(crate) async fn status(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<AgentStatusView> {
    let hub = agent_hub(&state)?;
    let cluster = agent_cluster(&state, &name).await?;
    let enrollment = hub.enrollment.enrollment(&cluster).await.map_err(refused)?;
    let time = |unix: i64| {
        time::OffsetDateTime::from_unix_timestamp(unix)
            .ok()
            .and_then(|t| t.format(&Rfc3339).ok())
    };
    let connected = hub.sessions.connected_anywhere(&cluster).await;
    Ok(Reply::ok(match enrollment {
        None => AgentStatusView {
            cluster: cluster.to_string(),
            generation: 1,
            joined_at: None,
            token_expires_at: None,
            pending: None,
            connected,
        },
        Some(enrollment) => AgentStatusView {
            cluster: cluster.to_string(),
            generation: enrollment.generation,
            joined_at: enrollment.joined_at.and_then(time),
            token_expires_at: enrollment.join.and_then(|j| time(j.expires_at)),
            pending: enrollment.pending.map(|p| PendingJoinView {
                key: p.key,
                requested_at: time(p.requested_at).unwrap_or_default(),
                approved: p.approved,
            }),
            connected,
        },
    }))
}

#[utoipa::path(post, path = "/cluster/{name}/agent/approve", operation_id = "approveAgent",
    tag = "clusters", params(NamePath), request_body = AgentApproveBody,
    responses((status = 200, body = inline(Envelope<AgentStatusView>)), Errors))]
pub(crate) async fn approve(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
    Body(body): Body<AgentApproveBody>,
) -> ApiResult<AgentStatusView> {
    let hub = agent_hub(&state)?;
    let cluster = agent_cluster(&state, &name).await?;
    hub.enrollment
        .approve(&cluster, &body.key)
        .await
        .map_err(|e| match e {
            karpor_agent::AgentError::Malformed(why) => ApiError::new(StatusCode::CONFLICT, why),
            other => refused(other),
        })?;
    tracing::info!(cluster = %cluster, by = %by.name, key = %body.key, "agent join approved");
    status(State(state), Path(NamePath { name })).await
}

/// A deleted agent cluster's certificates stop working with it.
pub(super) async fn revoke_deleted(state: &AppState, name: &str) -> Result<(), ApiError> {
    let (Some(hub), Ok(cluster)) = (&state.agents, name.parse::<ClusterName>()) else {
        return Ok(());
    };
    hub.enrollment.revoke(&cluster).await.map_err(refused)?;
    hub.sessions.close_everywhere(&cluster).await;
    Ok(())
}

fn agent_hub(state: &AppState) -> Result<&AgentHub, ApiError> {
    state.agents.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "this hub takes no agents: configure its agent listener (agents:)",
        )
    })
}

async fn agent_cluster(state: &AppState, name: &str) -> Result<ClusterName, ApiError> {
    let current = find(state, name).await?;
    if current.record.mode != ClusterMode::Agent {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("cluster {name:?} is synced by the hub (kubeconfig mode), not by an agent"),
        ));
    }
    name.parse()
        .map_err(|_| ApiError::bad_request(format!("{name:?} is not a cluster name")))
}
