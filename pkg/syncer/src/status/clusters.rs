//! What the syncer can say about itself and each cluster: shared with its checks, the API
//! and `/metrics`. Written by the cluster tasks, read at any time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use karpor_health::Reason;
use time::OffsetDateTime;

use crate::status::metrics::SyncMetrics;
use crate::status::watched_types::{TypeId, TypeInfo, TypeProgress, TypeSnapshot};

/// Where a cluster's sync stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncState {
    /// Registered; its watchers have not started listing.
    Pending,
    /// Listing or relisting.
    Syncing,
    /// Every watcher has finished its list and follows changes.
    Synced,
    /// Cannot sync now; the reason code says why, it retries with backoff.
    Error(Reason),
}

impl SyncState {
    pub fn as_str(&self) -> &'static str {
        match self {
            SyncState::Pending => "pending",
            SyncState::Syncing => "syncing",
            SyncState::Synced => "synced",
            SyncState::Error(_) => "error",
        }
    }

    pub const NAMES: [&'static str; 4] = ["pending", "syncing", "synced", "error"];
}

/// One cluster's progress, as its tasks report it.
#[derive(Debug)]
pub(crate) struct ClusterProgress {
    name: String,
    state: RwLock<SyncState>,
    /// Set once the first full list of every watcher is in storage.
    initially_synced: AtomicBool,
    objects: AtomicU64,
    last_event_ms: AtomicI64,
    /// The API server's version and how long asking for it took, at the last check.
    server: RwLock<Option<ServerSeen>>,
    /// The audit policy generation all of the cluster's documents were last listed with
    /// (0: none yet).
    audited: AtomicU64,
    /// Each watched type's progress.
    types: RwLock<BTreeMap<TypeId, Arc<TypeProgress>>>,
    /// The rules its watchers follow now.
    rules: RwLock<Vec<RuleInForce>>,
    /// Raised by every write to storage (documents, deletions, purges): what the type
    /// counts wait for.
    writes: AtomicU64,
    /// Why its rules are refused (over `syncer.limits`): while set, the cluster watches
    /// nothing and is in error whatever else reports a state.
    refused: RwLock<Option<String>>,
    metrics: SyncMetrics,
}

/// What karpor last learnt of a cluster's API server.
#[derive(Debug, Clone)]
struct ServerSeen {
    version: String,
    latency_ms: u64,
    at: OffsetDateTime,
}

/// A sync rule a cluster's watchers follow, at the version they follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInForce {
    pub name: String,
    /// The stored record's version; `None` for a built-in rule.
    pub version: Option<i64>,
}

/// A cluster's status at one moment, for the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSnapshot {
    pub name: String,
    pub state: SyncState,
    /// Documents written since the syncer started this cluster.
    pub objects_synced: u64,
    pub last_event: Option<OffsetDateTime>,
    /// The API server's `gitVersion`, as last measured (see `server_seen_at`).
    pub server_version: Option<String>,
    /// How long that `/version` call took, in milliseconds.
    pub latency_ms: Option<u64>,
    /// When they were measured: by the sync on its own schedule, or by the cluster's
    /// health check, whichever was last.
    pub server_seen_at: Option<OffsetDateTime>,
    /// The rules in force for it (once its watchers follow them).
    pub rules: Vec<RuleInForce>,
    /// Each watched type, by group, version, resource and namespace.
    pub types: Vec<TypeSnapshot>,
    /// Why the cluster's rules are refused, naming the `syncer.limits` key they go over
    /// (its state is then `error`, `misconfigured`, and nothing is watched).
    pub refused: Option<String>,
}

impl ClusterProgress {
    fn new(name: String, metrics: SyncMetrics) -> Self {
        let progress = ClusterProgress {
            name,
            state: RwLock::new(SyncState::Pending),
            initially_synced: AtomicBool::new(false),
            objects: AtomicU64::new(0),
            last_event_ms: AtomicI64::new(0),
            server: RwLock::new(None),
            audited: AtomicU64::new(0),
            types: RwLock::default(),
            rules: RwLock::default(),
            writes: AtomicU64::new(0),
            refused: RwLock::new(None),
            metrics,
        };
        progress
            .metrics
            .set_state(&progress.name, "pending", &SyncState::NAMES);
        progress
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn state(&self) -> SyncState {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_state(&self, state: SyncState) {
        // Stopping the watchers of refused rules reports an empty cluster as synced.
        let state = match (&state, self.refused().is_some()) {
            (SyncState::Error(_), _) | (_, false) => state,
            (_, true) => SyncState::Error(Reason::Misconfigured),
        };
        if state == SyncState::Synced {
            self.initially_synced.store(true, Ordering::SeqCst);
        }
        let name = state.as_str();
        let mut current = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if *current != state {
            tracing::info!(from = current.as_str(), to = name, "cluster sync state");
            *current = state;
            self.metrics.set_state(&self.name, name, &SyncState::NAMES);
        }
    }

    /// The cluster's rules go over a limit (`why` names it) and it watches nothing; or,
    /// with `None`, they fit. Whether that changed.
    pub(crate) fn refuse(&self, why: Option<String>) -> bool {
        let refused = why.is_some();
        let before = std::mem::replace(
            &mut *self.refused.write().unwrap_or_else(PoisonError::into_inner),
            why.clone(),
        );
        if refused {
            self.set_state(SyncState::Error(Reason::Misconfigured));
        }
        before != why
    }

    fn refused(&self) -> Option<String> {
        self.refused
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Done with the first list, or unable to start it: either way it no longer holds up
    /// readiness (a dead member cluster fails its own non-critical check instead).
    pub(crate) fn settled(&self) -> bool {
        self.initially_synced.load(Ordering::SeqCst) || matches!(self.state(), SyncState::Error(_))
    }

    pub(crate) fn event_seen(&self) {
        let now = OffsetDateTime::now_utc();
        let ms = (now.unix_timestamp_nanos() / 1_000_000) as i64;
        self.last_event_ms.store(ms, Ordering::Relaxed);
        self.metrics.last_event(&self.name, now);
    }

    pub(crate) fn objects_written(&self, n: usize) {
        self.wrote();
        self.objects.fetch_add(n as u64, Ordering::Relaxed);
        self.metrics.objects_written(&self.name, n);
    }

    /// Every watcher has listed with audit policy `generation`.
    pub(crate) fn audited(&self, generation: u64) {
        let was = self.audited.fetch_max(generation, Ordering::SeqCst);
        if generation > was {
            self.metrics.audited(&self.name, generation);
        }
    }

    /// A watcher starts: its type's progress, fresh.
    pub(crate) fn watch_type(&self, info: TypeInfo) -> Arc<TypeProgress> {
        let progress = Arc::new(TypeProgress::new(&self.name, info, self.metrics.clone()));
        let replaced = self
            .types
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(progress.id().clone(), progress.clone());
        if let Some(old) = replaced {
            old.forget();
        }
        progress
    }

    /// A watcher stopped (unless another already took its type over).
    pub(crate) fn unwatch_type(&self, progress: &Arc<TypeProgress>) {
        let mut types = self.types.write().unwrap_or_else(PoisonError::into_inner);
        if types
            .get(progress.id())
            .is_some_and(|current| Arc::ptr_eq(current, progress))
        {
            types.remove(progress.id());
            progress.forget();
        }
    }

    pub(crate) fn types(&self) -> Vec<Arc<TypeProgress>> {
        self.types
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    pub(crate) fn set_rules(&self, rules: Vec<RuleInForce>) {
        *self.rules.write().unwrap_or_else(PoisonError::into_inner) = rules;
    }

    /// Storage changed for this cluster.
    pub(crate) fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// What a call to the API server's `/version` learnt (the sync's own probe, or the
    /// cluster's health check).
    pub(crate) fn server_answered(&self, version: String, latency_ms: u64) {
        let seen = ServerSeen {
            version,
            latency_ms,
            at: OffsetDateTime::now_utc(),
        };
        *self.server.write().unwrap_or_else(PoisonError::into_inner) = Some(seen);
    }

    pub(crate) fn snapshot(&self) -> ClusterSnapshot {
        let ms = self.last_event_ms.load(Ordering::Relaxed);
        let server = self
            .server
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        ClusterSnapshot {
            name: self.name.clone(),
            state: self.state(),
            objects_synced: self.objects.load(Ordering::Relaxed),
            last_event: (ms > 0)
                .then(|| OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok())
                .flatten(),
            server_version: server.as_ref().map(|s| s.version.clone()),
            latency_ms: server.as_ref().map(|s| s.latency_ms),
            server_seen_at: server.map(|s| s.at),
            rules: self
                .rules
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            types: self.types().iter().map(|t| t.snapshot()).collect(),
            refused: self.refused(),
        }
    }
}

/// The syncer's status: whether it runs, and each registered cluster's progress.
#[derive(Debug)]
pub struct SyncStatus {
    running: AtomicBool,
    clusters: RwLock<BTreeMap<String, Arc<ClusterProgress>>>,
    /// The audit policy's generation now (raised on each change of the policy).
    audit_generation: AtomicU64,
    share: RwLock<Share>,
    metrics: SyncMetrics,
}

/// This syncer's part among the members sharing the clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Share {
    /// This syncer's member name.
    pub member: String,
    /// Whether its lease certainly holds (it writes only then).
    pub lease_held: bool,
    /// Live members it sees, itself included.
    pub members: usize,
    /// Clusters it holds the claim of, and their epochs.
    pub owned: BTreeMap<String, i64>,
    /// The registered clusters were listed at least once: before, their number is unknown.
    pub listed: bool,
    /// Registered clusters.
    pub registered: usize,
    /// Registered clusters no live member has held for longer than the lease TTL.
    pub unowned_overdue: usize,
    /// Registered clusters this member is preferred for but does not run yet (being
    /// claimed, or handed over by another): they hold its initial sync.
    pub pending: usize,
}

/// How far the current audit policy has reached: clusters whose every document was
/// written under it, of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditProgress {
    pub generation: u64,
    pub clusters: usize,
    pub audited: usize,
}

impl SyncStatus {
    pub(crate) fn new(metrics: SyncMetrics) -> Self {
        SyncStatus {
            running: AtomicBool::new(false),
            clusters: RwLock::default(),
            audit_generation: AtomicU64::new(0),
            share: RwLock::default(),
            metrics,
        }
    }

    pub(crate) fn set_audit_generation(&self, generation: u64) {
        self.audit_generation.store(generation, Ordering::SeqCst);
        self.metrics.audit_policy(generation);
    }

    /// How many clusters are audited with the current policy (re-audit progress).
    pub fn audit_progress(&self) -> AuditProgress {
        let generation = self.audit_generation.load(Ordering::SeqCst);
        let clusters = self.clusters.read().unwrap_or_else(PoisonError::into_inner);
        let audited = clusters
            .values()
            .filter(|c| c.audited.load(Ordering::SeqCst) >= generation)
            .count();
        AuditProgress {
            generation,
            clusters: clusters.len(),
            audited,
        }
    }

    pub fn share(&self) -> Share {
        self.share
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_share(&self, share: Share) {
        self.metrics.share(
            share.members,
            share.owned.len(),
            share.registered,
            share.lease_held,
        );
        *self.share.write().unwrap_or_else(PoisonError::into_inner) = share;
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    pub(crate) fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::SeqCst);
    }

    /// A fresh progress for `name`, replacing any earlier one (the cluster restarted).
    pub(crate) fn track(&self, name: &str) -> Arc<ClusterProgress> {
        let progress = Arc::new(ClusterProgress::new(name.to_owned(), self.metrics.clone()));
        self.clusters
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), progress.clone());
        progress
    }

    pub(crate) fn forget(&self, name: &str) {
        let removed = self
            .clusters
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
        for progress in removed.iter().flat_map(|c| c.types()) {
            progress.forget();
        }
        self.metrics.forget(name, &SyncState::NAMES);
    }

    /// How many registered clusters have settled their first list, of how many.
    pub fn initial_sync(&self) -> (usize, usize) {
        let clusters = self.clusters.read().unwrap_or_else(PoisonError::into_inner);
        let settled = clusters.values().filter(|c| c.settled()).count();
        (settled, clusters.len())
    }

    /// Every registered cluster's status, by name.
    pub fn clusters(&self) -> Vec<ClusterSnapshot> {
        let clusters = self.clusters.read().unwrap_or_else(PoisonError::into_inner);
        clusters.values().map(|c| c.snapshot()).collect()
    }

    pub fn cluster(&self, name: &str) -> Option<ClusterSnapshot> {
        let clusters = self.clusters.read().unwrap_or_else(PoisonError::into_inner);
        clusters.get(name).map(|c| c.snapshot())
    }
}

pub(crate) struct RunningGuard(pub Arc<SyncStatus>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.set_running(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_rules_keep_the_cluster_in_error_until_they_fit() {
        let metrics = SyncMetrics::new(&mut prometheus_client::registry::Registry::default());
        let progress = SyncStatus::new(metrics).track("prod");
        let why = "watches the sync rules resolve to: 9 is over the limit of 4 (syncer.limits.watches_per_cluster)";
        assert!(progress.refuse(Some(why.to_owned())));
        assert!(!progress.refuse(Some(why.to_owned())));
        progress.set_state(SyncState::Synced);
        let snapshot = progress.snapshot();
        assert_eq!(snapshot.state, SyncState::Error(Reason::Misconfigured));
        assert_eq!(snapshot.refused.as_deref(), Some(why));
        assert!(
            progress.settled(),
            "a refused cluster holds up no readiness"
        );
        progress.refuse(None);
        progress.set_state(SyncState::Synced);
        assert_eq!(progress.snapshot().state, SyncState::Synced);
        assert_eq!(progress.snapshot().refused, None);
    }
}
