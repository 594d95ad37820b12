//! Keeps one cluster sync per registered cluster, following the metadata store: clusters
//! and sync rules are listed, then watched; an added cluster starts, a changed record
//! restarts its sync, changed rules are handed to the running sync (which applies them
//! without a restart), a removed cluster stops and its documents go. While the metadata
//! store is unreachable the running syncs carry on unchanged.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use karpor_audit::AuditConfig;
use karpor_core::model::{AuditPolicy, Cluster, Kind, RelationRule, SyncRule};
use karpor_health::{HealthChecker, Membership};
use karpor_kube::ExecSettings;
use karpor_metastore::{Metastore, StoreError};
use karpor_search::Field;
use karpor_storage::Storage;
use tokio_util::sync::CancellationToken;

use crate::check::{cluster_check, ClusterCheck};
use crate::cluster::{ClusterRun, ClusterSync};
use crate::outage::{self, Recoveries};
use crate::policy::{Ingest, IngestPolicy};
use crate::rules::{rules_for, VersionedRule};
use crate::status::SyncStatus;
use crate::SyncSettings;

pub struct Supervisor {
    pub metastore: Metastore,
    pub storage: Arc<dyn Storage>,
    pub health: HealthChecker,
    pub status: Arc<SyncStatus>,
    pub exec: Arc<ExecSettings>,
    pub settings: SyncSettings,
    /// The config file's audit policy: in force while no policy record is stored.
    pub audit: Arc<AuditConfig>,
}

struct Running {
    /// Of the cluster's record: a change restarts the sync.
    fingerprint: u64,
    rules: tokio::sync::watch::Sender<Arc<Vec<VersionedRule>>>,
    sync: ClusterSync,
}

struct State {
    running: BTreeMap<String, Running>,
    /// Deregistered clusters whose documents could not be removed yet.
    orphans: BTreeSet<String>,
    /// Storage was checked for clusters nobody registers (removed while we were down).
    swept: bool,
    recoveries: Recoveries,
    policy: tokio::sync::watch::Sender<IngestPolicy>,
}

impl Supervisor {
    pub async fn run(self, stop: CancellationToken) {
        let mut state = State {
            running: BTreeMap::new(),
            orphans: BTreeSet::new(),
            swept: false,
            recoveries: outage::follow(
                self.storage.clone(),
                self.settings.storage_probe,
                stop.clone(),
            ),
            policy: tokio::sync::watch::Sender::new(IngestPolicy {
                generation: 1,
                ingest: Arc::new(Ingest {
                    audit: (*self.audit).clone(),
                    relations: karpor_topology::in_force(&[]),
                }),
            }),
        };
        self.status.set_audit_generation(1);
        let mut retry = Duration::from_millis(500);
        while !stop.is_cancelled() {
            match self.follow(&mut state, &stop).await {
                Ok(()) => retry = Duration::from_millis(500),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot follow the metadata store; clusters keep syncing, retrying");
                    retry = (retry * 2).min(Duration::from_secs(10));
                }
            }
            // Also after a feed that simply ended: never a tight list-and-watch loop.
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(retry) => {}
            }
        }
        for (name, running) in std::mem::take(&mut state.running) {
            running.sync.stop().await;
            self.health.deregister(&cluster_check(&name));
        }
    }

    /// Lists, reconciles, then reconciles again on every change (and every resync
    /// period, in case a change feed stalls) until the feed ends or `stop`.
    async fn follow(&self, state: &mut State, stop: &CancellationToken) -> Result<(), StoreError> {
        let revision = self.metastore.revision().await?;
        self.reconcile(state).await?;
        let mut changes = self.metastore.watch(revision).await?;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                change = changes.next() => match change {
                    Some(Ok(change))
                        if matches!(
                            change.kind,
                            Kind::Cluster | Kind::SyncRule | Kind::AuditPolicy | Kind::RelationRule
                        ) =>
                    {
                        // A burst of writes (an import, say) is one reconcile.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        self.reconcile(state).await?;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    None => return Ok(()),
                },
                _ = tokio::time::sleep(self.settings.resync) => self.reconcile(state).await?,
            }
        }
    }

    async fn reconcile(&self, state: &mut State) -> Result<(), StoreError> {
        let clusters = self.metastore.list_all::<Cluster>().await?;
        let stored_rules = self.metastore.list_all::<SyncRule>().await?;
        let versions: BTreeMap<String, i64> = stored_rules
            .iter()
            .map(|s| (s.record.name.clone(), s.version))
            .collect();
        let rules: Vec<SyncRule> = stored_rules.into_iter().map(|s| s.record).collect();
        self.follow_ingest_policy(state).await?;
        let mut wanted: BTreeMap<String, (Cluster, Vec<VersionedRule>, u64)> = BTreeMap::new();
        for stored in clusters {
            let cluster = stored.record;
            let rules = rules_for(&cluster, &rules)
                .into_iter()
                .map(|rule| VersionedRule {
                    version: versions.get(&rule.name).copied(),
                    rule,
                })
                .collect();
            let fingerprint = fingerprint(&cluster);
            wanted.insert(cluster.name.clone(), (cluster, rules, fingerprint));
        }
        let gone: Vec<String> = state
            .running
            .keys()
            .filter(|name| !wanted.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            if let Some(running) = state.running.remove(&name) {
                running.sync.stop().await;
            }
            self.health.deregister(&cluster_check(&name));
            self.status.forget(&name);
            tracing::info!(
                cluster = name,
                "cluster deregistered; removing its documents"
            );
            state.orphans.insert(name);
        }
        for (name, (cluster, rules, fingerprint)) in wanted {
            state.orphans.remove(&name);
            let rules = Arc::new(rules);
            if let Some(running) = state.running.get(&name) {
                if running.fingerprint == fingerprint {
                    running.rules.send_if_modified(|current| {
                        let changed = **current != *rules;
                        if changed {
                            *current = rules.clone();
                        }
                        changed
                    });
                    continue;
                }
                tracing::info!(
                    cluster = name,
                    "cluster record changed; restarting its sync"
                );
            }
            if let Some(old) = state.running.remove(&name) {
                old.sync.stop().await;
            }
            let progress = self.status.track(&name);
            let (client, seen) = tokio::sync::watch::channel(None);
            let check = ClusterCheck::new(progress.clone(), seen);
            // Its `must_ready` override, if any, is the checker's to apply.
            self.health
                .register(Arc::new(check), Membership::READYZ, None);
            let (rules, rules_seen) = tokio::sync::watch::channel(rules);
            let sync = ClusterSync::start(ClusterRun {
                cluster,
                rules: rules_seen,
                storage: self.storage.clone(),
                progress,
                client,
                exec: self.exec.clone(),
                settings: self.settings,
                recoveries: state.recoveries.clone(),
                policy: state.policy.subscribe(),
            });
            state.running.insert(
                name,
                Running {
                    fingerprint,
                    rules,
                    sync,
                },
            );
        }
        if !state.swept {
            self.find_orphans(state).await;
        }
        self.remove_orphans(state).await;
        Ok(())
    }

    /// The stored audit policy (or the config file's) and the relation rules in force: a
    /// change reaches every cluster sync, which relists under it.
    async fn follow_ingest_policy(&self, state: &mut State) -> Result<(), StoreError> {
        let stored = self
            .metastore
            .list_all::<AuditPolicy>()
            .await?
            .into_iter()
            .find(|p| p.record.name == AuditPolicy::NAME);
        let audit = match stored {
            Some(policy) => policy.record.config,
            None => (*self.audit).clone(),
        };
        let relations: Vec<RelationRule> = self
            .metastore
            .list_all::<RelationRule>()
            .await?
            .into_iter()
            .map(|r| r.record)
            .collect();
        let ingest = Ingest {
            audit,
            relations: karpor_topology::in_force(&relations),
        };
        let current = state.policy.borrow().clone();
        if *current.ingest != ingest {
            let generation = current.generation + 1;
            tracing::info!(
                generation,
                "audit policy or relation rules changed; relisting every cluster"
            );
            self.status.set_audit_generation(generation);
            state.policy.send_replace(IngestPolicy {
                generation,
                ingest: Arc::new(ingest),
            });
        }
        Ok(())
    }

    /// Clusters with documents in storage but no record: removed while no syncer ran.
    async fn find_orphans(&self, state: &mut State) {
        let everything =
            karpor_search::parse("select * from resources where deleted = true or deleted = false")
                .expect("a constant query parses");
        match self
            .storage
            .terms(&Field::Cluster, &everything, 10_000)
            .await
        {
            Ok(buckets) => {
                state.swept = true;
                state.orphans.extend(
                    buckets
                        .into_iter()
                        .map(|b| b.key)
                        .filter(|name| !state.running.contains_key(name)),
                );
            }
            Err(e) => tracing::warn!(error = %e, "cannot list the clusters in storage; will retry"),
        }
    }

    async fn remove_orphans(&self, state: &mut State) {
        for name in std::mem::take(&mut state.orphans) {
            match self.storage.delete_cluster(&name).await {
                Ok(removed) => {
                    tracing::info!(
                        cluster = name,
                        removed,
                        "removed a deregistered cluster's documents"
                    )
                }
                Err(e) => {
                    tracing::warn!(cluster = name, error = %e, "cannot remove a deregistered cluster's documents; will retry");
                    state.orphans.insert(name);
                }
            }
        }
    }
}

/// Changes whenever the cluster record does (its kubeconfig, labels, names).
fn fingerprint(cluster: &Cluster) -> u64 {
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(cluster)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}
