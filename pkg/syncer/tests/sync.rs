//! The syncer against the test script's real kube-apiservers (and a private one this test
//! may kill): objects created, changed and deleted in the clusters appear, change and
//! vanish in storage; Secret values never reach it; selectors are honoured; a removed
//! cluster leaves nothing; a dead cluster or a dead storage is caught up with; a rule
//! narrowed, widened, retargeted and deleted leaves storage equal to what the rules
//! select; the built-in rules pick up a custom resource whose CRD comes later; history
//! keeps every change once, through restarts and hand-overs, on both backends.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use karpor_core::model::{
    Cluster, ClusterSelector, Kubeconfig, ResourceSelector, RuleHistory, SyncRule, Transform,
};
use karpor_health::{
    CheckOutcome, Endpoint, HealthChecker, HealthMetrics, Membership, Reason, ReportRequest,
    Settings, Status,
};
use karpor_metastore::{Metastore, MetastoreConfig};
use karpor_storage::{Change, ElasticConfig, ObjectName, RefreshPolicy, Storage, StorageConfig};
use karpor_syncer::{RuleInForce, SyncSettings, SyncState, Syncer, SyncerParts, TypeState};
use karpor_testkit::cluster::{
    configmaps, kube_name as unique, namespaces, secrets, widgets, Kube, Obj, LIMIT,
};
use karpor_testkit::process::wait_for;
use karpor_testkit::services::{Apiserver, Elastic};
use kube::api::ApiResource;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A syncer on its own metadata store and storage.
struct Harness {
    metastore: Metastore,
    storage: Arc<dyn Storage>,
    health: HealthChecker,
    syncer: Option<Syncer>,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Harness {
    async fn start(storage: Option<StorageConfig>) -> Harness {
        Harness::start_with(storage, Duration::from_secs(2)).await
    }

    /// With discovery running again every `rediscover` only.
    async fn start_with(storage: Option<StorageConfig>, rediscover: Duration) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let metastore = karpor_metastore::connect(&MetastoreConfig::Sqlite {
            path: dir.path().join("meta.db"),
            encryption_key_file: None,
        })
        .await
        .unwrap();
        let storage = storage.unwrap_or(StorageConfig::Sqlite {
            path: dir.path().join("resources.db"),
        });
        let storage = karpor_storage::connect(&storage).await.unwrap();
        Harness::on(metastore, storage, rediscover, dir)
    }

    /// Another syncer on the same metadata store and storage (a restart, or a second
    /// member sharing the clusters).
    fn another(&self) -> Harness {
        Harness::on(
            self.metastore.clone(),
            self.storage.clone(),
            Duration::from_secs(2),
            tempfile::tempdir().unwrap(),
        )
    }

    fn on(
        metastore: Metastore,
        storage: Arc<dyn Storage>,
        rediscover: Duration,
        dir: tempfile::TempDir,
    ) -> Harness {
        let mut registry = Registry::default();
        let health = HealthChecker::new(
            Settings {
                check_timeout: Duration::from_secs(2),
                deadline: Duration::from_secs(3),
                cache_ttl: Duration::ZERO,
                ..Settings::default()
            },
            HealthMetrics::new(&mut registry),
        );
        let mut settings = SyncSettings {
            rediscover,
            resync: Duration::from_secs(5),
            ..SyncSettings::default()
        };
        settings.writer.window = Duration::from_millis(50);
        let mut syncer = Syncer::new(SyncerParts {
            audit: Default::default(),
            member: karpor_testkit::unique("syncer").replace('_', "-"),
            clients: karpor_syncer::client_cache(Default::default()),
            metastore: metastore.clone(),
            storage: storage.clone(),
            health: health.clone(),
            metrics: karpor_syncer::metrics(&mut registry),
            settings,
        });
        health.register(Arc::new(syncer.check()), Membership::READYZ, None);
        let stop = CancellationToken::new();
        syncer.start(stop.clone());
        Harness {
            metastore,
            storage,
            health,
            syncer: Some(syncer),
            stop,
            _dir: dir,
        }
    }

    async fn register(&self, name: &str, kubeconfig: String) {
        self.metastore
            .create(Cluster {
                name: name.to_owned(),
                display_name: String::new(),
                description: String::new(),
                labels: BTreeMap::new(),
                kubeconfig: Kubeconfig(kubeconfig),
                mode: Default::default(),
            })
            .await
            .unwrap();
    }

    async fn rule(&self, rule: SyncRule) {
        self.metastore.create(rule).await.unwrap();
    }

    /// Stores `rule` (created or replaced); its version.
    async fn put_rule(&self, rule: SyncRule) -> i64 {
        match self.metastore.get::<SyncRule>(&rule.name).await.unwrap() {
            Some(current) => {
                self.metastore
                    .update(rule, current.version)
                    .await
                    .unwrap()
                    .version
            }
            None => self.metastore.create(rule).await.unwrap().version,
        }
    }

    /// Waits until `cluster` follows exactly `rules` (name and version) and has settled
    /// under them: every watched type listed (or failing), what they no longer cover
    /// swept.
    async fn settled(&self, cluster: &str, rules: &[(&str, Option<i64>)]) {
        let want: Vec<RuleInForce> = rules
            .iter()
            .map(|(name, version)| RuleInForce {
                name: name.to_string(),
                version: *version,
            })
            .collect();
        let status = self.syncer.as_ref().unwrap().status();
        let started = std::time::Instant::now();
        loop {
            let snapshot = status.cluster(cluster);
            if let Some(s) = &snapshot {
                if s.rules == want
                    && s.state == SyncState::Synced
                    && s.types.iter().all(|t| t.state != TypeState::Syncing)
                {
                    return;
                }
            }
            assert!(
                started.elapsed() < LIMIT,
                "{cluster} did not settle under {want:?}: {snapshot:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every document of `cluster` in `namespace` (or cluster-scoped ones named so):
    /// uid to kind, name and resourceVersion.
    async fn stored(&self, cluster: &str, namespace: &str) -> BTreeMap<String, Obj> {
        let sql = format!(
            "select * from resources where cluster = '{cluster}' and (namespace = '{namespace}' or (kind = 'Namespace' and name = '{namespace}'))"
        );
        let query = karpor_search::parse(&sql).unwrap();
        let mut all = BTreeMap::new();
        let mut from = 0;
        loop {
            let Ok(page) = self.storage.search(&query, from, 500).await else {
                return BTreeMap::from([("<storage down>".into(), Obj::default())]);
            };
            for d in &page.items {
                all.insert(
                    d.uid.clone(),
                    Obj {
                        kind: d.kind.clone(),
                        name: d.name.clone(),
                        version: d.resource_version.clone(),
                    },
                );
            }
            from += page.items.len() as u64;
            if page.items.is_empty() || from >= page.total {
                return all;
            }
        }
    }

    async fn readyz(&self) -> karpor_health::HealthReport {
        self.health
            .report(Endpoint::Readyz, &ReportRequest::default())
            .await
            .unwrap()
    }

    /// Stops the syncer; its directory (the SQLite files, when storage is there), for a
    /// syncer that goes on with the same stores.
    async fn stop(mut self) -> tempfile::TempDir {
        self.stop.cancel();
        if let Some(syncer) = self.syncer.take() {
            syncer.join().await;
        }
        self._dir
    }
}

fn rule(name: &str, resources: &[(&str, &str)], namespaces: &[&str]) -> SyncRule {
    SyncRule {
        name: name.into(),
        description: String::new(),
        clusters: ClusterSelector::All,
        resources: resources
            .iter()
            .map(|(group, plural)| ResourceSelector {
                group: group.to_string(),
                version: "v1".into(),
                resource: plural.to_string(),
            })
            .collect(),
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        label_selector: None,
        field_selector: None,
        transform: Transform::default(),
        keep_after_delete: false,
        history: None,
    }
}

/// Waits until storage holds exactly the live objects.
async fn converges(
    h: &Harness,
    kube: &Kube,
    cluster: &str,
    namespace: &str,
    types: &[ApiResource],
) {
    let started = std::time::Instant::now();
    loop {
        let live = kube.live(namespace, types).await;
        let stored = h.stored(cluster, namespace).await;
        if live == stored {
            return;
        }
        assert!(
            started.elapsed() < LIMIT,
            "{cluster}/{namespace}: storage did not converge\n live: {live:?}\n stored: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_appear_change_and_vanish_in_both_clusters() {
    let clusters = [
        ("a", Kube::shared("KARPOR_TEST_KUBECONFIG_A").await),
        ("b", Kube::shared("KARPOR_TEST_KUBECONFIG_B").await),
    ];
    let ns = unique("objs");
    let h = Harness::start(None).await;
    let mut objects = rule(
        "a-objects",
        &[
            ("", "configmaps"),
            ("", "secrets"),
            ("karpor.test", "widgets"),
        ],
        &[&ns],
    );
    objects.transform.trim = vec!["data.dropped".into()];
    h.rule(objects).await;
    let mut namespace_rule = rule("b-namespace", &[("", "namespaces")], &[]);
    namespace_rule.field_selector = Some(format!("metadata.name={ns}"));
    h.rule(namespace_rule).await;
    let types = [configmaps(), secrets(), widgets(), namespaces()];

    for (name, kube) in &clusters {
        kube.widget_crd().await;
        kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
            .await;
        h.register(name, kube.kubeconfig.clone()).await;
    }
    for (_, kube) in &clusters {
        let ns = Some(ns.as_str());
        kube.create(
            &configmaps(),
            ns,
            json!({"metadata": {"name": "settings"},
            "data": {"color": "blue", "dropped": "trimmed-away"}}),
        )
        .await;
        kube.create(&secrets(), ns, json!({"metadata": {"name": "creds",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"stringData\":{\"password\":\"hunter2-karpor\"}}"}},
            "stringData": {"password": "hunter2-karpor"}}))
            .await;
        kube.create(
            &widgets(),
            ns,
            json!({"metadata": {"name": "gear"}, "spec": {"teeth": 12}}),
        )
        .await;
    }
    for (name, kube) in &clusters {
        converges(&h, kube, name, &ns, &types).await;
    }
    // The API server's version and latency are measured by the sync itself, before anyone
    // probes `/readyz` (nothing has here).
    for (name, _) in &clusters {
        let status = h.syncer.as_ref().unwrap().status().cluster(name).unwrap();
        let version = status.server_version.unwrap_or_default();
        assert!(version.starts_with('v'), "{name}: {version:?}");
        assert!(status.latency_ms.is_some(), "{name}");
        assert!(status.server_seen_at.is_some(), "{name}");
    }

    // Secret values and trimmed paths never reach storage, in any form.
    let everything =
        karpor_search::parse(&format!("select * from resources where namespace = '{ns}'")).unwrap();
    let page = h.storage.search(&everything, 0, 100).await.unwrap();
    assert_eq!(page.total, 6, "{:?}", page.items);
    let text = serde_json::to_string(&page.items).unwrap();
    for secret in ["hunter2-karpor", "aHVudGVyMi1rYXJwb3I", "trimmed-away"] {
        assert!(!text.contains(secret), "{secret} reached storage");
    }
    let found =
        karpor_search::parse("select * from resources where contains(content, 'hunter2')").unwrap();
    assert_eq!(h.storage.search(&found, 0, 10).await.unwrap().total, 0);
    let secret = page.items.iter().find(|d| d.kind == "Secret").unwrap();
    assert_eq!(secret.object["data"], json!({"password": null}));

    for (name, kube) in &clusters {
        kube.patch(
            &configmaps(),
            &ns,
            "settings",
            json!({"data": {"color": "red"}}),
        )
        .await;
        kube.patch(&widgets(), &ns, "gear", json!({"spec": {"teeth": 13}}))
            .await;
        converges(&h, kube, name, &ns, &types).await;
    }
    for (name, kube) in &clusters {
        let in_ns = Some(ns.as_str());
        kube.delete(&configmaps(), in_ns, "settings").await;
        kube.delete(&secrets(), in_ns, "creds").await;
        kube.delete(&widgets(), in_ns, "gear").await;
        kube.delete_namespace(&ns).await;
        converges(&h, kube, name, &ns, &types).await;
        assert!(h.stored(name, &ns).await.is_empty());
    }
    let report = h.readyz().await;
    assert_eq!(report.status(), Status::Pass, "{}", report.to_text(true));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_selector_rule_syncs_only_matching_objects() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("labels");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let h = Harness::start(None).await;
    let mut only_a = rule("team-a", &[("", "configmaps")], &[&ns]);
    only_a.label_selector = Some("team=a".into());
    h.rule(only_a).await;
    let in_ns = Some(ns.as_str());
    kube.create(
        &configmaps(),
        in_ns,
        json!({"metadata": {"name": "one", "labels": {"team": "a"}}}),
    )
    .await;
    kube.create(
        &configmaps(),
        in_ns,
        json!({"metadata": {"name": "two", "labels": {"team": "b"}}}),
    )
    .await;
    h.register("a", kube.kubeconfig.clone()).await;

    let names = |stored: BTreeMap<String, Obj>| -> Vec<String> {
        let mut names: Vec<String> = stored.into_values().map(|o| o.name).collect();
        names.sort();
        names
    };
    let expect = |want: &'static [&'static str]| {
        let h = &h;
        let ns = ns.clone();
        async move {
            let started = std::time::Instant::now();
            loop {
                let got = names(h.stored("a", &ns).await);
                if got == want {
                    return;
                }
                assert!(started.elapsed() < LIMIT, "stored {got:?}, want {want:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    expect(&["one"]).await;
    kube.patch(
        &configmaps(),
        &ns,
        "two",
        json!({"metadata": {"labels": {"team": "a"}}}),
    )
    .await;
    expect(&["one", "two"]).await;
    kube.patch(
        &configmaps(),
        &ns,
        "one",
        json!({"metadata": {"labels": {"team": "c"}}}),
    )
    .await;
    expect(&["two"]).await;
    kube.delete_namespace(&ns).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_cluster_leaves_no_documents() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_B").await;
    let ns = unique("removed");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(&configmaps(), Some(&ns), json!({"metadata": {"name": "x"}}))
        .await;
    let h = Harness::start(None).await;
    h.rule(rule("cms", &[("", "configmaps")], &[&ns])).await;
    h.register("gone-soon", kube.kubeconfig.clone()).await;
    converges(&h, &kube, "gone-soon", &ns, &[configmaps()]).await;
    assert!(!h.stored("gone-soon", &ns).await.is_empty());
    let report = h.readyz().await;
    assert!(report
        .entries
        .iter()
        .any(|e| &*e.name == "Cluster/gone-soon"));

    h.metastore
        .delete::<Cluster>("gone-soon", None)
        .await
        .unwrap();
    let storage = h.storage.clone();
    wait_for(LIMIT, "the cluster's documents are removed", || {
        let storage = storage.clone();
        async move { storage.count(Some("gone-soon")).await.unwrap() == 0 }
    })
    .await;
    let report = h.readyz().await;
    assert!(!report
        .entries
        .iter()
        .any(|e| &*e.name == "Cluster/gone-soon"));
    kube.delete_namespace(&ns).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_apiserver_fails_only_its_own_check_and_is_caught_up_with() {
    let Some(mut private) = Apiserver::start() else {
        panic!("KARPOR_TEST_APISERVER_BIN is not set: run scripts/services.sh start");
    };
    let dying = Kube::from_text(private.kubeconfig()).await;
    let alive = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("dead");
    for kube in [&dying, &alive] {
        kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
            .await;
        kube.create(
            &configmaps(),
            Some(&ns),
            json!({"metadata": {"name": "before"}}),
        )
        .await;
    }
    let h = Harness::start(None).await;
    h.rule(rule("cms", &[("", "configmaps")], &[&ns])).await;
    h.register("dying", dying.kubeconfig.clone()).await;
    h.register("alive", alive.kubeconfig.clone()).await;
    converges(&h, &dying, "dying", &ns, &[configmaps()]).await;
    converges(&h, &alive, "alive", &ns, &[configmaps()]).await;
    // Storage can equal a cluster a moment before its first list is recorded as done
    // (the purge that ends it is still queued): wait for both, or Syncer fails below.
    wait_for(LIMIT, "both clusters finished their first list", || async {
        h.readyz().await.status() == Status::Pass
    })
    .await;

    private.process.kill();
    wait_for(LIMIT, "Cluster/dying fails as unreachable", || async {
        let report = h.readyz().await;
        let dying = report.entries.iter().find(|e| &*e.name == "Cluster/dying");
        matches!(dying.map(|e| &e.outcome), Some(CheckOutcome::Fail(f)) if f.reason == Reason::Unreachable)
    })
    .await;
    let report = h.readyz().await;
    assert_eq!(report.status(), Status::Warn, "{}", report.to_text(false));
    assert!(report.passed());
    for entry in &report.entries {
        if &*entry.name != "Cluster/dying" {
            assert!(entry.outcome.is_pass(), "{}", report.to_text(true));
        }
    }
    // The other cluster keeps syncing.
    alive
        .create(
            &configmaps(),
            Some(&ns),
            json!({"metadata": {"name": "during"}}),
        )
        .await;
    converges(&h, &alive, "alive", &ns, &[configmaps()]).await;

    private.process.restart();
    let dying = Kube::from_text(private.kubeconfig()).await;
    dying
        .create(
            &configmaps(),
            Some(&ns),
            json!({"metadata": {"name": "after"}}),
        )
        .await;
    dying.delete(&configmaps(), Some(&ns), "before").await;
    converges(&h, &dying, "dying", &ns, &[configmaps()]).await;
    wait_for(LIMIT, "readyz passes again", || async {
        h.readyz().await.status() == Status::Pass
    })
    .await;
    alive.delete_namespace(&ns).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_that_stops_while_objects_change_ends_equal_to_the_cluster() {
    let Some(mut elastic) = Elastic::start() else {
        panic!("KARPOR_TEST_NOIDA_BIN is not set: run scripts/services.sh start");
    };
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_B").await;
    let ns = unique("outage");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let in_ns = Some(ns.as_str());
    for i in 0..40 {
        kube.create(
            &configmaps(),
            in_ns,
            json!({"metadata": {"name": format!("cm-{i}")}, "data": {"v": "0"}}),
        )
        .await;
    }
    let h = Harness::start(Some(StorageConfig::Elasticsearch(ElasticConfig {
        url: elastic.url(),
        username: None,
        password: None,
        index: "karpor-resources".into(),
        refresh: RefreshPolicy::WaitFor,
    })))
    .await;
    h.rule(rule("cms", &[("", "configmaps")], &[&ns])).await;
    h.register("b", kube.kubeconfig.clone()).await;
    converges(&h, &kube, "b", &ns, &[configmaps()]).await;

    // A clean stop, so the server keeps what it acknowledged.
    elastic.process.stop();
    for i in 0..10 {
        kube.patch(
            &configmaps(),
            &ns,
            &format!("cm-{i}"),
            json!({"data": {"v": "1"}}),
        )
        .await;
    }
    for i in 10..20 {
        kube.delete(&configmaps(), in_ns, &format!("cm-{i}")).await;
    }
    for i in 40..60 {
        kube.create(
            &configmaps(),
            in_ns,
            json!({"metadata": {"name": format!("cm-{i}")}}),
        )
        .await;
    }
    wait_for(LIMIT, "readiness fails while storage is down", || async {
        h.readyz().await.status() == Status::Fail
    })
    .await;

    elastic.process.restart();
    converges(&h, &kube, "b", &ns, &[configmaps()]).await;
    kube.delete_namespace(&ns).await;
    h.stop().await;
}

/// The kinds of the documents `stored` compares.
async fn kinds(h: &Harness, cluster: &str, namespace: &str) -> Vec<String> {
    let mut kinds: Vec<String> = h
        .stored(cluster, namespace)
        .await
        .into_values()
        .map(|o| o.kind)
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The invariant: after each change of a rule (narrowed, widened, retargeted,
/// deleted), with objects created and deleted around it, storage ends exactly equal to
/// what the rules then select, uid and resourceVersion alike; documents of types no
/// longer selected go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_narrowed_widened_retargeted_and_deleted_leaves_storage_equal_to_what_it_selects() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_B").await;
    let ns = unique("rules");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let in_ns = Some(ns.as_str());
    let serviceaccounts =
        karpor_testkit::cluster::resource("", "v1", "ServiceAccount", "serviceaccounts");
    for i in 0..3 {
        kube.create(
            &configmaps(),
            in_ns,
            json!({"metadata": {"name": format!("cm-{i}")}}),
        )
        .await;
        kube.create(
            &secrets(),
            in_ns,
            json!({"metadata": {"name": format!("s-{i}")}}),
        )
        .await;
        kube.create(
            &serviceaccounts,
            in_ns,
            json!({"metadata": {"name": format!("sa-{i}")}}),
        )
        .await;
    }
    let h = Harness::start(None).await;
    let mut namespace_only = rule("a-namespace", &[("", "namespaces")], &[]);
    namespace_only.field_selector = Some(format!("metadata.name={ns}"));
    let a = h.put_rule(namespace_only).await;
    let wide = rule(
        "objects",
        &[("", "configmaps"), ("", "secrets"), ("", "serviceaccounts")],
        &[&ns],
    );
    let v = h.put_rule(wide.clone()).await;
    h.register("b", kube.kubeconfig.clone()).await;
    h.settled("b", &[("a-namespace", Some(a)), ("objects", Some(v))])
        .await;
    let everything = [
        configmaps(),
        secrets(),
        serviceaccounts.clone(),
        namespaces(),
    ];
    converges(&h, &kube, "b", &ns, &everything).await;

    // Narrowed to ConfigMaps, with a Secret created and a ConfigMap deleted around it.
    kube.create(&secrets(), in_ns, json!({"metadata": {"name": "s-new"}}))
        .await;
    kube.delete(&configmaps(), in_ns, "cm-0").await;
    let v = h
        .put_rule(rule("objects", &[("", "configmaps")], &[&ns]))
        .await;
    kube.create(
        &configmaps(),
        in_ns,
        json!({"metadata": {"name": "cm-new"}}),
    )
    .await;
    h.settled("b", &[("a-namespace", Some(a)), ("objects", Some(v))])
        .await;
    // Settled: nothing of a type no longer selected is left.
    assert_eq!(kinds(&h, "b", &ns).await, ["ConfigMap", "Namespace"]);
    converges(&h, &kube, "b", &ns, &[configmaps(), namespaces()]).await;

    // Widened again.
    kube.delete(&secrets(), in_ns, "s-1").await;
    kube.patch(
        &serviceaccounts,
        &ns,
        "sa-1",
        json!({"metadata": {"labels": {"changed": "yes"}}}),
    )
    .await;
    let v = h.put_rule(wide).await;
    kube.delete(&serviceaccounts, in_ns, "sa-2").await;
    h.settled("b", &[("a-namespace", Some(a)), ("objects", Some(v))])
        .await;
    converges(&h, &kube, "b", &ns, &everything).await;

    // Retargeted: no rule selects the cluster any more, so nothing of it stays.
    let mut elsewhere = rule("objects", &[("", "configmaps")], &[&ns]);
    elsewhere.clusters = ClusterSelector::Names(vec!["another-cluster".into()]);
    let v = h.put_rule(elsewhere).await;
    let mut namespace_elsewhere = rule("a-namespace", &[("", "namespaces")], &[]);
    namespace_elsewhere.clusters = ClusterSelector::Selector("env=elsewhere".parse().unwrap());
    let a = h.put_rule(namespace_elsewhere).await;
    kube.create(
        &configmaps(),
        in_ns,
        json!({"metadata": {"name": "cm-unseen"}}),
    )
    .await;
    h.settled("b", &[]).await;
    let _ = (a, v);
    assert_eq!(h.storage.count(Some("b")).await.unwrap(), 0);

    // Deleted: the built-in rules apply again (every type), and storage follows the
    // namespace's objects of every kind.
    h.metastore
        .delete::<SyncRule>("objects", None)
        .await
        .unwrap();
    h.metastore
        .delete::<SyncRule>("a-namespace", None)
        .await
        .unwrap();
    kube.delete(&configmaps(), in_ns, "cm-1").await;
    h.settled(
        "b",
        &[
            (karpor_syncer::DEFAULT_RULE, None),
            (karpor_syncer::DEFAULT_METADATA_RULE, None),
        ],
    )
    .await;
    converges(&h, &kube, "b", &ns, &everything).await;
    kube.delete_namespace(&ns).await;
    h.stop().await;
}

/// With no rule stored, the built-in rules sync every type: a custom resource whose CRD
/// is created after the sync settled is synced without a restart, and without waiting
/// for the next periodic discovery (an hour away here): the built-in rules watch CRDs,
/// and a change of one makes the cluster discover at once. The CRD itself is stored as
/// metadata only; once the CRD goes, so do its objects' documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_rules_sync_a_custom_resource_whose_crd_comes_later() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("crd-later");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let h = Harness::start_with(None, Duration::from_secs(3600)).await;
    h.register("a", kube.kubeconfig.clone()).await;
    h.settled(
        "a",
        &[
            (karpor_syncer::DEFAULT_RULE, None),
            (karpor_syncer::DEFAULT_METADATA_RULE, None),
        ],
    )
    .await;

    let (databases, crd_name) = kube.database_crd("db").await;
    let group = databases.group.clone();
    let crds = karpor_testkit::cluster::resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    kube.create(
        &databases,
        Some(&ns),
        json!({"metadata": {"name": "orders"}, "spec": {"engine": "postgres"}}),
    )
    .await;
    converges(&h, &kube, "a", &ns, &[databases.clone(), namespaces()]).await;
    let stored = |sql: String| {
        let storage = h.storage.clone();
        async move {
            let query = karpor_search::parse(&sql).unwrap();
            storage.search(&query, 0, 10).await.unwrap().items
        }
    };
    let found = stored(format!(
        "select * from resources where cluster = 'a' and kind = 'Database' and namespace = '{ns}'"
    ))
    .await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].object["spec"]["engine"], "postgres");
    let crd = stored(format!(
        "select * from resources where cluster = 'a' and kind = 'CustomResourceDefinition' and name = '{crd_name}'"
    ))
    .await;
    assert_eq!(crd.len(), 1, "the CRD is synced");
    assert!(
        crd[0].object.get("spec").is_none(),
        "metadata only: {}",
        crd[0].object
    );
    let status = h.syncer.as_ref().unwrap().status().cluster("a").unwrap();
    let database = status.types.iter().find(|t| t.group == group).unwrap();
    assert_eq!(
        (
            database.kind.as_str(),
            database.rule.as_str(),
            database.namespaced
        ),
        ("Database", karpor_syncer::DEFAULT_RULE, true)
    );

    kube.delete(&crds, None, &crd_name).await;
    let storage = h.storage.clone();
    let gone = karpor_search::parse(&format!(
        "select * from resources where cluster = 'a' and apiVersion = '{group}/v1'"
    ))
    .unwrap();
    wait_for(LIMIT, "the custom resources' documents are gone", || {
        let (storage, gone) = (storage.clone(), gone.clone());
        async move { storage.search(&gone, 0, 1).await.unwrap().total == 0 }
    })
    .await;
    kube.delete_namespace(&ns).await;
    h.stop().await;
}

fn deployments() -> ApiResource {
    karpor_testkit::cluster::resource("apps", "v1", "Deployment", "deployments")
}

/// The stored resourceVersion of an object, once its document is written.
async fn stored_version(h: &Harness, cluster: &str, uid: &str) -> Option<String> {
    let document = h.storage.get(cluster, uid).await.ok()??;
    Some(document.resource_version)
}

/// The live object's uid and resourceVersion, once storage holds that version.
async fn written(
    h: &Harness,
    kube: &Kube,
    r: &ApiResource,
    ns: &str,
    name: &str,
) -> (String, String) {
    let live = kube.api(r, Some(ns)).get(name).await.unwrap();
    let uid = live.metadata.uid.unwrap();
    let version = live.metadata.resource_version.unwrap();
    wait_for(LIMIT, &format!("{name} at {version} stored"), || async {
        stored_version(h, "a", &uid).await.as_deref() == Some(version.as_str())
    })
    .await;
    (uid, version)
}

fn object(ns: &str, name: &str, kind: &str) -> ObjectName {
    ObjectName {
        cluster: "a".to_owned(),
        kind: kind.to_owned(),
        namespace: ns.to_owned(),
        name: name.to_owned(),
    }
}

/// The changes (type, version, late) of an object, newest first.
async fn revisions(h: &Harness, name: &ObjectName) -> Vec<(Change, String, bool)> {
    let all = h
        .storage
        .object_revisions(name, None, None, 100)
        .await
        .unwrap();
    all.into_iter()
        .map(|r| (r.change, r.resource_version, r.late))
        .collect()
}

fn image(object: &serde_json::Value) -> &str {
    object["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

/// History against a real kube-apiserver, on each backend: every change once with its
/// diff; the object as the API server had it between two changes; a deletion's last
/// state; changes made while no syncer ran, once and marked late; no duplicate through a
/// restart and a hand-over; retention by rule; no Secret value in any revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_keeps_every_change_once_through_restarts_and_hand_overs() {
    let mut backends = vec![None];
    if let Some(url) = karpor_testkit::service("KARPOR_TEST_ES_URL") {
        backends.push(Some(StorageConfig::Elasticsearch(ElasticConfig {
            url,
            username: None,
            password: None,
            index: karpor_testkit::unique("history"),
            refresh: RefreshPolicy::True,
        })));
    }
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    for backend in backends {
        history_on(&kube, backend).await;
    }
}

async fn history_on(kube: &Kube, backend: Option<StorageConfig>) {
    let ns = unique("hist");
    let in_ns = Some(ns.as_str());
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let h = Harness::start(backend).await;
    let deploys = h
        .put_rule(rule("deploys", &[("apps", "deployments")], &[&ns]))
        .await;
    let mut secrets_rule = rule("secrets", &[("", "secrets")], &[&ns]);
    secrets_rule.history = Some(RuleHistory {
        enabled: true,
        keep: Some(Duration::from_secs(3600)),
    });
    let secrets_version = h.put_rule(secrets_rule).await;
    let rules = [
        ("deploys", Some(deploys)),
        ("secrets", Some(secrets_version)),
    ];
    h.register("a", kube.kubeconfig.clone()).await;
    // Listed first: what follows is seen as it happens, not at a list.
    h.settled("a", &rules).await;

    let web = object(&ns, "web", "Deployment");
    kube.create(
        &deployments(),
        in_ns,
        json!({"metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}}),
    )
    .await;
    kube.create(
        &secrets(),
        in_ns,
        json!({"metadata": {"name": "creds"},
        "stringData": {"password": "hunter2-history"}}),
    )
    .await;
    written(&h, kube, &deployments(), &ns, "web").await;
    let set_image = |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}});
    let mut between = None;
    for (i, tag) in ["nginx:2", "nginx:3", "nginx:4"].iter().enumerate() {
        kube.patch(&deployments(), &ns, "web", set_image(tag)).await;
        let (_, version) = written(&h, kube, &deployments(), &ns, "web").await;
        if i == 0 {
            // A moment between the second image and the third, and what the API server
            // had then.
            tokio::time::sleep(Duration::from_millis(20)).await;
            between = Some((time::OffsetDateTime::now_utc(), version));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    kube.patch(&deployments(), &ns, "web", json!({"spec": {"replicas": 3}}))
        .await;
    written(&h, kube, &deployments(), &ns, "web").await;
    kube.patch(
        &secrets(),
        &ns,
        "creds",
        json!({"stringData": {"password": "hunter3-history"}}),
    )
    .await;
    written(&h, kube, &secrets(), &ns, "creds").await;

    let history = h.storage.history(&web, 100).await.unwrap();
    let changes: Vec<Change> = history.iter().map(|r| r.revision.change).collect();
    assert_eq!(
        changes,
        [
            Change::Updated,
            Change::Updated,
            Change::Updated,
            Change::Updated,
            Change::Created
        ],
        "{history:#?}"
    );
    // Each revision's object: the scale changed the replicas only, each rollout the image
    // only.
    let objects: Vec<&serde_json::Value> =
        history.iter().map(|r| r.object.as_ref().unwrap()).collect();
    let replicas: Vec<&serde_json::Value> =
        objects.iter().map(|o| &o["spec"]["replicas"]).collect();
    let images: Vec<&str> = objects.iter().map(|o| image(o)).collect();
    assert_eq!(
        replicas,
        [&json!(3), &json!(1), &json!(1), &json!(1), &json!(1)]
    );
    assert_eq!(
        images,
        ["nginx:4", "nginx:4", "nginx:3", "nginx:2", "nginx:1"]
    );
    assert!(!history[0].revision.managers.is_empty(), "who changed it");
    let (at, version) = between.unwrap();
    let then = h.storage.object_at(&web, at).await.unwrap().unwrap();
    assert_eq!(image(&then.object), "nginx:2");
    assert_eq!(then.object["metadata"]["resourceVersion"], json!(version));
    assert_eq!(then.object["spec"]["replicas"], json!(1));

    // No syncer runs while the image changes and the Secret goes: at the relist, each
    // is kept once, marked late.
    let (metastore, storage) = (h.metastore.clone(), h.storage.clone());
    let dir = h.stop().await;
    kube.patch(&deployments(), &ns, "web", set_image("nginx:5"))
        .await;
    kube.delete(&secrets(), in_ns, "creds").await;
    let h = Harness::on(metastore, storage, Duration::from_secs(2), dir);
    let (_, late_version) = written(&h, kube, &deployments(), &ns, "web").await;
    let creds = object(&ns, "creds", "Secret");
    wait_for(LIMIT, "the Secret's deletion kept", || async {
        revisions(&h, &creds).await.first().map(|r| r.0) == Some(Change::Deleted)
    })
    .await;
    h.settled("a", &rules).await;
    let web_revisions = revisions(&h, &web).await;
    assert_eq!(web_revisions.len(), 6, "{web_revisions:?}");
    assert_eq!(web_revisions[0], (Change::Updated, late_version, true));
    assert!(web_revisions[1..].iter().all(|r| !r.2), "{web_revisions:?}");
    // A change of nothing but a Secret's values is none here: they are never stored.
    let creds_revisions = revisions(&h, &creds).await;
    assert_eq!(
        creds_revisions
            .iter()
            .map(|r| (r.0, r.2))
            .collect::<Vec<_>>(),
        [(Change::Deleted, true), (Change::Created, false)]
    );

    // A second member shares the cluster, then the first stops: whoever lists it again
    // finds nothing changed and writes no revision.
    let second = h.another();
    let kept = h.stop().await;
    second.settled("a", &rules).await;
    assert_eq!(
        revisions(&second, &web).await,
        web_revisions,
        "no duplicate"
    );
    assert_eq!(revisions(&second, &creds).await, creds_revisions);

    // Deleted: its last state is kept.
    kube.delete(&deployments(), in_ns, "web").await;
    wait_for(LIMIT, "the Deployment's deletion kept", || async {
        revisions(&second, &web).await.first().map(|r| r.0) == Some(Change::Deleted)
    })
    .await;
    let history = second.storage.history(&web, 100).await.unwrap();
    let last = history[0].object.as_ref().unwrap();
    assert_eq!(
        (image(last), last["spec"]["replicas"].clone()),
        ("nginx:5", json!(3))
    );
    let gone = time::OffsetDateTime::now_utc() + time::Duration::seconds(1);
    assert_eq!(second.storage.object_at(&web, gone).await.unwrap(), None);

    // No Secret value in any revision, patches and states included.
    let all = second
        .storage
        .object_revisions(&creds, None, None, 100)
        .await
        .unwrap();
    let text = serde_json::to_string(&all).unwrap();
    for value in [
        "hunter2-history",
        "hunter3-history",
        "aHVudGVyMi1oaXN0b3J5",
        "aHVudGVyMy1oaXN0b3J5",
    ] {
        assert!(!text.contains(value), "{value} reached history");
    }

    // Retention: the Secret's rule keeps an hour, the Deployment's the default week.
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(2);
    let caps = karpor_storage::HistoryCaps {
        revisions: 1_000_000,
        bytes: u64::MAX,
    };
    let removed = second.storage.expire(later, caps).await.unwrap();
    assert_eq!(removed, 2, "the Secret's two revisions");
    assert!(revisions(&second, &creds).await.is_empty());
    assert_eq!(revisions(&second, &web).await.len(), 7);

    drop(kept);
    second.stop().await;
    kube.delete_namespace(&ns).await;
}
