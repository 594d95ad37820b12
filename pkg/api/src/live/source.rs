//! Where a live read of a cluster is made: with the hub's client of it (kubeconfig mode),
//! or by its agent over its control stream (agent mode). Both make the same typed reads
//! ([`karpor_kube::reads`]); an agent validates them again and serves them with its own
//! read-only credential. An agent's answer is size-capped here and redacted like any.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use karpor_agent::wire::{self, LiveRead, ReplyHead};
use karpor_core::names::ClusterName;
use karpor_kube::reads::{self, EventsRef, ObjectRef, ReadError};
use kube::Client;
use serde_json::Value;
use tokio::time::Instant;

use super::{bounded, unreachable, TIMEOUTS};
use crate::agents::reply::ReplyBody;
use crate::agents::sessions::AgentSessions;
use crate::envelope::ApiError;

/// A registered cluster, ready for one live read.
pub(crate) enum Source {
    Kube(ClusterName, Client),
    Agent(AgentLink),
}

/// A cluster's agent, as the hub reaches it.
pub(crate) struct AgentLink {
    pub cluster: ClusterName,
    pub sessions: Arc<AgentSessions>,
}

/// An agent's answer: how it went, then its bytes (holding the read's place among its
/// cluster's until dropped).
pub(crate) struct AgentAnswer {
    pub head: ReplyHead,
    pub body: ReplyBody,
}

impl Source {
    pub(crate) fn cluster(&self) -> &ClusterName {
        match self {
            Source::Kube(cluster, _) => cluster,
            Source::Agent(link) => &link.cluster,
        }
    }

    /// The object `at` names as the cluster has it now, not yet redacted; `None` when it
    /// has none of that name.
    pub(crate) async fn object(&self, at: &ObjectRef) -> Result<Option<Value>, ApiError> {
        let cluster = self.cluster();
        match self {
            Source::Kube(_, client) => {
                let read = bounded(cluster, async {
                    Ok(reads::object(client.clone(), at).await)
                })
                .await?;
                match read {
                    Ok(object) => Ok(object),
                    Err(ReadError::NoKind) => Err(no_kind(cluster, at)),
                    Err(ReadError::Scope(why)) => Err(ApiError::bad_request(why)),
                    Err(ReadError::Cluster(e)) => Err(unreachable(cluster.as_str(), &e)),
                }
            }
            Source::Agent(link) => {
                let within = TIMEOUTS.read.unwrap_or(TIMEOUTS.connect);
                let deadline = Instant::now() + within;
                let answer = link.ask(LiveRead::Object(at.clone()), within).await?;
                match answer.head {
                    ReplyHead::Ok => json(cluster, answer.body, deadline).await.map(Some),
                    ReplyHead::NotFound => Ok(None),
                    ReplyHead::NoKind => Err(no_kind(cluster, at)),
                    head => Err(refusal(cluster, head)),
                }
            }
        }
    }

    /// The events `at` selects, as the cluster lists them.
    pub(crate) async fn events(&self, at: &EventsRef) -> Result<Vec<Event>, ApiError> {
        let cluster = self.cluster();
        match self {
            Source::Kube(_, client) => bounded(cluster, reads::events(client.clone(), at)).await,
            Source::Agent(link) => {
                let within = TIMEOUTS.read.unwrap_or(TIMEOUTS.connect);
                let deadline = Instant::now() + within;
                let answer = link.ask(LiveRead::Events(at.clone()), within).await?;
                match answer.head {
                    ReplyHead::Ok => {
                        let events = json(cluster, answer.body, deadline).await?;
                        serde_json::from_value(events).map_err(|e| {
                            agent_broke(cluster, &format!("its events do not parse: {e}"))
                        })
                    }
                    head => Err(refusal(cluster, head)),
                }
            }
        }
    }
}

impl AgentLink {
    /// Asks the agent `read`, its head within `within` (and the whole of it too: the agent
    /// stops at that deadline): through its session here, or through the replica that
    /// holds it.
    pub(crate) async fn ask(
        &self,
        read: LiveRead,
        within: Duration,
    ) -> Result<AgentAnswer, ApiError> {
        if self.sessions.connected(&self.cluster).is_err() {
            // Connected to another replica, maybe: that one asks it.
            if let Some(peers) = self.sessions.peers() {
                if let Some(holder) = peers.holder(&self.cluster).await? {
                    let reply = peers.forward(&holder, &self.cluster, read, within).await?;
                    return Ok(AgentAnswer {
                        head: reply.head,
                        body: reply.body,
                    });
                }
            }
        }
        let asked = self.sessions.ask(&self.cluster, read, within)?;
        let (reply, in_flight) = asked.reply(&self.cluster, within).await?;
        let body = reply
            .body
            .map(move |chunk| {
                // The read keeps its place among the cluster's until its bytes are read.
                let _in_flight = &in_flight;
                chunk
            })
            .boxed();
        Ok(AgentAnswer {
            head: reply.head,
            body,
        })
    }
}

/// An agent's JSON answer, read whole within `deadline` and [`wire::MAX_REPLY_BYTES`].
async fn json(
    cluster: &ClusterName,
    mut body: ReplyBody,
    deadline: Instant,
) -> Result<Value, ApiError> {
    let read = async {
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            if bytes.len() + chunk.len() > wire::MAX_REPLY_BYTES {
                return Err(io::Error::other(format!(
                    "its answer is larger than {} bytes",
                    wire::MAX_REPLY_BYTES
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    };
    let bytes = match tokio::time::timeout_at(deadline, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => return Err(agent_broke(cluster, &e.to_string())),
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cluster {cluster:?}'s agent did not finish its answer in time"),
            ))
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| agent_broke(cluster, &format!("its answer does not parse: {e}")))
}

fn no_kind(cluster: &ClusterName, at: &ObjectRef) -> ApiError {
    ApiError::not_found(format!(
        "cluster {cluster:?} serves no {} {}",
        at.api_version, at.kind
    ))
}

fn agent_broke(cluster: &ClusterName, why: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        format!("cluster {cluster:?}'s agent answered badly: {why}"),
    )
}

/// An agent's answer that is no answer, as the caller's error.
pub(crate) fn refusal(cluster: &ClusterName, head: ReplyHead) -> ApiError {
    match head {
        ReplyHead::Ok => agent_broke(cluster, "an answer where none was expected"),
        ReplyHead::NotFound => ApiError::not_found("no such object in the cluster now"),
        ReplyHead::NoKind => {
            ApiError::not_found(format!("cluster {cluster:?} serves no such kind"))
        }
        ReplyHead::Scope { message } => ApiError::bad_request(message),
        ReplyHead::Status { code, message } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cluster {cluster:?} answered {code}: {message}"),
        ),
        ReplyHead::Refused { message } => ApiError::new(
            StatusCode::FORBIDDEN,
            format!("cluster {cluster:?}'s agent refuses the read: {message}"),
        ),
        ReplyHead::Failed { message } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cluster {cluster:?} did not answer its agent: {message}"),
        ),
    }
}
