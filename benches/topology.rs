//! The topology's latency at 100,000 stored objects (`cargo bench --bench topology`): the
//! real `karpor serve` (release) on the embedded default, its storage filled beforehand
//! with a realistic mix, asked over HTTP as the page asks. Per namespace (20 of them, 5,000
//! objects each): 250 Deployments, each with a ReplicaSet it owns and 10 Pods the
//! ReplicaSet owns, a Service selecting them, and a ConfigMap, a Secret and a PVC they
//! mount, plus 1,000 unrelated ConfigMaps. Documents carry the keys the syncer indexes.
//!
//! Reported: p50 and p99 of a Pod's graph (2 hops), a Deployment's graph (2 hops: its
//! ReplicaSet and 10 Pods) and a namespace's graph of kinds (5,000 objects).

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use karpor_core::model::KindRef;
use karpor_storage::{ResourceDocument, StorageConfig};
use karpor_testkit::api::Client;
use karpor_testkit::process::{import, Spawn};
use serde_json::{json, Value};
use time::OffsetDateTime;

const NAMESPACES: usize = 20;
const DEPLOYMENTS: usize = 250;
const PODS: usize = 10;
const UNRELATED: usize = 1000;
const RUNS: usize = 200;
const CLUSTER: &str = "bench";

fn document(
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    object: Value,
) -> ResourceDocument {
    let uid = format!("{kind}-{namespace}-{name}");
    let mut object = object;
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    object["metadata"]["name"] = json!(name);
    object["metadata"]["namespace"] = json!(namespace);
    object["metadata"]["uid"] = json!(uid);
    let labels: BTreeMap<String, String> =
        serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default();
    let rules = karpor_topology::builtin_rules();
    let refs = karpor_topology::reference_keys(
        &object,
        &KindRef::of(api_version, kind),
        namespace,
        &rules,
    );
    ResourceDocument {
        cluster: CLUSTER.to_owned(),
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid,
        labels,
        annotations: BTreeMap::new(),
        owner_references: object["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        creation_timestamp: None,
        deletion_timestamp: None,
        resource_version: "1".to_owned(),
        sync_at: OffsetDateTime::now_utc(),
        deleted: false,
        object,
        issues: Vec::new(),
        refs,
        history: None,
    }
}

fn owner(api_version: &str, kind: &str, namespace: &str, name: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name,
            "uid": format!("{kind}-{namespace}-{name}"), "controller": true}])
}

/// One namespace's 5,000 objects.
fn namespace(n: usize) -> Vec<ResourceDocument> {
    let ns = format!("ns-{n:02}");
    let mut docs = Vec::new();
    for d in 0..DEPLOYMENTS {
        let app = format!("app-{d:03}");
        let labels = json!({"app": app});
        let spec = json!({"containers": [{"name": "app", "image": "nginx:1.25",
                "envFrom": [{"secretRef": {"name": format!("{app}-secret")}}]}],
            "volumes": [{"name": "c", "configMap": {"name": format!("{app}-config")}},
                        {"name": "d", "persistentVolumeClaim": {"claimName": format!("{app}-data")}}]});
        docs.push(document(
            "apps/v1",
            "Deployment",
            &ns,
            &app,
            json!({
            "metadata": {"labels": labels},
            "spec": {"replicas": PODS, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}),
        ));
        let rs = format!("{app}-rs");
        docs.push(document("apps/v1", "ReplicaSet", &ns, &rs, json!({
            "metadata": {"labels": labels, "ownerReferences": owner("apps/v1", "Deployment", &ns, &app)},
            "spec": {"replicas": PODS, "template": {"metadata": {"labels": labels}, "spec": spec}}})));
        for p in 0..PODS {
            docs.push(document("v1", "Pod", &ns, &format!("{rs}-{p}"), json!({
                "metadata": {"labels": labels, "ownerReferences": owner("apps/v1", "ReplicaSet", &ns, &rs)},
                "spec": spec})));
        }
        docs.push(document(
            "v1",
            "Service",
            &ns,
            &app,
            json!({
            "metadata": {}, "spec": {"selector": labels}}),
        ));
        docs.push(document(
            "v1",
            "ConfigMap",
            &ns,
            &format!("{app}-config"),
            json!({"metadata": {}, "data": {"a": "1"}}),
        ));
        docs.push(document(
            "v1",
            "Secret",
            &ns,
            &format!("{app}-secret"),
            json!({"metadata": {}}),
        ));
        docs.push(document(
            "v1",
            "PersistentVolumeClaim",
            &ns,
            &format!("{app}-data"),
            json!({"metadata": {}}),
        ));
    }
    for u in 0..UNRELATED {
        docs.push(document(
            "v1",
            "ConfigMap",
            &ns,
            &format!("other-{u:03}"),
            json!({"metadata": {}}),
        ));
    }
    docs
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e3
}

async fn measure(api: &Client, label: &str, paths: &[String], runs: usize) {
    let mut latencies = Vec::with_capacity(runs);
    let mut nodes = 0;
    for i in 0..=runs {
        let path = &paths[i % paths.len()];
        let started = Instant::now();
        let (code, answer) = api.call("GET", path, None).await;
        let took = started.elapsed();
        assert_eq!(code, 200, "{path}: {answer}");
        nodes = answer["data"][CLUSTER].as_object().map_or(0, |o| o.len());
        // The first run prepares statements and caches: not counted.
        if i > 0 {
            latencies.push(took);
        }
    }
    latencies.sort_unstable();
    println!(
        "| {label} | {nodes} | {:.1} ms | {:.1} ms |",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: dir.path().join("data/resources.db"),
    })
    .await
    .unwrap();
    let started = Instant::now();
    let mut total = 0;
    for n in 0..NAMESPACES {
        let docs = namespace(n);
        total += docs.len();
        for batch in docs.chunks(500) {
            storage.upsert(batch).await.unwrap();
        }
    }
    eprintln!("stored {total} documents in {:?}", started.elapsed());
    drop(storage);
    let config = "server: {syncer: false}\nshutdown: {drain_delay: 1s}\n";
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: bench}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
    import(dir.path(), config, &[(CLUSTER, kubeconfig)], json!([]));
    let karpor = Spawn::serve(config).in_dir(dir.path()).start();
    let api = Client::local_admin(&karpor);
    let locator = |kind: &str, api_version: &str, ns: usize, name: String| {
        format!(
            "/rest-api/v1/insight/topology?cluster={CLUSTER}&apiVersion={api_version}&kind={kind}&namespace=ns-{ns:02}&name={name}&hops=2"
        )
    };
    let pods: Vec<String> = (0..50)
        .map(|i| {
            locator(
                "Pod",
                "v1",
                i % NAMESPACES,
                format!("app-{:03}-rs-{}", (i * 37) % DEPLOYMENTS, i % PODS),
            )
        })
        .collect();
    let deployments: Vec<String> = (0..50)
        .map(|i| {
            locator(
                "Deployment",
                "apps/v1",
                i % NAMESPACES,
                format!("app-{:03}", (i * 53) % DEPLOYMENTS),
            )
        })
        .collect();
    let namespaces: Vec<String> = (0..NAMESPACES)
        .map(|n| format!("/rest-api/v1/insight/topology?cluster={CLUSTER}&namespace=ns-{n:02}"))
        .collect();
    println!(
        "{total} stored objects, {NAMESPACES} namespaces of {} each; {RUNS} runs a row",
        total / NAMESPACES
    );
    println!("| topology | nodes | p50 | p99 |");
    println!("|---|---|---|---|");
    measure(&api, "a Pod, 2 hops", &pods, RUNS).await;
    measure(&api, "a Deployment, 2 hops", &deployments, RUNS).await;
    measure(
        &api,
        "a namespace's kinds (5,000 objects)",
        &namespaces,
        RUNS / 4,
    )
    .await;
}
