//! One member cluster's sync: a client from its kubeconfig, discovery (again every few
//! seconds, so new custom resources are picked up, and at once when its rules change), a
//! watcher per resolved target, the writer they share, and the sweep that removes what
//! the targets no longer cover once the new watchers have listed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use karpor_core::model::{Cluster, SyncRule};
use karpor_health::Reason;
use karpor_kube::{ClientCache, ClientError, ClusterClient, Timeouts};
use karpor_storage::Storage;
use kube::Client;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::document_counts;
use crate::cluster::fence::Fence;
use crate::cluster::owed_lists::Lists;
use crate::cluster::sweep::Coverage;
use crate::cluster::watcher::{now_millis, Watcher};
use crate::cluster::writer::{self, Op};
use crate::ingest::policy::Ingest;
use crate::ingest::policy::PolicySeen;
use crate::rules::discovery::{discover, Discovered};
use crate::rules::resolve::{resolve_within, RulesSeen, Target, TargetKey};
use crate::status::clusters::{ClusterProgress, RuleInForce, SyncState};
use crate::SyncSettings;

/// The cluster's API client, once its kubeconfig has been turned into one (and again when
/// an exec plugin's certificate is renewed); its health check sees it through
/// [`ClientSeen`].
pub(crate) type ClientSlot = watch::Sender<Option<Client>>;
pub(crate) type ClientSeen = watch::Receiver<Option<Client>>;

/// Counts storage recoveries ([`crate::fleet::outage`]): a cluster relists whenever it
/// changes.
pub(crate) type Recoveries = watch::Receiver<u64>;

/// The timeouts of a member cluster's client, the syncer's and the API's alike (the API
/// bounds each of its calls shorter). A watch is silent for up to the API server's watch
/// timeout (290 s): reads may wait a little longer, and no call waits for ever on an API
/// server that hangs.
pub const CLIENT_TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(10),
    read: Some(Duration::from_secs(295)),
};

/// A running cluster sync.
pub(crate) struct ClusterSync {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ClusterSync {
    /// The run, its watchers and its writer log in one span that names the cluster.
    pub(crate) fn start(run: ClusterRun) -> Self {
        let stop = CancellationToken::new();
        let span = tracing::info_span!("cluster", cluster = %run.cluster.name);
        ClusterSync {
            task: tokio::spawn(run.run(stop.clone()).instrument(span)),
            stop,
        }
    }

    /// Stops the watchers, lets the writer write what it holds (bounded), and waits.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "cluster sync task ended abnormally");
        }
    }
}

/// What one cluster's sync works with.
pub(crate) struct ClusterRun {
    pub cluster: Cluster,
    /// Its rules; a change is applied at once, by the watchers it concerns.
    pub rules: RulesSeen,
    pub storage: Arc<dyn Storage>,
    pub progress: Arc<ClusterProgress>,
    pub client: ClientSlot,
    pub clients: Arc<ClientCache>,
    pub settings: SyncSettings,
    pub recoveries: Recoveries,
    /// The audit policy and relation rules; a change relists every resource type.
    pub policy: PolicySeen,
    /// This member's lease, and the id of the one the sync runs under: its writer writes
    /// only while that one holds.
    pub fence: (Arc<Fence>, i64),
}

struct Running {
    target: Target,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// How often each watched type's documents are counted again while the cluster's change.
const COUNT_INTERVAL: Duration = Duration::from_secs(10);
/// How long a count may take before it is left for the next time.
const COUNT_TIMEOUT: Duration = Duration::from_secs(5);

/// A change of CustomResourceDefinitions is followed by a discovery this much later (the
/// new type is served once the CRD is established), and several in a burst by one.
const CRD_SETTLE: Duration = Duration::from_millis(500);

/// What the loop does next.
enum Next {
    Discover,
    Stop,
}

impl ClusterRun {
    async fn run(self, stop: CancellationToken) {
        let mut recoveries = self.recoveries.clone();
        recoveries.mark_unchanged();
        let Some(mut connected) = self.connect(&stop).await else {
            return;
        };
        let mut client = connected.client.clone();
        self.client.send_replace(Some(client.clone()));
        let writer_stop = CancellationToken::new();
        let (writer, mut writer_task) = writer::spawn(
            self.storage.clone(),
            self.progress.clone(),
            self.settings.writer,
            self.policy.clone(),
            self.fence.clone(),
            writer_stop.clone(),
        );
        let lists = Arc::new(Lists::new(self.progress.clone()));
        // Where a watcher of CustomResourceDefinitions (the built-in rules have one) says
        // one changed: discovery runs at once, not at the next interval.
        let crds_changed = Arc::new(Notify::new());
        let mut running: HashMap<TargetKey, Running> = HashMap::new();
        let mut policy = self.policy.clone();
        let mut rules = self.rules.clone();
        let mut retry = Duration::from_secs(1);
        // A relist after a storage outage is owed no first list: the cluster stays synced.
        let mut relisting = false;
        // A sweep is owed after a change of what the targets cover, sent once the new
        // watchers have listed, with what they cover then. Owed at the start: the rules
        // may have changed while no syncer ran.
        let mut sweep = false;
        let mut covered: Option<Coverage> = None;
        let mut counted = None;
        let mut count = tokio::time::interval(COUNT_INTERVAL);
        count.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        'discover: loop {
            let discovered = tokio::select! {
                _ = stop.cancelled() => break,
                found = discover(&client) => found,
            };
            let wait = match discovered {
                Ok(found) => 'applied: {
                    let current = policy.borrow_and_update().clone();
                    let in_force = rules.borrow_and_update().clone();
                    lists.generation(current.generation);
                    let plain: Vec<SyncRule> = in_force.iter().map(|r| r.rule.clone()).collect();
                    let Some(targets) = self.within_limits(&plain, &found, &current.ingest) else {
                        // Nothing is watched, and nothing swept: the documents stay until
                        // rules that fit say what to keep.
                        stop_all(&mut running, &lists).await;
                        self.progress.set_rules(Vec::new());
                        (sweep, covered) = (false, None);
                        break 'applied self.settings.rediscover;
                    };
                    let owed = !std::mem::take(&mut relisting);
                    let watchers = Watchers {
                        client: &client,
                        writer: &writer,
                        lists: &lists,
                        crds_changed: &crds_changed,
                    };
                    self.apply(targets, &mut running, &watchers, owed).await;
                    let coverage = Coverage::of(running.values().map(|r| &r.target));
                    if covered.as_ref() != Some(&coverage) {
                        covered = Some(coverage);
                        sweep = true;
                        lists.owe_sweep();
                    }
                    self.progress.set_rules(
                        in_force
                            .iter()
                            .map(|r| RuleInForce {
                                name: r.rule.name.clone(),
                                version: r.version,
                            })
                            .collect(),
                    );
                    lists.refresh();
                    retry = Duration::from_secs(1);
                    self.settings.rediscover
                }
                Err(e) => {
                    let error = karpor_kube::describe(&e);
                    tracing::warn!(error, "discovery failed; retrying");
                    self.progress
                        .set_state(SyncState::Error(crate::status::reason::of_kube(&e)));
                    let wait = retry;
                    retry = (retry * 2).min(self.settings.rediscover);
                    wait
                }
            };
            let next_discovery = tokio::time::Instant::now() + wait;
            loop {
                let next = tokio::select! {
                    _ = stop.cancelled() => Next::Stop,
                    _ = tokio::time::sleep_until(next_discovery) => Next::Discover,
                    Ok(()) = rules.changed() => {
                        tracing::info!("sync rules changed; applying them");
                        Next::Discover
                    }
                    _ = crds_changed.notified() => {
                        tracing::debug!("a CustomResourceDefinition changed; discovering");
                        tokio::time::sleep(CRD_SETTLE).await;
                        Next::Discover
                    }
                    _ = lists.settled(), if sweep => {
                        sweep = false;
                        let op = Op::Sweep {
                            coverage: Coverage::of(running.values().map(|r| &r.target)),
                            before: now_millis(),
                            lists: lists.clone(),
                        };
                        tokio::select! {
                            _ = stop.cancelled() => break 'discover,
                            _ = writer.send(op) => {}
                        }
                        continue;
                    }
                    _ = count.tick() => {
                        let writes = self.progress.writes();
                        if counted != Some(writes) {
                            // A slow count must not hold up a stop (a hand-over waits on it).
                            let done = tokio::select! {
                                _ = stop.cancelled() => break 'discover,
                                done = self.count() => done,
                            };
                            if done {
                                counted = Some(writes);
                            }
                        }
                        continue;
                    }
                    Ok(()) = policy.changed() => {
                        // Stopped first: a watcher with other options would otherwise look
                        // like a type no longer selected.
                        tracing::info!("relisting every resource type under the new audit policy or relation rules");
                        stop_all(&mut running, &lists).await;
                        relisting = true;
                        Next::Discover
                    }
                    Ok(()) = recoveries.changed() => {
                        tracing::info!("relisting every resource type after a storage outage");
                        stop_all(&mut running, &lists).await;
                        relisting = true;
                        Next::Discover
                    }
                    _ = until(connected.renew_at) => {
                        tracing::info!("renewing the exec plugin's client certificate");
                        let Some(renewed) = self.connect(&stop).await else { break 'discover };
                        stop_all(&mut running, &lists).await;
                        connected = renewed;
                        client = connected.client.clone();
                        self.client.send_replace(Some(client.clone()));
                        relisting = true;
                        Next::Discover
                    }
                };
                match next {
                    Next::Discover => continue 'discover,
                    Next::Stop => break 'discover,
                }
            }
        }
        stop_all(&mut running, &lists).await;
        drop(writer);
        // A writer fenced off (this member's lease may have ended) may write nothing of
        // what it holds: no drain. The next owner lists afresh.
        if !self.fence.0.holds(self.fence.1) {
            writer_stop.cancel();
        }
        // The writer ends once it has written what it holds; a dead storage gets a bound.
        if tokio::time::timeout(self.settings.writer_drain, &mut writer_task)
            .await
            .is_err()
        {
            writer_stop.cancel();
            let _ = writer_task.await;
        }
        tracing::info!("cluster sync stopped");
    }

    /// Each watched type's documents, counted in storage; `false` when storage could not
    /// say in time.
    async fn count(&self) -> bool {
        let types = self.progress.types();
        let counted = tokio::time::timeout(
            COUNT_TIMEOUT,
            document_counts::count(self.storage.as_ref(), &self.cluster.name, &types),
        )
        .await;
        match counted {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "cannot count the watched types' documents");
                false
            }
            Err(_) => false,
        }
    }

    /// Starts watchers for new targets and stops those no longer wanted (a type gone, or
    /// no longer selected, or selected with other options).
    async fn apply(
        &self,
        targets: Vec<Target>,
        running: &mut HashMap<TargetKey, Running>,
        with: &Watchers<'_>,
        owed: bool,
    ) {
        let lists = with.lists;
        let wanted: HashMap<TargetKey, Target> =
            targets.into_iter().map(|t| (t.key(), t)).collect();
        let new: Vec<(TargetKey, Target)> = wanted
            .iter()
            .filter(|(key, _)| !running.contains_key(key))
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        // All owed before anything stops or starts: neither a stop nor a fast first list
        // may find nothing owed while new watchers are about to start.
        let progresses: Vec<_> = new
            .iter()
            .map(|(key, target)| lists.start(key.clone(), target, owed))
            .collect();
        let gone: Vec<TargetKey> = running
            .keys()
            .filter(|k| !wanted.contains_key(k))
            .cloned()
            .collect();
        for key in gone {
            let Some(watcher) = running.remove(&key) else {
                continue;
            };
            watcher.stop.cancel();
            let _ = watcher.task.await;
            lists.stopped(&key);
            tracing::info!(
                kind = watcher.target.resource.kind,
                api_version = watcher.target.resource.api_version,
                "stopped watching a type no longer served or selected as it was"
            );
        }
        for ((key, target), type_progress) in new.into_iter().zip(progresses) {
            let stop = CancellationToken::new();
            let crds = target.resource.group == "apiextensions.k8s.io"
                && target.resource.plural == "customresourcedefinitions";
            let watcher = Watcher {
                client: with.client.clone(),
                target: target.clone(),
                key: key.clone(),
                writer: with.writer.clone(),
                progress: self.progress.clone(),
                type_progress,
                lists: lists.clone(),
                crds_changed: crds.then(|| with.crds_changed.clone()),
            };
            let task = tokio::spawn(watcher.run(stop.clone()).in_current_span());
            running.insert(key, Running { target, stop, task });
        }
    }
}

impl ClusterRun {
    /// The targets of `rules`, or `None` when they go over `syncer.limits`: then the
    /// cluster's status says which limit, and no watch is opened.
    fn within_limits(
        &self,
        rules: &[SyncRule],
        found: &[Discovered],
        ingest: &Arc<Ingest>,
    ) -> Option<Vec<Target>> {
        match resolve_within(rules, found, ingest, &self.settings.limits) {
            Ok(targets) => {
                if self.progress.refuse(None) {
                    tracing::info!("the cluster's sync rules fit the limits again");
                }
                Some(targets)
            }
            Err(why) => {
                if self.progress.refuse(Some(why.clone())) {
                    tracing::warn!(
                        why,
                        "the cluster's sync rules are over a limit: nothing is watched"
                    );
                }
                None
            }
        }
    }
}

/// What each new watcher shares with the others.
struct Watchers<'a> {
    client: &'a Client,
    writer: &'a mpsc::Sender<Op>,
    lists: &'a Arc<Lists>,
    crds_changed: &'a Arc<Notify>,
}

async fn stop_all(running: &mut HashMap<TargetKey, Running>, lists: &Lists) {
    for (key, watcher) in running.drain() {
        watcher.stop.cancel();
        let _ = watcher.task.await;
        lists.stopped(&key);
    }
}

/// Sleeps until `at`, or for ever.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl ClusterRun {
    /// A client for the cluster's kubeconfig. A failing exec plugin is tried again with
    /// backoff (it may recover); a kubeconfig that cannot be used waits for a new record,
    /// which restarts this sync: `None`, as when `stop` comes first.
    async fn connect(&self, stop: &CancellationToken) -> Option<ClusterClient> {
        let mut retry = Duration::from_secs(1);
        loop {
            let connected = self
                .clients
                .connect(&self.cluster.name, &self.cluster.kubeconfig.0)
                .await;
            let error = match connected {
                Ok(connected) => return Some(connected),
                Err(e) => e,
            };
            let text = error.to_string();
            if let ClientError::Exec(_) = error {
                tracing::warn!(error = text, "the exec plugin gave no credential; retrying");
                self.progress
                    .set_state(SyncState::Error(Reason::Unauthorized));
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(self.settings.rediscover);
                continue;
            }
            tracing::warn!(error = text, "cannot use the cluster's kubeconfig");
            self.progress
                .set_state(SyncState::Error(Reason::Misconfigured));
            return None;
        }
    }
}
