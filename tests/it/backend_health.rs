//! `/readyz` against the real backends of every sample configuration, and what it says
//! when a backend dies, hangs and comes back.

use std::time::Duration;

use karpor_testkit::process::{get, get_with, ready, wait_for, Karpor, Spawn};
use karpor_testkit::service;
use karpor_testkit::services::{Elastic, Etcd, Managed, Mariadb};

const READY: &str =
    "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\nhealth check passed\n";

/// Health settings for these tests: an admin token to see details; a short drain.
const COMMON: &str = "health: {admin_token: test-admin}\nshutdown: {drain_delay: 100ms}\n";

fn etcd_config(etcd: &str, storage: &str) -> String {
    format!("{COMMON}metadata: {{backend: etcd, etcd: {{endpoints: ['{etcd}'], prefix: /karpor-test}}}}\nstorage: {storage}\n")
}

#[tokio::test]
async fn the_etcd_and_elasticsearch_config_is_ready() {
    let (Some(etcd), Some(es)) = (service("KARPOR_TEST_ETCD"), service("KARPOR_TEST_ES_URL"))
    else {
        return;
    };
    let storage = format!("{{backend: elasticsearch, url: '{es}'}}");
    let karpor = Spawn::serve(&etcd_config(&etcd, &storage)).start();
    assert_eq!(ready(&karpor).await, (200, READY.to_owned()));
}

#[tokio::test]
async fn the_mysql_and_opensearch_config_is_ready() {
    let (Some(mysql), Some(os)) = (
        service("KARPOR_TEST_MYSQL_URL"),
        service("KARPOR_TEST_OPENSEARCH_URL"),
    ) else {
        return;
    };
    let config = format!(
        "{COMMON}metadata: {{backend: mysql, url: {{env: KARPOR_MYSQL_URL}}}}\n\
         storage: {{backend: elasticsearch, url: '{os}'}}\n"
    );
    let karpor = Spawn {
        env: vec![("KARPOR_MYSQL_URL", mysql)],
        ..Spawn::serve(&config)
    }
    .start();
    assert_eq!(ready(&karpor).await, (200, READY.to_owned()));
}

/// A MySQL URL naming a database that does not exist is a configuration problem, not a
/// dead server: `misconfigured`, with the reason in the admin's detail.
#[tokio::test]
async fn a_missing_mysql_database_is_misconfigured_not_unreachable() {
    let Some(mysql) = service("KARPOR_TEST_MYSQL_URL") else {
        return;
    };
    let (server, _) = mysql.rsplit_once('/').unwrap();
    let config = format!("{COMMON}metadata: {{backend: mysql, url: {{env: KARPOR_MYSQL_URL}}}}\n");
    let karpor = Spawn {
        env: vec![("KARPOR_MYSQL_URL", format!("{server}/no_such_database"))],
        ..Spawn::serve(&config)
    }
    .start();
    let (code, body) = get(&karpor.url("/readyz")).await;
    assert_eq!(code, 503);
    assert!(
        body.contains("[-] Server failed: misconfigured\n"),
        "{body}"
    );
    let (_, detail) = get_with(
        &karpor.url("/readyz/Server"),
        &[("authorization", "Bearer test-admin")],
    )
    .await;
    assert!(detail.contains("does not exist"), "{detail}");
}

fn sample(file: &str) -> String {
    std::fs::read_to_string(format!("{}/config/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[tokio::test]
async fn the_shipped_sample_configs_start() {
    for file in ["karpor.yaml", "etcd-elasticsearch.yaml"] {
        let karpor = Spawn::serve(&sample(file)).start();
        assert_eq!(get(&karpor.url("/livez")).await.0, 200, "{file}");
    }
    let karpor = Spawn {
        env: vec![("KARPOR_MYSQL_URL", "mysql://root@127.0.0.1:1/x".to_owned())],
        ..Spawn::serve(&sample("mysql-elasticsearch.yaml"))
    }
    .start();
    assert_eq!(get(&karpor.url("/livez")).await.0, 200);
}

#[test]
fn the_mysql_sample_needs_its_url_variable() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!(
        "{}/config/mysql-elasticsearch.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_karpor"))
        .args(["serve", "--config", &path])
        .current_dir(dir.path())
        .env_remove("KARPOR_MYSQL_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("metadata.url") && stderr.contains("KARPOR_MYSQL_URL"),
        "{stderr}"
    );
}

/// Kills the dependency behind `karpor` and checks what `/readyz` then says, byte for
/// byte, within failure_threshold (1) × probe period + the deadline (2 s); `/livez` stays
/// `OK`, and no address reaches a public body.
async fn kill_and_expect(karpor: &Karpor, process: &mut Managed, failing: &str) {
    process.kill();
    wait_for(Duration::from_secs(3), "readyz fails", || async {
        get(&karpor.url("/readyz")).await.0 == 503
    })
    .await;
    let (_, body) = get(&karpor.url("/readyz")).await;
    assert_eq!(body, failing);
    assert_eq!(get(&karpor.url("/livez")).await, (200, "OK\n".to_owned()));
    let (_, json) = get(&karpor.url("/readyz?format=json")).await;
    assert!(
        !json.contains("127.0.0.1") && !body.contains("127.0.0.1"),
        "{json}"
    );
}

/// Restarts the dependency and waits for readiness; both transitions were logged.
async fn restart_and_expect_ready(karpor: &Karpor, process: &mut Managed) {
    process.restart();
    wait_for(Duration::from_secs(10), "readyz recovers", || async {
        get(&karpor.url("/readyz")).await.0 == 200
    })
    .await;
    // The transition lines reach the test through a reader thread: wait, do not race.
    wait_for(
        Duration::from_secs(5),
        "both transitions are logged",
        || async {
            let logs = karpor.logs();
            logs.contains("health check failed") && logs.contains("health check recovered")
        },
    )
    .await;
}

const SERVER_DOWN: &str =
    "[+] Ping ok\n[-] Server failed: unreachable\n[+] Syncer ok\n[+] Storage ok\nhealth check failed\n";

#[tokio::test]
async fn a_dead_etcd_fails_server_and_readiness_returns_after_restart() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    let karpor = Spawn::serve(&etcd_config(&etcd.url(), "{backend: sqlite, path: r.db}")).start();
    assert_eq!(ready(&karpor).await, (200, READY.to_owned()));

    kill_and_expect(&karpor, &mut etcd.process, SERVER_DOWN).await;
    let (_, detail) = get_with(
        &karpor.url("/readyz/server"),
        &[("authorization", "Bearer test-admin")],
    )
    .await;
    assert!(detail.contains("detail: etcd backend"), "{detail}");
    restart_and_expect_ready(&karpor, &mut etcd.process).await;
}

/// `/readyz`, asserted to answer within the response deadline (2 s) and some slack.
async fn readyz_within_deadline(karpor: &Karpor) -> (u16, String) {
    let started = std::time::Instant::now();
    let answer = get(&karpor.url("/readyz")).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2500),
        "deadline 2 s, took {took:?}"
    );
    answer
}

#[tokio::test]
async fn a_paused_etcd_answers_timeout_within_the_deadline() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let karpor = Spawn::serve(&etcd_config(&etcd.url(), "{backend: sqlite, path: r.db}")).start();
    assert_eq!(ready(&karpor).await.0, 200);
    etcd.process.pause();
    // Every probe answers within the deadline: while the cached pass lasts, and once the
    // timeout is reported.
    wait_for(
        Duration::from_secs(10),
        "readyz reports the timeout",
        || async {
            let (status, body) = readyz_within_deadline(&karpor).await;
            status == 503 && body.contains("[-] Server failed: timeout\n")
        },
    )
    .await;
    for _ in 0..3 {
        let (status, body) = readyz_within_deadline(&karpor).await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("[-] Server failed: timeout\n"), "{body}");
    }
    etcd.process.resume();
    wait_for(Duration::from_secs(10), "readyz recovers", || async {
        get(&karpor.url("/readyz")).await.0 == 200
    })
    .await;
}

#[tokio::test]
async fn a_dead_mariadb_fails_server_and_readiness_returns_after_restart() {
    let Some(mut mariadb) = Mariadb::start() else {
        return;
    };
    let config = format!(
        "{COMMON}metadata: {{backend: mysql, url: '{}'}}\nstorage: {{backend: sqlite, path: r.db}}\n",
        mariadb.url()
    );
    let karpor = Spawn::serve(&config).start();
    assert_eq!(ready(&karpor).await, (200, READY.to_owned()));
    kill_and_expect(&karpor, &mut mariadb.process, SERVER_DOWN).await;
    restart_and_expect_ready(&karpor, &mut mariadb.process).await;
}

#[tokio::test]
async fn a_dead_elasticsearch_fails_storage_and_syncer_and_both_recover() {
    let Some(mut es) = Elastic::start() else {
        return;
    };
    let config = format!(
        "{COMMON}storage: {{backend: elasticsearch, url: '{}'}}\n",
        es.url()
    );
    let karpor = Spawn::serve(&config).start();
    assert_eq!(ready(&karpor).await, (200, READY.to_owned()));
    let storage_down = "[+] Ping ok\n[+] Server ok\n[-] Syncer failed: unreachable\n\
                        [-] Storage failed: unreachable\nhealth check failed\n";
    kill_and_expect(&karpor, &mut es.process, storage_down).await;
    restart_and_expect_ready(&karpor, &mut es.process).await;
}
