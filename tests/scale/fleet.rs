//! The syncers under test: `karpor syncer` processes on one metadata store and one
//! storage, the clusters they share, who holds what (claims in the store) and who runs
//! what (each syncer's metrics), and a sampler that records any cluster run by two
//! syncers at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karpor_metastore::{Metastore, MetastoreConfig};
use karpor_storage::{Change, ChangeQuery, Storage, StorageConfig};
use karpor_testkit::cluster::Kube;
use karpor_testkit::process::{import, Karpor, Spawn};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::churn::{Churn, Objects};

/// The syncers' lease TTL (`syncer.lease_ttl`).
pub(crate) const TTL: Duration = Duration::from_secs(10);
const SAMPLE: Duration = Duration::from_millis(200);
/// How long storage may take to equal the clusters once they hold still.
const CONVERGE: Duration = Duration::from_secs(60);

/// Each live syncer's metrics URL; a paused one is left out while it cannot write.
type Probes = Arc<Mutex<BTreeMap<String, String>>>;
/// Cluster → the syncers seen running it in one sample, when more than one.
type Doubles = BTreeMap<String, Vec<String>>;

pub(crate) struct Fleet {
    pub backend: &'static str,
    head: String,
    dir: tempfile::TempDir,
    syncers: BTreeMap<String, Karpor>,
    metastore: Metastore,
    storage: Arc<dyn Storage>,
    namespace: String,
    /// Registered cluster → the apiserver it is (0 = a, 1 = b).
    clusters: BTreeMap<String, usize>,
    probes: Probes,
    sampling: CancellationToken,
    sampler: JoinHandle<Doubles>,
}

impl Fleet {
    /// Registers `count` clusters over `kubes` with one rule (ConfigMaps of
    /// `namespace`), and starts the sampler.
    pub(crate) async fn new(
        backend: &'static str,
        metadata: &str,
        storage: &str,
        namespace: &str,
        kubes: [&Kube; 2],
        count: usize,
    ) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let head = format!("metadata: {metadata}\nstorage: {storage}\n");
        let clusters: BTreeMap<String, usize> =
            (0..count).map(|i| (format!("c{i:02}"), i % 2)).collect();
        let registered: Vec<(&str, &str)> = clusters
            .iter()
            .map(|(name, i)| (name.as_str(), kubes[*i].kubeconfig.as_str()))
            .collect();
        let rule = json!({"name": "scale", "clusters": "*",
            "resources": [{"group": "", "version": "v1", "resource": "configmaps"}],
            "namespaces": [namespace]});
        import(dir.path(), &head, &registered, json!([rule]));
        let metastore_config: MetastoreConfig = serde_yaml::from_str(metadata).unwrap();
        let storage_config: StorageConfig = serde_yaml::from_str(storage).unwrap();
        let probes: Probes = Arc::default();
        let sampling = CancellationToken::new();
        let sampler = tokio::spawn(sample(probes.clone(), sampling.clone()));
        Fleet {
            backend,
            head,
            dir,
            syncers: BTreeMap::new(),
            metastore: karpor_metastore::connect(&metastore_config).await.unwrap(),
            storage: karpor_storage::connect(&storage_config).await.unwrap(),
            namespace: namespace.to_owned(),
            clusters,
            probes,
            sampling,
            sampler,
        }
    }

    pub(crate) fn start(&mut self, name: &str) {
        // History on, as by default: every batch also compares and writes revisions.
        let config = format!(
            "{}syncer: {{member: {name}, lease_ttl: {}s}}\nshutdown: {{drain_delay: 500ms}}\n",
            self.head,
            TTL.as_secs()
        );
        // Each in its own directory: the address file is named after the command.
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let syncer = Spawn::syncer(&config).in_dir(&dir).start();
        self.probes
            .lock()
            .unwrap()
            .insert(name.to_owned(), syncer.url("/metrics"));
        // A restarted name replaces the dead process.
        self.syncers.insert(name.to_owned(), syncer);
    }

    pub(crate) fn kill(&mut self, name: &str) {
        self.probes.lock().unwrap().remove(name);
        let mut syncer = self.syncers.remove(name).unwrap();
        syncer.signal("KILL");
        syncer.wait_exit(Duration::from_secs(10));
    }

    /// Sends `signal`. A stopped syncer is left out of the sampling until, continued, it
    /// runs no cluster it does not hold (it cannot write meanwhile: its writers check its
    /// lease first, and the lease it ran under is gone).
    pub(crate) async fn signal(&mut self, name: &str, signal: &str) {
        let url = self.syncers[name].url("/metrics");
        if matches!(signal, "STOP" | "TERM") {
            self.probes.lock().unwrap().remove(name);
        }
        self.syncers[name].signal(signal);
        if signal != "CONT" {
            return;
        }
        let woken = Instant::now();
        loop {
            let held: BTreeSet<String> = self.held_by(name).await.into_iter().collect();
            if let Some(running) = running(&url).await {
                if running.keys().all(|c| held.contains(c)) {
                    break;
                }
            }
            assert!(
                woken.elapsed() < Duration::from_secs(60),
                "[{}] {name} still runs clusters it does not hold",
                self.backend
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(
            "[{}] {name} continued: runs only what it holds after {:?}",
            self.backend,
            woken.elapsed()
        );
        self.probes.lock().unwrap().insert(name.to_owned(), url);
    }

    /// Every registered cluster's claim holder.
    pub(crate) async fn owners(&self) -> BTreeMap<String, String> {
        self.metastore
            .claims()
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.cluster, c.member))
            .collect()
    }

    /// The live members' names.
    pub(crate) async fn members(&self) -> BTreeSet<String> {
        let members = self.metastore.members().await.unwrap();
        members.into_iter().map(|m| m.name).collect()
    }

    pub(crate) async fn held_by(&self, member: &str) -> Vec<String> {
        let owners = self.owners().await;
        owners
            .into_iter()
            .filter(|(_, m)| m == member)
            .map(|(c, _)| c)
            .collect()
    }

    /// Waits until every registered cluster is held by one of `members` and each of them
    /// runs exactly what it holds; returns how long it took.
    pub(crate) async fn settle(&self, members: &[&str], limit: Duration) -> Duration {
        self.settle_without("", members, limit).await
    }

    /// As [`Fleet::settle`], with `gone` holding nothing (it may be paused or stopping).
    pub(crate) async fn settle_without(
        &self,
        gone: &str,
        members: &[&str],
        limit: Duration,
    ) -> Duration {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < limit {
            match self.settled(gone, members).await {
                Ok(()) => return started.elapsed(),
                Err(why) => last = why,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.print_logs();
        panic!(
            "[{}] not settled on {members:?} within {limit:?}: {last}",
            self.backend
        );
    }

    async fn settled(&self, gone: &str, members: &[&str]) -> Result<(), String> {
        let owners = self.owners().await;
        let live: BTreeSet<String> = members
            .iter()
            .filter(|m| **m != gone)
            .map(|m| (*m).to_owned())
            .collect();
        let mut held: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for cluster in self.clusters.keys() {
            // Settled: each cluster with the member the syncers prefer for it.
            let preferred = karpor_syncer::preferred(&live, cluster);
            match owners.get(cluster) {
                Some(m) if Some(m.as_str()) == preferred => {
                    held.entry(preferred.unwrap())
                        .or_default()
                        .insert(cluster.clone());
                }
                other => {
                    return Err(format!(
                        "{cluster} is held by {other:?}, not yet by {preferred:?}"
                    ))
                }
            }
        }
        for member in live.iter().map(String::as_str) {
            let url = self.syncers[member].url("/metrics");
            let running = running(&url)
                .await
                .ok_or(format!("{member} does not answer"))?;
            let mine = held.get(member).cloned().unwrap_or_default();
            if running.keys().cloned().collect::<BTreeSet<_>>() != mine {
                return Err(format!("{member} runs {running:?} but holds {mine:?}"));
            }
        }
        Ok(())
    }

    fn print_logs(&self) {
        for (name, syncer) in &self.syncers {
            let logs = syncer.logs();
            let tail: Vec<&str> = logs.lines().rev().take(60).collect();
            eprintln!("--- {name}, last lines:");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }

    /// Prints how evenly the clusters are spread.
    pub(crate) async fn balance(&self, label: &str) {
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for member in self.owners().await.into_values() {
            *per.entry(member).or_default() += 1;
        }
        let max = per.values().max().copied().unwrap_or(0);
        let min = per.values().min().copied().unwrap_or(0);
        eprintln!(
            "[{}] balance with {label}: {per:?} (max {max}, min {min})",
            self.backend
        );
    }

    /// Holds the churn still and waits until storage holds exactly each cluster's live
    /// ConfigMaps (uid and resourceVersion).
    pub(crate) async fn storage_equals_clusters(&self, churn: &Churn, label: &str) {
        let _still = churn.hold_still().await;
        let live = [churn.live(0).await, churn.live(1).await];
        let started = Instant::now();
        loop {
            let mut wrong = Vec::new();
            for (cluster, i) in &self.clusters {
                let stored = self.stored(cluster).await;
                if stored != live[*i] {
                    wrong.push(cluster.clone());
                }
            }
            if wrong.is_empty() {
                eprintln!(
                    "[{}] {label}: storage equals all {} clusters after {:?}",
                    self.backend,
                    self.clusters.len(),
                    started.elapsed()
                );
                return;
            }
            if started.elapsed() > CONVERGE {
                let owners = self.owners().await;
                for cluster in &wrong {
                    let stored = self.stored(cluster).await;
                    let want = &live[self.clusters[cluster]];
                    let missing = want.keys().filter(|u| !stored.contains_key(*u)).count();
                    let extra = stored.keys().filter(|u| !want.contains_key(*u)).count();
                    let stale = want
                        .iter()
                        .filter(|(u, v)| stored.get(*u).is_some_and(|s| s != *v))
                        .count();
                    eprintln!(
                        "{cluster}: held by {:?}; {missing} missing, {extra} extra, {stale} stale",
                        owners.get(cluster)
                    );
                }
                self.print_logs();
                panic!(
                    "[{}] {label}: storage differs from clusters {wrong:?} after {CONVERGE:?}",
                    self.backend
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn stored(&self, cluster: &str) -> Objects {
        let query = karpor_search::parse(&format!(
            "select * from resources where cluster = '{cluster}' and namespace = '{}' \
             and kind = 'ConfigMap' and deleted = false",
            self.namespace
        ))
        .unwrap();
        let found = self.storage.search(&query, 0, 1000).await.unwrap();
        found
            .items
            .into_iter()
            .map(|d| (d.uid, d.resource_version))
            .collect()
    }

    /// Checks every cluster's history: each object was created and deleted at most once
    /// (hand-overs, relists, paused writers and restarts wrote no change twice), and
    /// updates were kept. Returns the revisions read.
    pub(crate) async fn history_has_no_duplicate(&self) -> u64 {
        const PAGE: u64 = 1000;
        let mut read = 0;
        for cluster in self.clusters.keys() {
            let search = karpor_search::parse_changes(&format!(
                "select * from changes where cluster = '{cluster}' and namespace = '{}'",
                self.namespace
            ))
            .unwrap();
            let query = ChangeQuery {
                filter: search.filter,
                since: None,
                until: None,
                changes: Vec::new(),
            };
            // uid → its changes, newest first.
            let mut of: BTreeMap<String, Vec<(Change, String)>> = BTreeMap::new();
            let mut updates = 0;
            for from in (0..).step_by(PAGE as usize) {
                let page = self.storage.changes(&query, from, PAGE).await.unwrap();
                for r in &page.items {
                    updates += u64::from(r.change == Change::Updated);
                    let late = if r.late { " late" } else { "" };
                    let seen = format!("{}{late} at {}", r.resource_version, r.seen_at);
                    of.entry(r.uid.clone()).or_default().push((r.change, seen));
                }
                read += page.items.len() as u64;
                if page.items.len() < PAGE as usize {
                    break;
                }
            }
            let twice = |changes: &[(Change, String)], change: Change| {
                changes.iter().filter(|(c, _)| *c == change).count() > 1
            };
            let wrong: BTreeMap<_, _> = of
                .iter()
                .filter(|(_, c)| twice(c, Change::Created) || twice(c, Change::Deleted))
                .collect();
            assert!(
                wrong.is_empty(),
                "[{}] {cluster}: created or deleted twice: {wrong:#?}",
                self.backend
            );
            assert!(updates > 0, "[{}] {cluster}: no update kept", self.backend);
        }
        read
    }

    /// `karpor serve` without a syncer of its own, on the same stores.
    pub(crate) fn server(&self) -> Karpor {
        let config = format!("{}server: {{syncer: false}}\n", self.head);
        let dir = self.dir.path().join("server");
        std::fs::create_dir_all(&dir).unwrap();
        Spawn::serve(&config).in_dir(&dir).start()
    }

    /// Stops the sampler and every syncer: what the sampler saw run twice at once.
    pub(crate) async fn stop_sampling(&mut self) -> Doubles {
        self.sampling.cancel();
        let doubles = (&mut self.sampler).await.unwrap();
        self.probes.lock().unwrap().clear();
        // Dropped: killed.
        self.syncers.clear();
        doubles
    }
}

/// The clusters a syncer runs (those with a sync state series), with their state.
async fn running(url: &str) -> Option<BTreeMap<String, String>> {
    // Not the testkit's `get`, which fails the test: a syncer may be gone between the
    // sampler's list and its read.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let response = client.get(url).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let body = response.text().await.ok()?;
    let mut running = BTreeMap::new();
    for line in body.lines() {
        let Some(labels) = line.strip_prefix("karpor_syncer_cluster_state{") else {
            continue;
        };
        if !line.ends_with(" 1") {
            continue;
        }
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=\"")))
                .and_then(|v| v.split('"').next())
                .map(str::to_owned)
        };
        if let (Some(cluster), Some(state)) = (label("cluster"), label("state")) {
            running.insert(cluster, state);
        }
    }
    Some(running)
}

/// Cluster → the syncers that run it, reading `urls` in order.
async fn runners(urls: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut runners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (member, url) in urls {
        for cluster in running(url).await.unwrap_or_default().into_keys() {
            runners.entry(cluster).or_default().push(member.clone());
        }
    }
    runners
}

async fn sample(probes: Probes, stop: CancellationToken) -> Doubles {
    let mut doubles = Doubles::new();
    while !stop.is_cancelled() {
        let urls: Vec<(String, String)> = probes
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // Syncers are read one after another, so a hand-over between two reads would
        // look like two runners: read forwards, then backwards, and count a cluster
        // only when the same syncers run it both times (a hand-over shows the new
        // owner without the old one on the way back).
        let forwards = runners(&urls).await;
        let mut reversed = urls.clone();
        reversed.reverse();
        let backwards = runners(&reversed).await;
        for (cluster, members) in forwards {
            let both: Vec<String> = members
                .into_iter()
                .filter(|m| backwards.get(&cluster).is_some_and(|b| b.contains(m)))
                .collect();
            if both.len() > 1 {
                eprintln!("sample: {cluster} run by {both:?}");
                doubles.insert(cluster, both);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(SAMPLE) => {}
        }
    }
    doubles
}
