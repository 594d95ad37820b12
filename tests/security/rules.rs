//! Sync and relation rules are bounded (`syncer.limits`): a rule over a limit is a 400
//! naming the limit's key and the rule's count, on every write and on a dry run; a
//! cluster whose rules would open more watches than `watches_per_cluster` says so in its
//! status and opens none, until rules that fit replace them; `/livez` stays fast
//! throughout. A rule of 1,000 namespaces over every type once opened about 13,500
//! watches, took RSS to 1 GB and `/livez` to 8.5 s.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use karpor_testkit::api::Client;
use karpor_testkit::cluster::{configmaps, kube_name, namespaces, Kube, LIMIT};
use karpor_testkit::process::{flat_kubeconfig, wait_for, Spawn};
use karpor_testkit::service;
use serde_json::{json, Value};

use crate::cluster_body;

/// Watches one cluster may have here: the built-in rules need far more (one per type).
const CONFIG: &str = "shutdown: {drain_delay: 1s}\nsyncer: {limits: {watches_per_cluster: 5}}\n";

/// `/livez` must answer within this whatever the rules ask (the incident: 8.5 s).
const LIVEZ_BOUND: Duration = Duration::from_millis(500);

/// Probes `/livez` every 50 ms until stopped; the slowest answer.
fn watch_livez(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        let mut slowest = Duration::ZERO;
        while !stop.load(Ordering::SeqCst) {
            slowest = slowest.max(crate::probe_livez(addr));
            std::thread::sleep(Duration::from_millis(50));
        }
        slowest
    })
}

fn every_type_in(namespaces: usize) -> Value {
    json!({
        "clusters": "*",
        "resources": [{"group": "*", "version": "*", "resource": "*"}],
        "namespaces": (0..namespaces).map(|i| format!("ns-{i}")).collect::<Vec<_>>(),
    })
}

/// The cluster's `syncStatus`.
async fn sync_status(admin: &Client, cluster: &str) -> Value {
    let (code, answer) = admin
        .call("GET", &format!("/rest-api/v1/cluster/{cluster}"), None)
        .await;
    assert_eq!(code, 200, "{answer}");
    answer["data"]["syncStatus"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_over_the_limits_are_refused_and_a_cluster_over_the_watch_limit_opens_none() {
    let path = service("KARPOR_TEST_KUBECONFIG_A").expect("test services: scripts/services.sh");
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let karpor = Spawn::serve(CONFIG).start();
    let admin = Client::local_admin(&karpor);
    let stop = Arc::new(AtomicBool::new(false));
    let livez = watch_livez(karpor.addr, stop.clone());

    // A rule of 1,000 namespaces: refused, however it is sent, naming the limit.
    for (method, path) in [
        ("POST", "/rest-api/v1/sync-rule/wide"),
        ("PUT", "/rest-api/v1/sync-rule/wide"),
        ("POST", "/rest-api/v1/sync-rule/wide/dry-run"),
    ] {
        let (code, answer) = admin.call(method, path, Some(every_type_in(1000))).await;
        assert_eq!(code, 400, "{method} {path}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert_eq!(
            message,
            "namespaces: 1000 is over the limit of 100 (syncer.limits.namespaces_per_rule)",
            "{method} {path}"
        );
    }
    let deep = json!({
        "parent": {"kind": "Pod"}, "child": {"kind": "Secret"},
        "relation": {"type": "selector", "path": vec!["a"; 40].join(".")},
    });
    let (code, answer) = admin
        .call("POST", "/rest-api/v1/relation-rule/deep", Some(deep))
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or_default()
            .contains("40 is over the limit of 16 (syncer.limits.relation_path_segments)"),
        "{answer}"
    );
    let (_, rules) = admin.call("GET", "/rest-api/v1/sync-rules", None).await;
    assert_eq!(
        rules["data"]["items"][0]["builtIn"], true,
        "nothing was stored"
    );

    // The built-in rules watch every type: far over 5 watches. The cluster says so and
    // opens none.
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/limited",
            Some(cluster_body(&flat_kubeconfig(&path))),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    wait_for(
        LIMIT,
        "the cluster reports its rules over the limit",
        || async {
            let status = sync_status(&admin, "limited").await;
            status["state"] == "error" && status["reason"] == "misconfigured"
        },
    )
    .await;
    let status = sync_status(&admin, "limited").await;
    assert_eq!(status["types"], json!([]), "no watch opened: {status}");
    assert_eq!(status["objectsSynced"], 0, "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("syncer.limits.watches_per_cluster"),
        "the status says why: {status}"
    );
    assert!(
        karpor
            .logs()
            .contains("(syncer.limits.watches_per_cluster)"),
        "the log names the limit"
    );

    // A rule that fits replaces the built-in ones: its one watch opens, the cluster syncs.
    let ns = kube_name("limits");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "kept"}}),
    )
    .await;
    let narrow = json!({
        "clusters": "*",
        "resources": [{"group": "", "version": "v1", "resource": "configmaps"}],
        "namespaces": [ns],
    });
    let (code, answer) = admin
        .call("POST", "/rest-api/v1/sync-rule/narrow", Some(narrow))
        .await;
    assert_eq!(code, 201, "{answer}");
    wait_for(LIMIT, "the cluster syncs under rules that fit", || async {
        sync_status(&admin, "limited").await["state"] == "synced"
    })
    .await;
    let status = sync_status(&admin, "limited").await;
    assert_eq!(
        status["types"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert_eq!(status["reason"], Value::Null, "{status}");

    stop.store(true, Ordering::SeqCst);
    let slowest = livez.join().unwrap();
    eprintln!("/livez throughout: slowest {slowest:?}");
    assert!(slowest < LIVEZ_BOUND, "/livez took {slowest:?}");
}
