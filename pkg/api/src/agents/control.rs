//! The hub's end of the live link: an agent's control stream (its session, one
//! [`Control`] per line, pinged while idle and ended when its certificate stops being
//! current or its cluster is revoked), and the replies it posts, each handed to the read
//! that waits on it.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::Extension;
use futures::{Stream, StreamExt, TryStreamExt};
use karpor_agent::identity::AgentIdentity;
use karpor_agent::wire::{self, Control};
use serde::Serialize;
use tokio::sync::oneshot;

use super::reply::{head, Reply};
use super::sessions::Opened;
use super::AgentState;
use crate::access::ACCESS_LOG;
use crate::envelope::{ApiError, ApiResult, Reply as Answer, Unenveloped};

/// How long after its reader's deadline a reply's upload may still run.
const REPLY_GRACE: Duration = Duration::from_secs(5);

/// The agent's session: control lines until it leaves, is replaced or revoked.
pub(super) async fn control(
    State(state): State<AgentState>,
    Extension(identity): Extension<AgentIdentity>,
) -> Response {
    let opened = state.sessions.open(&identity.cluster);
    if let Some(peers) = state.sessions.peers() {
        peers.opened(&identity.cluster).await;
    }
    tracing::info!(target: ACCESS_LOG, who = %format!("agent:{}", identity.cluster),
        permission = "agent", outcome = "allowed", "agent connected");
    let mut response = Response::new(Body::from_stream(lines(state, identity, opened)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    response.extensions_mut().insert(Unenveloped);
    response
}

/// A ping first (the agent knows it is connected), then each control line, a ping when
/// idle; the certificate is checked again at each ping.
fn lines(
    state: AgentState,
    identity: AgentIdentity,
    opened: Opened,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let Opened { control, guard } = opened;
    let pings = tokio::time::interval(wire::CONTROL_PING);
    futures::stream::unfold(
        (control, pings, guard, state, identity),
        |(mut control, mut pings, guard, state, identity)| async move {
            let line = tokio::select! {
                next = control.recv() => next?,
                _ = pings.tick() => {
                    if let Err(e) = state.enrollment.check(&identity).await {
                        tracing::info!(cluster = %identity.cluster, error = %e, "agent session ended");
                        return None;
                    }
                    Control::Ping
                }
            };
            let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
            bytes.push(b'\n');
            Some((
                Ok(Bytes::from(bytes)),
                (control, pings, guard, state, identity),
            ))
        },
    )
}

/// What the hub says to a reply it took.
#[derive(Debug, Serialize)]
pub(super) struct Taken {
    pub id: u64,
}

/// The reply to read `id`: its head line, then its bytes, streamed to the reader that
/// waits on it; answered once the reader is done with them.
pub(super) async fn reply(
    State(state): State<AgentState>,
    Extension(identity): Extension<AgentIdentity>,
    Path(id): Path<u64>,
    request: Request,
) -> ApiResult<Taken> {
    let mut body = request
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other);
    let (head, rest) = head(&mut body).await?;
    let (done, finished) = oneshot::channel::<()>();
    let rest = futures::stream::iter((!rest.is_empty()).then(|| Ok(rest)));
    let body = rest.chain(body).map(move |chunk| {
        // Held while the reader reads: dropped with the stream, it says the reader is done.
        let _done = &done;
        chunk
    });
    let reply = Reply {
        head,
        body: body.boxed(),
    };
    let Some(within) = state.sessions.deliver(&identity.cluster, id, reply) else {
        return Err(ApiError::not_found(format!(
            "no live read {id} waits for this agent's reply"
        )));
    };
    let _ = tokio::time::timeout(within + REPLY_GRACE, finished).await;
    Ok(Answer::ok(Taken { id }))
}
