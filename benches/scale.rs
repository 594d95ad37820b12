//! What sharing the clusters costs the metadata store (`cargo bench --bench scale`, with
//! `source target/test-services/env.sh`): three `karpor syncer` processes on a private
//! etcd and a private Elasticsearch-API server, first 30 and then 300 registered clusters.
//! The clusters' API servers are unreachable on purpose (`127.0.0.1:1`): their syncs
//! retry quietly, so what is measured is membership alone: leases, members and claims.
//! Reported per registration count, once every cluster is claimed and settled: metadata store
//! operations per second summed over the syncers (writes: join, renew, claim, release,
//! record writes; reads: members, claims, lists), from the syncers' own
//! `karpor_metastore_operations_total`, over 20 s; the claims each holds; its RSS.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use karpor_metastore::MetastoreConfig;
use karpor_testkit::process::{get, import, Karpor, Spawn};
use karpor_testkit::services::{Elastic, Etcd};
use serde_json::json;

const SYNCERS: [&str; 3] = ["s1", "s2", "s3"];
const WINDOW: Duration = Duration::from_secs(20);
const WRITES: [&str; 8] = [
    "join", "renew", "leave", "claim", "release", "create", "update", "delete",
];

const UNREACHABLE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: bench}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

/// `operation` → count, summed over the outcomes.
async fn operations(syncer: &Karpor) -> BTreeMap<String, f64> {
    let (_, body) = get(&syncer.url("/metrics")).await;
    let mut counts = BTreeMap::new();
    for line in body.lines() {
        let Some(labels) = line.strip_prefix("karpor_metastore_operations_total{") else {
            continue;
        };
        let Some(op) = labels
            .split(',')
            .find_map(|kv| kv.strip_prefix("operation=\""))
            .and_then(|v| v.split('"').next())
        else {
            continue;
        };
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *counts.entry(op.to_owned()).or_default() += value;
    }
    counts
}

/// Claims and releases so far, summed over the syncers.
async fn handovers(syncers: &[Karpor]) -> f64 {
    let all = futures::future::join_all(syncers.iter().map(operations)).await;
    all.iter()
        .flat_map(|ops| ["claim", "release"].map(|op| ops.get(op).copied().unwrap_or(0.0)))
        .sum()
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let etcd = Etcd::start().expect("etcd: source target/test-services/env.sh");
    let es =
        Elastic::start().expect("the Elasticsearch-API server: source target/test-services/env.sh");
    let dir = tempfile::tempdir().unwrap();
    let metadata = format!(
        "{{backend: etcd, etcd: {{endpoints: ['{}'], prefix: '/bench'}}}}",
        etcd.url()
    );
    let head = format!(
        "metadata: {metadata}\nstorage: {{backend: elasticsearch, url: '{}', index: bench}}\n",
        es.url()
    );
    let store =
        karpor_metastore::connect(&serde_yaml::from_str::<MetastoreConfig>(&metadata).unwrap())
            .await
            .unwrap();
    let syncers: Vec<Karpor> = SYNCERS
        .iter()
        .map(|name| {
            let config = format!("{head}syncer: {{member: {name}}}\n");
            let dir = dir.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            Spawn::syncer(&config).in_dir(&dir).start()
        })
        .collect();
    println!("| registered clusters | writes/s (all syncers) | reads/s (all syncers) | claims per syncer | RSS per syncer |");
    println!("|---|---|---|---|---|");
    let mut registered = 0;
    for count in [30, 300] {
        let names: Vec<String> = (registered..count).map(|i| format!("c{i:03}")).collect();
        let clusters: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), UNREACHABLE)).collect();
        import(dir.path(), &head, &clusters, json!([]));
        registered = count;
        let started = Instant::now();
        loop {
            let claims = store.claims().await.unwrap();
            if claims.len() == count {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{} of {count} claimed",
                claims.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Past the claiming: steady once an ownership tick passes with no claim or
        // release anywhere.
        let deadline = Instant::now() + Duration::from_secs(60);
        let tick = karpor_syncer::SyncSettings::default().ownership_tick;
        let mut moved = handovers(&syncers).await;
        loop {
            tokio::time::sleep(tick).await;
            let now = handovers(&syncers).await;
            if now == moved {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "clusters still moving after 60 s"
            );
            moved = now;
        }
        let before: Vec<_> = futures::future::join_all(syncers.iter().map(operations)).await;
        tokio::time::sleep(WINDOW).await;
        let after: Vec<_> = futures::future::join_all(syncers.iter().map(operations)).await;
        let (mut writes, mut reads) = (0.0, 0.0);
        let mut per_op: BTreeMap<&str, f64> = BTreeMap::new();
        for (b, a) in before.iter().zip(&after) {
            for (op, n) in a {
                let delta = n - b.get(op).copied().unwrap_or(0.0);
                *per_op.entry(op.as_str()).or_default() += delta / WINDOW.as_secs_f64();
                if WRITES.contains(&op.as_str()) {
                    writes += delta;
                } else {
                    reads += delta;
                }
            }
        }
        eprintln!("{count} registered, operations per second: {per_op:.1?}");
        let mut held: BTreeMap<String, usize> = BTreeMap::new();
        for claim in store.claims().await.unwrap() {
            *held.entry(claim.member).or_default() += 1;
        }
        let rss: Vec<String> = syncers
            .iter()
            .map(|s| format!("{:.1} MiB", rss_mib(s.pid())))
            .collect();
        let secs = WINDOW.as_secs_f64();
        println!(
            "| {count} | {:.1} | {:.1} | {} | {} |",
            writes / secs,
            reads / secs,
            SYNCERS
                .iter()
                .map(|s| held.get(*s).copied().unwrap_or(0).to_string())
                .collect::<Vec<_>>()
                .join(" / "),
            rss.join(" / ")
        );
    }
}
