//! Ingest rate and query latency at 100,000 Pod-shaped documents
//! (`cargo bench -p karpor-storage --bench storage_search`): the embedded backend, and the
//! Elasticsearch-API server for reference when `KARPOR_TEST_ES_URL` is set
//! (`source target/test-services/env.sh`). One run, one client.
//!
//! Each document carries the audit findings the auditors make of its object (a fifth of
//! the pods privileged, a third without probes, ...), and the audit totals of a scope
//! (what `/insight/score` and `/insight/audit` sum) are timed beside the searches.
//!
//! `KARPOR_BENCH_DOCS` sets the document count (default 100,000) and `KARPOR_BENCH_RUNS`
//! the runs a query (default 100), for quick iterations and for Elasticsearch-API servers
//! too slow for 100,000; `KARPOR_BENCH_DIR` keeps the SQLite file there (it must not
//! exist yet) for `EXPLAIN QUERY PLAN` afterwards, and with `KARPOR_BENCH_REUSE=1` an
//! existing file there is queried again without writing.

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use karpor_search::{keyword, parse, parse_table, Expr, Field, Op, Query, Shape, Value};
use karpor_storage::{
    connect, ElasticConfig, RefreshPolicy, ResourceDocument, Storage, StorageConfig, StorageError,
};
use serde_json::json;
use time::macros::datetime;

const DOCUMENTS: usize = 100_000;
const BATCH: usize = 500;
// 100 runs so that p99 is not simply the worst run; one more before them, not counted,
// prepares the statements.
const RUNS: usize = 100;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("{name} is a whole number"))
        })
        .unwrap_or(default)
}
const PAGE: u64 = 20;

fn pod(i: usize) -> ResourceDocument {
    let app = format!("app-{}", i % 200);
    let namespace = format!("ns-{}", i % 50);
    let name = format!("{app}-{:08x}", i.wrapping_mul(2_654_435_761) % 0xffff_ffff);
    let labels = BTreeMap::from([
        ("app".to_owned(), app.clone()),
        (
            "tier".to_owned(),
            ["fe", "be", "db"][(i / 3) % 3].to_owned(),
        ),
        ("pod-template-hash".to_owned(), format!("{:x}", i % 4096)),
    ]);
    let image = ["nginx:1.25", "redis:7", "postgres:16", "envoy:1.30"][i % 4];
    let created = datetime!(2026-01-01 00:00:00 UTC) + time::Duration::seconds(i as i64 * 13);
    let mut container = json!({
        "name": app,
        "image": image,
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "MODE", "value": "production"}, {"name": "REGION", "value": "eu-west-1"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "500m", "memory": "512Mi"}},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}},
        "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false}
    });
    if i.is_multiple_of(5) {
        container["securityContext"] = json!({"privileged": true});
    }
    if i.is_multiple_of(3) {
        container.as_object_mut().unwrap().remove("readinessProbe");
    }
    let object = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "nodeName": format!("node-{}", i % 40),
            "serviceAccountName": "default",
            "hostNetwork": i.is_multiple_of(97),
            "containers": [container]
        },
        "status": {"phase": "Running", "podIP": format!("10.{}.{}.{}", i % 250, (i / 250) % 250, i % 200),
                   "conditions": [{"type": "Ready", "status": "True"}]}
    });
    let issues = karpor_audit::audit(&object, &karpor_audit::AuditConfig::default());
    ResourceDocument {
        cluster: format!("cluster-{}", i % 3),
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        namespace: namespace.clone(),
        name: name.clone(),
        uid: format!("{i:08}-0000-4000-8000-000000000000"),
        labels: labels.clone(),
        annotations: BTreeMap::from([("kubernetes.io/psp".to_owned(), "restricted".to_owned())]),
        owner_references: vec![json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": format!("{app}-rs"), "uid": format!("rs-{}", i % 200)})],
        creation_timestamp: Some(created),
        deletion_timestamp: None,
        resource_version: (1_000_000 + i).to_string(),
        sync_at: created,
        deleted: false,
        object,
        issues,
        refs: Vec::new(),
        history: None,
    }
}

fn queries() -> Vec<(&'static str, Query)> {
    let sql = |s| parse(s).unwrap();
    vec![
        ("kind and namespace", sql("select * from resources where kind = 'pod' and namespace = 'ns-7'")),
        ("one label", sql("select * from resources where labels.app = 'app-42'")),
        ("three filters", sql("select * from resources where cluster = 'cluster-1' and labels.tier = 'fe' and namespace in ('ns-1', 'ns-2', 'ns-3')")),
        ("name prefix", sql("select * from resources where name like 'app-17-%'")),
        ("time range, newest first", sql("select * from resources where creationTimestamp > '2026-01-10T00:00:00Z' order by creationTimestamp desc")),
        ("full text", sql("select * from resources where contains(content, 'postgres 16')")),
        ("full text and filter", sql("select * from resources where contains(content, 'redis') and namespace = 'ns-9'")),
        ("not a label", sql("select * from resources where not labels.tier = 'db' and cluster = 'cluster-2'")),
        ("deep page by name", sql("select * from resources order by name limit 20 offset 5000")),
        ("keyword", keyword("app-123").unwrap()),
    ]
}

/// Answers beyond lists, as `/search/rows` asks storage for them: a count is an exact
/// total (a page of none), a group is `terms`.
fn aggregates() -> Vec<(&'static str, &'static str)> {
    vec![
        ("count: everything", "select count(*) from resources"),
        ("count: one label", "select count(*) from resources where labels.app = 'app-42'"),
        ("groups: kinds", "select kind, count(*) from resources group by kind"),
        ("groups: high severity by namespace", "select namespace, count(*) from resources where kind = 'Pod' and severity = 'high' group by namespace order by count(*) desc limit 10"),
        ("groups: apps in a cluster", "select labels.app, count(*) from resources where cluster = 'cluster-1' group by labels.app order by count(*) desc limit 10"),
        ("groups: rules in a namespace", "select issue, count(*) from resources where namespace = 'ns-7' group by issue"),
    ]
}

async fn measure_aggregates(storage: &Arc<dyn Storage>, runs: usize) {
    println!("\n| aggregate | rows | first row | p50 | p99 |");
    println!("|---|---|---|---|---|");
    for (label, sql) in aggregates() {
        let table = parse_table(sql).unwrap();
        let answer = || async {
            match &table.shape {
                Shape::Count => storage
                    .search(&table.query, 0, 0)
                    .await
                    .map(|found| (1, found.total.to_string())),
                Shape::Groups { by, limit, .. } => {
                    let buckets = storage.terms(by, &table.query, *limit as usize).await?;
                    let first = buckets.first().map(|b| format!("{} {}", b.key, b.count));
                    Ok((buckets.len(), first.unwrap_or_default()))
                }
                Shape::Columns(_) => unreachable!("projections are timed as searches"),
            }
        };
        let (rows, first) = answer().await.unwrap();
        let mut latencies = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            answer().await.unwrap();
            latencies.push(t.elapsed());
        }
        latencies.sort_unstable();
        println!(
            "| {label} | {rows} | {first} | {:.1} ms | {:.1} ms |",
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99)
        );
    }
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e3
}

/// Scopes whose audit totals are timed: everything, one cluster, one namespace.
fn audit_scopes() -> Vec<(&'static str, Query)> {
    let sql = |s| parse(s).unwrap();
    vec![
        ("score: everything", sql("select * from resources")),
        (
            "score: one cluster",
            sql("select * from resources where cluster = 'cluster-1'"),
        ),
        (
            "score: one namespace",
            sql("select * from resources where cluster = 'cluster-1' and namespace = 'ns-7'"),
        ),
        (
            "findings: one rule",
            sql("select * from resources where issue = 'privileged' and cluster = 'cluster-1'"),
        ),
    ]
}

/// `query` within a viewer's scope of 10 of the 50 namespaces: the term karpor's API adds
/// (`pkg/api/src/scope.rs`, written out here as storage cannot depend on the API): the
/// namespaces or their Namespace objects, and no Secrets.
fn scoped(query: &Query) -> Query {
    let namespaces: Vec<Value> = (0..10).map(|i| Value::Text(format!("ns-{i}"))).collect();
    let kind = |kind: &str| Expr::Compare {
        field: Field::Kind,
        op: Op::Eq,
        value: Value::Text(kind.to_owned()),
    };
    let scope = Expr::And(vec![
        Expr::Or(vec![
            Expr::In {
                field: Field::Namespace,
                values: namespaces.clone(),
                negated: false,
            },
            Expr::And(vec![
                Expr::Compare {
                    field: Field::Namespace,
                    op: Op::Eq,
                    value: Value::Text(String::new()),
                },
                kind("Namespace"),
                Expr::In {
                    field: Field::Name,
                    values: namespaces,
                    negated: false,
                },
            ]),
        ]),
        Expr::Not(Box::new(kind("Secret"))),
    ]);
    let mut scoped = query.clone();
    scoped.filter = Expr::And(vec![query.filter.clone(), Expr::Scope(Box::new(scope))]);
    scoped
}

/// Each query unscoped and scoped, their runs interleaved so that the machine's load
/// falls on both alike; the ratio of their p99s is what the scope costs.
async fn measure_scoped(storage: &Arc<dyn Storage>, runs: usize) {
    println!("
| query, scope of 10 of 50 namespaces | matches | unscoped p99 | scoped p50 | scoped p99 | p99 ratio |");
    println!("|---|---|---|---|---|---|");
    for (label, query) in queries() {
        let within = scoped(&query);
        let (mut plain, mut narrowed) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        let mut matches = storage.search(&within, 0, PAGE).await.unwrap().total;
        storage.search(&query, 0, PAGE).await.unwrap();
        for _ in 0..runs {
            let t = Instant::now();
            storage.search(&query, 0, PAGE).await.unwrap();
            plain.push(t.elapsed());
            let t = Instant::now();
            matches = storage.search(&within, 0, PAGE).await.unwrap().total;
            narrowed.push(t.elapsed());
        }
        plain.sort_unstable();
        narrowed.sort_unstable();
        let (p99, scoped_p99) = (percentile(&plain, 0.99), percentile(&narrowed, 0.99));
        println!(
            "| {label} | {matches} | {p99:.1} ms | {:.1} ms | {scoped_p99:.1} ms | {:.2} |",
            percentile(&narrowed, 0.5),
            scoped_p99 / p99
        );
    }
}

/// Matches the API's search counts before its total becomes a lower bound
/// (`karpor-api`'s `COUNT_UP_TO`).
const COUNT_UP_TO: u64 = 10_000;

/// The machine's load average (1, 5, 15 minutes), as `/proc/loadavg` says it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `runs` timings of one search, and the total it answered (`+` when a lower bound).
async fn timed<F, Fut>(runs: usize, search: F) -> Result<(Vec<Duration>, String), StorageError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<karpor_storage::SearchResult, StorageError>>,
{
    let mut latencies = Vec::with_capacity(runs);
    let first = search().await?;
    let total = format!("{}{}", first.total, if first.exact { "" } else { "+" });
    for _ in 0..runs {
        let t = Instant::now();
        search().await?;
        latencies.push(t.elapsed());
    }
    latencies.sort_unstable();
    Ok((latencies, total))
}

async fn measure(name: &str, storage: Arc<dyn Storage>, count: usize, runs: usize) {
    if count > 0 {
        ingest(name, &storage, count).await;
    }
    queried(storage, runs).await;
}

async fn ingest(name: &str, storage: &Arc<dyn Storage>, count: usize) {
    let started = Instant::now();
    // Made a batch at a time: a million documents at once would need many gigabytes here.
    for start in (0..count).step_by(BATCH) {
        let batch: Vec<ResourceDocument> = (start..(start + BATCH).min(count)).map(pod).collect();
        storage.upsert(&batch).await.unwrap();
    }
    let took = started.elapsed();
    println!(
        "\n{name}: ingest of {count} documents in batches of {BATCH}: {:.1} s, {:.0} documents/s (load {})\n",
        took.as_secs_f64(),
        count as f64 / took.as_secs_f64(),
        load()
    );
}

async fn queried(storage: Arc<dyn Storage>, runs: usize) {
    println!("| query | matches | p50 | p99 | counted up to {COUNT_UP_TO}: total | p50 | p99 |");
    println!("|---|---|---|---|---|---|---|");
    for (label, query) in queries() {
        // A failed query (a slow server's timeout) is reported in its row; the rest run.
        let exact = timed(runs, || storage.search(&query, 0, PAGE)).await;
        let capped = timed(runs, || {
            storage.search_counted(&query, 0, PAGE, Some(COUNT_UP_TO))
        })
        .await;
        match (exact, capped) {
            (Ok((exact, matches)), Ok((capped, total))) => println!(
                "| {label} | {matches} | {:.1} ms | {:.1} ms | {total} | {:.1} ms | {:.1} ms |",
                percentile(&exact, 0.5),
                percentile(&exact, 0.99),
                percentile(&capped, 0.5),
                percentile(&capped, 0.99)
            ),
            (Err(e), _) | (_, Err(e)) => println!("| {label} | failed: {e} | | | | | |"),
        }
    }
    measure_scoped(&storage, runs).await;
    measure_aggregates(&storage, runs).await;
    println!("\n| audit totals | resources | findings | score | p50 | p99 |");
    println!("|---|---|---|---|---|---|");
    for (label, query) in audit_scopes() {
        let mut latencies = Vec::with_capacity(runs);
        let mut totals = storage.audit_totals(&query).await.unwrap();
        for _ in 0..runs {
            let t = Instant::now();
            totals = storage.audit_totals(&query).await.unwrap();
            latencies.push(t.elapsed());
        }
        latencies.sort_unstable();
        println!(
            "| {label} | {} | {} | {:.2} | {:.1} ms | {:.1} ms |",
            totals.resources,
            totals.findings.total(),
            totals.score(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99)
        );
    }
}

#[tokio::main]
async fn main() {
    let count = setting("KARPOR_BENCH_DOCS", DOCUMENTS);
    let runs = setting("KARPOR_BENCH_RUNS", RUNS);
    println!(
        "{count} Pod documents, {runs} runs a query, first page of {PAGE} with total (load {})",
        load()
    );
    let temp = tempfile::tempdir().unwrap();
    let path = match std::env::var_os("KARPOR_BENCH_DIR") {
        Some(dir) => std::path::PathBuf::from(dir).join("resources.db"),
        None => temp.path().join("resources.db"),
    };
    // An existing file is queried again as it is (KARPOR_BENCH_REUSE=1): a million
    // documents take minutes to write.
    let reuse = std::env::var_os("KARPOR_BENCH_REUSE").is_some();
    assert!(reuse || !path.exists(), "{} exists already", path.display());
    let written = if reuse && path.exists() { 0 } else { count };
    let sqlite = connect(&StorageConfig::Sqlite { path }).await.unwrap();
    measure("sqlite (embedded)", sqlite, written, runs).await;
    match std::env::var("KARPOR_TEST_ES_URL") {
        Ok(url) => {
            let es = connect(&StorageConfig::Elasticsearch(ElasticConfig {
                url,
                username: None,
                password: None,
                index: format!("bench-{}", std::process::id()),
                refresh: RefreshPolicy::WaitFor,
            }))
            .await
            .unwrap();
            measure("Elasticsearch-API server (noida-db)", es, count, runs).await;
        }
        Err(_) => println!("\nElasticsearch-API server: skipped (KARPOR_TEST_ES_URL not set)"),
    }
}
