//! The syncer: keeps storage equal to what the sync rules select in every registered
//! cluster. A supervisor follows the metadata store's clusters and sync rules and runs one
//! cluster sync per cluster; each resolves its rules through discovery into watchers
//! (kube-rs list then watch), whose objects are trimmed and written in batches by one
//! writer per cluster, with backpressure, and sweeps away what its rules no longer
//! select. Nothing holds a copy of a cluster's objects in memory. A rule can be tried
//! against a cluster first ([`dry_run`]).
//!
//! Its rooms, each importing only those after it: `remote` (an agent's sync of its own
//! cluster, with the hub as its sink, and the plan the hub gives it), `fleet` (the supervisor, this member's
//! lease, the placement of clusters on members, the storage outage probe), `checks` (the
//! `Syncer` and `Cluster/NAME` checks), `cluster` (one cluster's run: watchers, writer,
//! owed lists, sweep, document counts, the lease's fence), `rules` (built-in rules,
//! resolution through discovery, the dry run), `ingest` (trimming, the audit policy and
//! relation rules, `pdb-missing`) and `status` (each cluster's and type's status,
//! metrics, reason codes).

mod checks;
mod cluster;
mod config;
mod fleet;
mod history;
mod ingest;
mod remote;
mod rules;
mod status;

use std::sync::Arc;
use std::time::Duration;

use karpor_audit::AuditConfig;
use karpor_core::model::RuleLimits;
use karpor_health::HealthChecker;
use karpor_kube::{ClientCache, ExecSettings};
use karpor_metastore::Metastore;
use karpor_storage::Storage;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use checks::cluster::{cluster_check, CLUSTER_CHECK_PREFIX};
pub use checks::syncer::{SyncerCheck, SYNCER_CHECK};
pub use checks::unowned::OwnersCheck;
pub use cluster::run::CLIENT_TIMEOUTS;

/// The member clusters' clients, one per cluster, built with the syncer's timeouts: give
/// the same cache to the syncer and to the API so both use one client per cluster.
pub fn client_cache(exec: Arc<ExecSettings>) -> Arc<ClientCache> {
    Arc::new(ClientCache::new(exec, CLIENT_TIMEOUTS))
}
pub use cluster::sink::{apply, Sink, SinkError, TypeScope, Upserted, Write};
pub use cluster::sweep::Coverage;
pub use cluster::writer::WriterSettings;
pub use config::{SyncerConfig, MEMBER_ENV};
pub use fleet::lease::default_member;
pub use fleet::outage::follow as follow_storage_recoveries;
pub use fleet::placement::preferred;
pub use history::HistorySettings;
pub use remote::{plan, PlannedRule, RemoteParts, RemoteSync, SyncPlan};
pub use rules::built_in::{default_rules, DEFAULT_METADATA_RULE, DEFAULT_RULE};
pub use rules::dry_run::{dry_run, DryRun, DryRunError, Selection};
pub use rules::resolve::selects;
pub use status::clusters::{
    AuditProgress, ClusterSnapshot, RuleInForce, Share, SyncState, SyncStatus,
};
pub use status::metrics::SyncMetrics;
pub use status::watched_types::{TypeError, TypeSnapshot, TypeState};

/// Timing and batching, with production defaults.
#[derive(Debug, Clone, Copy)]
pub struct SyncSettings {
    pub writer: WriterSettings,
    /// How often each cluster's discovery runs again (new custom resources).
    pub rediscover: Duration,
    /// How often clusters and rules are listed again besides the change feed.
    pub resync: Duration,
    /// How long a stopping cluster sync waits for its writer to write what it holds.
    pub writer_drain: Duration,
    /// How often storage is pinged to notice an outage (after which every cluster
    /// relists).
    pub storage_probe: Duration,
    /// How long this syncer's membership lease lives unless renewed: a member that dies
    /// or hangs loses its clusters after it.
    pub lease_ttl: Duration,
    /// How often members and claims are read again, to claim or hand over clusters.
    pub ownership_tick: Duration,
    /// How many rules and watches one cluster may have (`syncer.limits`).
    pub limits: RuleLimits,
    /// What history keeps (`syncer.history`).
    pub history: HistorySettings,
}

impl Default for SyncSettings {
    fn default() -> Self {
        SyncSettings {
            writer: WriterSettings::default(),
            rediscover: Duration::from_secs(30),
            resync: Duration::from_secs(60),
            writer_drain: Duration::from_secs(5),
            storage_probe: Duration::from_secs(2),
            lease_ttl: Duration::from_secs(15),
            ownership_tick: Duration::from_secs(1),
            limits: RuleLimits::default(),
            history: HistorySettings::default(),
        }
    }
}

/// What the syncer works with.
pub struct SyncerParts {
    pub metastore: Metastore,
    pub storage: Arc<dyn Storage>,
    /// Where each member cluster's `Cluster/NAME` check is registered.
    pub health: HealthChecker,
    pub metrics: SyncMetrics,
    /// The member clusters' clients ([`client_cache`]), shared with the API's live reads.
    pub clients: Arc<ClientCache>,
    pub settings: SyncSettings,
    /// The config file's audit policy (a stored policy record replaces it).
    pub audit: AuditConfig,
    /// This syncer's member name among those sharing the clusters (unique among live
    /// syncers; see [`default_member`]).
    pub member: String,
}

/// The syncer: built, then started once the process's own checks are registered (so
/// `Cluster/NAME` lines come after them).
pub struct Syncer {
    status: Arc<SyncStatus>,
    storage: Arc<dyn Storage>,
    supervisor: Option<fleet::supervisor::Supervisor>,
    task: Option<JoinHandle<()>>,
    /// History's expiry, started with the supervisor.
    expiry: (HistorySettings, SyncMetrics),
    expiry_task: Option<JoinHandle<()>>,
}

impl Syncer {
    pub fn new(parts: SyncerParts) -> Self {
        let expiry = (parts.settings.history, parts.metrics.clone());
        let status = Arc::new(SyncStatus::new(parts.metrics));
        status.set_running(true);
        Syncer {
            expiry,
            expiry_task: None,
            supervisor: Some(fleet::supervisor::Supervisor {
                metastore: parts.metastore,
                storage: parts.storage.clone(),
                health: parts.health,
                status: status.clone(),
                clients: parts.clients,
                settings: parts.settings,
                audit: Arc::new(parts.audit),
                member: parts.member,
            }),
            status,
            storage: parts.storage,
            task: None,
        }
    }

    /// Starts the supervisor; it stops its clusters and ends when `stop` is cancelled.
    pub fn start(&mut self, stop: CancellationToken) {
        let Some(supervisor) = self.supervisor.take() else {
            return;
        };
        let (history, metrics) = self.expiry.clone();
        self.expiry_task = Some(history::spawn_expiry(
            self.storage.clone(),
            history,
            metrics,
            stop.clone(),
        ));
        let running = self.status.clone();
        self.task = Some(tokio::spawn(async move {
            // The guard marks the syncer stopped however the task ends, panics included,
            // so the check can never report a dead syncer as healthy.
            let _guard = status::clusters::RunningGuard(running);
            supervisor.run(stop).await;
            tracing::info!("syncer stopped");
        }));
    }

    /// The `Syncer` check for this syncer.
    pub fn check(&self) -> SyncerCheck {
        SyncerCheck::new(self.status.clone(), self.storage.clone())
    }

    pub fn status(&self) -> Arc<SyncStatus> {
        self.status.clone()
    }

    /// Waits for the syncer to finish after its stop token was cancelled.
    pub async fn join(self) {
        if let Some(expiry) = self.expiry_task {
            // It stops at the same token; a pass under way is not waited for long.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), expiry).await;
        }
        let Some(task) = self.task else { return };
        if let Err(e) = task.await {
            tracing::error!(error = %e, "syncer task ended abnormally");
        }
    }
}

/// Registers the syncer's metrics in `registry`.
pub fn metrics(registry: &mut Registry) -> SyncMetrics {
    SyncMetrics::new(registry)
}
