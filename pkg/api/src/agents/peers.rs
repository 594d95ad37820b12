//! Hub replicas forwarding live reads among themselves. An agent keeps one control stream,
//! to whichever replica its connection reached; that replica records itself as the
//! session's holder ([`AgentSession`], by its `agents.peer_url`). Another replica asked a
//! live read of the cluster forwards it there (`POST /agent/v1/peer/reads/{cluster}`) and
//! streams the reply back; a revocation anywhere closes the session where it is
//! (`POST /agent/v1/peer/close/{cluster}`). Replicas trust each other through the
//! authority: the holder's listener is checked by its pin, and the caller presents a
//! secret derived from the authority's key, which agents never hold. A forwarded read is
//! served only from a session of the holder's own: it is never forwarded twice.

use std::time::Duration;

use axum::http::StatusCode;
use futures::{StreamExt, TryStreamExt};
use karpor_agent::authority::Authority;
use karpor_agent::wire::{self, LiveRead};
use karpor_core::model::AgentSession;
use karpor_core::names::ClusterName;
use karpor_metastore::{Metastore, StoreError};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::reply::{head, Reply};
use crate::envelope::ApiError;

/// The header a replica presents its peer secret in.
pub(crate) const PEER_HEADER: &str = "x-karpor-peer";
/// `POST /peer/reads/{cluster}`: a live read of an agent connected to the replica called.
pub(crate) const PEER_READS: &str = "/peer/reads/{cluster}";
/// `POST /peer/close/{cluster}`: the cluster's session there ends (revoked).
pub(crate) const PEER_CLOSE: &str = "/peer/close/{cluster}";
/// How long connecting to another replica may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a replica may take over a close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long past the read's own deadline its forwarded answer may take to start.
const FORWARD_GRACE: Duration = Duration::from_secs(2);

/// A live read forwarded to the replica holding the agent's session.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Forwarded {
    pub read: LiveRead,
    pub within_ms: u64,
}

/// This replica among the others.
pub struct Peers {
    me: String,
    metastore: Metastore,
    secret: String,
    client: reqwest::Client,
}

impl Peers {
    /// This replica, reached by the others at `me` (its `agents.peer_url`).
    pub fn new(
        me: String,
        metastore: Metastore,
        authority: &Authority,
    ) -> Result<Peers, karpor_agent::AgentError> {
        let pin = authority.pin()?;
        let tls = karpor_agent::tls::agent_client(pin, None)?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| karpor_agent::AgentError::Authority(e.to_string()))?;
        Ok(Peers {
            me,
            metastore,
            secret: authority.peer_secret(),
            client,
        })
    }

    /// Whether `presented` is the replicas' secret.
    pub(crate) fn admits(&self, presented: &[u8]) -> bool {
        presented.ct_eq(self.secret.as_bytes()).into()
    }

    /// `cluster`'s session is here now.
    pub(crate) async fn opened(&self, cluster: &ClusterName) {
        let record = AgentSession {
            name: cluster.to_string(),
            peer: self.me.clone(),
            since: time::OffsetDateTime::now_utc().unix_timestamp(),
        };
        // Twice: the replica the agent left may remove its own record in between.
        let mut written = Ok(());
        for _ in 0..2 {
            written = match self.metastore.get::<AgentSession>(cluster).await {
                Ok(Some(current)) => self
                    .metastore
                    .update(record.clone(), current.version)
                    .await
                    .map(drop),
                Ok(None) => self.metastore.create(record.clone()).await.map(drop),
                Err(e) => Err(e),
            };
            if !matches!(
                written,
                Err(StoreError::NotFound { .. }
                    | StoreError::Conflict { .. }
                    | StoreError::AlreadyExists { .. })
            ) {
                break;
            }
        }
        if let Err(e) = written {
            tracing::warn!(%cluster, error = %e,
                "cannot record which replica holds the agent's session; other replicas cannot forward to it");
        }
    }

    /// `cluster`'s session here ended; the record goes unless another replica holds it
    /// by now.
    pub(crate) async fn closed(&self, cluster: &ClusterName) {
        let gone = async {
            match self.metastore.get::<AgentSession>(cluster).await? {
                Some(current) if current.record.peer == self.me => {
                    self.metastore
                        .delete::<AgentSession>(cluster, Some(current.version))
                        .await
                }
                _ => Ok(()),
            }
        };
        match gone.await {
            Ok(()) | Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => tracing::debug!(%cluster, error = %e, "cannot remove the session's record"),
        }
    }

    /// The other replica holding `cluster`'s session, if one does.
    pub(crate) async fn holder(&self, cluster: &ClusterName) -> Result<Option<String>, ApiError> {
        let stored = self.metastore.get::<AgentSession>(cluster).await?;
        Ok(stored
            .map(|s| s.record.peer)
            .filter(|peer| *peer != self.me))
    }

    /// `read` of `cluster`, through the replica `holder`: its reply as the agent sent it.
    pub(crate) async fn forward(
        &self,
        holder: &str,
        cluster: &ClusterName,
        read: LiveRead,
        within: Duration,
    ) -> Result<Reply, ApiError> {
        let body = Forwarded {
            read,
            within_ms: u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
        };
        let url = format!(
            "{holder}{}{}",
            wire::PREFIX,
            PEER_READS.replace("{cluster}", cluster.as_str())
        );
        let away = |why: String| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cluster {cluster:?}'s agent is connected to another hub replica ({holder}), which {why}"),
            )
        };
        let sent = self
            .client
            .post(url)
            .header(PEER_HEADER, &self.secret)
            .json(&body)
            .send();
        let response = match tokio::time::timeout(within + FORWARD_GRACE, sent).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(away(format!("does not answer: {e}"))),
            Err(_) => return Err(away(format!("did not answer within {within:?}"))),
        };
        let status = response.status();
        if status != StatusCode::OK {
            // The holder's own refusal (the agent's timeout, its limit), as it said it.
            let bytes = response.bytes().await.unwrap_or_default();
            let message = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("answered {status}"));
            let status =
                StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            return Err(ApiError::new(status, message));
        }
        let mut stream = response
            .bytes_stream()
            .map_err(std::io::Error::other)
            .boxed();
        let (head, rest) = head(&mut stream).await?;
        let rest = futures::stream::iter((!rest.is_empty()).then(|| Ok(rest)));
        Ok(Reply {
            head,
            body: rest.chain(stream).boxed(),
        })
    }

    /// Tells the replica holding `cluster`'s session to end it.
    pub(crate) async fn close_elsewhere(&self, cluster: &ClusterName) {
        let Ok(Some(holder)) = self.holder(cluster).await else {
            return;
        };
        let url = format!(
            "{holder}{}{}",
            wire::PREFIX,
            PEER_CLOSE.replace("{cluster}", cluster.as_str())
        );
        let sent = self
            .client
            .post(url)
            .header(PEER_HEADER, &self.secret)
            .timeout(CLOSE_TIMEOUT)
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => tracing::warn!(%cluster, %holder, status = %response.status(),
                "the replica holding the agent's session refused to close it; it ends at its next ping"),
            Err(e) => tracing::warn!(%cluster, %holder, error = %e,
                "cannot reach the replica holding the agent's session; it ends at its next ping"),
        }
    }
}

/// `POST /peer/reads/{cluster}`: another replica's read of an agent connected here,
/// answered as the agent's reply is (a head line, then its bytes). Never forwarded again.
pub(super) async fn read(
    axum::extract::State(state): axum::extract::State<super::AgentState>,
    axum::extract::Path(cluster): axum::extract::Path<String>,
    request: axum::extract::Request,
) -> Result<axum::response::Response, ApiError> {
    let cluster: ClusterName = cluster
        .parse()
        .map_err(|e: karpor_core::names::InvalidName| ApiError::bad_request(e.to_string()))?;
    let bytes = axum::body::to_bytes(request.into_body(), wire::MAX_LINE_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a forwarded read is at most {} bytes", wire::MAX_LINE_BYTES),
            )
        })?;
    let forwarded: Forwarded = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("not a forwarded read: {e}")))?;
    let within = Duration::from_millis(forwarded.within_ms).min(wire::MAX_READ_FOR);
    let asked = state.sessions.ask(&cluster, forwarded.read, within)?;
    let (reply, in_flight) = asked.reply(&cluster, within).await?;
    let mut head = serde_json::to_vec(&reply.head).unwrap_or_default();
    head.push(b'\n');
    let body = futures::stream::once(async move { Ok(axum::body::Bytes::from(head)) }).chain(
        reply.body.map(move |chunk| {
            // The read keeps its place among the cluster's until its bytes are read.
            let _in_flight = &in_flight;
            chunk
        }),
    );
    let mut response = axum::response::Response::new(axum::body::Body::from_stream(body));
    response
        .extensions_mut()
        .insert(crate::envelope::Unenveloped);
    Ok(response)
}

/// `POST /peer/close/{cluster}`: the cluster was revoked at another replica.
pub(super) async fn close(
    axum::extract::State(state): axum::extract::State<super::AgentState>,
    axum::extract::Path(cluster): axum::extract::Path<String>,
) -> Result<crate::envelope::Reply<Closed>, ApiError> {
    let cluster: ClusterName = cluster
        .parse()
        .map_err(|e: karpor_core::names::InvalidName| ApiError::bad_request(e.to_string()))?;
    state.sessions.close(&cluster);
    tracing::info!(%cluster, "agent session closed for another replica (revoked)");
    Ok(crate::envelope::Reply::ok(Closed {
        cluster: cluster.to_string(),
    }))
}

/// What a close answers.
#[derive(Debug, Serialize)]
pub(super) struct Closed {
    pub cluster: String,
}
