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

use futures::{FutureExt, StreamExt};
use karpor_audit::AuditConfig;
use karpor_core::model::{Cluster, Kind, SyncRule};
use karpor_health::{HealthChecker, Membership};
use karpor_kube::ClientCache;
use karpor_metastore::{Metastore, Revision, StoreError};
use karpor_search::Field;
use karpor_storage::Storage;
use time::OffsetDateTime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::checks::cluster::{cluster_check, ClusterCheck};
use crate::cluster::fence::Fence;
use crate::cluster::run::Recoveries;
use crate::cluster::run::{span as cluster_span, ClusterRun, ClusterSync, Resume};
use crate::cluster::sink::StorageSink;
use crate::fleet::lease::LeaseSeen;
use crate::fleet::{lease, outage, placement};
use crate::ingest::policy::{read, Ingest, IngestPolicy};
use crate::rules::resolve::{rules_for, VersionedRule};
use crate::status::clusters::{Share, SyncStatus};
use crate::SyncSettings;

pub(crate) struct Supervisor {
    pub metastore: Metastore,
    pub storage: Arc<dyn Storage>,
    pub health: HealthChecker,
    pub status: Arc<SyncStatus>,
    pub clients: Arc<ClientCache>,
    pub settings: SyncSettings,
    /// The config file's audit policy: in force while no policy record is stored.
    pub audit: Arc<AuditConfig>,
    /// This syncer's member name among the syncers sharing the clusters.
    pub member: String,
}

struct Running {
    /// Of the cluster's record: a change restarts the sync.
    fingerprint: u64,
    /// The lease it runs under: fenced off once that one is gone.
    lease: i64,
    rules: tokio::sync::watch::Sender<Arc<Vec<VersionedRule>>>,
    sync: ClusterSync,
}

/// A registered cluster as last listed.
struct Registered {
    cluster: Cluster,
    registered_at: OffsetDateTime,
    rules: Arc<Vec<VersionedRule>>,
    fingerprint: u64,
}

struct State {
    running: BTreeMap<String, Running>,
    /// Every registered cluster, whoever syncs it.
    registered: BTreeMap<String, Registered>,
    /// The clusters this member holds the claim of, with their epochs.
    owned: BTreeMap<String, Revision>,
    /// Registered clusters no live member holds, since when (as first seen here).
    unowned: BTreeMap<String, Instant>,
    members: usize,
    /// Registered clusters this member is preferred for and does not hold yet.
    pending: usize,
    lease: LeaseSeen,
    fence: Arc<Fence>,
    /// Deregistered clusters whose documents could not be removed yet.
    orphans: BTreeSet<String>,
    /// The registered clusters were listed at least once.
    listed: bool,
    /// Storage was checked for clusters nobody registers (removed while we were down).
    swept: bool,
    recoveries: Recoveries,
    policy: tokio::sync::watch::Sender<IngestPolicy>,
}

impl Supervisor {
    pub(crate) async fn run(self, stop: CancellationToken) {
        let fence = Fence::new();
        // Stopped after the syncs, so the lease outlives every write.
        let keeper = CancellationToken::new();
        let lease = lease::keep(
            self.metastore.clone(),
            self.member.clone(),
            self.settings.lease_ttl,
            fence.clone(),
            keeper.clone(),
        );
        let mut state = State {
            running: BTreeMap::new(),
            registered: BTreeMap::new(),
            owned: BTreeMap::new(),
            unowned: BTreeMap::new(),
            members: 0,
            pending: 0,
            lease,
            fence,
            orphans: BTreeSet::new(),
            listed: false,
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
                    history: self.settings.history,
                }),
            }),
        };
        self.status.set_audit_generation(1);
        self.publish(&state);
        let mut retry = Duration::from_millis(500);
        while !stop.is_cancelled() {
            match self.follow(&mut state, &stop).await {
                Ok(()) => retry = Duration::from_millis(500),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot follow the metadata store; clusters keep syncing while the lease holds, retrying");
                    retry = (retry * 2).min(Duration::from_secs(10));
                }
            }
            // Also after a feed that simply ended: never a tight list-and-watch loop. A
            // lease that ends meanwhile stops this member's syncs at once.
            let deadline = tokio::time::Instant::now() + retry;
            let mut lease = state.lease.clone();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep_until(deadline) => break,
                    Ok(()) = lease.changed() => {
                        if let Err(e) = self.rebalance(&mut state).await {
                            tracing::debug!(error = %e, "cannot rebalance yet");
                        }
                    }
                }
            }
        }
        // All at once: a graceful stop hands its clusters over as soon as it can.
        let running = std::mem::take(&mut state.running);
        let names: Vec<String> = running.keys().cloned().collect();
        futures::future::join_all(running.into_values().map(|r| r.sync.stop())).await;
        for name in names {
            self.health.deregister(&cluster_check(&name));
        }
        keeper.cancel();
        let held = state.lease.borrow().clone();
        if let Some(lease) = held {
            // Its claims go with it: the other members take its clusters over at once.
            match tokio::time::timeout(self.settings.lease_ttl / 3, self.metastore.leave(&lease))
                .await
            {
                Ok(Ok(())) => tracing::info!(member = lease.member, "left the syncer members"),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot leave the syncer members; the lease ends by itself")
                }
                Err(_) => {
                    tracing::warn!("leaving the syncer members timed out; the lease ends by itself")
                }
            }
        }
    }

    /// Lists, reconciles, then reconciles again on every change (and every resync
    /// period, in case a change feed stalls) and rebalances every ownership tick and on
    /// each change of the lease, until the feed ends or `stop`.
    async fn follow(&self, state: &mut State, stop: &CancellationToken) -> Result<(), StoreError> {
        let revision = self.metastore.revision().await?;
        self.reconcile(state).await?;
        let mut changes = self.metastore.watch(revision).await?;
        let mut lease = state.lease.clone();
        let mut tick = tokio::time::interval(self.settings.ownership_tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut resync = tokio::time::interval(self.settings.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.reset();
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
                        // A burst of writes (an import, say) is one reconcile: what
                        // queued meanwhile is taken at once, not a reconcile each.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let mut ended = false;
                        loop {
                            match changes.next().now_or_never() {
                                Some(Some(Ok(_))) => {}
                                Some(Some(Err(e))) => return Err(e),
                                Some(None) => {
                                    ended = true;
                                    break;
                                }
                                None => break,
                            }
                        }
                        self.reconcile(state).await?;
                        if ended {
                            return Ok(());
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    None => return Ok(()),
                },
                _ = tick.tick() => self.rebalance(state).await?,
                Ok(()) = lease.changed() => self.rebalance(state).await?,
                _ = resync.tick() => self.reconcile(state).await?,
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
        let mut registered = BTreeMap::new();
        for stored in clusters {
            let registered_at = stored.created_at;
            let cluster = stored.record;
            let rules = rules_for(&cluster, &rules)
                .into_iter()
                .map(|rule| VersionedRule {
                    version: versions.get(&rule.name).copied(),
                    rule,
                })
                .collect();
            let fingerprint = fingerprint(&cluster);
            registered.insert(
                cluster.name.clone(),
                Registered {
                    cluster,
                    registered_at,
                    rules: Arc::new(rules),
                    fingerprint,
                },
            );
        }
        let before = std::mem::replace(&mut state.registered, registered);
        state.listed = true;
        for name in before.keys().filter(|n| !state.registered.contains_key(*n)) {
            // Every member removes a deregistered cluster's documents (idempotent): its
            // owner may be gone too.
            cluster_span(name)
                .in_scope(|| tracing::info!("cluster deregistered; removing its documents"));
            state.orphans.insert(name.clone());
        }
        for name in state.registered.keys() {
            state.orphans.remove(name);
        }
        self.rebalance(state).await
    }

    /// Claims the clusters this member is preferred for, hands over the others, then
    /// runs exactly the syncs of the registered clusters it holds. Without a lease that
    /// certainly holds, it runs none.
    async fn rebalance(&self, state: &mut State) -> Result<(), StoreError> {
        let held = state.lease.borrow().clone();
        let Some(lease) = held.filter(|l| state.fence.holds(l.id)) else {
            if !state.owned.is_empty() {
                tracing::warn!("the syncer lease is not held; stopping this member's clusters");
            }
            state.owned.clear();
            state.pending = 0;
            self.converge(state).await;
            return Ok(());
        };
        let members: BTreeSet<String> = self
            .metastore
            .members()
            .await?
            .into_iter()
            .map(|m| m.name)
            .collect();
        let claims = self.metastore.claims().await?;
        let holders: BTreeMap<String, String> = claims
            .iter()
            .map(|c| (c.cluster.clone(), c.member.clone()))
            .collect();
        state.members = members.len();
        state.owned = claims
            .iter()
            .filter(|c| c.member == lease.member)
            .map(|c| (c.cluster.clone(), c.epoch))
            .collect();
        let now = Instant::now();
        // Clusters in agent mode are their agents' to sync: no member claims them.
        let registered: BTreeSet<String> = state
            .registered
            .iter()
            .filter(|(_, r)| r.cluster.synced_by_hub())
            .map(|(name, _)| name.clone())
            .collect();
        state
            .unowned
            .retain(|name, _| registered.contains(name) && !holders.contains_key(name));
        for name in &registered {
            if !holders.contains_key(name) {
                state.unowned.entry(name.clone()).or_insert(now);
            }
        }
        let plan = placement::plan(&lease.member, &members, &registered, &holders);
        if !plan.release.is_empty() {
            // Stopped first (all at once): never two writers of one cluster.
            for name in &plan.release {
                state.owned.remove(name);
            }
            self.converge(state).await;
            for name in plan.release {
                self.metastore.release(&lease, &name).await?;
                cluster_span(&name)
                    .in_scope(|| tracing::info!("handed the cluster over to its preferred member"));
            }
        }
        for name in plan.claim {
            match self.metastore.claim(&lease, &name).await {
                Ok(Some(epoch)) => {
                    cluster_span(&name).in_scope(|| tracing::info!(epoch, "claimed the cluster"));
                    state.unowned.remove(&name);
                    state.owned.insert(name, epoch);
                }
                Ok(None) => {}
                Err(StoreError::LeaseLost(_)) => {
                    state.owned.clear();
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        state.pending = registered
            .iter()
            .filter(|name| {
                !state.owned.contains_key(*name)
                    && placement::preferred(&members, name) == Some(lease.member.as_str())
            })
            .count();
        self.converge(state).await;
        Ok(())
    }

    /// Runs exactly the syncs of the registered clusters this member holds; removes
    /// deregistered clusters' documents.
    async fn converge(&self, state: &mut State) {
        let lease = state.fence.held();
        if lease.is_none() {
            state.owned.clear();
        }
        let stale: Vec<String> = state
            .running
            .iter()
            .filter(|(name, running)| {
                !state.owned.contains_key(*name)
                    || !state
                        .registered
                        .get(*name)
                        .is_some_and(|r| r.cluster.synced_by_hub())
                    || Some(running.lease) != lease
            })
            .map(|(name, _)| name.clone())
            .collect();
        // All at once: each may wait for its writer to drain.
        let stopping: Vec<ClusterSync> = stale
            .iter()
            .filter_map(|name| state.running.remove(name))
            .map(|r| r.sync)
            .collect();
        futures::future::join_all(stopping.into_iter().map(ClusterSync::stop)).await;
        for name in stale {
            self.health.deregister(&cluster_check(&name));
            self.status.forget(&name);
        }
        let mine: Vec<String> = state
            .owned
            .keys()
            .filter(|name| {
                state
                    .registered
                    .get(*name)
                    .is_some_and(|r| r.cluster.synced_by_hub())
            })
            .cloned()
            .collect();
        for name in mine {
            let Some(lease) = lease else { break };
            let registered = &state.registered[&name];
            let rules = registered.rules.clone();
            if let Some(running) = state.running.get(&name) {
                if running.fingerprint == registered.fingerprint {
                    running.rules.send_if_modified(|current| {
                        let changed = **current != *rules;
                        if changed {
                            *current = rules.clone();
                        }
                        changed
                    });
                    continue;
                }
                cluster_span(&name)
                    .in_scope(|| tracing::info!("cluster record changed; restarting its sync"));
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
                cluster: registered.cluster.clone(),
                registered_at: registered.registered_at,
                rules: rules_seen,
                sink: Arc::new(StorageSink {
                    storage: self.storage.clone(),
                    policy: state.policy.subscribe(),
                }),
                given: None,
                progress,
                client,
                clients: self.clients.clone(),
                settings: self.settings,
                recoveries: state.recoveries.clone(),
                policy: state.policy.subscribe(),
                fence: (state.fence.clone(), lease),
                // The hub's syncer writes its lists again after a restart.
                resume: Resume::default(),
            });
            state.running.insert(
                name,
                Running {
                    fingerprint: registered.fingerprint,
                    lease,
                    rules,
                    sync,
                },
            );
        }
        // Only once the registered clusters were listed: before, every cluster in
        // storage would look deregistered.
        if state.listed && !state.swept {
            self.find_orphans(state).await;
        }
        self.remove_orphans(state).await;
        self.publish(state);
    }

    /// This member's share, for the `Syncer` check, the API and metrics.
    fn publish(&self, state: &State) {
        let overdue = state
            .unowned
            .values()
            .filter(|since| since.elapsed() > self.settings.lease_ttl)
            .count();
        self.status.set_share(Share {
            member: self.member.clone(),
            lease_held: state.fence.held().is_some() && state.lease.borrow().is_some(),
            members: state.members,
            owned: state.owned.clone(),
            listed: state.listed,
            registered: state.registered.len(),
            unowned_overdue: overdue,
            pending: state.pending,
        });
    }

    /// The stored audit policy (or the config file's) and the relation rules in force: a
    /// change reaches every cluster sync, which relists under it.
    async fn follow_ingest_policy(&self, state: &mut State) -> Result<(), StoreError> {
        let ingest = read(&self.metastore, &self.audit, self.settings.history).await?;
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
                        .filter(|name| !state.registered.contains_key(name)),
                );
            }
            Err(e) => tracing::warn!(error = %e, "cannot list the clusters in storage; will retry"),
        }
    }

    async fn remove_orphans(&self, state: &mut State) {
        for name in std::mem::take(&mut state.orphans) {
            match self.storage.delete_cluster(&name).await {
                Ok(removed) => cluster_span(&name).in_scope(|| {
                    tracing::info!(removed, "removed a deregistered cluster's documents")
                }),
                Err(e) => {
                    cluster_span(&name).in_scope(|| {
                        tracing::warn!(error = %e, "cannot remove a deregistered cluster's documents; will retry")
                    });
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
