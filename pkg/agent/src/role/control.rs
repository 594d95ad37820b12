//! The agent's control stream: opened to the hub (every connection starts here), read a
//! line at a time, each read served in a task of its own and replied to on its own
//! request, so a slow log holds up neither ingest nor other reads. A read the hub cancels
//! stops; a link with no line for [`wire::CONTROL_IDLE`] is opened again, with jittered
//! backoff after a failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::backoff::{jittered, FIRST_BACKOFF, MAX_BACKOFF};
use super::hub::Hub;
use super::serve::{self, Line, Served};
use crate::wire::{self, Control, LiveRequest, ReplyHead};

/// The reads under way, by id, each with its way to stop.
#[derive(Default)]
struct Running(Mutex<HashMap<u64, CancellationToken>>);

impl Running {
    fn start(&self, id: u64) -> CancellationToken {
        let token = CancellationToken::new();
        let mut running = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        running.insert(id, token.clone());
        token
    }

    fn cancel(&self, id: u64) {
        let running = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(token) = running.get(&id) {
            token.cancel();
        }
    }

    fn done(&self, id: u64) {
        let mut running = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        running.remove(&id);
    }
}

/// Keeps a control stream open to the hub until `stop`, serving its reads with `client`;
/// `resync` is told when the hub asks for every type again.
pub(crate) async fn run(
    hub: Arc<Hub>,
    client: kube::Client,
    resync: Arc<Notify>,
    stop: CancellationToken,
) {
    let running = Arc::new(Running::default());
    let slots = Arc::new(Semaphore::new(wire::MAX_READS_AT_ONCE));
    let mut backoff = FIRST_BACKOFF;
    loop {
        let session = session(&hub, &client, &running, &slots, &resync, &stop);
        let outcome = tokio::select! {
            _ = stop.cancelled() => return,
            outcome = session => outcome,
        };
        match outcome {
            Ok(()) => {
                tracing::info!("the hub ended the control stream; opening it again");
                backoff = FIRST_BACKOFF;
            }
            Err(e) => {
                tracing::warn!(error = %e, "control stream lost; opening it again");
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(jittered(backoff)) => {}
        }
    }
}

/// One control stream, read until it ends (`Ok`) or breaks.
async fn session(
    hub: &Arc<Hub>,
    client: &kube::Client,
    running: &Arc<Running>,
    slots: &Arc<Semaphore>,
    resync: &Notify,
    stop: &CancellationToken,
) -> Result<(), String> {
    let response = hub.control().await.map_err(|e| e.to_string())?;
    tracing::info!("control stream open");
    let mut chunks = response.bytes_stream();
    let mut pending = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(wire::CONTROL_IDLE, chunks.next()).await {
            Err(_) => return Err(format!("no line from the hub for {:?}", wire::CONTROL_IDLE)),
            Ok(None) => return Ok(()),
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Ok(Some(Ok(chunk))) => chunk,
        };
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = serve::parse(&line[..end]);
            if let Line::Control(Control::Resync) = line {
                tracing::info!(
                    "the hub's storage came back after an outage; listing every type again"
                );
                resync.notify_one();
                continue;
            }
            take(line, hub, client, running, slots, stop);
        }
        if pending.len() > wire::MAX_LINE_BYTES {
            return Err(format!(
                "a control line longer than {} bytes",
                wire::MAX_LINE_BYTES
            ));
        }
    }
}

fn take(
    line: Line,
    hub: &Arc<Hub>,
    client: &kube::Client,
    running: &Arc<Running>,
    slots: &Arc<Semaphore>,
    stop: &CancellationToken,
) {
    match line {
        // Taken by the session, which tells the sync.
        Line::Control(Control::Ping | Control::Resync) => {}
        Line::Control(Control::Cancel(id)) => running.cancel(id),
        Line::Control(Control::Read(request)) => {
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                // The hub sends no more than this at once; beyond it nothing is spawned and
                // the hub's read times out.
                tracing::warn!(
                    id = request.id,
                    "a live read beyond the {} the agent serves at once; dropped",
                    wire::MAX_READS_AT_ONCE
                );
                return;
            };
            let (hub, client, running) = (hub.clone(), client.clone(), running.clone());
            let cancelled = running.start(request.id);
            let stop = stop.child_token();
            tokio::spawn(async move {
                let _slot = slot;
                let id = request.id;
                tokio::select! {
                    _ = cancelled.cancelled() => {}
                    _ = stop.cancelled() => {}
                    _ = read(&hub, client, request) => {}
                }
                running.done(id);
            });
        }
        Line::Refuse { id, why } => {
            tracing::warn!(id, %why, "refused a live read");
            // A refusal takes a read's place too: a hub sending garbage fast gets no more
            // replies under way than reads.
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                return;
            };
            spawn_reply(
                hub,
                id,
                Served::only(ReplyHead::Refused { message: why }),
                slot,
            );
        }
        Line::Garbage(why) => tracing::warn!(%why, "a control line that is no control"),
    }
}

/// Serves `request` and posts its reply, all within its deadline.
async fn read(hub: &Hub, client: kube::Client, request: LiveRequest) {
    let within = serve::deadline(&request);
    let served = serve::serve(client, request.read, within).await;
    let body = reqwest::Body::wrap_stream(served.into_stream());
    if let Err(e) = hub.reply(request.id, body, within).await {
        tracing::info!(id = request.id, error = %e, "a live read's reply did not reach the hub");
    }
}

/// How long a refusal's reply may take to reach the hub.
const REFUSAL_WITHIN: Duration = Duration::from_secs(10);

/// Posts a refusal in a task of its own, holding `slot` (a read's place) while it does.
fn spawn_reply(hub: &Arc<Hub>, id: u64, served: Served, slot: tokio::sync::OwnedSemaphorePermit) {
    let hub = hub.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let body = reqwest::Body::wrap_stream(served.into_stream());
        if let Err(e) = hub.reply(id, body, REFUSAL_WITHIN).await {
            tracing::info!(id, error = %e, "a refusal did not reach the hub");
        }
    });
}
