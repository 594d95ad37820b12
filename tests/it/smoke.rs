//! The real binary on the embedded default: starts, answers, stops cleanly; refuses bad
//! config before it starts anything.

use std::process::Command;
use std::time::{Duration, Instant};

use karpor_testkit::process::{get, ready, wait_for, Spawn, EMBEDDED};

#[tokio::test]
async fn livez_answers_ok_within_a_second_of_start() {
    let started = Instant::now();
    let karpor = Spawn::serve(EMBEDDED).start();
    assert_eq!(get(&karpor.url("/livez")).await, (200, "OK\n".to_owned()));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "first OK after {took:?}");
}

#[tokio::test]
async fn readyz_prints_the_contract_lines_on_the_embedded_default() {
    let karpor = Spawn::serve(EMBEDDED).start();
    assert_eq!(
        ready(&karpor).await,
        (
            200,
            "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\nhealth check passed\n"
                .to_owned()
        )
    );
    assert!(karpor.dir().join("data/metadata.db").exists());
    assert!(karpor.dir().join("data/resources.db").exists());
}

#[tokio::test]
async fn sigterm_fails_readiness_at_once_keeps_liveness_and_exits_after_the_drain() {
    let mut karpor = Spawn::serve("shutdown: {drain_delay: 2s, grace_period: 200ms}\n").start();
    assert_eq!(ready(&karpor).await.0, 200);
    let signalled = Instant::now();
    karpor.signal("TERM");
    wait_for(
        Duration::from_millis(500),
        "readyz 503 after SIGTERM",
        || async { get(&karpor.url("/readyz")).await.0 == 503 },
    )
    .await;
    let (_, body) = get(&karpor.url("/readyz")).await;
    assert!(
        body.ends_with("[-] Shutdown failed: shutting down\nhealth check failed\n"),
        "{body}"
    );
    assert_eq!(get(&karpor.url("/livez")).await, (200, "OK\n".to_owned()));
    let status = karpor
        .wait_exit(Duration::from_secs(4))
        .expect("exits after the drain");
    let took = signalled.elapsed();
    assert!(status.success(), "{status:?}\n{}", karpor.logs());
    assert!(
        took >= Duration::from_secs(2),
        "stopped before the drain: {took:?}"
    );
    assert!(
        took < Duration::from_secs(3),
        "drain 2 s + 1 s exceeded: {took:?}"
    );
}

#[tokio::test]
async fn sigint_stops_the_syncer_process_too() {
    let mut karpor = Spawn::syncer("shutdown: {drain_delay: 100ms}\n").start();
    assert_eq!(
        ready(&karpor).await,
        (
            200,
            "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\nhealth check passed\n"
                .to_owned()
        )
    );
    karpor.signal("INT");
    let status = karpor.wait_exit(Duration::from_secs(3)).expect("exits");
    assert!(status.success());
}

#[tokio::test]
async fn requests_carry_a_request_id_into_headers_and_logs() {
    // A library's lines are RUST_LOG's to turn on; `log.level` is karpor's own.
    let karpor = Spawn::serve(EMBEDDED)
        .with_env("RUST_LOG", "info,tower_http=debug")
        .start();
    let client = reqwest::Client::new();
    let response = client
        .get(karpor.url("/livez"))
        .header("x-request-id", "test-id-42")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "test-id-42");
    let made = client.get(karpor.url("/livez")).send().await.unwrap();
    let made = made.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(made.len(), 36, "a UUID: {made}");
    wait_for(Duration::from_secs(2), "request id in the log", || async {
        karpor.logs().contains("request_id=test-id-42")
    })
    .await;
}

#[tokio::test]
async fn json_logs_by_flag() {
    let karpor = Spawn {
        env: vec![("KARPOR_LOG__FORMAT", "json".to_owned())],
        ..Spawn::serve(EMBEDDED)
    }
    .start();
    let logs = karpor.logs();
    let first = logs.lines().next().unwrap();
    let parsed: serde_json::Value = serde_json::from_str(first).expect(first);
    assert_eq!(parsed["level"], "INFO");
}

#[tokio::test]
async fn metrics_expose_the_four_health_metrics() {
    let karpor = Spawn::serve(EMBEDDED).start();
    get(&karpor.url("/readyz")).await;
    let (status, body) = get(&karpor.url("/metrics")).await;
    assert_eq!(status, 200);
    for name in [
        "karpor_health_check_status{check=\"Storage\",endpoint=\"readyz\"} 1",
        "karpor_health_check_duration_seconds_bucket",
        "karpor_health_check_runs_total{check=\"Server\"}",
        "# TYPE karpor_health_check_transitions counter",
    ] {
        assert!(body.contains(name), "{name} missing from\n{body}");
    }
}

#[tokio::test]
async fn the_placeholder_page_is_served_at_the_root() {
    let karpor = Spawn::serve(EMBEDDED).start();
    let (status, body) = get(&karpor.url("/")).await;
    assert_eq!(status, 200);
    assert!(body.contains("<title>karpor</title>"));
}

#[tokio::test]
async fn serves_tls_when_configured() {
    let karpor_dir = tempfile::tempdir().unwrap();
    let dir = karpor_dir.path();
    let cert = karpor_testkit::tls::self_signed(dir);
    let config = "server: {tls: {cert_file: tls.crt, key_file: tls.key}}\n";
    let karpor = Spawn::serve(config).in_dir(dir).start();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&cert).unwrap())
        .build()
        .unwrap();
    let url = format!("https://{}/livez", karpor.addr);
    let body = client.get(&url).send().await.unwrap().text().await.unwrap();
    assert_eq!(body, "OK\n");
}

/// Runs the binary to completion: (exit code, stderr, stdout).
fn run(args: &[&str], dir: &std::path::Path) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_karpor"))
        .args(args)
        .current_dir(dir)
        .env_remove("KARPOR_CONFIG")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stderr).unwrap(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

/// A config error: exit 2, one line on stderr, nothing started.
fn config_error(yaml: &str, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.yaml"), yaml).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karpor"));
    command
        .args(["serve", "--config", "bad.yaml"])
        .current_dir(dir.path())
        .env_remove("KARPOR_CONFIG");
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(!dir.path().join("data").exists(), "nothing may start");
    stderr
}

#[test]
fn a_missing_config_file_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, _) = run(&["serve", "--config", "missing.yaml"], dir.path());
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("missing.yaml") && stderr.contains("No such file"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_backend_exits_2_listing_the_supported_ones() {
    let stderr = config_error("metadata: {backend: oracle}\n", &[]);
    assert!(stderr.contains("bad.yaml"), "{stderr}");
    assert!(stderr.contains("metadata.backend"), "{stderr}");
    assert!(stderr.contains("oracle"), "{stderr}");
    for supported in ["sqlite", "etcd", "mysql"] {
        assert!(stderr.contains(supported), "{stderr}");
    }
}

#[test]
fn an_unknown_key_exits_2_naming_it() {
    let stderr = config_error("server: {lisen: 127.0.0.1:1}\n", &[]);
    assert!(
        stderr.contains("server.lisen") && stderr.contains("bad.yaml"),
        "{stderr}"
    );
}

#[test]
fn a_wrong_type_exits_2_naming_the_key() {
    let stderr = config_error("health: {failure_threshold: many}\n", &[]);
    assert!(stderr.contains("health.failure_threshold"), "{stderr}");
}

#[test]
fn a_deadline_below_the_check_timeout_is_a_config_error() {
    let stderr = config_error("health: {check_timeout: 2s, deadline: 1s}\n", &[]);
    assert!(stderr.contains("health.deadline"), "{stderr}");
}

#[test]
fn a_negative_duration_is_a_config_error() {
    let stderr = config_error("shutdown: {drain_delay: -5s}\n", &[]);
    assert!(stderr.contains("shutdown.drain_delay"), "{stderr}");
}

#[test]
fn a_secret_from_an_unset_variable_is_a_config_error() {
    let stderr = config_error(
        "health: {admin_token: {env: KARPOR_TEST_SURELY_UNSET}}\n",
        &[],
    );
    assert!(stderr.contains("health.admin_token"), "{stderr}");
    assert!(stderr.contains("KARPOR_TEST_SURELY_UNSET"), "{stderr}");
}

#[test]
fn an_environment_override_is_checked_like_the_file() {
    let stderr = config_error("{}\n", &[("KARPOR_HEALTH__SUCCESS_THRESHOLD", "lots")]);
    assert!(stderr.contains("health.success_threshold"), "{stderr}");
}

#[test]
fn version_prints_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stdout) = run(&["version"], dir.path());
    assert_eq!(code, 0);
    assert_eq!(stdout, format!("karpor {}\n", env!("CARGO_PKG_VERSION")));
}

/// Besides health: every HTTP request by route and status, storage and metadata store
/// operations, the process, and the build, with the conventional names and units.
#[tokio::test]
async fn metrics_cover_requests_stores_process_and_build() {
    let karpor = Spawn::serve(EMBEDDED).start();
    for path in [
        "/rest-api/v1/search?query=select%20*%20from%20resources",
        "/rest-api/v1/clusters",
        "/rest-api/v1/cluster/does-not-exist",
        "/no/such/path/with-a-secret-looking-segment",
    ] {
        get(&karpor.url(path)).await;
    }
    let (status, body) = get(&karpor.url("/metrics")).await;
    assert_eq!(status, 200);
    for series in [
        "http_server_requests_total{method=\"GET\",route=\"/rest-api/v1/search\",status=\"200\"} 1",
        "http_server_requests_total{method=\"GET\",route=\"/rest-api/v1/cluster/{name}\",status=\"404\"} 1",
        "http_server_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 1",
        "http_server_request_duration_seconds_bucket{",
        "karpor_storage_operations_total{backend=\"sqlite\",operation=\"search\",outcome=\"ok\"}",
        "karpor_storage_operation_duration_seconds_count{backend=\"sqlite\",operation=\"search\"}",
        "karpor_metastore_operations_total{backend=\"sqlite\",operation=\"get\",outcome=\"ok\"}",
        "karpor_metastore_operation_duration_seconds_sum{",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_max_fds ",
        "process_start_time_seconds ",
        "karpor_build_info{version=\"",
    ] {
        assert!(body.contains(series), "{series} missing:\n{body}");
    }
    assert!(
        !body.contains("secret-looking"),
        "raw paths never become labels"
    );
}
