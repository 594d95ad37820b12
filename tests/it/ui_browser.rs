//! The placeholder page in headless Chromium against a real `karpor serve` (storage on a
//! private Elasticsearch-API server): on a fresh install, the hint to add a cluster and
//! every `/readyz` check named as `/readyz` spells it; with a real cluster registered, the
//! cluster, a keyword search, an SQL search whose row opens the object as YAML, an empty
//! result's hint, a bad query's message, refreshes that never overlap on a slow server,
//! and the Storage check turning red once its server is killed, the clusters still
//! listed; a pod's log, its last lines and then followed (from a kubelet stand-in); with
//! the shared test model server, the log's diagnosis, a natural-language search showing the query that ran
//! (or the server's 400 showing it) and an object's explanation streamed in. No console
//! errors. The driver is tests/ui/browser.mjs (playwright-core); a screenshot lands in
//! target/.

use std::process::Command;
use std::time::Duration;

use karpor_storage::{ElasticConfig, RefreshPolicy, StorageConfig};
use karpor_testkit::model::ModelServer;
use karpor_testkit::process;
use karpor_testkit::process::{wait_for, Spawn};
use karpor_testkit::service;
use karpor_testkit::services::Elastic;

const GUEST: &str = "guest-token-for-the-page";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_health_clusters_and_search_in_a_real_browser() {
    let chromium = service("KARPOR_TEST_CHROMIUM").expect("run scripts/services.sh start");
    let kubeconfig = service("KARPOR_TEST_KUBECONFIG_A").expect("run scripts/services.sh start");
    let model = ModelServer::shared().expect("run scripts/services.sh start");
    let elastic = Elastic::start().expect("KARPOR_TEST_NOIDA_BIN");
    let root = env!("CARGO_MANIFEST_DIR");
    assert!(
        std::path::Path::new(root)
            .join("tests/ui/node_modules/playwright-core")
            .exists(),
        "playwright-core is not installed: run scripts/services.sh install"
    );

    let dir = tempfile::tempdir().unwrap();
    // Anonymous read off: the page must ask for the guest token once.
    let config = format!(
        "shutdown: {{drain_delay: 1s}}\nstorage: {{backend: elasticsearch, url: \"{}\"}}\n\
         auth: {{anonymous: none, pod_logs: guest, tokens: [{{name: viewer, role: guest, token: {GUEST}}}]}}\n",
        elastic.url()
    );
    // Served with the model as tests/it/ai.rs configures it (the import below needs only
    // the store); generous times: generations queue at the one test server behind other
    // tests'.
    let serving = format!(
        "{config}server: {{limits: {{request_timeout: 5m}}, connections: {{idle_timeout: 6m}}}}\n\
         ai:\n  base_url: {}\n  model: {}\n  api_key: {{env: KARPOR_TEST_AI_KEY}}\n  max_tokens: 40\n  first_token_timeout: 5m\n",
        model.url, model.name
    );
    let karpor = Spawn::serve(&serving)
        .in_dir(dir.path())
        .with_env("KARPOR_TEST_AI_KEY", &model.key)
        .start();
    let browser = |phase: &str| {
        Command::new("node")
            .arg(format!("{root}/tests/ui/browser.mjs"))
            .env("KARPOR_URL", format!("http://{}", karpor.addr))
            .env("KARPOR_TOKEN", GUEST)
            .env("KARPOR_PHASE", phase)
            .env("KARPOR_CHROMIUM", &chromium)
            .output()
            .unwrap()
    };
    let fresh = browser("empty");
    let out = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(fresh.status.success(), "fresh install:\n{}", out(&fresh));
    let kubeconfig = process::flat_kubeconfig(&kubeconfig);
    process::import_clusters(dir.path(), &config, &[("a", &kubeconfig)]);

    // Something the search will find: the cluster's own kube-system namespace.
    let storage = karpor_storage::connect(&StorageConfig::Elasticsearch(ElasticConfig {
        url: elastic.url(),
        username: None,
        password: None,
        index: "karpor-resources".into(),
        refresh: RefreshPolicy::WaitFor,
    }))
    .await
    .unwrap();
    let query = "select * from resources where kind = 'Namespace' and name = 'kube-system'";
    let parsed = karpor_search::parse(query).unwrap();
    wait_for(Duration::from_secs(60), "kube-system is synced", || {
        let (storage, parsed) = (storage.clone(), parsed.clone());
        async move { matches!(storage.search(&parsed, 0, 1).await, Ok(r) if r.total == 1) }
    })
    .await;

    // An object with a finding (an untagged image), for the detail view.
    let kube = karpor_testkit::cluster::Kube::from_text(kubeconfig.clone()).await;
    let ns = karpor_testkit::cluster::kube_name("ui");
    let flawed = "ui-untagged";
    kube.create(
        &karpor_testkit::cluster::namespaces(),
        None,
        serde_json::json!({"metadata": {"name": ns}}),
    )
    .await;
    kube.create(
        &karpor_testkit::cluster::resource("apps", "v1", "Deployment", "deployments"),
        Some(&ns),
        serde_json::json!({"metadata": {"name": flawed}, "spec": {
            "selector": {"matchLabels": {"app": flawed}},
            "template": {"metadata": {"labels": {"app": flawed}},
                         "spec": {"containers": [{"name": "app", "image": "nginx"}],
                                  "volumes": [{"name": "c", "configMap": {"name": flawed}}]}}}}),
    )
    .await;
    kube.create(
        &karpor_testkit::cluster::configmaps(),
        Some(&ns),
        serde_json::json!({"metadata": {"name": flawed}, "data": {"k": "v"}}),
    )
    .await;
    kube.create(
        &karpor_testkit::cluster::resource("", "v1", "Event", "events"),
        Some(&ns),
        serde_json::json!({"metadata": {"name": "ui-probe"}, "reason": "UiProbe",
            "message": "seen by the browser test", "type": "Normal",
            "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": flawed, "namespace": ns}}),
    )
    .await;
    let flawed_query = karpor_search::parse(&format!(
        "select * from resources where issue = 'image-tag' and namespace = '{ns}'"
    ))
    .unwrap();
    wait_for(
        Duration::from_secs(60),
        "the flawed Deployment is audited",
        || {
            let (storage, query) = (storage.clone(), flawed_query.clone());
            async move { matches!(storage.search(&query, 0, 1).await, Ok(r) if r.total == 1) }
        },
    )
    .await;

    // A pod on a node whose kubelet is the test's: its log, read through the page.
    let kubelet = karpor_testkit::kubelet::Kubelet::start(
        (1..=30).map(|i| format!("page line {i}")).collect(),
    );
    let node = kubelet.node(&kube).await;
    let log_pod = "ui-logs";
    karpor_testkit::kubelet::pod(&kube, &ns, log_pod, &node, &["app"]).await;
    let pod_query = karpor_search::parse(&format!(
        "select * from resources where kind = 'Pod' and name = '{log_pod}' and namespace = '{ns}'"
    ))
    .unwrap();
    wait_for(Duration::from_secs(60), "the pod is synced", || {
        let (storage, query) = (storage.clone(), pod_query.clone());
        async move { matches!(storage.search(&query, 0, 1).await, Ok(r) if r.total == 1) }
    })
    .await;

    let screenshot = format!("{root}/target/ui-placeholder.png");
    let output = Command::new("node")
        .arg(format!("{root}/tests/ui/browser.mjs"))
        .env("KARPOR_URL", format!("http://{}", karpor.addr))
        .env("KARPOR_TOKEN", GUEST)
        .env("KARPOR_QUERY", query)
        .env("KARPOR_EXPECT_NAME", "kube-system")
        .env("KARPOR_AUDIT_NAME", flawed)
        .env("KARPOR_LOG_POD", log_pod)
        .env("KARPOR_LOG_LINE", "page line 30")
        .env("KARPOR_NL_QUESTION", "all namespaces")
        .env("KARPOR_KILL_PID", elastic.process.pid().to_string())
        .env("KARPOR_SCREENSHOT", &screenshot)
        .env("KARPOR_CHROMIUM", &chromium)
        .output()
        .unwrap();
    eprintln!("{}{}", out(&fresh), out(&output));
    assert!(
        output.status.success(),
        "browser test failed:\n{}\nkarpor's log:\n{}",
        out(&output),
        karpor.logs()
    );
    assert!(std::path::Path::new(&screenshot).exists());
    assert!(!karpor.logs().contains(&model.key), "the key was logged");
    assert!(
        kubelet
            .requests()
            .iter()
            .any(|r| r.contains("/containerLogs/") && r.contains("follow=true")),
        "the page followed the log: {:?}",
        kubelet.requests()
    );
    assert!(
        kubelet
            .requests()
            .iter()
            .any(|r| r.contains("/containerLogs/")
                && !r.contains("follow=true")
                && r.contains("tailLines=200")
                && !r.contains("limitBytes")),
        "the server read the lines it diagnosed: {:?}",
        kubelet.requests()
    );
    karpor_testkit::kubelet::delete_pods(&kube, &ns).await;
    kube.delete_namespace(&ns).await;
    node.delete().await;
}
