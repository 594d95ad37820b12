//! One cluster synced from inside it, by its agent: what the hub tells the agent to sync
//! ([`SyncPlan`], made from the metadata store the agent never reads), and the sync
//! itself ([`RemoteSync`]): the same run, watchers and writer as the hub's, with the
//! agent's own client and the hub as the writer's sink. No lease: the cluster's agent is
//! the only one that writes it, by its certificate.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use karpor_audit::AuditConfig;
use karpor_core::model::{Cluster, ClusterMode, Kubeconfig, RelationRule, SyncRule};
use karpor_kube::ExecSettings;
use karpor_metastore::{Metastore, StoreError};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::cluster::fence::Fence;
use crate::cluster::run::{ClusterRun, ClusterSync, Resume};
use crate::cluster::sink::Sink;
use crate::ingest::policy::{Ingest, IngestPolicy};
use crate::rules::resolve::{rules_for, VersionedRule};
use crate::status::clusters::SyncStatus;
use crate::status::metrics::SyncMetrics;
use crate::{HistorySettings, SyncSettings};

/// The lease id an agent's writer runs under; its fence never ends.
const AGENT_LEASE: i64 = 1;

/// What an agent syncs: its cluster's rules and the ingest policy in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncPlan {
    /// When the cluster was registered: history keeps as created only what was created
    /// after.
    #[serde(with = "time::serde::rfc3339")]
    pub registered_at: OffsetDateTime,
    pub rules: Vec<PlannedRule>,
    pub audit: AuditConfig,
    /// The relation rules in force, built-in ones included.
    pub relations: Vec<RelationRule>,
    pub history: HistorySettings,
}

/// A rule and its stored version (none for a built-in one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedRule {
    pub rule: SyncRule,
    pub version: Option<i64>,
}

/// The plan for `cluster` as the hub's own syncer would follow it; `None` when no such
/// cluster is registered. `configured`: the config file's audit policy.
pub async fn plan(
    metastore: &Metastore,
    cluster: &str,
    configured: &AuditConfig,
    history: HistorySettings,
) -> Result<Option<SyncPlan>, StoreError> {
    let Some(stored) = metastore.get::<Cluster>(cluster).await? else {
        return Ok(None);
    };
    let stored_rules = metastore.list_all::<SyncRule>().await?;
    let versions: BTreeMap<String, i64> = stored_rules
        .iter()
        .map(|s| (s.record.name.clone(), s.version))
        .collect();
    let rules: Vec<SyncRule> = stored_rules.into_iter().map(|s| s.record).collect();
    let ingest = crate::ingest::policy::read(metastore, configured, history).await?;
    Ok(Some(SyncPlan {
        registered_at: stored.created_at,
        rules: rules_for(&stored.record, &rules)
            .into_iter()
            .map(|rule| PlannedRule {
                version: versions.get(&rule.name).copied(),
                rule,
            })
            .collect(),
        audit: ingest.audit,
        relations: ingest.relations,
        history: ingest.history,
    }))
}

impl SyncPlan {
    fn rules(&self) -> Arc<Vec<VersionedRule>> {
        Arc::new(
            self.rules
                .iter()
                .map(|p| VersionedRule {
                    rule: p.rule.clone(),
                    version: p.version,
                })
                .collect(),
        )
    }

    fn ingest(&self) -> Ingest {
        Ingest {
            audit: self.audit.clone(),
            relations: self.relations.clone(),
            history: self.history,
        }
    }
}

/// What an agent's sync works with.
pub struct RemoteParts {
    /// The cluster its certificate names.
    pub cluster: String,
    /// The agent's own client of its cluster (its read-only ServiceAccount).
    pub client: kube::Client,
    /// The hub.
    pub sink: Arc<dyn Sink>,
    pub settings: SyncSettings,
    pub metrics: SyncMetrics,
    /// The fingerprints of the targets whose lists the hub held when the agent last ran
    /// ([`RemoteSync::held`]): their first lists compare digests instead of sending.
    pub held_before: BTreeSet<String>,
}

/// An agent's sync of its cluster, following the plans the hub sends.
pub struct RemoteSync {
    rules: watch::Sender<Arc<Vec<VersionedRule>>>,
    policy: watch::Sender<IngestPolicy>,
    status: Arc<SyncStatus>,
    sync: ClusterSync,
    /// The run's storage-recovery signal: the hub asks for a relist through it
    /// ([`RemoteSync::relist`]) when its storage came back after an outage.
    recoveries: watch::Sender<u64>,
    held: Arc<watch::Sender<BTreeSet<String>>>,
}

impl RemoteSync {
    pub fn start(parts: RemoteParts, plan: &SyncPlan) -> RemoteSync {
        let status = Arc::new(SyncStatus::new(parts.metrics));
        status.set_running(true);
        let progress = status.track(&parts.cluster);
        let (rules, rules_seen) = watch::channel(plan.rules());
        let (policy, policy_seen) = watch::channel(IngestPolicy {
            generation: 1,
            ingest: Arc::new(plan.ingest()),
        });
        let (recoveries, recoveries_seen) = watch::channel(0);
        // Empty until each list is held again: a target no longer watched is not kept.
        let held = Arc::new(watch::Sender::new(BTreeSet::new()));
        let fence = Fence::new();
        fence.extend(
            AGENT_LEASE,
            tokio::time::Instant::now(),
            std::time::Duration::from_secs(100 * 365 * 24 * 3600),
        );
        let sync = ClusterSync::start(ClusterRun {
            cluster: Cluster {
                name: parts.cluster,
                display_name: String::new(),
                description: String::new(),
                labels: BTreeMap::new(),
                kubeconfig: Kubeconfig(String::new()),
                mode: ClusterMode::Agent,
            },
            registered_at: plan.registered_at,
            rules: rules_seen,
            sink: parts.sink,
            given: Some(parts.client),
            progress,
            client: watch::Sender::new(None),
            clients: crate::client_cache(Arc::new(ExecSettings::default())),
            settings: parts.settings,
            recoveries: recoveries_seen,
            policy: policy_seen,
            fence: (fence, AGENT_LEASE),
            resume: Resume {
                held_before: parts.held_before,
                held: held.clone(),
            },
        });
        RemoteSync {
            rules,
            policy,
            status,
            sync,
            recoveries,
            held,
        }
    }

    /// Follows a newer plan: changed rules reach the watchers they concern, a changed
    /// ingest policy relists every type under it.
    pub fn follow(&self, plan: &SyncPlan) {
        let rules = plan.rules();
        self.rules.send_if_modified(|current| {
            let changed = **current != *rules;
            if changed {
                *current = rules.clone();
            }
            changed
        });
        let ingest = plan.ingest();
        self.policy.send_if_modified(|current| {
            let changed = *current.ingest != ingest;
            if changed {
                current.generation += 1;
                current.ingest = Arc::new(ingest.clone());
            }
            changed
        });
    }

    /// The fingerprints of the targets whose lists the hub holds now, for the agent to
    /// keep across a restart (as [`RemoteParts::held_before`]).
    pub fn held(&self) -> watch::Receiver<BTreeSet<String>> {
        self.held.subscribe()
    }

    /// Every type lists again and is sent whole: the hub's storage may have lost what it
    /// had acknowledged.
    pub fn relist(&self) {
        self.recoveries.send_modify(|n| *n += 1);
    }

    /// The sync's status: the agent's own `/readyz` reports it.
    pub fn status(&self) -> Arc<SyncStatus> {
        self.status.clone()
    }

    /// Stops the watchers and lets the writer send what it holds (bounded).
    pub async fn stop(self) {
        self.sync.stop().await;
        self.status.set_running(false);
    }
}
