//! What auditing at ingest costs the syncer (`cargo bench -p karpor-syncer --bench
//! audit_ingest`, with `source target/test-services/env.sh`): N Deployments (default
//! 5,000, `KARPOR_BENCH_OBJECTS`) with varied pod templates (some with added capabilities, some
//! without probes or limits, some clean) created in a fresh namespace of the test
//! script's kube-apiserver `a`; then the syncer, on a fresh embedded SQLite each time,
//! timed until every one is stored, with auditing off and on, alternating
//! (off, on, on, off), in one run. The ratio of the on and off rates is the figure.

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use karpor_audit::AuditConfig;
use karpor_core::model::{
    Cluster, ClusterSelector, Kubeconfig, ResourceSelector, SyncRule, Transform,
};
use karpor_health::{HealthChecker, HealthMetrics, Settings};
use karpor_metastore::MetastoreConfig;
use karpor_storage::StorageConfig;
use karpor_syncer::{SyncSettings, Syncer, SyncerParts};
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig as KubeKubeconfig};
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: if group.is_empty() {
            "v1".into()
        } else {
            format!("{group}/v1")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The i-th Deployment: a mix of what real clusters hold.
fn deployment(i: usize) -> Value {
    let image = [
        "nginx:1.25",
        "redis",
        "envoy:latest",
        "registry.example/app:3.1",
    ][i % 4];
    let mut container = json!({
        "name": "app",
        "image": image,
        "ports": [{"containerPort": 8080}],
        "env": [{"name": "MODE", "value": "production"}],
    });
    if i.is_multiple_of(2) {
        container["resources"] = json!({"requests": {"cpu": "100m", "memory": "128Mi"},
                                        "limits": {"cpu": "500m", "memory": "512Mi"}});
        container["readinessProbe"] = json!({"httpGet": {"path": "/readyz", "port": 8080}});
        container["livenessProbe"] = json!({"httpGet": {"path": "/livez", "port": 8080}});
    }
    if i.is_multiple_of(5) {
        // Not privileged: the test apiservers refuse it.
        container["securityContext"] = json!({"capabilities": {"add": ["NET_ADMIN"]}});
    } else if i.is_multiple_of(3) {
        container["securityContext"] = json!({"runAsNonRoot": true, "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}});
    }
    let name = format!("app-{i:06}");
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1 + i % 3,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [container]}}
        }
    })
}

/// Seconds until the syncer has stored every Deployment of `ns`, auditing or not.
async fn sync_once(kubeconfig: &str, ns: &str, objects: usize, audit: bool) -> f64 {
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
                group: "apps".into(),
                version: "v1".into(),
                resource: "deployments".into(),
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
    let stop = CancellationToken::new();
    let mut syncer = Syncer::new(SyncerParts {
        audit: AuditConfig {
            enabled: audit,
            ..AuditConfig::default()
        },
        clients: karpor_syncer::client_cache(Default::default()),
        member: karpor_syncer::default_member(),
        metastore: metastore.clone(),
        storage: storage.clone(),
        health: HealthChecker::new(Settings::default(), HealthMetrics::new(&mut registry)),
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
            kubeconfig: Kubeconfig(kubeconfig.to_owned()),
            mode: Default::default(),
        })
        .await
        .unwrap();
    while storage.count(Some("bench")).await.unwrap() < objects as u64 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = started.elapsed().as_secs_f64();
    let findings = storage
        .audit_totals(&karpor_search::parse("select * from resources").unwrap())
        .await
        .unwrap()
        .findings
        .total();
    assert_eq!(findings > 0, audit, "audit {audit}: {findings} findings");
    stop.cancel();
    syncer.join().await;
    took
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let objects: usize = std::env::var("KARPOR_BENCH_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
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
    let ns = format!("bench-audit-{}", std::process::id());
    let namespaces = resource("", "Namespace", "namespaces");
    let namespace: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .unwrap();
    Api::<DynamicObject>::all_with(client.clone(), &namespaces)
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let api = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &resource("apps", "Deployment", "deployments"),
    );
    let started = Instant::now();
    futures::stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move {
                let object: DynamicObject = serde_json::from_value(deployment(i)).unwrap();
                api.create(&PostParams::default(), &object).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;
    eprintln!("created {objects} Deployments in {:?}", started.elapsed());

    let mut off = Vec::new();
    let mut on = Vec::new();
    for audit in [false, true, true, false] {
        let took = sync_once(&kubeconfig, &ns, objects, audit).await;
        eprintln!("audit {audit}: {took:.2} s");
        if audit {
            on.push(took);
        } else {
            off.push(took);
        }
    }
    let rate = |times: &[f64]| objects as f64 * times.len() as f64 / times.iter().sum::<f64>();
    let (rate_off, rate_on) = (rate(&off), rate(&on));
    println!("| objects | auditing off, objects/s | auditing on, objects/s | on / off |");
    println!("|---|---|---|---|");
    println!(
        "| {objects} | {rate_off:.0} | {rate_on:.0} | {:.2} |",
        rate_on / rate_off
    );

    Api::<DynamicObject>::all_with(client, &namespaces)
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}
