//! A dashboard build served on karpor's own listener (Karpor's, built for `/public/`):
//! its files under `/public`, its `index.html` at `/` and at its router's paths, nothing
//! outside its directory, and the page's headers on all of it.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use karpor_health::{HealthChecker, HealthMetrics, Settings};
use karpor_server::{AllowedHosts, HttpMetrics, RouterParts};
use prometheus_client::registry::Registry;
use tower::ServiceExt;

const INDEX: &str = "<!doctype html><title>dashboard</title>";

fn router(dashboard: Option<std::path::PathBuf>) -> Router {
    let mut registry = Registry::default();
    let health = HealthChecker::new(Settings::default(), HealthMetrics::new(&mut registry));
    let http = HttpMetrics::new(&mut registry);
    let api = Router::new().nest(
        "/rest-api/v1",
        Router::new()
            .route("/clusters", axum::routing::get(|| async { "clusters" }))
            .fallback(|| async { (StatusCode::NOT_FOUND, "api: no such route") }),
    );
    karpor_server::router(RouterParts {
        health,
        admin_token: None,
        check_lines: None,
        metrics: Arc::new(registry),
        with_ui: true,
        dashboard,
        routes: api,
        endpoints: Vec::new(),
        hosts: AllowedHosts::new(SocketAddr::from(([127, 0, 0, 1], 7443)), &[]),
        http,
        request_timeout: Duration::from_secs(5),
    })
}

async fn get(router: &Router, method: &str, path: &str) -> (StatusCode, String, Vec<String>) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "localhost")
        .body(Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = [
        header::CONTENT_SECURITY_POLICY,
        header::X_CONTENT_TYPE_OPTIONS,
        header::X_FRAME_OPTIONS,
        header::CONTENT_TYPE,
    ]
    .iter()
    .map(|name| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    })
    .collect();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned(), headers)
}

#[tokio::test]
async fn a_dashboard_build_is_served_with_its_routers_fallback() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside the build").unwrap();
    let build = outside.path().join("build");
    std::fs::create_dir_all(build.join("static/js")).unwrap();
    std::fs::write(build.join("index.html"), INDEX).unwrap();
    std::fs::write(build.join("static/js/main.1a2b.js"), "console.log(1)").unwrap();
    let router = router(Some(build));

    for path in [
        "/",
        "/insightDetail/resource?cluster=a",
        "/cluster/access",
        "/login",
    ] {
        let (status, body, headers) = get(&router, "GET", path).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, INDEX), "{path}");
        assert!(headers[3].starts_with("text/html"), "{path}: {headers:?}");
        assert!(
            headers[0].contains("frame-ancestors 'none'"),
            "{path}: {headers:?}"
        );
        assert_eq!(
            (headers[1].as_str(), headers[2].as_str()),
            ("nosniff", "DENY")
        );
    }
    let (status, body, headers) = get(&router, "GET", "/public/static/js/main.1a2b.js").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "console.log(1)"));
    assert!(headers[3].contains("javascript"), "{headers:?}");
    assert_eq!(headers[1], "nosniff");

    // Nothing outside the build, however asked.
    for path in [
        "/public/../secret.txt",
        "/public/%2e%2e/secret.txt",
        "/public/..%2fsecret.txt",
        "/public/static/js/missing.js",
    ] {
        let (status, body, _) = get(&router, "GET", path).await;
        assert!(!body.contains("outside the build"), "{path}: {body}");
        assert_ne!(status, StatusCode::OK, "{path}: {body}");
    }
    // The API, the probes and the writes stay theirs.
    let (status, body, _) = get(&router, "GET", "/rest-api/v1/clusters").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "clusters"));
    let (status, body, _) = get(&router, "GET", "/rest-api/v1/nothing").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::NOT_FOUND, "api: no such route")
    );
    let (status, body, _) = get(&router, "GET", "/livez").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "OK\n"));
    let (status, _, _) = get(&router, "POST", "/cluster/access").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn without_a_dashboard_the_page_is_karpors_own() {
    let router = router(None);
    let (status, body, headers) = get(&router, "GET", "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("<html") || body.contains("<!doctype"),
        "{body}"
    );
    assert!(headers[0].contains("frame-ancestors 'none'"), "{headers:?}");
    let (status, _, _) = get(&router, "GET", "/public/index.html").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = get(&router, "GET", "/insightDetail/resource").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
