//! The syncer's throughput and memory on a real kube-apiserver
//! (`cargo bench -p karpor-syncer --bench syncer_ingest`, with
//! `source target/test-services/env.sh`): N ConfigMaps (default 20,000,
//! `KARPOR_BENCH_OBJECTS`) created in a fresh namespace, then a syncer on embedded SQLite
//! started and timed until every one is searchable, with resident memory before and
//! after; beside it, in the same run, the same documents bulk-written straight into a
//! fresh storage of the same kind (the raw ingest rate the syncer is compared with).
//!
//! History's cost, in the same run: four passes, each a fresh storage and syncer over the
//! same objects, with history on, off, off, on (`syncer.history.enabled`). Each pass is
//! timed to its initial sync (no revision: the objects were there before the cluster
//! was registered, so the sync imports them), then patches
//! its own slice of `KARPOR_BENCH_PATCHES` ConfigMaps (default 2,000; a data value
//! changed) and is timed until storage holds every new version (an `updated` revision
//! each). The watch keeps pace with the patches, so their wall time says little; the
//! process's CPU time over the pass, less that of the same patches sent with no syncer
//! running, is the syncer's cost per update. `KARPOR_BENCH_HISTORY_FIRST=off` runs off,
//! on, on, off instead, so the memory table (the first pass) is of a syncer without
//! history.

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use karpor_core::model::{
    Cluster, ClusterSelector, Kubeconfig, ResourceSelector, SyncRule, Transform,
};
use karpor_health::{HealthChecker, HealthMetrics, Settings};
use karpor_metastore::MetastoreConfig;
use karpor_storage::{ResourceDocument, Storage, StorageConfig};
use karpor_syncer::{HistorySettings, SyncSettings, Syncer, SyncerParts};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig as KubeKubeconfig};
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// Resident memory the process owns, without file pages it maps (SQLite's mmap of its
/// database file is page cache the kernel may drop).
fn anon_kib() -> u64 {
    status_kib("RssAnon:")
}

fn configmaps() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
    }
}

/// CPU time of this process so far (user and system), in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command's closing parenthesis: state is the 3rd, utime the 14th.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0 // USER_HZ, 100 on Linux
}

/// A changed data value for each ConfigMap of `which`; their uids and new
/// resourceVersions.
async fn patch(
    api: &Api<DynamicObject>,
    which: std::ops::Range<usize>,
    round: usize,
) -> Vec<(String, u64)> {
    futures::stream::iter(which)
        .map(|i| {
            let api = api.clone();
            async move {
                let data = json!({"data": {"config.yaml": format!(
                    "replicas: {}\nimage: nginx:1.{}\nport: 8080\nlog: debug\n", i % 7, 26 + round
                )}});
                let patched = api
                    .patch(
                        &format!("cm-{i:06}"),
                        &PatchParams::default(),
                        &Patch::Merge(data),
                    )
                    .await
                    .unwrap();
                let version = patched.metadata.resource_version.unwrap().parse().unwrap();
                (patched.metadata.uid.unwrap(), version)
            }
        })
        .buffer_unordered(32)
        .collect()
        .await
}

fn stored_version(document: Option<ResourceDocument>) -> u64 {
    document.map_or(0, |d| d.resource_version.parse().unwrap_or(0))
}

/// RSS and anonymous memory (KiB) before and after, the peak RSS, (count, RSS) at half the
/// objects, and the peak of anonymous memory.
type Memory = (u64, u64, u64, u64, u64, (u64, u64), u64);

/// One syncer's pass: what it took to list and store every object, then to store the
/// changes of the objects in `slice`.
struct Pass {
    history: bool,
    dir: tempfile::TempDir,
    storage: Arc<dyn Storage>,
    synced: Duration,
    sync_cpu: f64,
    sync_revisions: u64,
    patched: Duration,
    lag: Duration,
    patch_cpu: f64,
    revisions: u64,
    memory: Option<Memory>,
}

impl Pass {
    fn rate(&self, objects: usize) -> f64 {
        objects as f64 / self.synced.as_secs_f64()
    }
}

async fn revisions(storage: &Arc<dyn Storage>) -> u64 {
    let sizes = storage.history_sizes().await.unwrap();
    sizes.iter().map(|s| s.revisions).sum()
}

async fn sync_pass(
    api: &Api<DynamicObject>,
    kubeconfig: &str,
    ns: &str,
    objects: usize,
    history: bool,
    memory: bool,
    slice: std::ops::Range<usize>,
) -> Pass {
    let dir = tempfile::tempdir().unwrap();
    let metastore = karpor_metastore::connect(&MetastoreConfig::Sqlite {
        path: dir.path().join("meta.db"),
        encryption_key_file: None,
    })
    .await
    .unwrap();
    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: dir.path().join("resources.db"),
    })
    .await
    .unwrap();
    metastore
        .create(SyncRule {
            name: "bench".into(),
            description: String::new(),
            clusters: ClusterSelector::All,
            resources: vec![ResourceSelector {
                group: String::new(),
                version: "v1".into(),
                resource: "configmaps".into(),
            }],
            namespaces: vec![ns.to_owned()],
            label_selector: None,
            field_selector: None,
            transform: Transform::default(),
            keep_after_delete: false,
            history: None,
        })
        .await
        .unwrap();
    let mut registry = Registry::default();
    let health = HealthChecker::new(Settings::default(), HealthMetrics::new(&mut registry));
    let before = rss_kib();
    let anon_before = anon_kib();
    let stop = CancellationToken::new();
    let mut syncer = Syncer::new(SyncerParts {
        audit: Default::default(),
        member: karpor_syncer::default_member(),
        clients: karpor_syncer::client_cache(Default::default()),
        metastore: metastore.clone(),
        storage: storage.clone(),
        health,
        metrics: karpor_syncer::metrics(&mut registry),
        settings: SyncSettings {
            history: HistorySettings {
                enabled: history,
                ..Default::default()
            },
            ..Default::default()
        },
    });
    syncer.start(stop.clone());
    let cpu = cpu_seconds();
    let started = Instant::now();
    metastore
        .create(Cluster {
            name: "bench".into(),
            display_name: String::new(),
            description: String::new(),
            labels: BTreeMap::new(),
            kubeconfig: Kubeconfig(kubeconfig.to_owned()),
            mode: Default::default(),
        })
        .await
        .unwrap();
    let mut peak = before;
    let mut peak_anon = anon_before;
    let mut at_half = None;
    loop {
        let count = storage.count(Some("bench")).await.unwrap();
        if memory {
            peak = peak.max(rss_kib());
            peak_anon = peak_anon.max(anon_kib());
            if count >= objects as u64 / 2 && at_half.is_none() {
                at_half = Some((count, rss_kib()));
            }
        }
        if count >= objects as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let synced = started.elapsed();
    let sync_cpu = cpu_seconds() - cpu;
    let (after, anon_after) = (rss_kib(), anon_kib());
    let memory = memory.then(|| {
        (
            before,
            after,
            anon_before,
            anon_after,
            peak.max(after),
            at_half.unwrap(),
            peak_anon.max(anon_after),
        )
    });
    let sync_revisions = revisions(&storage).await;

    // The steady state: changes seen by the watch, each stored as an update.
    let cpu = cpu_seconds();
    let started = Instant::now();
    let changed = patch(api, slice.clone(), slice.start / slice.len().max(1)).await;
    let sent = started.elapsed();
    let (last_uid, last) = changed.iter().max_by_key(|(_, v)| *v).unwrap().clone();
    loop {
        // The writer stores a watch's events in order: the newest stored, all are.
        if stored_version(storage.get("bench", &last_uid).await.unwrap()) >= last {
            let mut all = true;
            for (uid, version) in &changed {
                all &= stored_version(storage.get("bench", uid).await.unwrap()) >= *version;
            }
            if all {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let patched = started.elapsed();
    let patch_cpu = cpu_seconds() - cpu;
    let revisions = revisions(&storage).await;
    stop.cancel();
    syncer.join().await;
    eprintln!(
        "pass, history {history}: synced in {synced:?}, {} patches sent in {sent:?}, stored after {patched:?}",
        changed.len()
    );
    Pass {
        history,
        dir,
        storage,
        synced,
        sync_cpu,
        sync_revisions,
        patched,
        lag: patched.saturating_sub(sent),
        patch_cpu,
        revisions,
        memory,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let objects: usize = std::env::var("KARPOR_BENCH_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let path = std::env::var("KARPOR_TEST_KUBECONFIG_A")
        .expect("KARPOR_TEST_KUBECONFIG_A: source target/test-services/env.sh");
    // Self-contained, as karpor takes kubeconfigs (file references are refused).
    let kubeconfig = karpor_testkit::process::flat_kubeconfig(&path);
    let config = kube::Config::from_custom_kubeconfig(
        KubeKubeconfig::from_yaml(&kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = Client::try_from(config).unwrap();
    let ns = format!("bench-{}", std::process::id());
    let namespaces = ApiResource {
        kind: "Namespace".into(),
        plural: "namespaces".into(),
        ..configmaps()
    };
    let namespace: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .unwrap();
    Api::<DynamicObject>::all_with(client.clone(), &namespaces)
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &configmaps());
    let started = Instant::now();
    futures::stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:06}"), "labels": {"app": format!("app-{}", i % 50), "tier": "be"}},
                    "data": {"config.yaml": format!("replicas: {}\nimage: nginx:1.25\nport: 8080\nlog: info\n", i % 7)},
                }))
                .unwrap();
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;
    eprintln!("created {objects} ConfigMaps in {:?}", started.elapsed());

    let patches: usize = std::env::var("KARPOR_BENCH_PATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
        .min(objects / 5);
    // History on, off, off, on (or the other way round): each pass a fresh storage and
    // syncer over the same objects, then its own slice of them patched; the first pass
    // also measures memory.
    let first_on = std::env::var("KARPOR_BENCH_HISTORY_FIRST").map_or(true, |v| v != "off");
    let mut passes = Vec::new();
    for (pass, on) in [true, false, false, true].into_iter().enumerate() {
        let history = on == first_on;
        let slice = pass * patches..(pass + 1) * patches;
        passes.push(sync_pass(&api, &kubeconfig, &ns, objects, history, pass == 0, slice).await);
    }
    // The patches alone, with no syncer running: the bench's own share of a patch pass.
    let cpu = cpu_seconds();
    let started = Instant::now();
    patch(&api, 4 * patches..5 * patches, 4).await;
    let (patch_only_cpu, patch_only_wall) = (cpu_seconds() - cpu, started.elapsed());

    let first = &passes[0];
    let (before, after, anon_before, anon_after, peak, (half_count, half_rss), peak_anon) =
        first.memory.unwrap();
    let (synced, sync_rate) = (first.synced, first.rate(objects));
    let storage = &first.storage;

    // The same documents, straight into a fresh storage of the same kind.
    let everything = karpor_search::parse("select * from resources").unwrap();
    let mut documents: Vec<ResourceDocument> = Vec::with_capacity(objects);
    while documents.len() < objects {
        let page = storage
            .search(&everything, documents.len() as u64, 1000)
            .await
            .unwrap();
        documents.extend(page.items);
    }
    let raw = karpor_storage::connect(&StorageConfig::Sqlite {
        path: first.dir.path().join("raw.db"),
    })
    .await
    .unwrap();
    let started = Instant::now();
    for batch in documents.chunks(500) {
        raw.upsert(batch).await.unwrap();
    }
    let raw_rate = objects as f64 / started.elapsed().as_secs_f64();

    // Growth over the second half alone: what each further object costs, without the
    // fixed cost of starting (client, caches, queue, batch).
    let marginal = (after.saturating_sub(half_rss) * 1024) as f64
        / (objects as u64 - half_count).max(1) as f64;
    let per_object = |from: u64, to: u64| (to.saturating_sub(from) * 1024) as f64 / objects as f64;
    println!("| objects | time to all indexed | syncer objects/s | raw ingest objects/s | syncer / raw | RSS before | RSS after | growth per object | second half, per object | anonymous growth per object |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {objects} | {:.1} s | {sync_rate:.0} | {raw_rate:.0} | {:.2} | {:.1} MiB | {:.1} MiB | {:.0} B (peak {:.0} B) | {marginal:.0} B | {:.0} B (peak {:.0} B) |",
        synced.as_secs_f64(),
        sync_rate / raw_rate,
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        per_object(before, after),
        per_object(before, peak),
        per_object(anon_before, anon_after),
        per_object(anon_before, peak_anon),
    );

    // History on against off.
    println!("\nHistory, {objects} objects listed, then {patches} of them patched (each pass its own slice); bench CPU for the patches alone: {patch_only_cpu:.2} s in {:.2} s", patch_only_wall.as_secs_f64());
    println!("\n| pass | history | initial sync | objects/s | CPU per object | revisions | patch pass: to all stored | lag after last patch | CPU per update (less the patches' own) | revisions |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (i, p) in passes.iter().enumerate() {
        println!(
            "| {} | {} | {:.2} s | {:.0} | {:.0} µs | {} | {:.2} s | {:.0} ms | {:.0} µs | {} |",
            i + 1,
            if p.history { "on" } else { "off" },
            p.synced.as_secs_f64(),
            p.rate(objects),
            p.sync_cpu / objects as f64 * 1e6,
            p.sync_revisions,
            p.patched.as_secs_f64(),
            p.lag.as_secs_f64() * 1e3,
            (p.patch_cpu - patch_only_cpu).max(0.0) / patches as f64 * 1e6,
            p.revisions - p.sync_revisions,
        );
    }
    let mean = |on: bool, f: &dyn Fn(&Pass) -> f64| {
        let of: Vec<f64> = passes.iter().filter(|p| p.history == on).map(f).collect();
        of.iter().sum::<f64>() / of.len() as f64
    };
    let rate = |p: &Pass| p.rate(objects);
    let sync_cpu = |p: &Pass| p.sync_cpu;
    let update_cpu = |p: &Pass| (p.patch_cpu - patch_only_cpu).max(1e-3);
    let wall = |p: &Pass| p.patched.as_secs_f64();
    println!(
        "\nOn / off (means of two passes each): initial sync rate {:.2}, initial sync by CPU {:.2}; patches: rate by CPU {:.2}, wall time to all stored {:.2}",
        mean(true, &rate) / mean(false, &rate),
        mean(false, &sync_cpu) / mean(true, &sync_cpu),
        mean(false, &update_cpu) / mean(true, &update_cpu),
        mean(false, &wall) / mean(true, &wall),
    );
    // In slices: one collection delete of everything outlasts the server's timeout.
    for app in 0..50 {
        let slice = ListParams::default().labels(&format!("app=app-{app}"));
        api.delete_collection(&DeleteParams::default(), &slice)
            .await
            .unwrap();
    }
    Api::<DynamicObject>::all_with(client, &namespaces)
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}
