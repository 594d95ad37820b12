//! One conformance suite: the same ~300 synthetic documents and the same queries against
//! the embedded backend, the Elasticsearch-API server and the OpenSearch-API server must
//! give the same documents in the same order with the same totals.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::sync::Arc;

use karpor_audit::{Finding, Severity};
use karpor_search::{keyword, parse, Expr, Field, Op, Query, Value};
use karpor_storage::{
    connect, Bucket, Change, ChangeQuery, ElasticConfig, HistoryCaps, HistoryNote, ObjectName,
    RefreshPolicy, ResourceDocument, Storage, StorageConfig,
};
use karpor_testkit::{service, unique};
use serde_json::json;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

const CLUSTERS: [&str; 3] = ["alpha", "beta", "gamma"];
const KINDS: [(&str, &str); 5] = [
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("apps/v1", "Deployment"),
    ("v1", "Secret"),
];
const NAMESPACES: [&str; 4] = ["default", "kube-system", "web", "data"];
const APPS: [&str; 3] = ["web", "db", "cache"];
const IMAGES: [&str; 4] = ["nginx:1.25", "redis:7", "postgres:16", "busybox"];

/// The synthetic documents: every field varies, names repeat across clusters (so the id
/// tie-break matters), some are deleted, some have no labels or no creation time.
fn documents() -> Vec<ResourceDocument> {
    let base = datetime!(2026-01-01 00:00:00 UTC);
    (0..300)
        .map(|i| {
            let (api_version, kind) = KINDS[i % KINDS.len()];
            let app = APPS[i % APPS.len()];
            let mut labels = BTreeMap::new();
            if i % 7 != 0 {
                labels.insert("app".to_owned(), app.to_owned());
                labels.insert(
                    "tier".to_owned(),
                    if i % 2 == 0 { "fe" } else { "be" }.to_owned(),
                );
                labels.insert("version".to_owned(), format!("{}", i % 4));
            }
            if i % 5 == 0 {
                labels.insert("app.kubernetes.io/name".to_owned(), "frontend".to_owned());
            }
            let mut annotations = BTreeMap::new();
            if i % 3 == 0 {
                annotations.insert(
                    "example.com/owner".to_owned(),
                    if i % 2 == 0 { "team-a" } else { "team-b" }.to_owned(),
                );
            }
            let deleted = i % 11 == 0;
            ResourceDocument {
                cluster: CLUSTERS[i % CLUSTERS.len()].to_owned(),
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                namespace: NAMESPACES[(i / 3) % NAMESPACES.len()].to_owned(),
                name: format!("{app}-{}", i % 40),
                uid: format!("uid-{i:04}"),
                labels,
                annotations,
                owner_references: Vec::new(),
                creation_timestamp: (i % 13 != 0).then(|| base + Duration::seconds(i as i64)),
                deletion_timestamp: (i % 6 == 0)
                    .then(|| base + Duration::days(30 + (i % 60) as i64)),
                resource_version: format!("{}", 100 + i * 7),
                sync_at: base + Duration::milliseconds(1_000_000 + i as i64 * 37),
                deleted,
                object: json!({
                    "spec": {"containers": [{
                        "name": app,
                        "image": IMAGES[i % IMAGES.len()],
                        "args": ["--port", format!("{}", 8000 + i % 5)]
                    }]},
                    "status": {"phase": if i % 4 == 0 { "Running" } else { "Pending" }}
                }),
                issues: findings(i),
                refs: refs(i),
                history: None,
            }
        })
        .collect()
}

/// Topology keys of the i-th document: half owned by one of ten owners, a third naming a
/// config map.
fn refs(i: usize) -> Vec<String> {
    let mut keys = Vec::new();
    if i.is_multiple_of(2) {
        keys.push(format!("owner:rs-{}", i % 10));
        keys.push(format!(
            "owner-kind:apps/{}",
            ["ReplicaSet", "StatefulSet"][i % 4 / 2]
        ));
    }
    if i.is_multiple_of(3) {
        keys.push(format!(
            "ref:/ConfigMap/{}/cm-{}",
            NAMESPACES[(i / 3) % NAMESPACES.len()],
            i % 5
        ));
    }
    keys
}

/// Audit findings of the i-th document: a third privileged with an untagged image (twice,
/// as two containers would), a third only untagged, a third clean.
fn findings(i: usize) -> Vec<Finding> {
    let finding = |rule: &str, severity| Finding {
        rule: rule.to_owned(),
        severity,
        title: rule.to_owned(),
        message: format!("{rule} in document {i}"),
        remediation: "fix it".to_owned(),
    };
    match i % 3 {
        0 => vec![
            finding("privileged", Severity::High),
            finding("image-tag", Severity::Medium),
            finding("image-tag", Severity::Medium),
        ],
        1 => vec![finding("image-tag", Severity::Medium)],
        _ => Vec::new(),
    }
}

const QUERIES: &[&str] = &[
    "select * from resources",
    "select * from resources where kind = 'Pod'",
    "select * from resources where kind = 'pod'",
    "select * from resources where kind != 'Pod'",
    "select * from resources where namespace = 'default'",
    "select * from resources where namespace in ('web', 'data')",
    "select * from resources where namespace not in ('web', 'data')",
    "select * from resources where cluster = 'beta' and kind = 'Service'",
    "select * from resources where cluster = 'alpha' or namespace = 'kube-system'",
    "select * from resources where not (cluster = 'alpha')",
    "select * from resources where name like 'web-%'",
    "select * from resources where name not like '%-1%'",
    "select * from resources where name like 'db-_'",
    "select * from resources where kind like 'config%'",
    "select * from resources where labels.app = 'web'",
    "select * from resources where labels.app != 'web'",
    "select * from resources where labels.`app.kubernetes.io/name` = 'frontend'",
    "select * from resources where labels.tier in ('fe', 'be')",
    "select * from resources where labels.tier not in ('fe')",
    "select * from resources where labels.app like 'c%'",
    "select * from resources where not labels.app = 'web'",
    "select * from resources where annotations.`example.com/owner` = 'team-a'",
    "select * from resources where creationTimestamp >= '2026-01-01T00:02:00Z'",
    "select * from resources where creationTimestamp between '2026-01-01T00:01:00Z' and '2026-01-01T00:03:00Z'",
    "select * from resources where deletionTimestamp < '2026-03-01T00:00:00Z'",
    "select * from resources where not deletionTimestamp < '2026-03-01T00:00:00Z'",
    "select * from resources where deleted = true",
    "select * from resources where deleted = false or kind = 'Secret'",
    "select * from resources where contains(content, 'nginx')",
    "select * from resources where contains(content, 'nginx 1')",
    "select * from resources where contains(content, 'REDIS') and namespace = 'data'",
    "select * from resources where contains(content, 'running') or labels.tier = 'fe'",
    "select * from resources order by name",
    "select * from resources order by name desc",
    "select * from resources order by creationTimestamp desc, name",
    "select * from resources order by deletionTimestamp",
    "select * from resources order by kind, namespace desc limit 10",
    "select * from resources limit 5 offset 7",
    "select * from resources where resourceVersion > '500'",
    "select * from resources where uid between 'uid-0100' and 'uid-0150'",
    "select * from resources where name >= 'web' and name < 'web-5'",
    "select * from resources where labels.version > '2'",
    "select * from resources where labels.version <= '1'",
    "select * from resources where apiVersion = 'apps/v1'",
    "select * from resources where syncAt > '2026-01-01T00:16:45.500Z'",
    "select * from resources where (kind = 'Pod' or kind = 'Service') and not labels.app = 'db' order by name desc limit 20",
    "select * from resources where name not between 'cache-10' and 'db-5' order by syncAt desc",
    "select * from resources where issue = 'privileged'",
    "select * from resources where issue != 'privileged'",
    "select * from resources where not issue = 'privileged'",
    "select * from resources where severity = 'high'",
    "select * from resources where severity in ('Medium', 'Low') and kind = 'Pod'",
    "select * from resources where issue in ('image-tag', 'privileged')",
    "select * from resources where issue not in ('privileged')",
    "select * from resources where issue like 'image%'",
    "select * from resources where issue not like 'priv%'",
    "select * from resources where score < 80",
    "select * from resources where score = 100",
    "select * from resources where score != 100",
    "select * from resources where score >= 80 order by score desc, name",
    "select * from resources where score between 50 and 90",
];

const KEYWORDS: &[&str] = &["web", "nginx", "tier=fe", "kube", "postgres 16", "*"];

struct Backend {
    name: &'static str,
    storage: Arc<dyn Storage>,
    _dir: tempfile::TempDir,
}

async fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = connect(&StorageConfig::Sqlite {
        path: dir.path().join("resources.db"),
    })
    .await
    .unwrap();
    let mut all = vec![Backend {
        name: "sqlite",
        storage: sqlite,
        _dir: dir,
    }];
    for (name, var) in [
        ("elasticsearch", "KARPOR_TEST_ES_URL"),
        ("opensearch", "KARPOR_TEST_OPENSEARCH_URL"),
    ] {
        let Some(url) = service(var) else {
            continue;
        };
        let storage = connect(&StorageConfig::Elasticsearch(ElasticConfig {
            url,
            username: None,
            password: None,
            index: unique("conformance"),
            refresh: RefreshPolicy::True,
        }))
        .await
        .unwrap();
        all.push(Backend {
            name,
            storage,
            _dir: tempfile::tempdir().unwrap(),
        });
    }
    all
}

async fn loaded() -> Vec<Backend> {
    let backends = backends().await;
    let docs = documents();
    for b in &backends {
        for chunk in docs.chunks(64) {
            b.storage.upsert(chunk).await.unwrap();
        }
    }
    backends
}

/// (total, ids in order) of every page.
async fn answer(storage: &dyn Storage, query: &Query) -> (u64, Vec<String>) {
    let result = storage.search(query, 0, 1000).await.unwrap();
    (result.total, result.items.iter().map(|d| d.id()).collect())
}

#[tokio::test]
async fn every_backend_answers_every_query_the_same() {
    let backends = loaded().await;
    let mut queries: Vec<(String, Query)> = QUERIES
        .iter()
        .map(|q| (q.to_string(), parse(q).unwrap()))
        .collect();
    queries.extend(
        KEYWORDS
            .iter()
            .map(|k| (format!("keyword {k}"), keyword(k).unwrap())),
    );
    assert!(queries.len() >= 40);
    let mut empty = 0;
    for (text, query) in &queries {
        let reference = answer(backends[0].storage.as_ref(), query).await;
        assert!(reference.0 as usize >= reference.1.len(), "{text}");
        if reference.1.is_empty() {
            eprintln!("matched nothing: {text}");
        }
        empty += usize::from(reference.1.is_empty());
        for b in &backends[1..] {
            let got = answer(b.storage.as_ref(), query).await;
            assert_eq!(got, reference, "{} differs from sqlite on: {text}", b.name);
        }
    }
    assert!(
        empty <= 1,
        "{empty} queries matched nothing: the data does not exercise them"
    );
    // A caller's scope narrows as the same term would, whichever plan it leaves: scopes of
    // the API's shape (namespaces, or the Namespace objects of those names, and no
    // Secrets; grants of several clusters joined), which counts and full-text pages find
    // rows by and queries naming namespaces decide, and others that name no namespace.
    for scope in [
        "select * from resources where (namespace in ('web', 'data') or (namespace = '' and kind = 'Namespace' and name in ('web', 'data'))) and not kind = 'Secret'",
        "select * from resources where (cluster = 'alpha' and namespace in ('web')) or namespace = 'data'",
        QUERIES[0],
        QUERIES[QUERIES.len() / 2],
        QUERIES[QUERIES.len() - 1],
    ] {
        let scope = parse(scope).unwrap().filter;
        for (text, query) in &queries {
            let mut plain = query.clone();
            plain.filter = Expr::And(vec![query.filter.clone(), scope.clone()]);
            let mut scoped = query.clone();
            scoped.filter = Expr::And(vec![
                query.filter.clone(),
                Expr::Scope(Box::new(scope.clone())),
            ]);
            for b in &backends {
                let (got, wanted) = (
                    answer(b.storage.as_ref(), &scoped).await,
                    answer(b.storage.as_ref(), &plain).await,
                );
                assert_eq!(got, wanted, "{}: {text} within {scope:?}", b.name);
            }
        }
    }
}

#[tokio::test]
async fn answers_match_the_documents_themselves() {
    let backends = loaded().await;
    let docs = documents();
    let live = |d: &&ResourceDocument| !d.deleted;
    let expect = [
        ("select * from resources", docs.iter().filter(live).count()),
        (
            "select * from resources where kind = 'pod'",
            docs.iter().filter(live).filter(|d| d.kind == "Pod").count(),
        ),
        (
            "select * from resources where labels.app != 'web'",
            docs.iter()
                .filter(live)
                .filter(|d| d.labels.get("app").is_some_and(|a| a != "web"))
                .count(),
        ),
        (
            "select * from resources where not deletionTimestamp < '2026-03-01T00:00:00Z'",
            docs.iter()
                .filter(live)
                .filter(|d| {
                    d.deletion_timestamp
                        .is_none_or(|t| t >= datetime!(2026-03-01 00:00:00 UTC))
                })
                .count(),
        ),
        (
            "select * from resources where contains(content, 'nginx')",
            docs.iter()
                .filter(live)
                .filter(|d| d.object.to_string().contains("nginx"))
                .count(),
        ),
        (
            "select * from resources where deleted = true",
            docs.iter().filter(|d| d.deleted).count(),
        ),
    ];
    for b in &backends {
        for (sql, count) in &expect {
            let (total, ids) = answer(b.storage.as_ref(), &parse(sql).unwrap()).await;
            assert_eq!(
                (total as usize, ids.len()),
                (*count, *count),
                "{}: {sql}",
                b.name
            );
        }
        let ordered = answer(
            b.storage.as_ref(),
            &parse("select * from resources order by name desc").unwrap(),
        )
        .await
        .1;
        let mut sorted: Vec<&ResourceDocument> = docs.iter().filter(live).collect();
        // Ties by id, in the direction of the last key.
        sorted.sort_by(|a, b| b.name.cmp(&a.name).then(b.id().cmp(&a.id())));
        assert_eq!(
            ordered,
            sorted.iter().map(|d| d.id()).collect::<Vec<_>>(),
            "{}",
            b.name
        );
    }
}

#[tokio::test]
async fn pages_add_up_to_the_whole_answer() {
    let backends = loaded().await;
    let query =
        parse("select * from resources where kind != 'Secret' order by name limit 95 offset 3")
            .unwrap();
    for b in &backends {
        let whole = b.storage.search(&query, 0, 1000).await.unwrap();
        assert_eq!(whole.total, 95, "{}", b.name);
        let mut paged = Vec::new();
        for page in 0..10 {
            let result = b.storage.search(&query, page * 10, 10).await.unwrap();
            assert_eq!(result.total, 95);
            paged.extend(result.items);
        }
        assert_eq!(paged, whole.items, "{}", b.name);
        assert_eq!(whole.items.len(), 95);
    }
}

#[tokio::test]
async fn totals_counted_up_to_a_cap_are_lower_bounds_and_pages_stay_exact() {
    let backends = loaded().await;
    let query = parse("select * from resources where kind != 'Secret' order by name").unwrap();
    let limited =
        parse("select * from resources where kind != 'Secret' order by name limit 20").unwrap();
    for b in &backends {
        let whole = b.storage.search(&query, 0, 1000).await.unwrap();
        let all = whole.total;
        assert!(all > 60 && whole.exact, "{}: {all}", b.name);
        let ids = |r: &karpor_storage::SearchResult| -> Vec<String> {
            r.items.iter().map(|d| d.id()).collect()
        };
        let whole_ids = ids(&whole);
        let counted = |from, size, cap| {
            let storage = b.storage.clone();
            let query = query.clone();
            async move {
                storage
                    .search_counted(&query, from, size, cap)
                    .await
                    .unwrap()
            }
        };
        // Past the cap: the cap, as a lower bound, on the first page, a deep one and the last.
        for from in [0, 40, all - 5] {
            let page = counted(from, 10, Some(30)).await;
            assert_eq!(
                (page.total, page.exact),
                (30, false),
                "{} from {from}",
                b.name
            );
            let end = (from + 10).min(all) as usize;
            assert_eq!(
                ids(&page),
                whole_ids[from as usize..end],
                "{} from {from}",
                b.name
            );
        }
        // At or under the cap: exact.
        let page = counted(0, 10, Some(all)).await;
        assert_eq!((page.total, page.exact), (all, true), "{}", b.name);
        // The query's own LIMIT ends the matches before the cap: exact too.
        let page = b
            .storage
            .search_counted(&limited, 0, 10, Some(30))
            .await
            .unwrap();
        assert_eq!((page.total, page.exact), (20, true), "{}", b.name);
    }
}

/// Counts of labels within named namespaces (and a cluster) read the label's rows there
/// alone (SQLite's label rows hold both): every count, exact or capped, must still be what
/// the whole answer holds, under NOT and OR and with namespaces named twice.
#[tokio::test]
async fn label_counts_within_named_namespaces_equal_the_whole_answer() {
    let backends = loaded().await;
    let queries = [
        "select * from resources where cluster = 'alpha' and labels.tier = 'fe' and namespace in ('default', 'web', 'data')",
        "select * from resources where namespace = 'web' and labels.app in ('web', 'db')",
        "select * from resources where namespace in ('web', 'data') and namespace = 'data' and labels.version like '1%'",
        "select * from resources where namespace in ('default', 'web') and not labels.tier = 'fe'",
        "select * from resources where cluster = 'beta' and namespace in ('default', 'data') and (labels.app = 'db' or labels.tier = 'be')",
        "select * from resources where namespace = 'kube-system' and not (cluster = 'gamma' and labels.app = 'cache')",
        "select * from resources where namespace != 'web' and labels.tier = 'be'",
    ];
    for b in &backends {
        for sql in queries {
            let query = parse(sql).unwrap();
            let whole = b.storage.search(&query, 0, 1000).await.unwrap();
            let matched = whole.items.len() as u64;
            assert!(matched > 2, "{}: {sql} matched {matched}", b.name);
            assert!(
                whole
                    .items
                    .iter()
                    .all(|d| sql.contains(&format!("'{}'", d.namespace)) || sql.contains("!=")),
                "{}: {sql}",
                b.name
            );
            let exact = b.storage.search_counted(&query, 0, 2, None).await.unwrap();
            assert_eq!(
                (exact.total, exact.exact),
                (matched, true),
                "{}: {sql}",
                b.name
            );
            let capped = b
                .storage
                .search_counted(&query, 0, 2, Some(matched))
                .await
                .unwrap();
            assert_eq!(
                (capped.total, capped.exact),
                (matched, true),
                "{}: {sql}",
                b.name
            );
            let under = b
                .storage
                .search_counted(&query, 0, 2, Some(matched - 1))
                .await
                .unwrap();
            assert_eq!(
                (under.total, under.exact),
                (matched - 1, false),
                "{}: {sql}",
                b.name
            );
        }
    }
}

#[tokio::test]
async fn term_aggregations_agree() {
    let backends = loaded().await;
    let all = parse("select * from resources").unwrap();
    let pods = parse("select * from resources where kind = 'Pod'").unwrap();
    for (field, query) in [
        (Field::Kind, &all),
        (Field::Namespace, &all),
        (Field::Cluster, &pods),
        (Field::ApiVersion, &all),
        (Field::Name, &pods),
        (Field::Label("app".into()), &all),
        (Field::Label("app".into()), &pods),
        (Field::Label("app.kubernetes.io/name".into()), &all),
        (Field::Issue, &all),
        (Field::Severity, &pods),
        (Field::Ref, &all),
    ] {
        let reference: Vec<Bucket> = backends[0].storage.terms(&field, query, 10).await.unwrap();
        assert!(!reference.is_empty());
        assert!(reference.windows(2).all(|w| w[0].count >= w[1].count));
        for b in &backends[1..] {
            let got = b.storage.terms(&field, query, 10).await.unwrap();
            assert_eq!(got, reference, "{} on {field:?}", b.name);
        }
    }
    for b in &backends {
        assert!(b.storage.terms(&Field::Uid, &all, 10).await.is_err());
        assert!(b.storage.terms(&Field::SyncAt, &all, 10).await.is_err());
    }
}

/// Full-text searches, which the embedded backend pages by probing and counts up to a cap
/// from the full-text matches, answer as every backend does: the same pages, the cap as
/// a lower bound past it, the exact count under it.
#[tokio::test]
async fn full_text_pages_and_capped_counts_agree() {
    let backends = loaded().await;
    for (sql, query) in [
        "select * from resources where contains(content, 'nginx')",
        "select * from resources where contains(content, 'running') and labels.tier = 'fe'",
        "select * from resources where namespace in ('web', 'data') and contains(content, 'redis')",
        "select * from resources where contains(content, 'postgres') and not labels.app = 'db'",
    ]
    .map(|sql| (sql.to_owned(), parse(sql).unwrap()))
    .into_iter()
    // Keyword pages are walked in id order too (SQLite), their counts taken apart.
    .chain(
        ["web", "tier=fe", "nginx"].map(|term| (format!("keyword {term}"), keyword(term).unwrap())),
    ) {
        let sql = &sql;
        for b in &backends {
            let whole = b.storage.search(&query, 0, 1000).await.unwrap();
            let all = whole.total;
            assert!(all > 12 && whole.exact, "{}: {sql}: {all}", b.name);
            let ids: Vec<String> = whole.items.iter().map(|d| d.id()).collect();
            for (from, size, cap) in [(0, 10, 12), (0, 5, 1000), (5, 5, 12), (10, 10, all)] {
                let page = b
                    .storage
                    .search_counted(&query, from, size, Some(cap))
                    .await
                    .unwrap();
                let expected = if cap < all { (cap, false) } else { (all, true) };
                assert_eq!(
                    (page.total, page.exact),
                    expected,
                    "{}: {sql} {from} {cap}",
                    b.name
                );
                let got: Vec<String> = page.items.iter().map(|d| d.id()).collect();
                let end = ((from + size) as usize).min(ids.len());
                assert_eq!(got, ids[from as usize..end], "{}: {sql} {from}", b.name);
            }
        }
    }
}

/// Grouped answers (`select COLUMN, count(*) ... group by COLUMN`) count the documents
/// the query matches by each value, most first and then by value, on every backend.
#[tokio::test]
async fn grouped_answers_count_the_matching_documents_by_value() {
    let backends = loaded().await;
    let docs = documents();
    for sql in [
        "select namespace, count(*) from resources where kind = 'Pod' and severity = 'high' group by namespace",
        "select labels.app, count(*) from resources group by labels.app order by count(*) desc limit 2",
        "select labels['tier'], count(*) from resources where contains(content, 'nginx') group by labels['tier']",
        "select count(*), cluster from resources where not labels.tier = 'fe' group by cluster",
        "select issue, count(*) from resources where cluster = 'beta' group by issue",
        "select kind, count(*) from resources where namespace = 'nowhere' group by kind",
        "select count(*), cluster from resources where namespace in ('web', 'data') and labels.tier = 'fe' group by cluster",
        "select labels.app, count(*) from resources where cluster = 'alpha' and namespace = 'default' and not labels.tier = 'be' group by labels.app",
    ] {
        let table = karpor_search::parse_table(sql).unwrap();
        let karpor_search::Shape::Groups { by, limit, .. } = &table.shape else {
            panic!("{sql} is grouped");
        };
        let ids = answer(backends[0].storage.as_ref(), &table.query).await.1;
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for d in docs.iter().filter(|d| ids.contains(&d.id())) {
            let mut values: Vec<String> = match by {
                Field::Namespace => vec![d.namespace.clone()],
                Field::Cluster => vec![d.cluster.clone()],
                Field::Kind => vec![d.kind.clone()],
                Field::Label(key) => d.labels.get(key).cloned().into_iter().collect(),
                Field::Issue => d.issues.iter().map(|f| f.rule.clone()).collect(),
                other => panic!("{other:?} is not modelled"),
            };
            values.sort();
            values.dedup();
            for v in values {
                *counts.entry(v).or_default() += 1;
            }
        }
        let mut expected: Vec<Bucket> = counts
            .into_iter()
            .map(|(key, count)| Bucket { key, count })
            .collect();
        expected.sort_by(|a, b| b.count.cmp(&a.count).then(a.key.cmp(&b.key)));
        expected.truncate(*limit as usize);
        for b in &backends {
            let got = b.storage.terms(by, &table.query, *limit as usize).await.unwrap();
            assert_eq!(got, expected, "{}: {sql}", b.name);
        }
    }
}

#[tokio::test]
async fn reference_keys_find_the_documents_that_hold_them() {
    let backends = loaded().await;
    let docs = documents();
    let query = |expr: Expr| Query {
        filter: Expr::And(vec![
            expr,
            Expr::Compare {
                field: Field::Deleted,
                op: Op::Eq,
                value: Value::Bool(false),
            },
        ]),
        order_by: Vec::new(),
        limit: None,
        offset: None,
    };
    let key = |k: &str| Value::Text(k.to_owned());
    let cases = [
        (
            query(Expr::Compare {
                field: Field::Ref,
                op: Op::Eq,
                value: key("owner:rs-4"),
            }),
            vec!["owner:rs-4"],
        ),
        (
            query(Expr::In {
                field: Field::Ref,
                values: vec![key("ref:/ConfigMap/web/cm-0"), key("owner:rs-2")],
                negated: false,
            }),
            vec!["ref:/ConfigMap/web/cm-0", "owner:rs-2"],
        ),
    ];
    for (query, keys) in cases {
        let mut expected: Vec<String> = docs
            .iter()
            .filter(|d| !d.deleted && d.refs.iter().any(|r| keys.contains(&r.as_str())))
            .map(|d| d.id())
            .collect();
        expected.sort();
        assert!(!expected.is_empty(), "{keys:?}");
        for b in &backends {
            let (total, ids) = answer(b.storage.as_ref(), &query).await;
            assert_eq!(
                (total as usize, ids),
                (expected.len(), expected.clone()),
                "{}: {keys:?}",
                b.name
            );
        }
    }
    // Terms of `ref` count owner kinds only.
    let all = parse("select * from resources").unwrap();
    for b in &backends {
        let buckets = b.storage.terms(&Field::Ref, &all, 10).await.unwrap();
        let keys: Vec<&str> = buckets.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys.len(), 2, "{}: {keys:?}", b.name);
        assert!(
            keys.iter().all(|k| k.starts_with("owner-kind:apps/")),
            "{}: {keys:?}",
            b.name
        );
    }
    // The keys come back with the document.
    for b in &backends {
        let stored = b.storage.get("alpha", "uid-0000").await.unwrap().unwrap();
        assert_eq!(stored.refs, docs[0].refs, "{}", b.name);
    }
}

#[tokio::test]
async fn audit_totals_agree_with_the_documents() {
    let backends = loaded().await;
    let docs = documents();
    for sql in [
        "select * from resources",
        "select * from resources where kind = 'Pod'",
        "select * from resources where issue = 'privileged'",
        "select * from resources where cluster = 'nowhere'",
    ] {
        let query = parse(sql).unwrap();
        // What the documents themselves say, through the same filter.
        let ids = answer(backends[0].storage.as_ref(), &query).await.1;
        let matched: Vec<&ResourceDocument> =
            docs.iter().filter(|d| ids.contains(&d.id())).collect();
        let mut counts = karpor_audit::SeverityCounts::default();
        for d in &matched {
            for f in &d.issues {
                counts.add(f.severity);
            }
        }
        let score_sum: f64 = matched.iter().map(|d| d.score()).sum();
        for b in &backends {
            let totals = b.storage.audit_totals(&query).await.unwrap();
            assert_eq!(totals.resources, matched.len() as u64, "{}: {sql}", b.name);
            assert_eq!(totals.findings, counts, "{}: {sql}", b.name);
            assert!(
                (totals.score_sum - score_sum).abs() < 1e-6,
                "{}: {sql}: {} vs {score_sum}",
                b.name,
                totals.score_sum
            );
            if matched.is_empty() {
                assert_eq!(totals.score(), 100.0);
            }
        }
    }
    // One document's score, Karpor's formula: p = 3 findings, s = 3 + 2 + 2 = 7.
    let expected = 100.0 * (-0.04f64 * 3.0 - 0.06 * 7.0).exp();
    assert!((docs[0].score() - expected).abs() < 1e-9);
}

#[tokio::test]
async fn documents_round_trip_and_writes_do_what_they_say() {
    let backends = backends().await;
    let docs = documents();
    for b in &backends {
        let s = b.storage.as_ref();
        s.upsert(&docs).await.unwrap();
        let first = &docs[1];
        assert_eq!(
            s.get(&first.cluster, &first.uid).await.unwrap().as_ref(),
            Some(first)
        );
        let live = docs.iter().filter(|d| !d.deleted).count() as u64;
        assert_eq!(s.count(None).await.unwrap(), live, "{}", b.name);
        let alpha = docs
            .iter()
            .filter(|d| !d.deleted && d.cluster == "alpha")
            .count() as u64;
        assert_eq!(s.count(Some("alpha")).await.unwrap(), alpha);

        let mut changed = first.clone();
        changed.resource_version = "999999".to_owned();
        s.upsert(std::slice::from_ref(&changed)).await.unwrap();
        assert_eq!(
            s.get(&first.cluster, &first.uid).await.unwrap(),
            Some(changed)
        );
        assert_eq!(s.count(None).await.unwrap(), live, "an upsert replaces");

        let at = datetime!(2026-06-01 00:00:00 UTC);
        assert!(s
            .soft_delete(&first.cluster, &first.uid, at, None, None)
            .await
            .unwrap());
        let soft = s.get(&first.cluster, &first.uid).await.unwrap().unwrap();
        assert!(soft.deleted && soft.sync_at == at);
        assert_eq!(s.count(None).await.unwrap(), live - 1);

        assert!(s
            .delete(&first.cluster, &first.uid, None, None)
            .await
            .unwrap());
        assert!(!s
            .delete(&first.cluster, &first.uid, None, None)
            .await
            .unwrap());
        assert_eq!(s.get(&first.cluster, &first.uid).await.unwrap(), None);

        // A relist of Pods in beta that began after everything was synced saw only two.
        let relist: OffsetDateTime = datetime!(2026-02-01 00:00:00 UTC);
        let seen: Vec<ResourceDocument> = docs
            .iter()
            .filter(|d| d.cluster == "beta" && d.kind == "Pod")
            .take(2)
            .map(|d| ResourceDocument {
                sync_at: relist + Duration::seconds(1),
                ..d.clone()
            })
            .collect();
        s.upsert(&seen).await.unwrap();
        let beta_pods = docs
            .iter()
            .filter(|d| d.cluster == "beta" && d.kind == "Pod")
            .count();
        // A relist of one namespace purges only that namespace.
        let namespace = &docs
            .iter()
            .find(|d| d.cluster == "alpha" && d.kind == "Pod" && !d.namespace.is_empty())
            .unwrap()
            .namespace;
        let alpha_pods = |extra: &str| {
            let sql = format!("select * from resources where cluster = 'alpha' and kind = 'Pod' and (deleted = true or deleted = false){extra}");
            async move { s.search(&parse(&sql).unwrap(), 0, 1).await.unwrap().total }
        };
        let before = alpha_pods("").await;
        let in_namespace = alpha_pods(&format!(" and namespace = '{namespace}'")).await;
        assert!(in_namespace > 0 && in_namespace < before);
        let purged = s
            .purge_unseen("alpha", "v1", "Pod", Some(namespace), relist, None)
            .await
            .unwrap();
        assert_eq!(purged, in_namespace, "{}", b.name);
        assert_eq!(alpha_pods("").await, before - in_namespace, "{}", b.name);

        let purged = s
            .purge_unseen("beta", "v1", "Pod", None, relist, None)
            .await
            .unwrap();
        assert_eq!(purged as usize, beta_pods - 2, "{}", b.name);
        let left = s
            .search(&parse("select * from resources where cluster = 'beta' and kind = 'Pod' and (deleted = true or deleted = false)").unwrap(), 0, 100)
            .await
            .unwrap();
        assert_eq!(left.total, 2);

        let gamma = docs.iter().filter(|d| d.cluster == "gamma").count() as u64;
        assert_eq!(s.delete_cluster("gamma").await.unwrap(), gamma);
        assert_eq!(s.count(Some("gamma")).await.unwrap(), 0);
    }
}

/// The cluster of the fencing cases, apart from the synthetic documents.
const FENCED: &str = "fenced";

/// One object at a resourceVersion, its every written part marked with `generation`: the
/// body, a label, an issue, a reference key.
fn version_of(uid: &str, resource_version: &str, generation: &str) -> ResourceDocument {
    let issue = Finding {
        rule: format!("rule-{generation}"),
        severity: Severity::High,
        title: generation.to_owned(),
        message: generation.to_owned(),
        remediation: generation.to_owned(),
    };
    ResourceDocument {
        cluster: FENCED.to_owned(),
        uid: uid.to_owned(),
        name: format!("{uid}-object"),
        labels: BTreeMap::from([("gen".to_owned(), generation.to_owned())]),
        resource_version: resource_version.to_owned(),
        object: json!({"data": {"generation": generation}}),
        issues: vec![issue],
        refs: vec![format!("owner:{generation}")],
        history: None,
        deleted: false,
        ..documents()[1].clone()
    }
}

/// Ids of the fenced cluster's documents (deleted or not) matching `condition`.
async fn fenced_ids(s: &dyn Storage, condition: &str) -> Vec<String> {
    let sql = format!(
        "select * from resources where cluster = '{FENCED}' and {condition} and (deleted = true or deleted = false)"
    );
    answer(s, &parse(&sql).unwrap()).await.1
}

/// What the stored document is found under: exactly `generation`'s label, issue, reference
/// key and words, none of any other generation's.
async fn found_as(b: &Backend, d: &ResourceDocument, generation: &str, others: &[&str]) {
    let (s, name) = (b.storage.as_ref(), b.name);
    let id = vec![d.id()];
    for g in std::iter::once(generation).chain(others.iter().copied()) {
        let expect = if g == generation {
            id.clone()
        } else {
            Vec::new()
        };
        for condition in [
            format!("labels.gen = '{g}'"),
            format!("issue = 'rule-{g}'"),
            format!("contains(content, '{g}')"),
        ] {
            let got = fenced_ids(s, &condition).await;
            assert_eq!(got, expect, "{name}: {condition}");
        }
        let by_ref = Query {
            filter: Expr::Compare {
                field: Field::Ref,
                op: Op::Eq,
                value: Value::Text(format!("owner:{g}")),
            },
            order_by: Vec::new(),
            limit: None,
            offset: None,
        };
        assert_eq!(answer(s, &by_ref).await.1, expect, "{name}: ref of {g}");
    }
}

#[tokio::test]
async fn an_older_resource_version_never_replaces_a_newer_one() {
    let backends = backends().await;
    for b in &backends {
        let s = b.storage.as_ref();
        let get = |d: &ResourceDocument| {
            let (cluster, uid) = (d.cluster.clone(), d.uid.clone());
            async move { s.get(&cluster, &uid).await.unwrap() }
        };
        let newer = version_of("a", "20", "newer");
        s.upsert(std::slice::from_ref(&newer)).await.unwrap();
        // Alone, and after the newer one in the same batch: skipped, nothing of it kept.
        let older = version_of("a", "9", "older");
        s.upsert(std::slice::from_ref(&older)).await.unwrap();
        s.upsert(&[version_of("a", "20", "newer"), older.clone()])
            .await
            .unwrap();
        assert_eq!(get(&newer).await.as_ref(), Some(&newer), "{}", b.name);
        found_as(b, &newer, "newer", &["older"]).await;
        // Numbers, not text: "100" is newer than "99".
        let hundred = version_of("a", "100", "hundred");
        s.upsert(&[hundred.clone(), version_of("a", "99", "older")])
            .await
            .unwrap();
        assert_eq!(get(&hundred).await.as_ref(), Some(&hundred), "{}", b.name);

        // The same version is written again (a relist re-audits it).
        let again = version_of("a", "100", "again");
        s.upsert(std::slice::from_ref(&again)).await.unwrap();
        assert_eq!(get(&again).await.as_ref(), Some(&again), "{}", b.name);
        found_as(b, &again, "again", &["hundred", "newer", "older"]).await;

        // A newer version replaces it.
        let newest = version_of("a", "101", "newest");
        s.upsert(std::slice::from_ref(&newest)).await.unwrap();
        assert_eq!(get(&newest).await.as_ref(), Some(&newest), "{}", b.name);
        found_as(b, &newest, "newest", &["again"]).await;

        // A version that is not a number is written unconditionally, over a number or
        // over another that is not.
        let opaque = version_of("a", "v1-opaque", "opaque");
        s.upsert(std::slice::from_ref(&opaque)).await.unwrap();
        assert_eq!(get(&opaque).await.as_ref(), Some(&opaque), "{}", b.name);
        found_as(b, &opaque, "opaque", &["newest"]).await;
        let other = version_of("a", "a0-opaque", "other");
        s.upsert(std::slice::from_ref(&other)).await.unwrap();
        assert_eq!(get(&other).await.as_ref(), Some(&other), "{}", b.name);
    }
}

#[tokio::test]
async fn deletes_are_fenced_by_the_deleted_objects_resource_version() {
    let backends = backends().await;
    let at = datetime!(2026-06-01 00:00:00 UTC);
    for b in &backends {
        let s = b.storage.as_ref();
        let stored = version_of("d", "30", "live");
        s.upsert(std::slice::from_ref(&stored)).await.unwrap();

        // An older deletion leaves the newer document, hard or soft.
        assert!(
            !s.delete(FENCED, "d", Some("15"), None).await.unwrap(),
            "{}",
            b.name
        );
        assert!(!s
            .soft_delete(FENCED, "d", at, Some("15"), None)
            .await
            .unwrap());
        assert_eq!(s.get(FENCED, "d").await.unwrap().as_ref(), Some(&stored));

        // A soft delete at the deletion's version keeps the document at that version, so a
        // stale write of the live object cannot bring it back.
        assert!(s
            .soft_delete(FENCED, "d", at, Some("40"), None)
            .await
            .unwrap());
        let kept = s.get(FENCED, "d").await.unwrap().unwrap();
        assert!(kept.deleted && kept.resource_version == "40", "{}", b.name);
        s.upsert(std::slice::from_ref(&stored)).await.unwrap();
        assert_eq!(s.get(FENCED, "d").await.unwrap(), Some(kept), "{}", b.name);
        assert!(fenced_ids(s, "deleted = false").await.is_empty());

        // The same version or a newer one removes it; so does one without a version.
        assert!(
            s.delete(FENCED, "d", Some("40"), None).await.unwrap(),
            "{}",
            b.name
        );
        assert_eq!(s.get(FENCED, "d").await.unwrap(), None);
        s.upsert(&[version_of("e", "50", "live"), version_of("f", "50", "live")])
            .await
            .unwrap();
        assert!(
            s.delete(FENCED, "e", Some("51"), None).await.unwrap(),
            "{}",
            b.name
        );
        assert!(
            s.delete(FENCED, "f", None, None).await.unwrap(),
            "{}",
            b.name
        );
        // One that is not a number removes it whatever its version.
        s.upsert(&[version_of("g", "60", "live")]).await.unwrap();
        assert!(s.delete(FENCED, "g", Some("opaque"), None).await.unwrap());
        assert!(fenced_ids(s, "labels.gen = 'live'").await.is_empty());
    }
}

#[tokio::test]
async fn a_page_past_ten_thousand_is_refused_by_elasticsearch_only_as_a_clear_error() {
    let backends = backends().await;
    let query = parse("select * from resources").unwrap();
    for b in &backends[1..] {
        let error = b.storage.search(&query, 10_000, 10).await.unwrap_err();
        assert!(error.to_string().contains("narrow the query"), "{error}");
    }
}

const HISTORY: &str = "history";

fn note(late: bool) -> HistoryNote {
    HistoryNote {
        keep_until: datetime!(2030-01-01 00:00:00 UTC),
        late,
        managers: vec!["kubectl-edit".to_owned()],
        preexisting: false,
    }
}

/// A Deployment `web` in `shop` (uid `uid`) at a resourceVersion, seen at minute `minute`.
fn deployment(
    uid: &str,
    version: u32,
    image: &str,
    replicas: u32,
    minute: i64,
) -> ResourceDocument {
    ResourceDocument {
        cluster: HISTORY.to_owned(),
        api_version: "apps/v1".to_owned(),
        kind: "Deployment".to_owned(),
        namespace: "shop".to_owned(),
        name: "web".to_owned(),
        uid: uid.to_owned(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        owner_references: Vec::new(),
        creation_timestamp: Some(datetime!(2026-12-01 09:00:00 UTC)),
        deletion_timestamp: None,
        resource_version: version.to_string(),
        sync_at: datetime!(2026-12-01 10:00:00 UTC) + Duration::minutes(minute),
        deleted: false,
        object: json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": uid,
                "resourceVersion": version.to_string(),
                "creationTimestamp": "2026-12-01T09:00:00Z"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "web", "image": image}]}}},
        }),
        issues: Vec::new(),
        refs: Vec::new(),
        history: Some(note(false)),
    }
}

fn web() -> ObjectName {
    ObjectName {
        cluster: HISTORY.to_owned(),
        kind: "deployment".to_owned(),
        namespace: "shop".to_owned(),
        name: "web".to_owned(),
    }
}

fn changes_in(cluster: &str) -> ChangeQuery {
    ChangeQuery {
        filter: Expr::Compare {
            field: Field::Cluster,
            op: Op::Eq,
            value: Value::Text(cluster.to_owned()),
        },
        since: None,
        until: None,
        changes: Vec::new(),
    }
}

#[tokio::test]
async fn history_keeps_each_change_once_and_rebuilds_the_object_on_every_backend() {
    let backends = backends().await;
    let v1 = deployment("u1", 10, "web:1", 1, 0);
    let v2 = deployment("u1", 11, "web:2", 1, 10);
    let version_only = deployment("u1", 12, "web:2", 1, 20);
    let v3 = deployment("u1", 13, "web:3", 1, 30);
    let v4 = deployment("u1", 14, "web:3", 3, 40);
    let stale = deployment("u1", 9, "web:0", 1, 45);
    for b in &backends {
        let (s, name) = (b.storage.as_ref(), b.name);
        s.upsert(std::slice::from_ref(&v1)).await.unwrap();
        // Two in one batch: the second compares with the first.
        s.upsert(&[v2.clone(), version_only.clone()]).await.unwrap();
        s.upsert(std::slice::from_ref(&v3)).await.unwrap();
        // A hand-over: two writers send the same change; and a relist of it.
        s.upsert(std::slice::from_ref(&v4)).await.unwrap();
        s.upsert(std::slice::from_ref(&v4)).await.unwrap();
        s.upsert(std::slice::from_ref(&stale)).await.unwrap();

        let history = s.history(&web(), 100).await.unwrap();
        let seen: Vec<(Change, &str)> = history
            .iter()
            .map(|r| (r.revision.change, r.revision.resource_version.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (Change::Updated, "14"),
                (Change::Updated, "13"),
                (Change::Updated, "11"),
                (Change::Created, "10")
            ],
            "{name}"
        );
        assert_eq!(history[0].revision.managers, ["kubectl-edit"], "{name}");
        // Each object as written (the version-only change is no revision: 13's patch back
        // leads to 11's object, its version included).
        assert_eq!(history[0].object.as_ref(), Some(&v4.object), "{name}");
        assert_eq!(history[1].object.as_ref(), Some(&v3.object), "{name}");
        assert_eq!(history[2].object.as_ref(), Some(&v2.object), "{name}");
        assert_eq!(history[3].object.as_ref(), Some(&v1.object), "{name}");

        // As it was between two changes, before it existed, and now.
        let at = |minute: i64| datetime!(2026-12-01 10:00:00 UTC) + Duration::minutes(minute);
        let between = s.object_at(&web(), at(25)).await.unwrap().unwrap();
        assert_eq!(between.object, v2.object, "{name}");
        assert_eq!(between.revision.unwrap().resource_version, "11");
        assert_eq!(s.object_at(&web(), at(-5)).await.unwrap(), None, "{name}");
        assert_eq!(
            s.object_at(&web(), at(50)).await.unwrap().unwrap().object,
            v4.object
        );

        // Deleted: its last state is kept; then a new object of the same name.
        assert!(s
            .delete(HISTORY, "u1", Some("15"), Some(&note(false)))
            .await
            .unwrap());
        let mut v5 = deployment("u2", 20, "web:4", 1, 60);
        v5.sync_at = OffsetDateTime::now_utc() + Duration::hours(1);
        s.upsert(std::slice::from_ref(&v5)).await.unwrap();
        let history = s.history(&web(), 100).await.unwrap();
        let seen: Vec<(Change, &str, &str)> = history
            .iter()
            .map(|r| {
                let r2 = &r.revision;
                (r2.change, r2.uid.as_str(), r2.resource_version.as_str())
            })
            .collect();
        assert_eq!(
            seen[..3],
            [
                (Change::Created, "u2", "20"),
                (Change::Deleted, "u1", "15"),
                (Change::Updated, "u1", "14")
            ],
            "{name}"
        );
        assert_eq!(
            history[1].object.as_ref(),
            Some(&v4.object),
            "{name}: last state"
        );
        assert_eq!(
            history[5].object.as_ref(),
            Some(&v1.object),
            "{name}: rebuilt from it"
        );
        let gone = OffsetDateTime::now_utc() + Duration::minutes(1);
        assert_eq!(
            s.object_at(&web(), gone).await.unwrap(),
            None,
            "{name}: deleted then"
        );
        assert_eq!(
            s.object_at(&web(), at(35)).await.unwrap().unwrap().object,
            v3.object
        );

        // What changed in the cluster, newest first, counted.
        let page = s.changes(&changes_in(HISTORY), 0, 3).await.unwrap();
        assert_eq!(page.total, 6, "{name}");
        assert_eq!(page.items.len(), 3);
        assert_eq!(page.items[0].resource_version, "20");
        assert!(page
            .items
            .iter()
            .all(|r| r.back.is_none() && r.state.is_none()));
        let counts = s.change_counts(&changes_in(HISTORY)).await.unwrap();
        let buckets = |b: &[Bucket]| {
            b.iter()
                .map(|b| (b.key.clone(), b.count))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            buckets(&counts.by_change),
            [
                ("updated".to_owned(), 3),
                ("created".to_owned(), 2),
                ("deleted".to_owned(), 1)
            ],
            "{name}"
        );
        assert_eq!(
            buckets(&counts.by_kind),
            [("Deployment".to_owned(), 6)],
            "{name}"
        );
        let window = ChangeQuery {
            since: Some(at(10)),
            until: Some(at(40)),
            changes: vec![Change::Updated],
            ..changes_in(HISTORY)
        };
        let page = s.changes(&window, 0, 10).await.unwrap();
        let versions: Vec<&str> = page
            .items
            .iter()
            .map(|r| r.resource_version.as_str())
            .collect();
        assert_eq!(versions, ["13", "11"], "{name}: [since, until)");
        let refused = ChangeQuery {
            filter: parse("select * from resources where contains(content, 'x')")
                .unwrap()
                .filter,
            ..changes_in(HISTORY)
        };
        assert!(s.changes(&refused, 0, 10).await.is_err(), "{name}");
    }
}

#[tokio::test]
async fn a_relist_keeps_what_went_unseen_as_late_deletions_and_expiry_removes_only_what_is_due() {
    let backends = backends().await;
    for b in &backends {
        let (s, name) = (b.storage.as_ref(), b.name);
        let cluster = "relisted";
        let object = |uid: &str, keep_until: OffsetDateTime| ResourceDocument {
            cluster: cluster.to_owned(),
            name: uid.to_owned(),
            history: Some(HistoryNote {
                keep_until,
                ..note(false)
            }),
            ..deployment(uid, 100, "web:1", 1, 0)
        };
        let soon = datetime!(2026-12-02 00:00:00 UTC);
        let later = datetime!(2026-12-09 00:00:00 UTC);
        s.upsert(&[object("a", soon), object("b", later), object("c", later)])
            .await
            .unwrap();
        // A relist that began after they were written saw none of them: gone meanwhile.
        let relist = datetime!(2026-12-01 11:00:00 UTC);
        let purged = s
            .purge_unseen(
                cluster,
                "apps/v1",
                "Deployment",
                Some("shop"),
                relist,
                Some(&note(true)),
            )
            .await
            .unwrap();
        assert_eq!(purged, 3, "{name}");
        let deleted = ChangeQuery {
            changes: vec![Change::Deleted],
            ..changes_in(cluster)
        };
        let page = s.changes(&deleted, 0, 10).await.unwrap();
        assert_eq!(page.total, 3, "{name}");
        assert!(page.items.iter().all(|r| r.late), "{name}: seen late");
        let sizes = s.history_sizes().await.unwrap();
        let size = sizes.iter().find(|size| size.cluster == cluster).unwrap();
        assert_eq!(size.revisions, 6, "{name}");
        assert!(size.bytes > 0, "{name}: the deletions' last states");

        // Due: a's creation only (the deletions keep until 2030).
        let removed = s
            .expire(datetime!(2026-12-03 00:00:00 UTC), caps(1_000, u64::MAX))
            .await
            .unwrap();
        assert!(removed >= 1, "{name}");
        let left = s.changes(&changes_in(cluster), 0, 10).await.unwrap();
        assert_eq!(left.total, 5, "{name}");
        assert!(
            !left
                .items
                .iter()
                .any(|r| r.uid == "a" && r.change == Change::Created),
            "{name}"
        );
        // Over the cap: the oldest go.
        s.expire(datetime!(2026-12-03 00:00:00 UTC), caps(3, u64::MAX))
            .await
            .unwrap();
        let left = s.changes(&changes_in(cluster), 0, 10).await.unwrap();
        assert_eq!(left.total, 3, "{name}");
        assert!(
            left.items.iter().all(|r| r.change == Change::Deleted),
            "{name}"
        );
    }
}

#[tokio::test]
async fn an_object_is_created_and_deleted_once_whatever_a_paused_writer_lands_between_relists() {
    let backends = backends().await;
    for b in &backends {
        let (s, name) = (b.storage.as_ref(), b.name);
        let cluster = "resurrected";
        let at = |version: u32, minute: i64| ResourceDocument {
            cluster: cluster.to_owned(),
            ..deployment("r1", version, &format!("web:{version}"), 1, minute)
        };
        let late = note(true);
        let purge = |minute: i64| {
            s.purge_unseen(
                cluster,
                "apps/v1",
                "Deployment",
                Some("shop"),
                datetime!(2026-12-01 10:00:00 UTC) + Duration::minutes(minute),
                Some(&late),
            )
        };
        s.upsert(std::slice::from_ref(&at(10, 0))).await.unwrap();
        s.upsert(std::slice::from_ref(&at(11, 1))).await.unwrap();
        // The next owner's relist finds it gone; then the paused owner's write of a change
        // it saw before lands, and the relist after that finds it gone again.
        assert_eq!(purge(5).await.unwrap(), 1, "{name}");
        s.upsert(std::slice::from_ref(&at(12, 2))).await.unwrap();
        assert_eq!(purge(10).await.unwrap(), 1, "{name}");
        let page = s.changes(&changes_in(cluster), 0, 10).await.unwrap();
        let seen: Vec<(Change, &str)> = page
            .items
            .iter()
            .map(|r| (r.change, r.resource_version.as_str()))
            .collect();
        let count = |change: Change| seen.iter().filter(|(c, _)| *c == change).count();
        assert_eq!(count(Change::Created), 1, "{name}: {seen:?}");
        assert_eq!(count(Change::Deleted), 1, "{name}: {seen:?}");
        // The deletion kept is the newest: its state is the object's last.
        let deletion = page
            .items
            .iter()
            .find(|r| r.change == Change::Deleted)
            .unwrap();
        assert_eq!(deletion.resource_version, "12", "{name}");
        assert!(deletion.late, "{name}");
        // The same deletion written again, or an older one, changes nothing.
        s.upsert(std::slice::from_ref(&at(11, 3))).await.unwrap();
        purge(15).await.unwrap();
        let again = s.changes(&changes_in(cluster), 0, 10).await.unwrap();
        assert_eq!(again.total, page.total, "{name}");
        let deletion = again
            .items
            .iter()
            .find(|r| r.change == Change::Deleted)
            .unwrap();
        assert_eq!(
            deletion.resource_version, "12",
            "{name}: not replaced by an older one"
        );
    }
}

#[tokio::test]
async fn an_import_of_what_was_there_before_makes_no_revision_but_its_changes_do() {
    let backends = backends().await;
    for b in &backends {
        let (s, name) = (b.storage.as_ref(), b.name);
        let cluster = "imported";
        let imported = |version: u32, image: &str, minute: i64| ResourceDocument {
            cluster: cluster.to_owned(),
            history: Some(HistoryNote {
                preexisting: true,
                ..note(true)
            }),
            ..deployment("imp-1", version, image, 1, minute)
        };
        // The cluster's first list: the Deployment was there before karpor watched.
        s.upsert(&[imported(10, "web:1", 0)]).await.unwrap();
        let page = s.changes(&changes_in(cluster), 0, 10).await.unwrap();
        assert_eq!(page.total, 0, "{name}: an import is no change");
        // A relist that finds it changed keeps the change (late), a watch's change too.
        s.upsert(&[imported(11, "web:2", 5)]).await.unwrap();
        let watched = ResourceDocument {
            cluster: cluster.to_owned(),
            ..deployment("imp-1", 12, "web:3", 1, 10)
        };
        s.upsert(&[watched]).await.unwrap();
        let page = s.changes(&changes_in(cluster), 0, 10).await.unwrap();
        let versions: Vec<(&str, Change)> = page
            .items
            .iter()
            .map(|r| (r.resource_version.as_str(), r.change))
            .collect();
        assert_eq!(
            versions,
            [("12", Change::Updated), ("11", Change::Updated)],
            "{name}"
        );
        // The imported state is still there to rebuild, before the first change.
        let at = s
            .object_at(
                &ObjectName {
                    cluster: cluster.to_owned(),
                    ..web()
                },
                datetime!(2026-12-01 10:02:00 UTC),
            )
            .await
            .unwrap()
            .expect("the imported state");
        assert_eq!(
            at.object["spec"]["template"]["spec"]["containers"][0]["image"], "web:1",
            "{name}"
        );
    }
}

fn caps(revisions: u64, bytes: u64) -> HistoryCaps {
    HistoryCaps { revisions, bytes }
}

#[tokio::test]
async fn a_cluster_over_its_bytes_loses_its_oldest_revisions() {
    let backends = backends().await;
    for b in &backends {
        let (s, name) = (b.storage.as_ref(), b.name);
        let cluster = "capped";
        let version = |v: u32, image: &str, minute: i64| ResourceDocument {
            cluster: cluster.to_owned(),
            ..deployment("cap-1", v, image, 1, minute)
        };
        // A creation (no bytes) and three updates of patches of one size.
        for (v, image, minute) in [
            (10, "web:1", 0),
            (11, "web:2", 1),
            (12, "web:3", 2),
            (13, "web:4", 3),
        ] {
            s.upsert(&[version(v, image, minute)]).await.unwrap();
        }
        let sizes = s.history_sizes().await.unwrap();
        let size = sizes.iter().find(|s| s.cluster == cluster).unwrap();
        assert_eq!(size.revisions, 4, "{name}");
        // Room for two patches: a third of the bytes over, at the mean of a quarter's
        // worth more than that each, takes the two oldest.
        let removed = s
            .expire(
                datetime!(2026-12-01 00:00:00 UTC),
                caps(1_000, size.bytes * 2 / 3),
            )
            .await
            .unwrap();
        assert_eq!(removed, 2, "{name}: of {} bytes", size.bytes);
        let left = s.changes(&changes_in(cluster), 0, 10).await.unwrap();
        let versions: Vec<&str> = left
            .items
            .iter()
            .map(|r| r.resource_version.as_str())
            .collect();
        assert_eq!(versions, ["13", "12"], "{name}");
    }
}

/// A small deterministic generator (xorshift): the same writes every run.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % sides as u64) as usize
    }
}

/// What the audit routes sum, told from a model of the stored documents: each scope's
/// totals and its rules by documents.
fn audit_of<'a>(
    docs: impl Iterator<Item = &'a ResourceDocument>,
) -> (u64, f64, karpor_audit::SeverityCounts, Vec<Bucket>) {
    let (mut n, mut score, mut counts) = (0, 0.0, karpor_audit::SeverityCounts::default());
    let mut rules: BTreeMap<String, u64> = BTreeMap::new();
    for d in docs {
        n += 1;
        score += d.score();
        for f in &d.issues {
            counts.add(f.severity);
        }
        let mut own: Vec<&str> = d.issues.iter().map(|f| f.rule.as_str()).collect();
        own.sort_unstable();
        own.dedup();
        for rule in own {
            *rules.entry(rule.to_owned()).or_default() += 1;
        }
    }
    let mut buckets: Vec<Bucket> = rules
        .into_iter()
        .map(|(key, count)| Bucket { key, count })
        .collect();
    buckets.sort_by(|a, b| b.count.cmp(&a.count).then(a.key.cmp(&b.key)));
    (n, score, counts, buckets)
}

/// Audit totals of every scope the routes ask for (everything, a cluster, a namespace, a
/// rule) stay equal to a recount of the documents through random upserts, changed
/// findings, soft and hard deletes, purges and a cluster's removal: the embedded backend
/// keeps them as counters at write time, the others aggregate.
#[tokio::test]
async fn audit_totals_equal_a_recount_after_random_writes_and_deletes() {
    let backends = backends().await;
    let pool = documents();
    let mut model: BTreeMap<String, ResourceDocument> = BTreeMap::new();
    let mut dice = Dice(0x2545_f491_4f6c_dd1d);
    let mut version = 10_000;
    for step in 0..24 {
        match dice.roll(8) {
            0..=4 => {
                let batch: Vec<ResourceDocument> = (0..1 + dice.roll(40))
                    .map(|_| {
                        let mut d = pool[dice.roll(pool.len())].clone();
                        d.issues = findings(dice.roll(3));
                        d.deleted = dice.roll(6) == 0;
                        version += 1;
                        d.resource_version = version.to_string();
                        d
                    })
                    .collect();
                for b in &backends {
                    b.storage.upsert(&batch).await.unwrap();
                }
                for d in batch {
                    model.insert(d.id(), d);
                }
            }
            5 | 6 => {
                let d = &pool[dice.roll(pool.len())];
                for b in &backends {
                    b.storage
                        .delete(&d.cluster, &d.uid, None, None)
                        .await
                        .unwrap();
                }
                model.remove(&d.id());
            }
            _ => {
                let (cluster, namespace) = (CLUSTERS[dice.roll(3)], NAMESPACES[dice.roll(4)]);
                let before = datetime!(2026-01-01 00:00:00 UTC)
                    + Duration::milliseconds(1_000_000 + dice.roll(300) as i64 * 37);
                for b in &backends {
                    if step == 20 {
                        b.storage.delete_cluster(cluster).await.unwrap();
                    } else {
                        b.storage
                            .purge_unseen(cluster, "v1", "Pod", Some(namespace), before, None)
                            .await
                            .unwrap();
                    }
                }
                model.retain(|_, d| {
                    d.cluster != cluster
                        || (step != 20
                            && (d.kind != "Pod" || d.namespace != namespace || d.sync_at >= before))
                });
            }
        }
        for sql in [
            "select * from resources",
            "select * from resources where cluster = 'beta'",
            "select * from resources where cluster = 'alpha' and namespace = 'web'",
            "select * from resources where issue = 'privileged'",
            "select * from resources where issue = 'image-tag' and cluster = 'gamma'",
        ] {
            let query = parse(sql).unwrap();
            let scope = |d: &&ResourceDocument| {
                !d.deleted
                    && (!sql.contains("'beta'") || d.cluster == "beta")
                    && (!sql.contains("'alpha'") || (d.cluster == "alpha" && d.namespace == "web"))
                    && (!sql.contains("'gamma'") || d.cluster == "gamma")
                    && (!sql.contains("issue = ")
                        || d.issues
                            .iter()
                            .any(|f| sql.contains(&format!("'{}'", f.rule))))
            };
            let (n, score, counts, rules) = audit_of(model.values().filter(scope));
            for b in &backends {
                let totals = b.storage.audit_totals(&query).await.unwrap();
                let at = format!("{}: step {step}: {sql}", b.name);
                assert_eq!(totals.resources, n, "{at}");
                assert_eq!(totals.findings, counts, "{at}");
                assert!((totals.score_sum - score).abs() < 1e-6, "{at}");
                let buckets = b.storage.terms(&Field::Issue, &query, 10).await.unwrap();
                assert_eq!(buckets, rules, "{at}");
            }
        }
    }
    assert!(!model.is_empty());
}

/// What an agent compares after a restart: each type's digest, from storage, equals the
/// one made from the documents themselves, by cluster and namespace, deleted ones left out.
#[tokio::test]
async fn version_digests_agree_with_the_documents() {
    let backends = loaded().await;
    let docs = documents();
    let expected = |cluster: &str, kind: &str, namespace: Option<&str>| {
        let mut digest = karpor_storage::VersionDigest::default();
        for d in docs.iter().filter(|d| {
            d.cluster == cluster
                && d.kind == kind
                && d.api_version == "v1"
                && !d.deleted
                && namespace.is_none_or(|n| d.namespace == n)
        }) {
            digest.add(&d.uid, &d.resource_version);
        }
        digest
    };
    let namespace = docs
        .iter()
        .find(|d| d.cluster == "alpha" && d.kind == "Pod" && !d.namespace.is_empty())
        .unwrap()
        .namespace
        .clone();
    for b in &backends {
        let s = b.storage.as_ref();
        for (cluster, namespace) in [
            ("alpha", None),
            ("alpha", Some(namespace.as_str())),
            ("beta", None),
        ] {
            let got = s.versions(cluster, "v1", "Pod", namespace).await.unwrap();
            let want = expected(cluster, "Pod", namespace);
            assert!(want.count > 0, "{}: the case holds pods", b.name);
            assert_eq!(got, want, "{}: {cluster} {namespace:?}", b.name);
        }
        assert_eq!(
            s.versions("nowhere", "v1", "Pod", None).await.unwrap(),
            karpor_storage::VersionDigest::default()
        );
        // A document marked deleted is no longer counted; another version differs.
        let pod = docs
            .iter()
            .find(|d| d.cluster == "beta" && d.kind == "Pod" && !d.deleted)
            .unwrap();
        let before = s.versions("beta", "v1", "Pod", None).await.unwrap();
        let at = datetime!(2026-06-01 00:00:00 UTC);
        assert!(s
            .soft_delete("beta", &pod.uid, at, None, None)
            .await
            .unwrap());
        let after = s.versions("beta", "v1", "Pod", None).await.unwrap();
        assert_eq!(after.count, before.count - 1, "{}", b.name);
        assert_ne!(after, before, "{}", b.name);
    }
}
