//! The health contract, one behaviour per test, through the real aggregator and routes.
//! The reporters here are scripted stand-ins: the aggregator is pure logic, and the real
//! backends' checks are proven against real services in the workspace's `tests/`.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use karpor_health::{
    routes, CheckOutcome, Endpoint, HealthChecker, HealthMetrics, HealthReporter, Membership,
    Reason, ReportRequest, Settings, Thresholds,
};
use prometheus_client::registry::Registry;
use serde_json::Value;
use tower::ServiceExt;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Script {
    Pass,
    Fail(Reason),
    Hang,
    Panic,
    Sleep(Duration),
}

struct Scripted {
    name: &'static str,
    critical: bool,
    script: Mutex<Script>,
    runs: AtomicUsize,
}

impl Scripted {
    fn new(name: &'static str, critical: bool, script: Script) -> Arc<Self> {
        Arc::new(Scripted {
            name,
            critical,
            script: Mutex::new(script),
            runs: AtomicUsize::new(0),
        })
    }

    fn set(&self, script: Script) {
        *self.script.lock().unwrap() = script;
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl HealthReporter for Scripted {
    fn name(&self) -> &str {
        self.name
    }

    fn critical(&self) -> bool {
        self.critical
    }

    async fn check(&self) -> CheckOutcome {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let script = *self.script.lock().unwrap();
        match script {
            Script::Pass => CheckOutcome::Pass,
            Script::Fail(reason) => {
                CheckOutcome::fail(reason, "dial tcp 10.9.8.7:2379: connection refused")
            }
            Script::Hang => std::future::pending().await,
            Script::Panic => panic!("scripted panic"),
            Script::Sleep(d) => {
                tokio::time::sleep(d).await;
                CheckOutcome::Pass
            }
        }
    }
}

struct Fixture {
    checker: HealthChecker,
    router: Router,
    server: Arc<Scripted>,
    storage: Arc<Scripted>,
    cluster: Arc<Scripted>,
}

fn settings() -> Settings {
    Settings {
        check_timeout: Duration::from_millis(300),
        deadline: Duration::from_millis(500),
        cache_ttl: Duration::ZERO,
        thresholds: Thresholds::default(),
    }
}

fn fixture(settings: Settings) -> Fixture {
    let mut registry = Registry::default();
    let checker = HealthChecker::new(settings, HealthMetrics::new(&mut registry));
    let server = Scripted::new("Server", true, Script::Pass);
    let syncer = Scripted::new("Syncer", true, Script::Pass);
    let storage = Scripted::new("Storage", true, Script::Pass);
    let cluster = Scripted::new("Cluster/prod", false, Script::Pass);
    checker.register(
        Scripted::new("Ping", true, Script::Pass),
        Membership::BOTH,
        None,
    );
    checker.register(
        Scripted::new("Heartbeat", true, Script::Pass),
        Membership::LIVEZ,
        None,
    );
    checker.register(server.clone(), Membership::READYZ, None);
    checker.register(syncer, Membership::READYZ, None);
    checker.register(storage.clone(), Membership::READYZ, None);
    checker.register(cluster.clone(), Membership::READYZ, None);
    let router = routes(checker.clone(), Some("admin-secret".to_owned()), None);
    Fixture {
        checker,
        router,
        server,
        storage,
        cluster,
    }
}

async fn get(router: &Router, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
    let mut request = Request::get(uri);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    assert_eq!(response.headers()["cache-control"], "no-store", "{uri}");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

const ALL_PASS: &str = "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\n\
[+] Cluster/prod ok\nhealth check passed\n";

#[tokio::test]
async fn readyz_passing_output_is_byte_exact_with_200() {
    let f = fixture(settings());
    assert_eq!(
        get(&f.router, "/readyz", &[]).await,
        (StatusCode::OK, ALL_PASS.to_owned())
    );
}

#[tokio::test]
async fn readyz_critical_failure_is_byte_exact_with_503() {
    let f = fixture(settings());
    f.server.set(Script::Fail(Reason::Unreachable));
    let (status, body) = get(&f.router, "/readyz", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "[+] Ping ok\n[-] Server failed: unreachable\n[+] Syncer ok\n[+] Storage ok\n\
[+] Cluster/prod ok\nhealth check failed\n"
    );
}

#[tokio::test]
async fn non_critical_failure_warns_and_stays_200() {
    let f = fixture(settings());
    f.cluster.set(Script::Fail(Reason::Unreachable));
    let (status, body) = get(&f.router, "/readyz", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("[-] Cluster/prod failed: unreachable (non-critical)\n"),
        "{body}"
    );
    assert!(body.ends_with("health check passed\n"));
    let (_, json) = get(&f.router, "/readyz?format=json", &[]).await;
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["status"], "warn");
    assert_eq!(json["checks"]["cluster/prod"][0]["status"], "warn");
}

#[tokio::test]
async fn a_non_critical_check_asked_for_by_name_answers_for_itself() {
    let f = fixture(settings());
    f.cluster.set(Script::Fail(Reason::Unreachable));
    for path in ["/readyz/Cluster%2Fprod", "/readyz/cluster/prod"] {
        let (status, body) = get(&f.router, path, &[]).await;
        assert_eq!(
            (status, body.as_str()),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "[-] Cluster/prod failed: unreachable (non-critical)\nhealth check failed\n"
            ),
            "{path}"
        );
    }
    let (_, json) = get(&f.router, "/readyz/Cluster%2Fprod?format=json", &[]).await;
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["status"], "fail");
    // The whole endpoint still passes: the check is non-critical there.
    assert_eq!(get(&f.router, "/readyz", &[]).await.0, StatusCode::OK);
    f.cluster.set(Script::Pass);
    assert_eq!(
        get(&f.router, "/readyz/Cluster%2Fprod", &[]).await,
        (
            StatusCode::OK,
            "[+] Cluster/prod ok\nhealth check passed\n".to_owned()
        )
    );
}

#[tokio::test]
async fn livez_is_terse_unless_verbose_and_ignores_readiness_checks() {
    let f = fixture(settings());
    f.server.set(Script::Fail(Reason::Unreachable));
    assert_eq!(
        get(&f.router, "/livez", &[]).await,
        (StatusCode::OK, "OK\n".to_owned())
    );
    assert_eq!(
        get(&f.router, "/livez?verbose", &[]).await,
        (
            StatusCode::OK,
            "[+] Ping ok\n[+] Heartbeat ok\nhealth check passed\n".to_owned()
        )
    );
}

#[tokio::test]
async fn exclude_leaves_a_check_out_in_every_spelling() {
    let f = fixture(settings());
    f.server.set(Script::Fail(Reason::Unreachable));
    for uri in [
        "/readyz?exclude=Server",
        "/readyz?exclude=server",
        "/readyz?excludes=SERVER",
        "/readyz?exclude=Storage,Server",
        "/readyz?exclude=Storage&exclude=Server",
        "/readyz?exclude=Storage&excludes=Server",
    ] {
        let (status, body) = get(&f.router, uri, &[]).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {body}");
        assert!(!body.contains("Server"), "{uri}: {body}");
    }
    let (_, body) = get(&f.router, "/readyz?exclude=Storage,Server", &[]).await;
    assert!(!body.contains("Storage"), "{body}");
}

#[tokio::test]
async fn an_unknown_exclude_is_reported_not_ignored() {
    let f = fixture(settings());
    let (status, body) = get(&f.router, "/readyz?exclude=Nope,Storage", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.ends_with("[!] unknown check \"Nope\" in exclude\nhealth check passed\n"),
        "{body}"
    );
    let (_, json) = get(&f.router, "/readyz?exclude=Nope&format=json", &[]).await;
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["notes"][0], "unknown check \"Nope\" in exclude");
}

#[tokio::test]
async fn sub_path_runs_one_check_and_404s_an_unknown_one() {
    let f = fixture(settings());
    f.server.set(Script::Fail(Reason::Timeout));
    assert_eq!(
        get(&f.router, "/readyz/storage", &[]).await,
        (
            StatusCode::OK,
            "[+] Storage ok\nhealth check passed\n".to_owned()
        )
    );
    assert_eq!(
        get(&f.router, "/readyz/Server", &[]).await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "[-] Server failed: timeout\nhealth check failed\n".to_owned()
        )
    );
    assert_eq!(
        get(&f.router, "/livez/heartbeat", &[]).await,
        (
            StatusCode::OK,
            "[+] Heartbeat ok\nhealth check passed\n".to_owned()
        )
    );
    let (status, body) = get(&f.router, "/readyz/heartbeat", &[]).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::NOT_FOUND, "unknown check \"heartbeat\"\n")
    );
}

#[tokio::test]
async fn json_form_by_accept_header_or_query() {
    let f = fixture(settings());
    f.storage.set(Script::Fail(Reason::StatusRed));
    for (uri, headers) in [
        ("/readyz?format=json", vec![]),
        ("/readyz", vec![("accept", "application/health+json")]),
        ("/readyz", vec![("accept", "application/json")]),
    ] {
        let (status, body) = get(&f.router, uri, &headers).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let json: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["status"], "fail");
        let storage = &json["checks"]["storage"][0];
        assert_eq!(storage["status"], "fail");
        assert_eq!(storage["output"], "status red");
        assert_eq!(storage["observedUnit"], "ms");
        assert!(storage["observedValue"].is_number());
        assert!(storage["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(json["checks"]["ping"][0]["status"], "pass");
        assert!(json["checks"]["ping"][0].get("output").is_none());
        assert_eq!(json["checks"].as_object().unwrap().len(), 5);
    }
}

#[tokio::test]
async fn a_hanging_check_answers_timeout_within_the_deadline() {
    let f = fixture(settings());
    f.storage.set(Script::Hang);
    let started = Instant::now();
    let (status, body) = get(&f.router, "/readyz", &[]).await;
    let took = started.elapsed();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("[-] Storage failed: timeout\n"), "{body}");
    assert!(
        took < settings().deadline + Duration::from_millis(200),
        "{took:?}"
    );
}

/// Blocks its thread: the per-check timeout cannot fire, only the response deadline can.
struct Blocking;

#[async_trait]
impl HealthReporter for Blocking {
    fn name(&self) -> &str {
        "Blocking"
    }

    async fn check(&self) -> CheckOutcome {
        std::thread::sleep(Duration::from_millis(1500));
        CheckOutcome::Pass
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_blocking_check_is_cut_off_by_the_response_deadline() {
    let f = fixture(settings());
    f.checker
        .register(Arc::new(Blocking), Membership::READYZ, None);
    let started = Instant::now();
    let (status, body) = get(&f.router, "/readyz", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("[-] Blocking failed: timeout\n"), "{body}");
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_panicking_check_fails_as_panicked_and_the_server_lives() {
    let f = fixture(settings());
    f.storage.set(Script::Panic);
    let (status, body) = get(&f.router, "/readyz", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("[-] Storage failed: panicked\n"), "{body}");
    f.storage.set(Script::Pass);
    assert_eq!(
        get(&f.router, "/readyz", &[]).await,
        (StatusCode::OK, ALL_PASS.to_owned())
    );
}

#[tokio::test]
async fn success_is_cached_for_the_ttl_and_failure_never() {
    let f = fixture(Settings {
        cache_ttl: Duration::from_secs(60),
        ..settings()
    });
    for _ in 0..5 {
        get(&f.router, "/readyz", &[]).await;
    }
    assert_eq!(f.storage.runs(), 1, "a pass is reused within the TTL");

    let g = fixture(Settings {
        cache_ttl: Duration::from_secs(60),
        ..settings()
    });
    g.storage.set(Script::Fail(Reason::Unreachable));
    for _ in 0..5 {
        get(&g.router, "/readyz", &[]).await;
    }
    assert_eq!(g.storage.runs(), 5, "a failure is run again on every probe");
}

#[tokio::test]
async fn the_cache_expires_after_the_ttl() {
    let f = fixture(Settings {
        cache_ttl: Duration::from_millis(100),
        ..settings()
    });
    let cached = Instant::now();
    get(&f.router, "/readyz", &[]).await;
    // Probed until the pass is run again: not within the TTL, soon after it.
    while f.storage.runs() < 2 {
        assert!(
            cached.elapsed() < Duration::from_secs(10),
            "never run again"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        get(&f.router, "/readyz", &[]).await;
    }
    assert_eq!(f.storage.runs(), 2);
    assert!(
        cached.elapsed() >= Duration::from_millis(100),
        "{:?}",
        cached.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_probes_run_each_check_once() {
    let f = fixture(Settings {
        cache_ttl: Duration::from_secs(60),
        ..settings()
    });
    // A slow check, so every probe arrives while the first run is in flight.
    f.storage.set(Script::Sleep(Duration::from_millis(200)));
    let probes: Vec<_> = (0..1000)
        .map(|_| {
            let router = f.router.clone();
            tokio::spawn(async move { get(&router, "/readyz", &[]).await })
        })
        .collect();
    for probe in probes {
        assert_eq!(probe.await.unwrap().0, StatusCode::OK);
    }
    assert_eq!(f.storage.runs(), 1);
    assert_eq!(f.checker.metrics().runs("Storage"), 1);
    assert_eq!(f.checker.metrics().runs("Server"), 1);
}

#[tokio::test]
async fn concurrent_probes_share_a_failing_run_too() {
    let f = fixture(settings());
    f.storage.set(Script::Hang);
    let probes: Vec<_> = (0..50)
        .map(|_| {
            let router = f.router.clone();
            tokio::spawn(async move { get(&router, "/readyz", &[]).await })
        })
        .collect();
    for probe in probes {
        assert_eq!(probe.await.unwrap().0, StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(f.storage.runs(), 1, "one in-flight run, not one per probe");
}

#[tokio::test]
async fn damping_holds_state_until_the_thresholds() {
    let f = fixture(Settings {
        thresholds: Thresholds {
            failure: 2,
            success: 2,
        },
        ..settings()
    });
    let ready = |f: &Fixture| {
        let router = f.router.clone();
        async move { get(&router, "/readyz", &[]).await.0 == StatusCode::OK }
    };
    assert!(ready(&f).await);
    f.storage.set(Script::Fail(Reason::Unreachable));
    assert!(
        ready(&f).await,
        "one failure is below the failure threshold"
    );
    assert!(
        !ready(&f).await,
        "the second consecutive failure is reported"
    );
    f.storage.set(Script::Pass);
    let (status, body) = get(&f.router, "/readyz", &[]).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "one pass is below the success threshold"
    );
    assert!(
        body.contains(
            "[-] Storage failed: unreachable
"
        ),
        "the held failure keeps its reason: {body}"
    );
    assert!(ready(&f).await, "the second consecutive pass recovers");
}

#[tokio::test]
async fn shutdown_fails_readyz_at_once_but_not_livez() {
    let f = fixture(Settings {
        cache_ttl: Duration::from_secs(60),
        ..settings()
    });
    assert_eq!(get(&f.router, "/readyz", &[]).await.0, StatusCode::OK);
    f.checker.begin_shutdown();
    let (status, body) = get(&f.router, "/readyz", &[]).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "even with passes cached"
    );
    assert!(
        body.ends_with("[-] Shutdown failed: shutting down\nhealth check failed\n"),
        "{body}"
    );
    assert_eq!(
        get(&f.router, "/livez", &[]).await,
        (StatusCode::OK, "OK\n".to_owned())
    );
}

#[tokio::test]
async fn raw_details_only_on_the_sub_path_and_only_for_the_admin_token() {
    let f = fixture(settings());
    f.server.set(Script::Fail(Reason::Unreachable));
    let secret = "10.9.8.7";
    for (uri, headers) in [
        ("/readyz", vec![("authorization", "Bearer admin-secret")]),
        (
            "/readyz?format=json",
            vec![("authorization", "Bearer admin-secret")],
        ),
        ("/readyz/server", vec![]),
        (
            "/readyz/server",
            vec![("authorization", "Bearer admin-secre")],
        ),
        (
            "/readyz/server",
            vec![("authorization", "Bearer admin-secretX")],
        ),
        ("/readyz/server", vec![("authorization", "admin-secret")]),
    ] {
        let (_, body) = get(&f.router, uri, &headers).await;
        assert!(!body.contains(secret), "{uri} {headers:?}: {body}");
    }
    let admin = [("authorization", "Bearer admin-secret")];
    let (_, body) = get(&f.router, "/readyz/server", &admin).await;
    assert!(body.contains("detail: dial tcp 10.9.8.7:2379"), "{body}");
    let (_, body) = get(&f.router, "/readyz/server?format=json", &admin).await;
    assert!(body.contains(secret), "{body}");
}

#[tokio::test]
async fn checks_run_concurrently() {
    let f = fixture(settings());
    f.server.set(Script::Sleep(Duration::from_millis(150)));
    f.storage.set(Script::Sleep(Duration::from_millis(150)));
    f.cluster.set(Script::Sleep(Duration::from_millis(150)));
    let started = Instant::now();
    assert_eq!(get(&f.router, "/readyz", &[]).await.0, StatusCode::OK);
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(400),
        "three 150 ms checks took {took:?}"
    );
}

#[tokio::test]
async fn upstream_checks_are_skipped_for_a_hop_request() {
    let f = fixture(settings());
    let remote = Scripted::new("Remote", true, Script::Fail(Reason::Unreachable));
    f.checker
        .register(remote.clone(), Membership::UPSTREAM, None);
    let (status, body) = get(&f.router, "/readyz", &[("x-karpor-health-hop", "1")]).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, ALL_PASS));
    assert_eq!(remote.runs(), 0);
    let (status, _) = get(&f.router, "/readyz", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn config_can_override_criticality_and_deregister() {
    let mut registry = Registry::default();
    let checker = HealthChecker::new(settings(), HealthMetrics::new(&mut registry));
    let flaky = Scripted::new("Flaky", true, Script::Fail(Reason::Stale));
    checker.register(flaky, Membership::READYZ, Some(false));
    let report = checker
        .report(Endpoint::Readyz, &ReportRequest::default())
        .await
        .unwrap();
    assert!(report.passed());
    checker.deregister("flaky");
    let report = checker
        .report(Endpoint::Readyz, &ReportRequest::default())
        .await
        .unwrap();
    assert!(report.entries.is_empty());
}

/// Fails on the first call only; reports on which runs it was asked.
struct FailsOnce(AtomicBool);

#[async_trait]
impl HealthReporter for FailsOnce {
    fn name(&self) -> &str {
        "Once"
    }

    async fn check(&self) -> CheckOutcome {
        if self.0.swap(false, Ordering::SeqCst) {
            CheckOutcome::fail(Reason::Unreachable, "first")
        } else {
            CheckOutcome::Pass
        }
    }
}

#[tokio::test]
async fn transitions_and_status_are_exported_as_metrics() {
    let mut registry = Registry::default();
    let checker = HealthChecker::new(settings(), HealthMetrics::new(&mut registry));
    checker.register(
        Arc::new(FailsOnce(AtomicBool::new(true))),
        Membership::READYZ,
        None,
    );
    for _ in 0..2 {
        checker
            .report(Endpoint::Readyz, &ReportRequest::default())
            .await
            .unwrap();
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        "karpor_health_check_status{check=\"Once\",endpoint=\"readyz\"} 1",
        "karpor_health_check_runs_total{check=\"Once\"} 2",
        "karpor_health_check_transitions_total{check=\"Once\",to=\"pass\"} 1",
        "karpor_health_check_duration_seconds_count{check=\"Once\"} 2",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

/// Says which thread it ran on.
struct WhereRun(Mutex<Vec<String>>);

#[async_trait]
impl HealthReporter for WhereRun {
    fn name(&self) -> &str {
        "Where"
    }

    async fn check(&self) -> CheckOutcome {
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_owned();
        self.0.lock().unwrap().push(thread);
        CheckOutcome::Pass
    }
}

/// Checks run on the runtime that made the checker, not on the one serving the probe:
/// a flood of probes on the serving runtime cannot starve the checks it waits for.
#[test]
fn checks_run_on_the_runtime_that_made_the_checker() {
    let checks = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("checks")
        .enable_all()
        .build()
        .unwrap();
    let serving = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("serving")
        .enable_all()
        .build()
        .unwrap();
    let checker = checks.block_on(async {
        HealthChecker::new(settings(), HealthMetrics::new(&mut Registry::default()))
    });
    let reporter = Arc::new(WhereRun(Mutex::new(Vec::new())));
    checker.register(reporter.clone(), Membership::READYZ, None);
    let report = serving
        .block_on(serving.spawn(async move {
            checker
                .report(Endpoint::Readyz, &ReportRequest::default())
                .await
        }))
        .unwrap()
        .unwrap();
    assert!(report.passed(), "{report:?}");
    assert_eq!(*reporter.0.lock().unwrap(), ["checks"]);
}
