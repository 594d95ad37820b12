//! History on the embedded backend (`cargo bench -p karpor-storage --bench history`):
//!
//! 1. What a revision costs: a kubectl-shaped Deployment (managedFields trimmed, as the
//!    syncer stores it) changed by `kubectl set image` again and again, written through
//!    `upsert` with history on and, in a second fresh file, off; the patch bytes
//!    `history_sizes()` reports and the file's growth (used pages after a checkpoint, on
//!    minus off, and `dbstat`'s pages of the revisions table and its indexes) per revision.
//! 2. Reads at scale: `KARPOR_BENCH_REVISIONS` revisions (default 1,000,000) written
//!    straight into `revisions` as the backend writes them (through `upsert` it would take
//!    a quarter of an hour), over 3 clusters, 50 namespaces and 20,000 objects in the last
//!    7 days; then "what changed in a namespace in the last hour" (`changes` and
//!    `change_counts`) and an object's history (`history(name, 50)`), each against a
//!    document read by id in the same run.
//!
//! `KARPOR_BENCH_UPDATES` sets the updates of part 1 (default 10,000, over 1,000
//! Deployments), `KARPOR_BENCH_RUNS` the runs a query (default 300), and
//! `KARPOR_BENCH_DIR` keeps the files there for `EXPLAIN QUERY PLAN` afterwards.
//! `KARPOR_BENCH_INDEX` adds an index to a copy of the filled file and times the reads
//! on the copy too (an SQL statement, e.g. `CREATE INDEX ... ON revisions (...)`).

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use karpor_search::{Expr, Field, Op, Value as SearchValue};
use karpor_storage::{
    connect, ChangeQuery, HistoryNote, ObjectName, ResourceDocument, Storage, StorageConfig,
};
use serde_json::{json, Value};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{AssertSqlSafe, ConnectOptions, Row};
use time::OffsetDateTime;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("{name} is a whole number"))
        })
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e3
}

const WEEK: time::Duration = time::Duration::days(7);

/// A Deployment as `kubectl apply` leaves it and the syncer stores it: managedFields
/// gone, the last-applied annotation gone (the syncer's trimming), the controller's
/// status in place. About 3.5 KB of JSON.
fn deployment(i: usize, image: usize, version: u64) -> Value {
    let app = format!("shop-{i:04}");
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": app,
            "namespace": format!("team-{}", i % 20),
            "uid": format!("{i:08x}-3f1c-4e2a-9b7d-5c2e8a1f{:04x}", i % 0xffff),
            "resourceVersion": version.to_string(),
            "generation": image + 1,
            "creationTimestamp": "2026-11-02T09:14:27Z",
            "labels": {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
                       "app.kubernetes.io/managed-by": "kubectl", "team": format!("team-{}", i % 20)},
            "annotations": {"deployment.kubernetes.io/revision": (image + 1).to_string(),
                            "shop.example.com/owner": "payments@example.com"}
        },
        "spec": {
            "replicas": 3,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {
                    "creationTimestamp": null,
                    "labels": {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop"},
                    "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
                },
                "spec": {
                    "serviceAccountName": app,
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "app",
                        "image": format!("registry.example.com/shop/{app}:1.{}.{}", image / 10, image % 10),
                        "imagePullPolicy": "IfNotPresent",
                        "args": ["--config=/etc/shop/config.yaml", "--log-format=json"],
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                                  {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                        "env": [{"name": "SHOP_ENV", "value": "production"},
                                {"name": "SHOP_REGION", "value": "eu-west-1"},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                                {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "password"}}}],
                        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                      "limits": {"cpu": "1", "memory": "512Mi"}},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http", "scheme": "HTTP"},
                                           "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                        "livenessProbe": {"httpGet": {"path": "/livez", "port": "http", "scheme": "HTTP"},
                                          "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 1,
                                          "successThreshold": 1, "failureThreshold": 3},
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/shop", "readOnly": true},
                                         {"name": "tmp", "mountPath": "/tmp"}],
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File"
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                                {"name": "tmp", "emptyDir": {}}]
                }
            }
        },
        "status": {
            "observedGeneration": image + 1,
            "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability.",
                 "lastUpdateTime": "2026-11-02T09:14:41Z", "lastTransitionTime": "2026-11-02T09:14:41Z"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": format!("ReplicaSet \"{app}-{:010x}\" has successfully progressed.", (i * 7919 + image * 104_729) % 0xff_ffff_ffff),
                 "lastUpdateTime": format!("2026-12-01T{:02}:{:02}:{:02}Z", image % 24, image % 60, i % 60),
                 "lastTransitionTime": "2026-11-02T09:14:27Z"}
            ]
        }
    })
}

fn document(object: Value, history: bool, at: OffsetDateTime) -> ResourceDocument {
    let meta = &object["metadata"];
    let text = |v: &Value| v.as_str().unwrap().to_owned();
    let map = |v: &Value| -> BTreeMap<String, String> {
        v.as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect())
            .unwrap_or_default()
    };
    ResourceDocument {
        cluster: "prod".to_owned(),
        api_version: text(&object["apiVersion"]),
        kind: text(&object["kind"]),
        namespace: text(&meta["namespace"]),
        name: text(&meta["name"]),
        uid: text(&meta["uid"]),
        labels: map(&meta["labels"]),
        annotations: map(&meta["annotations"]),
        owner_references: Vec::new(),
        creation_timestamp: None,
        deletion_timestamp: None,
        resource_version: text(&meta["resourceVersion"]),
        sync_at: at,
        deleted: false,
        issues: Vec::new(),
        refs: Vec::new(),
        history: history.then(|| HistoryNote {
            keep_until: at + WEEK,
            late: false,
            managers: vec!["kubectl-set".to_owned()],
            preexisting: false,
        }),
        object,
    }
}

async fn raw(path: &Path) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap()
}

async fn scalar(conn: &mut SqliteConnection, sql: &str) -> i64 {
    sqlx::query(AssertSqlSafe(sql.to_owned()))
        .fetch_one(&mut *conn)
        .await
        .unwrap()
        .try_get(0)
        .unwrap()
}

/// Bytes of used pages (all pages minus free ones) after a full checkpoint.
async fn used_bytes(path: &Path) -> i64 {
    let mut conn = raw(path).await;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
    let pages = scalar(&mut conn, "PRAGMA page_count").await;
    let free = scalar(&mut conn, "PRAGMA freelist_count").await;
    let size = scalar(&mut conn, "PRAGMA page_size").await;
    (pages - free) * size
}

/// Bytes of the pages of the revisions table and its indexes, where SQLite was built
/// with `dbstat`.
async fn revision_pages(path: &Path) -> Option<i64> {
    let mut conn = raw(path).await;
    sqlx::query(
        "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'revisions' \
         OR name IN (SELECT name FROM sqlite_master WHERE tbl_name = 'revisions')",
    )
    .fetch_one(&mut conn)
    .await
    .ok()
    .map(|row| row.try_get(0).unwrap())
}

/// Part 1: the cost of a revision of a Deployment's image change.
async fn per_revision(dir: &Path, updates: usize) {
    let objects = 1_000.min(updates);
    let rounds = updates / objects;
    let now = OffsetDateTime::now_utc();
    let size = deployment(0, 0, 1).to_string().len();
    let one = {
        let before = deployment(0, 0, 1);
        let after = deployment(0, 1, 2);
        serde_json::to_string(&json_patch::diff(&after, &before)).unwrap()
    };
    println!(
        "\nA Deployment of {size} bytes of JSON; one image change's patch back: {} bytes: {one}",
        one.len()
    );
    let mut figures = Vec::new();
    for history in [true, false] {
        let path = dir.join(format!("revisions-{history}.db"));
        let storage = connect(&StorageConfig::Sqlite { path: path.clone() })
            .await
            .unwrap();
        let mut version = 1_000_u64;
        let mut next = || {
            version += 1;
            version
        };
        let created: Vec<ResourceDocument> = (0..objects)
            .map(|i| document(deployment(i, 0, next()), history, now))
            .collect();
        for batch in created.chunks(500) {
            storage.upsert(batch).await.unwrap();
        }
        let revisions_before: u64 = storage
            .history_sizes()
            .await
            .unwrap()
            .iter()
            .map(|s| s.revisions)
            .sum();
        let (used_before, pages_before) = (used_bytes(&path).await, revision_pages(&path).await);
        let started = Instant::now();
        for round in 1..=rounds {
            let changed: Vec<ResourceDocument> = (0..objects)
                .map(|i| {
                    let at = now + time::Duration::seconds(round as i64);
                    document(deployment(i, round, next()), history, at)
                })
                .collect();
            for batch in changed.chunks(500) {
                storage.upsert(batch).await.unwrap();
            }
        }
        let took = started.elapsed();
        let sizes = storage.history_sizes().await.unwrap();
        let revisions: u64 = sizes.iter().map(|s| s.revisions).sum::<u64>() - revisions_before;
        let bytes: u64 = sizes.iter().map(|s| s.bytes).sum();
        let (used_after, pages_after) = (used_bytes(&path).await, revision_pages(&path).await);
        figures.push((
            history,
            revisions,
            bytes,
            used_after - used_before,
            pages_before.zip(pages_after).map(|(b, a)| a - b),
            took,
        ));
    }
    let updates = (objects * rounds) as f64;
    println!("\n{objects} Deployments, each changed {rounds} times ({updates} updates)\n");
    println!("| history | revisions written | patch bytes per revision | file growth per update | revisions table and indexes per revision | updates/s |");
    println!("|---|---|---|---|---|---|");
    for (history, revisions, bytes, growth, pages, took) in &figures {
        let per = |b: f64| b / (*revisions).max(1) as f64;
        println!(
            "| {} | {revisions} | {:.0} B | {:.0} B | {} | {:.0} |",
            if *history { "on" } else { "off" },
            per(*bytes as f64),
            *growth as f64 / updates,
            pages.map_or("n/a".to_owned(), |p| format!("{:.0} B", per(p as f64))),
            updates / took.as_secs_f64()
        );
    }
    let (on, off) = (&figures[0], &figures[1]);
    println!(
        "\nOn-disk bytes per revision (growth on minus off): {:.0} B, against a document of {size} B ({:.1} %)",
        (on.3 - off.3) as f64 / updates,
        (on.3 - off.3) as f64 / updates / size as f64 * 100.0
    );
}

const CLUSTERS: usize = 3;
const NAMESPACES: usize = 50;
const OBJECTS: usize = 20_000;
const KINDS: [(&str, &str); 5] = [
    ("apps/v1", "Deployment"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Secret"),
];

struct Object {
    cluster: String,
    namespace: String,
    api_version: &'static str,
    kind: &'static str,
    name: String,
    uid: String,
}

fn object(o: usize) -> Object {
    let (api_version, kind) = KINDS[o % KINDS.len()];
    Object {
        cluster: format!("cluster-{}", o % CLUSTERS),
        namespace: format!("ns-{}", (o / CLUSTERS) % NAMESPACES),
        api_version,
        kind,
        name: format!("{}-{o:05}", kind.to_lowercase()),
        uid: format!(
            "{o:08x}-0000-4000-8000-{:012x}",
            o.wrapping_mul(2_654_435_761)
        ),
    }
}

/// The object revision `j` is of: a tenth of the objects (the busy ones) get half of
/// the changes.
fn object_of(j: usize) -> usize {
    let h = (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
    if h.is_multiple_of(2) {
        ((h >> 1) % (OBJECTS as u64 / 10)) as usize * 10
    } else {
        ((h >> 1) % OBJECTS as u64) as usize
    }
}

/// The newest object a filled object's history is rebuilt from: the paths its patches
/// replace are there.
fn filled_object(o: usize, generation: u64, version: u64) -> Value {
    let ob = object(o);
    json!({
        "apiVersion": ob.api_version, "kind": ob.kind,
        "metadata": {"name": ob.name, "namespace": ob.namespace, "uid": ob.uid,
                     "resourceVersion": version.to_string(), "generation": generation,
                     "labels": {"app": format!("app-{}", o % 200)}},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "app", "image": format!("registry.example.com/app-{}:{generation}", o % 200)}]}}}
    })
}

/// Fills `revisions` as `sqlite/history.rs`'s `insert` writes them, in time order:
/// revision `j` is seen at `start + j * step`, its version the etcd revision `base + j`.
/// Returns each object's revision count, newest version and newest generation.
async fn fill(path: &Path, total: usize, now: OffsetDateTime) -> Vec<(u64, u64)> {
    const ROWS: usize = 100; // 17 values a row, within SQLite's 32,766 bound
    let mut conn = raw(path).await;
    let start = now - WEEK;
    let step_ms = (WEEK.whole_milliseconds() as f64 / total as f64).max(1.0);
    let start_ms = (start.unix_timestamp_nanos() / 1_000_000) as i64;
    let base = 10_000_000_u64;
    let mut seen = vec![(0_u64, 0_u64); OBJECTS];
    let row = format!("({})", vec!["?"; 17].join(", "));
    let statement = |rows: usize| {
        format!(
            "INSERT OR IGNORE INTO revisions (cluster, uid, resource_version, version, \
             api_version, kind, kind_lower, namespace, name, change, seen_at, late, managers, \
             back, state, bytes, keep_until) VALUES {}",
            vec![row.as_str(); rows].join(", ")
        )
    };
    let full = statement(ROWS);
    let started = Instant::now();
    let mut j = 0;
    while j < total {
        sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
        let end = (j + 100_000).min(total);
        while j < end {
            let rows = ROWS.min(end - j);
            let text = if rows == ROWS {
                full.clone()
            } else {
                statement(rows)
            };
            let mut query = sqlx::query(AssertSqlSafe(text));
            for j in j..j + rows {
                let o = object_of(j);
                let ob = object(o);
                let version = base + j as u64;
                let seen_at = start_ms + (j as f64 * step_ms) as i64;
                let (count, _) = seen[o];
                let previous = seen[o].1;
                seen[o] = (count + 1, version);
                let (change, back, managers) = if count == 0 {
                    ("created", None, r#"["kubectl-client-side-apply"]"#)
                } else {
                    // From this version back to the one before: generation and image,
                    // and the resourceVersion.
                    let back = json!([
                        {"op": "replace", "path": "/metadata/generation", "value": count},
                        {"op": "replace", "path": "/metadata/resourceVersion", "value": previous.to_string()},
                        {"op": "replace", "path": "/spec/template/spec/containers/0/image",
                         "value": format!("registry.example.com/app-{}:{count}", o % 200)}
                    ])
                    .to_string();
                    (
                        "updated",
                        Some(back),
                        if count % 3 == 0 {
                            r#"["kube-controller-manager"]"#
                        } else {
                            r#"["kubectl-set"]"#
                        },
                    )
                };
                let bytes = back.as_ref().map_or(0, |b| b.len() as i64);
                query = query
                    .bind(ob.cluster)
                    .bind(ob.uid)
                    .bind(version.to_string())
                    .bind(version as i64)
                    .bind(ob.api_version)
                    .bind(ob.kind)
                    .bind(ob.kind.to_lowercase())
                    .bind(ob.namespace)
                    .bind(ob.name)
                    .bind(change)
                    .bind(seen_at)
                    .bind(false)
                    .bind(managers)
                    .bind(back)
                    .bind(None::<String>)
                    .bind(bytes)
                    .bind(seen_at + WEEK.whole_milliseconds() as i64);
            }
            query.execute(&mut conn).await.unwrap();
            j += rows;
        }
        sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
    }
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
    println!(
        "\nFilled {total} revisions in {:.1} s ({:.0} rows/s)",
        started.elapsed().as_secs_f64(),
        total as f64 / started.elapsed().as_secs_f64()
    );
    seen
}

fn namespace_filter(namespace: &str) -> Expr {
    Expr::Compare {
        field: Field::Namespace,
        op: Op::Eq,
        value: SearchValue::Text(namespace.to_owned()),
    }
}

fn cluster_filter(cluster: &str) -> Expr {
    Expr::Compare {
        field: Field::Cluster,
        op: Op::Eq,
        value: SearchValue::Text(cluster.to_owned()),
    }
}

/// Times each read `runs` times, interleaved so the machine's load falls on all alike.
async fn reads(label: &str, storage: &Arc<dyn Storage>, read: &[usize], runs: usize) {
    let now = OffsetDateTime::now_utc();
    let hour = now - time::Duration::hours(1);
    let in_namespace = |i: usize| ChangeQuery {
        filter: namespace_filter(&format!("ns-{}", i % NAMESPACES)),
        since: Some(hour),
        until: None,
        changes: Vec::new(),
    };
    let in_cluster = |i: usize| ChangeQuery {
        filter: cluster_filter(&format!("cluster-{}", i % CLUSTERS)),
        since: Some(hour),
        until: None,
        changes: Vec::new(),
    };
    let fleet = ChangeQuery {
        filter: Expr::All,
        since: None,
        until: None,
        changes: Vec::new(),
    };
    let name = |o: usize| {
        let ob = object(o);
        ObjectName {
            cluster: ob.cluster,
            kind: ob.kind.to_owned(),
            namespace: ob.namespace,
            name: ob.name,
        }
    };
    let labels = [
        "baseline: a document by id (`get`)",
        "a namespace, last hour: `changes`, page of 50 with total",
        "a namespace, last hour: `change_counts`",
        "a namespace, last hour: both (what the page asks)",
        "a cluster, last hour: `changes`, page of 50 with total",
        "the fleet, newest: `changes`, page of 50 with total",
        "an object's history: `history(name, 50)`",
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); labels.len()];
    let mut matched = vec![(0_u64, 0_usize); labels.len()];
    // One round not counted first: statements prepared, pages mapped.
    for i in 0..=runs {
        let o = read[i % read.len()];
        let ob = object(o);
        let mut timed = Vec::with_capacity(labels.len());
        let t = Instant::now();
        let got = storage.get(&ob.cluster, &ob.uid).await.unwrap();
        timed.push((t.elapsed(), u64::from(got.is_some()), 1));
        let t = Instant::now();
        let page = storage.changes(&in_namespace(i), 0, 50).await.unwrap();
        let page_took = t.elapsed();
        timed.push((page_took, page.total, page.items.len()));
        let t = Instant::now();
        let counts = storage.change_counts(&in_namespace(i)).await.unwrap();
        let counts_took = t.elapsed();
        timed.push((
            counts_took,
            counts.by_change.iter().map(|b| b.count).sum(),
            0,
        ));
        timed.push((page_took + counts_took, page.total, page.items.len()));
        let t = Instant::now();
        let page = storage.changes(&in_cluster(i), 0, 50).await.unwrap();
        timed.push((t.elapsed(), page.total, page.items.len()));
        let t = Instant::now();
        let page = storage.changes(&fleet, 0, 50).await.unwrap();
        timed.push((t.elapsed(), page.total, page.items.len()));
        let t = Instant::now();
        let history = storage.history(&name(o), 50).await.unwrap();
        let rebuilt = history.iter().filter(|r| r.object.is_some()).count();
        timed.push((t.elapsed(), rebuilt as u64, history.len()));
        if i == 0 {
            continue;
        }
        for (k, (took, total, items)) in timed.into_iter().enumerate() {
            times[k].push(took);
            matched[k].0 += total;
            matched[k].1 += items;
        }
    }
    println!("\n{label}: {runs} runs a read\n");
    println!("| read | matches (mean) | rows (mean) | p50 | p99 | p99 / baseline p99 |");
    println!("|---|---|---|---|---|---|");
    for t in &mut times {
        t.sort_unstable();
    }
    let base = percentile(&times[0], 0.99);
    for (k, label) in labels.iter().enumerate() {
        let p99 = percentile(&times[k], 0.99);
        println!(
            "| {label} | {:.0} | {:.1} | {:.2} ms | {:.2} ms | {:.1} |",
            matched[k].0 as f64 / runs as f64,
            matched[k].1 as f64 / runs as f64,
            percentile(&times[k], 0.5),
            p99,
            p99 / base
        );
    }
}

/// Part 2: reads over `total` revisions.
async fn at_scale(dir: &Path, total: usize, runs: usize) {
    let path = dir.join("history.db");
    let storage = connect(&StorageConfig::Sqlite { path: path.clone() })
        .await
        .unwrap();
    let now = OffsetDateTime::now_utc();
    let seen = fill(&path, total, now).await;
    // The objects whose history is read: busy ones and quiet ones, each with its document
    // (written without history, so it adds no revision).
    let read: Vec<usize> = (0..300)
        .map(|k| {
            if k % 2 == 0 {
                k * 10
            } else {
                OBJECTS / 2 + k * 7
            }
        })
        .filter(|&o| seen[o].0 > 0)
        .collect();
    let documents: Vec<ResourceDocument> = read
        .iter()
        .map(|&o| {
            let (count, version) = seen[o];
            let mut d = document(filled_object(o, count, version), false, now);
            d.cluster = object(o).cluster;
            d
        })
        .collect();
    storage.upsert(&documents).await.unwrap();
    let counts: Vec<u64> = read.iter().map(|&o| seen[o].0).collect();
    println!(
        "{} objects' histories read: {:.0} revisions each on average (max {})",
        read.len(),
        counts.iter().sum::<u64>() as f64 / counts.len() as f64,
        counts.iter().max().unwrap()
    );
    reads(
        &format!("{total} revisions, indexes of 0007_history.sql"),
        &storage,
        &read,
        runs,
    )
    .await;
    if let Ok(index) = std::env::var("KARPOR_BENCH_INDEX") {
        let copy = dir.join("history-index.db");
        std::fs::copy(&path, &copy).unwrap();
        let mut conn = raw(&copy).await;
        let t = Instant::now();
        for statement in index.split(';').filter(|s| !s.trim().is_empty()) {
            sqlx::query(AssertSqlSafe(statement.to_owned()))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        println!(
            "\nOn a copy: `{index}` in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        drop(conn);
        let indexed = connect(&StorageConfig::Sqlite { path: copy })
            .await
            .unwrap();
        reads(
            &format!("{total} revisions, with `{index}`"),
            &indexed,
            &read,
            runs,
        )
        .await;
    }
}

#[tokio::main]
async fn main() {
    let updates = setting("KARPOR_BENCH_UPDATES", 10_000);
    let total = setting("KARPOR_BENCH_REVISIONS", 1_000_000);
    let runs = setting("KARPOR_BENCH_RUNS", 300);
    let temp = tempfile::tempdir().unwrap();
    let dir: PathBuf = match std::env::var_os("KARPOR_BENCH_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => temp.path().to_owned(),
    };
    std::fs::create_dir_all(&dir).unwrap();
    assert!(
        !dir.join("history.db").exists(),
        "{} holds a history.db already",
        dir.display()
    );
    per_revision(&dir, updates).await;
    at_scale(&dir, total, runs).await;
}
