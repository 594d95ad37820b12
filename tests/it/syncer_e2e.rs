//! The syncer inside `karpor serve`, end to end: a cluster registered on the embedded
//! default becomes searchable within seconds, and an exec user's secrets never reach the
//! log.

use std::time::Duration;

use karpor_storage::StorageConfig;
use karpor_testkit::cluster::{configmaps, kube_name as unique, namespaces, Kube, LIMIT};
use karpor_testkit::process::{get, import_clusters, wait_for, Spawn, EMBEDDED};
use karpor_testkit::services::APISERVER_TOKEN;
use serde_json::json;

/// The "done when": `karpor serve` on the embedded default, a cluster registered
/// (here through `karpor metadata import`), and every object of the default rule is
/// searchable within seconds of its creation. Also: the kubeconfig's token is never
/// logged and never indexed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpor_serve_on_the_embedded_default_makes_new_objects_searchable_within_seconds() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let dir = tempfile::tempdir().unwrap();
    let karpor = Spawn::serve(EMBEDDED).in_dir(dir.path()).start();
    import_clusters(dir.path(), EMBEDDED, &[("a", &kube.kubeconfig)]);
    let url = karpor.url("/readyz");
    // Synced (the Syncer check passes once every cluster's first list is in), not only
    // reachable: from then on, a new object is a watch event.
    wait_for(LIMIT, "cluster a is synced", || {
        let url = url.clone();
        async move {
            let (code, body) = get(&url).await;
            code == 200 && body.contains("[+] Syncer ok") && body.contains("[+] Cluster/a ok")
        }
    })
    .await;

    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: dir.path().join("data/resources.db"),
    })
    .await
    .unwrap();
    let ns = unique("e2e");
    let created = std::time::Instant::now();
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "found-me"}}),
    )
    .await;
    let query = karpor_search::parse(&format!(
        "select * from resources where kind = 'ConfigMap' and namespace = '{ns}'"
    ))
    .unwrap();
    wait_for(
        Duration::from_secs(10),
        "the new ConfigMap is searchable",
        || {
            let (storage, query) = (storage.clone(), query.clone());
            async move { storage.search(&query, 0, 10).await.unwrap().total == 1 }
        },
    )
    .await;
    eprintln!("searchable {:?} after creation", created.elapsed());

    let logs = karpor.logs();
    assert!(!logs.contains(APISERVER_TOKEN), "{logs}");
    let token =
        karpor_search::parse("select * from resources where contains(content, 'test-admin-token')")
            .unwrap();
    assert_eq!(storage.search(&token, 0, 1).await.unwrap().total, 0);
    kube.delete_namespace(&ns).await;
}

/// An allowed exec user whose command fails: neither its command line nor its
/// environment reaches the log or the health output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_users_command_line_never_reaches_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{EMBEDDED}kubernetes: {{exec: {{allowed_commands: [/bin/false], allowed_env: {{/bin/false: [TOKEN]}}}}}}\n");
    let karpor = Spawn::serve(&config).in_dir(dir.path()).start();
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:9'}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: /bin/false\n      args: ['--password=exec-arg-secret']\n      env: [{name: TOKEN, value: exec-env-secret}]\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
    import_clusters(dir.path(), &config, &[("exec", kubeconfig)]);
    let url = karpor.url("/readyz?verbose");
    wait_for(LIMIT, "Cluster/exec fails", || {
        let url = url.clone();
        async move { get(&url).await.1.contains("[-] Cluster/exec failed") }
    })
    .await;
    wait_for(LIMIT, "the failure is logged", || async {
        karpor.logs().contains("cluster=exec")
    })
    .await;
    let logs = karpor.logs();
    let (_, health) = get(&karpor.url("/readyz?verbose")).await;
    for secret in ["exec-arg-secret", "exec-env-secret"] {
        assert!(!logs.contains(secret), "{secret} logged:\n{logs}");
        assert!(!health.contains(secret), "{secret} in /readyz:\n{health}");
    }
}
