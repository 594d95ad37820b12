//! One member cluster's sync: a client from its kubeconfig, discovery (again every few
//! seconds, so new custom resources are picked up, and at once when its rules change), a
//! watcher per resolved target, the writer they share, and the sweep that removes what
//! the targets no longer cover once the new watchers have listed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use karpor_core::model::{Cluster, SyncRule};
use karpor_health::Reason;
use karpor_kube::{ClientCache, ClientError, ClusterClient, Timeouts};
use kube::Client;
use time::OffsetDateTime;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::document_counts;
use crate::cluster::fence::Fence;
use crate::cluster::owed_lists::{Held, Lists};
use crate::cluster::sink::Sink;
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
        let span = span(&run.cluster.name);
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

/// The span of a cluster's log lines: its sync's, its watchers' and writer's, and the
/// supervisor's about it. No line writes the cluster's name by hand.
pub(crate) fn span(cluster: &str) -> tracing::Span {
    tracing::info_span!("cluster", cluster = %cluster)
}

/// What one cluster's sync works with.
pub(crate) struct ClusterRun {
    pub cluster: Cluster,
    /// When it was registered (its record made): history keeps as created only what
    /// was created after.
    pub registered_at: OffsetDateTime,
    /// Its rules; a change is applied at once, by the watchers it concerns.
    pub rules: RulesSeen,
    /// Where the writer writes: storage, or in an agent the hub.
    pub sink: Arc<dyn Sink>,
    /// A client made by whoever runs the sync (an agent, from its own credential) instead
    /// of one from the cluster's kubeconfig.
    pub given: Option<Client>,
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
    pub resume: Resume,
}

/// What a run knows of the sink's lists from before it: an agent's, across a restart.
#[derive(Default)]
pub(crate) struct Resume {
    /// The fingerprints of the targets whose lists the sink held before: compared with
    /// the sink's digest rather than sent, once each.
    pub held_before: BTreeSet<String>,
    /// Where the run keeps the fingerprints of those it holds now.
    pub held: Held,
}

/// A watcher running, and how to stop it.
struct RunningWatcher {
    target: Target,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// How often each watched type's documents are counted again while the cluster's change.
const COUNT_INTERVAL: Duration = Duration::from_secs(10);
/// How long a count may take before it is left for the next time.
const COUNT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the API server's version and latency are measured for the cluster's
/// summary (and at the start), whether or not anyone probes `/readyz`.
const SERVER_PROBE_INTERVAL: Duration = Duration::from_secs(30);
/// How long that measure may take before it is left for the next time.
const SERVER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A change of CustomResourceDefinitions is followed by a discovery this much later (the
/// new type is served once the CRD is established), and several in a burst by one.
const CRD_SETTLE: Duration = Duration::from_millis(500);

/// What the sync does after a wait.
enum Next {
    Discover,
    Stop,
}

/// What ended a wait between two discoveries.
enum Wake {
    Stop,
    DiscoveryDue,
    RulesChanged,
    CrdsChanged,
    /// The new watchers have listed, and a sweep is owed.
    ListsSettled,
    CountDue,
    ServerProbeDue,
    PolicyChanged,
    StorageRecovered,
    ClientExpiring,
}

/// `stop` came while a step waited.
struct Stopped;

impl ClusterRun {
    /// Connects, then discovers and resolves the rules again and again, each time waiting
    /// for a change or the next interval, until `stop`; then stops the watchers and lets
    /// the writer drain.
    async fn run(self, stop: CancellationToken) {
        let mut recoveries = self.recoveries.clone();
        recoveries.mark_unchanged();
        let Some(client) = self.connect(&stop).await else {
            return;
        };
        let mut sync = Connected::start(self, client, recoveries, stop);
        while let Some(wait) = sync.discover_and_resolve().await {
            if let Next::Stop = sync.wait(wait).await {
                break;
            }
        }
        sync.shut_down().await;
    }
}

/// A cluster's sync once it has a client: what it keeps from one transition to the next.
struct Connected {
    run: ClusterRun,
    stop: CancellationToken,
    client: ClusterClient,
    writer: mpsc::Sender<Op>,
    writer_task: JoinHandle<()>,
    /// Ends the writer without draining it.
    writer_stop: CancellationToken,
    lists: Arc<Lists>,
    /// Where a watcher of CustomResourceDefinitions (the built-in rules have one) says
    /// one changed: discovery runs at once, not at the next interval.
    crds_changed: Arc<Notify>,
    watchers: HashMap<TargetKey, RunningWatcher>,
    /// Fingerprints of targets whose first list may compare (see [`Resume`]).
    held_before: BTreeSet<String>,
    policy: PolicySeen,
    rules: RulesSeen,
    recoveries: Recoveries,
    /// How long after a failed discovery the next one runs; doubles up to the interval.
    retry: Duration,
    /// A relist (new policy, storage back, new client) is owed no first list: the cluster
    /// stays synced.
    relisting: bool,
    /// A sweep is owed after a change of what the targets cover, sent once the new
    /// watchers have listed, with what they cover then. Owed at the start: the rules may
    /// have changed while no syncer ran.
    sweep_owed: bool,
    covered: Option<Coverage>,
    /// The cluster's writes when its documents were last counted.
    counted: Option<u64>,
    count: tokio::time::Interval,
    server_probe: tokio::time::Interval,
}

impl Connected {
    /// Publishes the client to the cluster's check and starts the writer.
    fn start(
        mut run: ClusterRun,
        client: ClusterClient,
        recoveries: Recoveries,
        stop: CancellationToken,
    ) -> Self {
        run.client.send_replace(Some(client.client.clone()));
        let writer_stop = CancellationToken::new();
        let (writer, writer_task) = writer::spawn(
            run.sink.clone(),
            run.progress.clone(),
            run.settings.writer,
            run.fence.clone(),
            writer_stop.clone(),
        );
        let mut count = tokio::time::interval(COUNT_INTERVAL);
        count.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut server_probe = tokio::time::interval(SERVER_PROBE_INTERVAL);
        server_probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Connected {
            lists: Arc::new(Lists::new(run.progress.clone(), run.resume.held.clone())),
            crds_changed: Arc::new(Notify::new()),
            watchers: HashMap::new(),
            held_before: std::mem::take(&mut run.resume.held_before),
            policy: run.policy.clone(),
            rules: run.rules.clone(),
            recoveries,
            retry: Duration::from_secs(1),
            relisting: false,
            sweep_owed: false,
            covered: None,
            counted: None,
            count,
            server_probe,
            run,
            stop,
            client,
            writer,
            writer_task,
            writer_stop,
        }
    }

    /// Discovery, then the rules resolved against what it found: how long until the next
    /// discovery, or `None` once stopped.
    async fn discover_and_resolve(&mut self) -> Option<Duration> {
        let discovered = tokio::select! {
            _ = self.stop.cancelled() => return None,
            found = discover(&self.client.client) => found,
        };
        Some(match discovered {
            Ok(found) => self.resolve_rules(&found).await,
            Err(e) => self.discovery_failed(&e),
        })
    }

    /// Watches what the rules in force select among `found` and owes a sweep when what
    /// the watchers cover changed; the interval until the next discovery.
    async fn resolve_rules(&mut self, found: &[Discovered]) -> Duration {
        let current = self.policy.borrow_and_update().clone();
        let in_force = self.rules.borrow_and_update().clone();
        self.lists.generation(current.generation);
        let plain: Vec<SyncRule> = in_force.iter().map(|r| r.rule.clone()).collect();
        let Some(targets) = self.run.within_limits(&plain, found, &current.ingest) else {
            self.watch_nothing().await;
            return self.run.settings.rediscover;
        };
        let owed = !std::mem::take(&mut self.relisting);
        self.start_watchers(targets, owed).await;
        let coverage = Coverage::of(self.watchers.values().map(|r| &r.target));
        if self.covered.as_ref() != Some(&coverage) {
            self.covered = Some(coverage);
            self.sweep_owed = true;
            self.lists.owe_sweep();
        }
        self.run.progress.set_rules(
            in_force
                .iter()
                .map(|r| RuleInForce {
                    name: r.rule.name.clone(),
                    version: r.version,
                })
                .collect(),
        );
        self.lists.refresh();
        self.retry = Duration::from_secs(1);
        self.run.settings.rediscover
    }

    /// Rules over a limit: nothing is watched, and nothing swept: the documents stay until
    /// rules that fit say what to keep.
    async fn watch_nothing(&mut self) {
        self.stop_watchers(true).await;
        self.run.progress.set_rules(Vec::new());
        (self.sweep_owed, self.covered) = (false, None);
    }

    /// The cluster's state says why; the wait until discovery is tried again.
    fn discovery_failed(&mut self, e: &kube::Error) -> Duration {
        let error = karpor_kube::describe(e);
        tracing::warn!(error, "discovery failed; retrying");
        self.run
            .progress
            .set_state(SyncState::Error(crate::status::reason::of_kube(e)));
        let wait = self.retry;
        self.retry = (self.retry * 2).min(self.run.settings.rediscover);
        wait
    }

    /// Waits `wait` for the next discovery, or less when something makes it due sooner;
    /// meanwhile sweeps once the new watchers have listed, and counts each type's
    /// documents.
    async fn wait(&mut self, wait: Duration) -> Next {
        let due = tokio::time::Instant::now() + wait;
        loop {
            let done = match self.wake(due).await {
                Wake::Stop => return Next::Stop,
                Wake::DiscoveryDue => return Next::Discover,
                Wake::RulesChanged => return self.on_rules_changed(),
                Wake::CrdsChanged => return self.on_crds_changed().await,
                Wake::PolicyChanged => return self.on_policy_changed().await,
                Wake::StorageRecovered => return self.on_storage_recovered().await,
                Wake::ClientExpiring => return self.renew_client().await,
                Wake::ListsSettled => self.sweep().await,
                Wake::CountDue => self.count_documents().await,
                Wake::ServerProbeDue => self.probe_server().await,
            };
            if let Err(Stopped) = done {
                return Next::Stop;
            }
        }
    }

    /// What ends a wait first.
    async fn wake(&mut self, due: tokio::time::Instant) -> Wake {
        tokio::select! {
            _ = self.stop.cancelled() => Wake::Stop,
            _ = tokio::time::sleep_until(due) => Wake::DiscoveryDue,
            Ok(()) = self.rules.changed() => Wake::RulesChanged,
            _ = self.crds_changed.notified() => Wake::CrdsChanged,
            _ = self.lists.settled(), if self.sweep_owed => Wake::ListsSettled,
            _ = self.count.tick() => Wake::CountDue,
            _ = self.server_probe.tick() => Wake::ServerProbeDue,
            Ok(()) = self.policy.changed() => Wake::PolicyChanged,
            Ok(()) = self.recoveries.changed() => Wake::StorageRecovered,
            _ = until(self.client.renew_at) => Wake::ClientExpiring,
        }
    }

    fn on_rules_changed(&self) -> Next {
        tracing::info!("sync rules changed; applying them");
        Next::Discover
    }

    async fn on_crds_changed(&self) -> Next {
        tracing::debug!("a CustomResourceDefinition changed; discovering");
        tokio::time::sleep(CRD_SETTLE).await;
        Next::Discover
    }

    async fn on_policy_changed(&mut self) -> Next {
        tracing::info!(
            "relisting every resource type under the new audit policy or relation rules"
        );
        self.relist().await
    }

    async fn on_storage_recovered(&mut self) -> Next {
        tracing::info!("relisting every resource type after a storage outage");
        self.relist().await
    }

    /// Stops every watcher; the next discovery starts them again, owing no first list.
    /// Stopped first: a watcher with other options would otherwise look like a type no
    /// longer selected.
    async fn relist(&mut self) -> Next {
        self.stop_watchers(true).await;
        self.relisting = true;
        Next::Discover
    }

    /// The exec plugin's certificate is about to expire: a new client, and every type
    /// relists with it.
    async fn renew_client(&mut self) -> Next {
        tracing::info!("renewing the exec plugin's client certificate");
        let Some(renewed) = self.run.connect(&self.stop).await else {
            return Next::Stop;
        };
        self.stop_watchers(true).await;
        self.client = renewed;
        self.run
            .client
            .send_replace(Some(self.client.client.clone()));
        self.relisting = true;
        Next::Discover
    }

    /// The new watchers have listed: the writer removes what they no longer cover.
    async fn sweep(&mut self) -> Result<(), Stopped> {
        self.sweep_owed = false;
        let op = Op::Sweep {
            coverage: Coverage::of(self.watchers.values().map(|r| &r.target)),
            before: now_millis(),
            lists: self.lists.clone(),
        };
        tokio::select! {
            _ = self.stop.cancelled() => Err(Stopped),
            _ = self.writer.send(op) => Ok(()),
        }
    }

    /// Each watched type's documents counted again when the cluster wrote since.
    async fn count_documents(&mut self) -> Result<(), Stopped> {
        let writes = self.run.progress.writes();
        if self.counted != Some(writes) {
            // A slow count must not hold up a stop (a hand-over waits on it).
            let done = tokio::select! {
                _ = self.stop.cancelled() => return Err(Stopped),
                done = self.run.count() => done,
            };
            if done {
                self.counted = Some(writes);
            }
        }
        Ok(())
    }

    /// The API server's version and how long `/version` took, for the cluster's summary.
    /// A failure is left to the cluster's health check to report.
    async fn probe_server(&mut self) -> Result<(), Stopped> {
        let asked = std::time::Instant::now();
        let version = self.client.client.apiserver_version();
        let answer = tokio::select! {
            _ = self.stop.cancelled() => return Err(Stopped),
            answer = tokio::time::timeout(SERVER_PROBE_TIMEOUT, version) => answer,
        };
        match answer {
            Ok(Ok(version)) => {
                let latency = asked.elapsed().as_millis() as u64;
                self.run
                    .progress
                    .server_answered(version.git_version, latency);
            }
            Ok(Err(e)) => tracing::debug!(error = %karpor_kube::describe(&e),
                "cannot read the API server's version"),
            Err(_) => tracing::debug!(timeout = ?SERVER_PROBE_TIMEOUT,
                "the API server's version took too long"),
        }
        Ok(())
    }

    /// Starts watchers for new targets and stops those no longer wanted (a type gone, or
    /// no longer selected, or selected with other options).
    async fn start_watchers(&mut self, targets: Vec<Target>, owed: bool) {
        let wanted: HashMap<TargetKey, Target> =
            targets.into_iter().map(|t| (t.key(), t)).collect();
        let new: Vec<(TargetKey, Target)> = wanted
            .iter()
            .filter(|(key, _)| !self.watchers.contains_key(key))
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        // All owed before anything stops or starts: neither a stop nor a fast first list
        // may find nothing owed while new watchers are about to start.
        let progresses: Vec<_> = new
            .iter()
            .map(|(key, target)| self.lists.start(key.clone(), target, owed))
            .collect();
        let gone: Vec<TargetKey> = self
            .watchers
            .keys()
            .filter(|k| !wanted.contains_key(k))
            .cloned()
            .collect();
        for key in gone {
            let Some(watcher) = self.watchers.remove(&key) else {
                continue;
            };
            watcher.stop.cancel();
            let _ = watcher.task.await;
            self.lists.stopped(&key);
            self.lists.forget(&key);
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
                client: self.client.client.clone(),
                target: target.clone(),
                key: key.clone(),
                writer: self.writer.clone(),
                progress: self.run.progress.clone(),
                type_progress,
                lists: self.lists.clone(),
                crds_changed: crds.then(|| self.crds_changed.clone()),
                watching_since: self.run.registered_at,
                sink: self.run.sink.clone(),
                compare: self.held_before.remove(&key.fingerprint()),
                behind: self.run.settings.writer.behind,
            };
            let task = tokio::spawn(watcher.run(stop.clone()).in_current_span());
            self.watchers
                .insert(key, RunningWatcher { target, stop, task });
        }
    }

    /// Stops every watcher; `forget`: for good, not just for this run (see
    /// [`Lists::forget`]).
    async fn stop_watchers(&mut self, forget: bool) {
        for (key, watcher) in self.watchers.drain() {
            watcher.stop.cancel();
            let _ = watcher.task.await;
            self.lists.stopped(&key);
            if forget {
                self.lists.forget(&key);
            }
        }
    }

    /// Stops the watchers, then lets the writer write what it holds (bounded).
    async fn shut_down(mut self) {
        self.stop_watchers(false).await;
        let Connected {
            run,
            writer,
            mut writer_task,
            writer_stop,
            ..
        } = self;
        drop(writer);
        // A writer fenced off (this member's lease may have ended) may write nothing of
        // what it holds: no drain. The next owner lists afresh.
        if !run.fence.0.holds(run.fence.1) {
            writer_stop.cancel();
        }
        // The writer ends once it has written what it holds; a dead storage gets a bound.
        if tokio::time::timeout(run.settings.writer_drain, &mut writer_task)
            .await
            .is_err()
        {
            writer_stop.cancel();
            let _ = writer_task.await;
        }
        tracing::info!("cluster sync stopped");
    }
}

impl ClusterRun {
    /// Each watched type's documents, counted in storage; `false` when storage could not
    /// say in time. An agent's sink has no storage to count in: the hub counts.
    async fn count(&self) -> bool {
        let Some(storage) = self.sink.storage() else {
            return true;
        };
        let types = self.progress.types();
        let counted = tokio::time::timeout(
            COUNT_TIMEOUT,
            document_counts::count(storage.as_ref(), &self.cluster.name, &types),
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

    /// A client for the cluster's kubeconfig. A failing exec plugin is tried again with
    /// backoff (it may recover); a kubeconfig that cannot be used waits for a new record,
    /// which restarts this sync: `None`, as when `stop` comes first.
    async fn connect(&self, stop: &CancellationToken) -> Option<ClusterClient> {
        if let Some(client) = &self.given {
            return Some(ClusterClient {
                client: client.clone(),
                renew_at: None,
            });
        }
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

/// Sleeps until `at`, or for ever.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
