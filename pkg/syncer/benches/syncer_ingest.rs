//! The syncer's throughput and memory on a real kube-apiserver
//! (`cargo bench -p karpor-syncer --bench syncer_ingest`, with
//! `source target/test-services/env.sh`): N ConfigMaps (default 20,000,
//! `KARPOR_BENCH_OBJECTS`) created in a fresh namespace, then a syncer on embedded SQLite
//! started and timed until every one is searchable, with resident memory before and
//! after; beside it, in the same run, the same documents bulk-written straight into a
//! fresh storage of the same kind (the raw ingest rate the syncer is compared with).

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use karpor_core::model::{
    Cluster, ClusterSelector, Kubeconfig, ResourceSelector, SyncRule, Transform,
};
use karpor_health::{HealthChecker, HealthMetrics, Settings};
use karpor_metastore::MetastoreConfig;
use karpor_storage::{ResourceDocument, StorageConfig};
use karpor_syncer::{SyncSettings, Syncer, SyncerParts};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
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
            namespaces: vec![ns.clone()],
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
        settings: SyncSettings::default(),
    });
    syncer.start(stop.clone());
    let started = Instant::now();
    metastore
        .create(Cluster {
            name: "bench".into(),
            display_name: String::new(),
            description: String::new(),
            labels: BTreeMap::new(),
            kubeconfig: Kubeconfig(kubeconfig),
        })
        .await
        .unwrap();
    let mut peak = before;
    let mut at_half = None;
    loop {
        let count = storage.count(Some("bench")).await.unwrap();
        peak = peak.max(rss_kib());
        if count >= objects as u64 / 2 && at_half.is_none() {
            at_half = Some((count, rss_kib()));
        }
        if count >= objects as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let synced = started.elapsed();
    let after = rss_kib();
    let anon_after = anon_kib();
    peak = peak.max(after);
    let sync_rate = objects as f64 / synced.as_secs_f64();

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
        path: dir.path().join("raw.db"),
    })
    .await
    .unwrap();
    let started = Instant::now();
    for batch in documents.chunks(500) {
        raw.upsert(batch).await.unwrap();
    }
    let raw_rate = objects as f64 / started.elapsed().as_secs_f64();
    stop.cancel();
    syncer.join().await;

    // Growth over the second half alone: what each further object costs, without the
    // fixed cost of starting (client, caches, queue, batch).
    let (half_count, half_rss) = at_half.unwrap();
    let marginal = (after.saturating_sub(half_rss) * 1024) as f64
        / (objects as u64 - half_count).max(1) as f64;
    let per_object = |from: u64, to: u64| (to.saturating_sub(from) * 1024) as f64 / objects as f64;
    println!("| objects | time to all indexed | syncer objects/s | raw ingest objects/s | syncer / raw | RSS before | RSS after | growth per object | second half, per object | anonymous growth per object |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {objects} | {:.1} s | {sync_rate:.0} | {raw_rate:.0} | {:.2} | {:.1} MiB | {:.1} MiB | {:.0} B (peak {:.0} B) | {marginal:.0} B | {:.0} B |",
        synced.as_secs_f64(),
        sync_rate / raw_rate,
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        per_object(before, after),
        per_object(before, peak),
        per_object(anon_before, anon_after),
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
