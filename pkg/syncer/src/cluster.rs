//! One member cluster's sync: a client from its kubeconfig, discovery (again every few
//! seconds, so new custom resources are picked up), a watcher per resolved target, and
//! the writer they share.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use karpor_core::model::{Cluster, SyncRule};
use karpor_health::Reason;
use karpor_kube::{ClientError, ClusterClient, ExecSettings, Timeouts};
use karpor_storage::Storage;
use kube::discovery::Discovery;
use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::lists::InitialLists;
use crate::outage::Recoveries;
use crate::policy::PolicySeen;
use crate::rules::{resolve, Discovered, Target, TargetKey};
use crate::status::{ClusterProgress, SyncState};
use crate::watch::{now_millis, Watcher};
use crate::writer::{self, Op};
use crate::SyncSettings;

/// The cluster's API client, once its kubeconfig has been turned into one (and again when
/// an exec plugin's certificate is renewed); its health check sees it through
/// [`ClientSeen`].
pub type ClientSlot = watch::Sender<Option<Client>>;
pub type ClientSeen = watch::Receiver<Option<Client>>;

/// A watch is silent for up to the API server's watch timeout (290 s): reads may wait a
/// little longer, and no call waits for ever on an API server that hangs.
const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(10),
    read: Some(Duration::from_secs(295)),
};

/// A running cluster sync.
pub struct ClusterSync {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ClusterSync {
    pub fn start(run: ClusterRun) -> Self {
        let stop = CancellationToken::new();
        ClusterSync {
            task: tokio::spawn(run.run(stop.clone())),
            stop,
        }
    }

    /// Stops the watchers, lets the writer write what it holds (bounded), and waits.
    pub async fn stop(self) {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "cluster sync task ended abnormally");
        }
    }
}

/// What one cluster's sync works with.
pub struct ClusterRun {
    pub cluster: Cluster,
    pub rules: Vec<SyncRule>,
    pub storage: Arc<dyn Storage>,
    pub progress: Arc<ClusterProgress>,
    pub client: ClientSlot,
    pub exec: Arc<ExecSettings>,
    pub settings: SyncSettings,
    pub recoveries: Recoveries,
    /// The audit policy; a change relists every resource type.
    pub policy: PolicySeen,
}

struct Running {
    target: Target,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ClusterRun {
    async fn run(self, stop: CancellationToken) {
        let name = self.cluster.name.clone();
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
            writer_stop.clone(),
        );
        let lists = Arc::new(InitialLists::new(self.progress.clone()));
        let mut running: HashMap<TargetKey, Running> = HashMap::new();
        let mut policy = self.policy.clone();
        let mut retry = Duration::from_secs(1);
        // A relist after a storage outage is owed no first list: the cluster stays synced.
        let mut relisting = false;
        loop {
            let discovered = tokio::select! {
                _ = stop.cancelled() => break,
                found = discover(&client) => found,
            };
            let wait = match discovered {
                Ok(found) => {
                    let current = policy.borrow_and_update().clone();
                    lists.generation(current.generation);
                    let targets = resolve(&self.rules, &found, &current.ingest);
                    let owed = !std::mem::take(&mut relisting);
                    self.apply(targets, &mut running, &client, &writer, &lists, owed)
                        .await;
                    lists.refresh();
                    retry = Duration::from_secs(1);
                    self.settings.rediscover
                }
                Err(e) => {
                    let error = karpor_kube::describe(&e);
                    tracing::warn!(cluster = name, error, "discovery failed; retrying");
                    self.progress
                        .set_state(SyncState::Error(crate::reason::of_kube(&e)));
                    let wait = retry;
                    retry = (retry * 2).min(self.settings.rediscover);
                    wait
                }
            };
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
                Ok(()) = policy.changed() => {
                    // Stopped first: a watcher with other options would otherwise look
                    // like a type no longer selected, and its documents be purged.
                    tracing::info!(cluster = name, "relisting every resource type under the new audit policy or relation rules");
                    stop_all(&mut running).await;
                    relisting = true;
                }
                Ok(()) = recoveries.changed() => {
                    tracing::info!(cluster = name, "relisting every resource type after a storage outage");
                    stop_all(&mut running).await;
                    relisting = true;
                }
                _ = until(connected.renew_at) => {
                    tracing::info!(cluster = name, "renewing the exec plugin's client certificate");
                    let Some(renewed) = self.connect(&stop).await else { break };
                    stop_all(&mut running).await;
                    connected = renewed;
                    client = connected.client.clone();
                    self.client.send_replace(Some(client.clone()));
                    relisting = true;
                }
            }
        }
        stop_all(&mut running).await;
        drop(writer);
        // The writer ends once it has written what it holds; a dead storage gets a bound.
        if tokio::time::timeout(self.settings.writer_drain, &mut writer_task)
            .await
            .is_err()
        {
            writer_stop.cancel();
            let _ = writer_task.await;
        }
        tracing::info!(cluster = name, "cluster sync stopped");
    }

    /// Starts watchers for new targets, stops those whose type is gone and removes its
    /// documents.
    async fn apply(
        &self,
        targets: Vec<Target>,
        running: &mut HashMap<TargetKey, Running>,
        client: &Client,
        writer: &mpsc::Sender<Op>,
        lists: &Arc<InitialLists>,
        owed: bool,
    ) {
        let wanted: HashMap<TargetKey, Target> =
            targets.into_iter().map(|t| (t.key(), t)).collect();
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
            lists.dropped(&key);
            let target = watcher.target;
            tracing::info!(
                cluster = self.cluster.name,
                kind = target.resource.kind,
                "resource type no longer served or selected; removing its documents"
            );
            let purge = Op::Purge {
                api_version: target.resource.api_version.clone(),
                kind: target.resource.kind.clone(),
                namespace: target.namespace.clone(),
                before: now_millis(),
                first_list: None,
            };
            if writer.send(purge).await.is_err() {
                return;
            }
        }
        let new: Vec<(TargetKey, Target)> = wanted
            .into_iter()
            .filter(|(key, _)| !running.contains_key(key))
            .collect();
        // All owed before any starts: a fast first list must not find nothing else owed.
        for (key, _) in &new {
            lists.expect(key.clone(), owed);
        }
        for (key, target) in new {
            let stop = CancellationToken::new();
            let watcher = Watcher {
                client: client.clone(),
                target: target.clone(),
                writer: writer.clone(),
                progress: self.progress.clone(),
                lists: lists.clone(),
            };
            let task = tokio::spawn(watcher.run(stop.clone()));
            running.insert(key, Running { target, stop, task });
        }
    }
}

async fn stop_all(running: &mut HashMap<TargetKey, Running>) {
    for (_, watcher) in running.drain() {
        watcher.stop.cancel();
        let _ = watcher.task.await;
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
        let name = &self.cluster.name;
        let mut retry = Duration::from_secs(1);
        loop {
            let error = match karpor_kube::connect(&self.cluster.kubeconfig.0, &self.exec, TIMEOUTS)
                .await
            {
                Ok(connected) => return Some(connected),
                Err(e) => e,
            };
            let text = error.to_string();
            if let ClientError::Exec(_) = error {
                tracing::warn!(
                    cluster = name,
                    error = text,
                    "the exec plugin gave no credential; retrying"
                );
                self.progress
                    .set_state(SyncState::Error(Reason::Unauthorized));
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(self.settings.rediscover);
                continue;
            }
            tracing::warn!(
                cluster = name,
                error = text,
                "cannot use the cluster's kubeconfig"
            );
            self.progress
                .set_state(SyncState::Error(Reason::Misconfigured));
            return None;
        }
    }
}

/// Every served resource type, with whether it is at its group's recommended version.
async fn discover(client: &Client) -> Result<Vec<Discovered>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut found = Vec::new();
    for group in discovery.groups() {
        let recommended: Vec<(String, String)> = group
            .recommended_resources()
            .into_iter()
            .map(|(r, _)| (r.plural, r.version))
            .collect();
        for version in group.versions() {
            for (resource, capabilities) in group.versioned_resources(version) {
                let preferred = recommended
                    .iter()
                    .any(|(plural, v)| *plural == resource.plural && v == version);
                found.push(Discovered {
                    resource,
                    capabilities,
                    preferred,
                });
            }
        }
    }
    Ok(found)
}
