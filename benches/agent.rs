//! Agent mode's cost (`cargo bench --bench agent`, with `source
//! target/test-services/env.sh`), on the test script's kube-apiserver `a`: N ConfigMaps
//! (default 20,000, `KARPOR_BENCH_OBJECTS`) in a fresh namespace, one sync rule selecting
//! them, and in the same run:
//!
//! - **ingest**: a hub syncing the cluster itself (kubeconfig mode), then a fresh hub whose
//!   agent syncs it, each timed from the cluster's registration (the agent's start) until
//!   its storage counts all N; the agent's rate ÷ the direct rate;
//! - **agent memory**: the agent's resident memory once it holds all N, less that of an
//!   agent of the same build watching an empty namespace, per object;
//! - **lag**: then `KARPOR_BENCH_RATE` changes per second (default 1,000) for 10 s to 500 of
//!   the ConfigMaps, each carrying when it was sent; the hub's storage is read every 50 ms
//!   and each change's lag is the time from its sending to the read that first shows it
//!   (so an upper bound, by up to 50 ms); p50, p99, the rate reached.

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use karpor_storage::{Storage, StorageConfig};
use karpor_testkit::process::{flat_kubeconfig, Karpor, Spawn};
use karpor_testkit::services::free_port;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::{json, Value};

const CHANGED: usize = 500;
const CHANGES_FOR: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);
const LIMIT: Duration = Duration::from_secs(600);

fn configmaps() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn rest(hub: &Karpor, method: reqwest::Method, path: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .request(method, hub.url(&format!("/rest-api/v1{path}")))
        .bearer_auth(hub.local_token())
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{path}: {status} {body}");
    body
}

/// A hub on the embedded stores in `dir`, with an agent listener on `port`, whose one sync
/// rule selects the ConfigMaps of `namespace`.
async fn hub(dir: &Path, port: u16, namespace: &str) -> Karpor {
    let config = format!(
        "shutdown: {{drain_delay: 1s}}\nagents: {{listen: '127.0.0.1:{port}', names: ['127.0.0.1']}}\n"
    );
    let hub = Spawn::serve(&config).in_dir(dir).start();
    let rule = json!({"clusters": "*", "namespaces": [namespace],
        "resources": [{"version": "v1", "resource": "configmaps"}]});
    rest(&hub, reqwest::Method::POST, "/sync-rule/bench", rule).await;
    hub
}

async fn hub_storage(dir: &Path) -> Arc<dyn Storage> {
    karpor_storage::connect(&StorageConfig::Sqlite {
        path: dir.join("data/resources.db"),
    })
    .await
    .unwrap()
}

/// Until `storage` counts `objects` documents of `cluster`.
async fn until_counted(storage: &dyn Storage, cluster: &str, objects: usize) -> Duration {
    let started = Instant::now();
    loop {
        if storage.count(Some(cluster)).await.unwrap_or(0) >= objects as u64 {
            return started.elapsed();
        }
        assert!(started.elapsed() < LIMIT, "{cluster}: not all indexed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `cluster` registered in agent mode on `hub`, and its agent started in `dir` with the
/// member `kubeconfig`.
async fn agent(hub: &Karpor, port: u16, cluster: &str, dir: &Path, kubeconfig: &str) -> Karpor {
    rest(
        hub,
        reqwest::Method::POST,
        &format!("/cluster/{cluster}"),
        json!({"mode": "agent"}),
    )
    .await;
    let issued = rest(
        hub,
        reqwest::Method::POST,
        &format!("/cluster/{cluster}/agent-token"),
        json!({}),
    )
    .await;
    let issued = &issued["data"];
    let member = dir.join("member.kubeconfig");
    std::fs::write(&member, kubeconfig).unwrap();
    let config = format!(
        "shutdown: {{drain_delay: 1s}}\n\
         agent: {{hub: 'https://127.0.0.1:{port}', pin: '{}', token: '{}', kubeconfig: '{}', \
         state_file: '{}', plan_interval: 1s}}\n",
        issued["pin"].as_str().unwrap(),
        issued["token"].as_str().unwrap(),
        member.display(),
        dir.join("agent-state.json").display()
    );
    Spawn {
        command: "agent",
        ..Spawn::serve(&config)
    }
    .in_dir(dir)
    .start()
}

/// Lags (from sending to first seen in storage) of changes sent at `rate` per second.
async fn lags(
    api: &Api<DynamicObject>,
    storage: Arc<dyn Storage>,
    cluster: &str,
    ns: &str,
    rate: usize,
) -> (Vec<Duration>, f64) {
    let sent_changes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sender = {
        let (api, sent) = (api.clone(), sent_changes.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let every = Duration::from_secs_f64(1.0 / rate as f64);
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut seq = 0usize;
            let mut inflight = futures::stream::FuturesUnordered::new();
            while started.elapsed() < CHANGES_FOR {
                tokio::select! {
                    _ = ticks.tick() => {
                        if inflight.len() < 64 {
                            seq += 1;
                            let api = api.clone();
                            let name = format!("cm-{:06}", seq % CHANGED);
                            let patch = json!({"data": {"seq": seq.to_string(), "sent": now_nanos().to_string()}});
                            inflight.push(async move {
                                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await.map(|_| ())
                            });
                        }
                    }
                    Some(done) = inflight.next(), if !inflight.is_empty() => {
                        if done.is_ok() {
                            sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            }
            while let Some(done) = inflight.next().await {
                if done.is_ok() {
                    sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            started.elapsed()
        })
    };
    let query = karpor_search::parse(&format!(
        "select * from resources where cluster = '{cluster}' and namespace = '{ns}' and kind = 'ConfigMap' and labels.changed = 'yes'"
    ))
    .unwrap();
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut lags = Vec::new();
    let polling = Instant::now();
    while polling.elapsed() < CHANGES_FOR + Duration::from_secs(5) {
        let page = storage
            .search(&query, 0, CHANGED as u64 + 10)
            .await
            .unwrap();
        let now = now_nanos();
        for document in page.items {
            let data = &document.object["data"];
            let (Some(seq), Some(sent)) = (
                data["seq"].as_str().and_then(|s| s.parse::<u64>().ok()),
                data["sent"].as_str().and_then(|s| s.parse::<u128>().ok()),
            ) else {
                continue;
            };
            if seen.get(&document.name).is_none_or(|last| *last < seq) {
                seen.insert(document.name.clone(), seq);
                lags.push(Duration::from_nanos(now.saturating_sub(sent) as u64));
            }
        }
        tokio::time::sleep(POLL).await;
    }
    let took = sender.await.unwrap();
    let reached =
        sent_changes.load(std::sync::atomic::Ordering::Relaxed) as f64 / took.as_secs_f64();
    lags.sort();
    (lags, reached)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let objects = env_number("KARPOR_BENCH_OBJECTS", 20_000);
    let rate = env_number("KARPOR_BENCH_RATE", 1_000);
    let path = std::env::var("KARPOR_TEST_KUBECONFIG_A")
        .expect("KARPOR_TEST_KUBECONFIG_A: source target/test-services/env.sh");
    let kubeconfig = flat_kubeconfig(&path);
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = Client::try_from(config).unwrap();
    let namespaces = ApiResource {
        kind: "Namespace".into(),
        plural: "namespaces".into(),
        ..configmaps()
    };
    let id = std::process::id();
    let (ns, empty) = (format!("bench-agent-{id}"), format!("bench-empty-{id}"));
    for name in [&ns, &empty] {
        let namespace: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .unwrap();
        Api::<DynamicObject>::all_with(client.clone(), &namespaces)
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &configmaps());
    let started = Instant::now();
    futures::stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:06}"), "labels": {"app": format!("app-{}", i % 50), "tier": "be",
                        "changed": if i < CHANGED { "yes" } else { "no" }}},
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

    // The hub's own syncer.
    let direct_dir = tempfile::tempdir().unwrap();
    let direct_hub = hub(direct_dir.path(), free_port(), &ns).await;
    let direct_storage = hub_storage(direct_dir.path()).await;
    rest(
        &direct_hub,
        reqwest::Method::POST,
        "/cluster/direct",
        json!({"kubeConfig": kubeconfig}),
    )
    .await;
    let direct = until_counted(direct_storage.as_ref(), "direct", objects).await;
    drop(direct_hub);
    eprintln!("direct: {direct:?}");

    // An agent of a cluster whose namespace is empty: the baseline of its memory.
    let empty_dir = tempfile::tempdir().unwrap();
    let empty_port = free_port();
    let empty_hub = hub(empty_dir.path(), empty_port, &empty).await;
    let agent_dir = tempfile::tempdir().unwrap();
    let idle = agent(
        &empty_hub,
        empty_port,
        "idle",
        agent_dir.path(),
        &kubeconfig,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let baseline = rss_kib(idle.pid());
    drop(idle);
    drop(empty_hub);

    // The agent.
    let hub_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let agent_hub = hub(hub_dir.path(), port, &ns).await;
    let storage = hub_storage(hub_dir.path()).await;
    let agent_dir = tempfile::tempdir().unwrap();
    let pushing = agent(&agent_hub, port, "pushed", agent_dir.path(), &kubeconfig).await;
    let through_agent = until_counted(storage.as_ref(), "pushed", objects).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let synced_rss = rss_kib(pushing.pid());
    eprintln!("through the agent: {through_agent:?}");

    let (lags, reached) = lags(&api, storage.clone(), "pushed", &ns, rate).await;
    let direct_rate = objects as f64 / direct.as_secs_f64();
    let agent_rate = objects as f64 / through_agent.as_secs_f64();
    let per_object = (synced_rss.saturating_sub(baseline) * 1024) as f64 / objects as f64;
    println!("| objects | direct: to all indexed | objects/s | agent: to all indexed | objects/s | agent ÷ direct | agent RSS idle | agent RSS at {objects} | per object |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {objects} | {:.1} s | {direct_rate:.0} | {:.1} s | {agent_rate:.0} | {:.2} | {:.1} MiB | {:.1} MiB | {per_object:.0} B |",
        direct.as_secs_f64(),
        through_agent.as_secs_f64(),
        agent_rate / direct_rate,
        baseline as f64 / 1024.0,
        synced_rss as f64 / 1024.0,
    );
    println!(
        "\nLag, {rate} changes/s asked for 10 s ({reached:.0}/s reached), {} changes seen: p50 {:?}, p99 {:?}, max {:?}",
        lags.len(),
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or_default()
    );
    drop(pushing);
    drop(agent_hub);
    // Nothing left behind in the shared test cluster: no controller manager empties a
    // deleted namespace, so its ConfigMaps go first (in rounds: a large collection's
    // delete may time out part way), then the namespace is finalized.
    let kube = karpor_testkit::cluster::Kube::from_text(kubeconfig.clone()).await;
    for name in [&ns, &empty] {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), name, &configmaps());
        for _ in 0..20 {
            let _ = api
                .delete_collection(&Default::default(), &Default::default())
                .await;
            let left = api.list(&kube::api::ListParams::default().limit(1)).await;
            if left.is_ok_and(|l| l.items.is_empty()) {
                break;
            }
        }
        kube.delete_namespace(name).await;
    }
}
