//! One client per cluster. Building a client parses the kubeconfig, checks it, resolves
//! its server and may run an exec plugin; a kube-rs client then keeps its connections and
//! renews a plugin's token itself before it expires. So the API and the syncer ask
//! [`ClientCache::get`] with the cluster's name and stored kubeconfig every time, and a
//! client is built only when there is none yet, when the kubeconfig's text changed (its
//! SHA-256 differs), or when its certificate from a plugin is due for renewal. A plugin
//! thus runs once per credential lifetime, not per request.
//!
//! At most one build per cluster runs at a time: callers that arrive during a build wait
//! for it and share its outcome. A failed build is answered from memory for a few seconds
//! ([`RETRY_FAILED_AFTER`]), so a broken kubeconfig is not rebuilt (nor its plugin run)
//! for every request, and a fixed one is used soon after. Entries stay until the cluster
//! is [`forget`](ClientCache::forget)ten (on deregistration) or its kubeconfig changes.
//!
//! A plain map under a std mutex held only to look an entry up, each entry a
//! [`tokio::sync::OnceCell`] that runs the one build: a caching crate (moka) was weighed,
//! but a fingerprint-checked, failure-aware entry is as short by hand and adds no
//! dependencies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use kube::Client;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use crate::client::{connect, ClientError, ClusterClient, Timeouts, RETRY_FAILED_AFTER};
use crate::exec::ExecSettings;

/// The clients of the registered clusters, by cluster name.
pub struct ClientCache {
    exec: Arc<ExecSettings>,
    timeouts: Timeouts,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    /// Builds started, for tests.
    builds: AtomicUsize,
}

/// One cluster's client, for one kubeconfig text.
struct Entry {
    fingerprint: [u8; 32],
    built: OnceCell<Built>,
}

/// What a build gave.
enum Built {
    Client {
        client: Client,
        /// When a certificate from a plugin is due; `None`: never.
        renew_at: Option<Instant>,
    },
    Failed {
        error: ClientError,
        at: Instant,
    },
}

impl Built {
    /// Whether this may still be answered at `now`.
    fn fresh(&self, now: Instant) -> bool {
        match self {
            Built::Client { renew_at, .. } => renew_at.is_none_or(|at| now < at),
            Built::Failed { at, .. } => now.duration_since(*at) < RETRY_FAILED_AFTER,
        }
    }
}

impl ClientCache {
    pub fn new(exec: Arc<ExecSettings>, timeouts: Timeouts) -> Self {
        ClientCache {
            exec,
            timeouts,
            entries: Mutex::new(HashMap::new()),
            builds: AtomicUsize::new(0),
        }
    }

    /// The client of `cluster` for `kubeconfig`: the one held while the text is the same
    /// and its credential is not due, else a new one (one build at a time per cluster).
    pub async fn get(&self, cluster: &str, kubeconfig: &str) -> Result<Client, ClientError> {
        self.connect(cluster, kubeconfig).await.map(|c| c.client)
    }

    /// As [`get`](Self::get), with when the client is due for renewal (a certificate from
    /// a plugin): the syncer asks again then, and its watches move to the new client.
    pub async fn connect(
        &self,
        cluster: &str,
        kubeconfig: &str,
    ) -> Result<ClusterClient, ClientError> {
        let entry = self.entry(cluster, fingerprint(kubeconfig));
        let built = entry.built.get_or_init(|| self.build(kubeconfig)).await;
        match built {
            Built::Client { client, renew_at } => Ok(ClusterClient {
                client: client.clone(),
                renew_at: *renew_at,
            }),
            Built::Failed { error, .. } => Err(error.clone()),
        }
    }

    /// Drops the cluster's client (a deregistered cluster). A build in flight still
    /// answers its callers, but is not kept.
    pub fn forget(&self, cluster: &str) {
        self.lock().remove(cluster);
    }

    /// Clusters held (built, failed or building).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cluster's current entry, or a new empty one in its place when the text changed
    /// or what it holds is due.
    fn entry(&self, cluster: &str, fingerprint: [u8; 32]) -> Arc<Entry> {
        let mut entries = self.lock();
        if let Some(entry) = entries.get(cluster) {
            let current = entry.fingerprint == fingerprint
                && entry
                    .built
                    .get()
                    .is_none_or(|built| built.fresh(Instant::now()));
            if current {
                return entry.clone();
            }
        }
        let entry = Arc::new(Entry {
            fingerprint,
            built: OnceCell::new(),
        });
        entries.insert(cluster.to_owned(), entry.clone());
        entry
    }

    async fn build(&self, kubeconfig: &str) -> Built {
        self.builds.fetch_add(1, Ordering::Relaxed);
        match connect(kubeconfig, &self.exec, self.timeouts).await {
            Ok(built) => Built::Client {
                client: built.client,
                renew_at: built.renew_at,
            },
            Err(error) => Built::Failed {
                error,
                at: Instant::now(),
            },
        }
    }

    /// The map; nothing panics while it is held, so a poisoned lock is still whole.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn builds(&self) -> usize {
        self.builds.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for ClientCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCache")
            .field("clusters", &self.len())
            .finish_non_exhaustive()
    }
}

fn fingerprint(kubeconfig: &str) -> [u8; 32] {
    Sha256::digest(kubeconfig.as_bytes()).into()
}

#[cfg(test)]
mod tests;
