//! One writer per cluster between its watchers and its sink (storage, or the hub): documents are written in
//! batches bounded by count, size and a time window, in the order the watchers sent
//! them. The queue is bounded and a failed write is retried until it succeeds, so a slow
//! or dead storage holds up the watchers' lists (backpressure) and makes their watches
//! remember changes by uid, bounded ([`crate::cluster::behind`]), instead of dropping
//! events or buffering objects without bound.

use std::sync::Arc;
use std::time::Duration;

use karpor_storage::{HistoryNote, ResourceDocument};
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::fence::Fence;
use crate::cluster::owed_lists::Lists;
use crate::cluster::sink::{Sink, SinkError, Upserted, Write};
use crate::cluster::sweep::Coverage;
use crate::rules::resolve::TargetKey;
use crate::status::clusters::ClusterProgress;

/// How often a fenced writer looks whether its lease holds again.
const FENCE_POLL: Duration = Duration::from_millis(100);

/// What a watcher asks of storage.
#[derive(Debug)]
pub(crate) enum Op {
    Upsert(ResourceDocument),
    /// The object went. Its last resourceVersion fences the delete (storage skips it when
    /// it holds a newer version).
    Delete {
        uid: String,
        resource_version: Option<String>,
        history: Option<HistoryNote>,
    },
    /// The object went, and its rule keeps deleted objects.
    SoftDelete {
        uid: String,
        at: OffsetDateTime,
        resource_version: Option<String>,
        history: Option<HistoryNote>,
    },
    /// A list completed: its type's documents written before it began are gone.
    Purge {
        api_version: String,
        kind: String,
        namespace: Option<String>,
        before: OffsetDateTime,
        /// The watcher's first list: storage now holds it.
        first_list: Option<(Arc<Lists>, TargetKey)>,
        /// Kept as deletions seen late, when the rule keeps history.
        history: Option<HistoryNote>,
    },
    /// The cluster's documents of what the targets no longer cover (written before
    /// `before`) are gone.
    Sweep {
        coverage: Coverage,
        before: OffsetDateTime,
        lists: Arc<Lists>,
    },
}

/// Batch bounds and queue length.
#[derive(Debug, Clone, Copy)]
pub struct WriterSettings {
    pub max_documents: usize,
    pub max_bytes: usize,
    pub window: Duration,
    /// Operations queued between the watchers and the writer.
    pub queue: usize,
    /// Changes each watcher remembers (by uid) while the queue is full, before its type
    /// relists instead.
    pub behind: usize,
}

impl Default for WriterSettings {
    fn default() -> Self {
        WriterSettings {
            max_documents: 500,
            max_bytes: 4 * 1024 * 1024,
            window: Duration::from_millis(100),
            queue: 1024,
            behind: 4096,
        }
    }
}

/// Starts a writer. It ends once every sender is dropped and what it holds is written,
/// or at once when `stop` is cancelled (what it held is written again by the next list).
pub(crate) fn spawn(
    sink: Arc<dyn Sink>,
    progress: Arc<ClusterProgress>,
    settings: WriterSettings,
    fence: (Arc<Fence>, i64),
    stop: CancellationToken,
) -> (mpsc::Sender<Op>, JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel(settings.queue);
    let writer = Writer {
        sink,
        progress,
        settings,
        fence,
        stop,
        batch: Vec::new(),
        bytes: 0,
    };
    (sender, tokio::spawn(writer.run(receiver).in_current_span()))
}

struct Writer {
    sink: Arc<dyn Sink>,
    progress: Arc<ClusterProgress>,
    settings: WriterSettings,
    /// This member's lease, and the id of the one the sync started under: no write once
    /// it may have ended (another member may own the cluster by then).
    fence: (Arc<Fence>, i64),
    stop: CancellationToken,
    batch: Vec<ResourceDocument>,
    bytes: usize,
}

impl Writer {
    async fn run(mut self, mut receiver: mpsc::Receiver<Op>) {
        loop {
            let first = tokio::select! {
                _ = self.stop.cancelled() => return,
                op = receiver.recv() => op,
            };
            let Some(first) = first else { return };
            let deadline = Instant::now() + self.settings.window;
            let mut next = Some(first);
            while let Some(op) = next {
                if !self.apply(op).await {
                    return;
                }
                next = tokio::select! {
                    _ = self.stop.cancelled() => return,
                    op = tokio::time::timeout_at(deadline, receiver.recv()) => match op {
                        Ok(Some(op)) => Some(op),
                        Ok(None) => {
                            self.flush().await;
                            return;
                        }
                        Err(_window_over) => None,
                    },
                };
            }
            if !self.flush().await {
                return;
            }
        }
    }

    /// `false` once stopped.
    async fn apply(&mut self, op: Op) -> bool {
        let Op::Upsert(document) = op else {
            return self.flush().await && self.barrier(op).await;
        };
        self.bytes += approximate_size(&document.object);
        self.batch.push(document);
        if self.batch.len() >= self.settings.max_documents || self.bytes >= self.settings.max_bytes
        {
            return self.flush().await;
        }
        true
    }

    async fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let batch = std::mem::take(&mut self.batch);
        self.bytes = 0;
        let written = batch.len();
        let documents = batch
            .into_iter()
            .map(|mut document| Upserted {
                history: document.history.take(),
                document,
            })
            .collect();
        let done = self
            .send("write documents", Write::Upsert { documents })
            .await;
        if done.is_some() {
            self.progress.objects_written(written);
        }
        done.is_some()
    }

    /// An operation that must see every earlier write in storage first.
    async fn barrier(&mut self, op: Op) -> bool {
        match op {
            Op::Upsert(_) => unreachable!("upserts are batched"),
            Op::Delete {
                uid,
                resource_version,
                history,
            } => {
                self.progress.wrote();
                let write = Write::Delete {
                    uid,
                    resource_version,
                    history,
                };
                self.send("delete a document", write).await.is_some()
            }
            Op::SoftDelete {
                uid,
                at,
                resource_version,
                history,
            } => {
                self.progress.wrote();
                let write = Write::SoftDelete {
                    uid,
                    at,
                    resource_version,
                    history,
                };
                self.send("mark a document deleted", write).await.is_some()
            }
            Op::Sweep {
                coverage,
                before,
                lists,
            } => {
                let write = Write::Sweep { coverage, before };
                let Some(removed) = self.send("remove documents no rule selects", write).await
                else {
                    return false;
                };
                if removed > 0 {
                    self.progress.wrote();
                    tracing::info!(removed, "removed documents the sync rules no longer select");
                }
                lists.swept();
                true
            }
            Op::Purge {
                api_version,
                kind,
                namespace,
                before,
                first_list,
                history,
            } => {
                let write = Write::Purge {
                    kind: kind.clone(),
                    api_version,
                    namespace,
                    before,
                    history,
                };
                let what = "purge documents a list did not see";
                let Some(purged) = self.send(what, write).await else {
                    return false;
                };
                self.progress.wrote();
                if purged > 0 {
                    tracing::debug!(kind, purged, "purged documents a list did not see");
                }
                if let Some((lists, key)) = first_list {
                    lists.listed(&key);
                }
                true
            }
        }
    }

    /// Sends `write` to the sink until it is durable; `None` once stopped.
    async fn send(&self, what: &str, write: Write) -> Option<u64> {
        let (sink, cluster) = (self.sink.clone(), self.progress.name().to_owned());
        self.retry(what, || sink.write(&cluster, &write)).await
    }

    /// Runs `write` until it succeeds, with backoff; `None` once stopped.
    async fn retry<T, F>(&self, what: &str, mut write: impl FnMut() -> F) -> Option<T>
    where
        F: std::future::Future<Output = Result<T, SinkError>>,
    {
        let mut delay = Duration::from_millis(100);
        let mut failures = 0u32;
        loop {
            // Waits rather than drops: a lease that survives (renewed late) keeps every
            // write; a lost one stops this sync, and the next owner lists afresh.
            while !self.fence.0.holds(self.fence.1) {
                tokio::select! {
                    _ = self.stop.cancelled() => return None,
                    _ = tokio::time::sleep(FENCE_POLL) => {}
                }
            }
            match write().await {
                Ok(value) => {
                    if failures > 0 {
                        tracing::info!(failures, "storage writes resumed");
                    }
                    return Some(value);
                }
                Err(e) => {
                    failures += 1;
                    // One line when writes start failing, then one a minute or so.
                    if failures == 1 || failures.is_multiple_of(12) {
                        tracing::warn!(error = %e, failures, "cannot {what}; retrying");
                    }
                }
            }
            tokio::select! {
                _ = self.stop.cancelled() => return None,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    }
}

/// Roughly the JSON size of a value, without serialising it.
fn approximate_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 12,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(approximate_size).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + approximate_size(v))
                .sum::<usize>()
        }
    }
}
