//! Logs as an operator reads them: a failing probe or a dead member cluster is no ERROR
//! line (the health transition is the record), `--log-level` is karpor's own level (no
//! flood from database and parser libraries), and the start line says where the page and
//! the API are.

use std::time::Duration;

use karpor_testkit::process::{get, import_clusters, wait_for, Spawn, EMBEDDED};
use karpor_testkit::services::free_port;

const UNREACHABLE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_probes_and_a_dead_cluster_are_not_error_lines() {
    let dir = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let config = format!(
        "{EMBEDDED}storage: {{backend: elasticsearch, url: '{dead}'}}\nhealth: {{cache_ttl: 0s}}\n"
    );
    import_clusters(dir.path(), &config, &[("gone", UNREACHABLE)]);
    let karpor = Spawn::serve(&config).in_dir(dir.path()).start();
    for _ in 0..5 {
        let (code, _) = get(&karpor.url("/readyz")).await;
        assert_eq!(code, 503);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for(
        Duration::from_secs(10),
        "the dead cluster is noticed",
        || async { karpor.logs().contains("cluster=gone") },
    )
    .await;
    let logs = karpor.logs();
    let errors: Vec<&str> = logs.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        logs.contains("health check failed") && logs.contains("check=Storage"),
        "the transition is logged: {logs}"
    );
    let listening = logs.lines().find(|l| l.contains(" listening ")).unwrap();
    let page = format!("page=http://{}/", karpor.addr);
    let api = format!("api=http://{}/rest-api/v1", karpor.addr);
    assert!(
        listening.contains(&page) && listening.contains(&api),
        "{listening}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_level_is_karpors_own() {
    let karpor = Spawn {
        env: vec![],
        ..Spawn::serve(&format!("{EMBEDDED}log: {{level: debug}}\n"))
    }
    .start();
    let (code, _) = get(&karpor
        .url("/rest-api/v1/search?query=select%20*%20from%20resources%20where%20kind%3D%27Pod%27"))
    .await;
    assert_eq!(code, 200);
    // A second request: once its first line is read from the log, every line of the
    // search before it is too.
    let (code, _) = get(&karpor.url("/rest-api/v1/clusters")).await;
    assert_eq!(code, 200);
    wait_for(
        Duration::from_secs(10),
        "both requests are logged",
        || async {
            let logs = karpor.logs();
            let authenticated = logs
                .lines()
                .filter(|l| l.contains(" DEBUG ") && l.contains("authenticated"))
                .count();
            authenticated >= 2
        },
    )
    .await;
    let logs = karpor.logs();
    assert!(logs.contains(" DEBUG "), "karpor's debug lines are there");
    for library in ["sqlx::", "sqlparser", "hyper::", "h2::"] {
        assert!(
            !logs
                .lines()
                .any(|l| l.contains(" DEBUG ") && l.contains(library)),
            "{library} debug lines:\n{logs}"
        );
    }
}
