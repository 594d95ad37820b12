//! DNS rebinding and cross-site requests: a request whose `Host` is not one of the server's
//! names is refused (probes and metrics excepted), and a state-changing request from
//! another origin is refused even with a valid token; a `multipart/form-data` upload,
//! which needs no CORS preflight, included.

use crate::raw;
use karpor_testkit::process::{Spawn, EMBEDDED};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_hosts_and_cross_origin_writes_are_refused_and_probes_stay_open() {
    let karpor = Spawn::serve(EMBEDDED).start();
    let addr = karpor.addr;
    let port = addr.port();
    let get = |path: &str, host: &str| {
        raw(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    for path in ["/", "/rest-api/v1/clusters", "/openapi.json"] {
        let (status, body) = get(path, &format!("rebound.example:{port}"));
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("Host"), "{body}");
        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ] {
            assert_eq!(get(path, &host).0, 200, "{path} {host}");
        }
    }
    for path in ["/livez", "/readyz", "/metrics"] {
        assert_eq!(get(path, "rebound.example").0, 200, "{path}");
    }
    assert!(
        karpor.logs().contains("host=rebound.example"),
        "refusals are logged with the Host"
    );

    let token = karpor.local_token();
    let body = r#"{"description":"x","fields":["cluster"]}"#;
    let post = |origin: Option<&str>, extra: &str| {
        let origin = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
        raw(
            addr,
            &format!(
                "POST /rest-api/v1/resource-group-rule/r{} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
                 Authorization: Bearer {token}\r\nContent-Type: application/json\r\n{origin}{extra}\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                rand_suffix(),
                body.len()
            ),
        )
    };
    assert_eq!(post(Some("http://rebound.example"), "").0, 403);
    assert_eq!(post(Some("null"), "").0, 403);
    assert_eq!(post(None, "Sec-Fetch-Site: cross-site\r\n").0, 403);
    assert_eq!(post(Some(&format!("http://127.0.0.1:{port}")), "").0, 201);
    assert_eq!(
        post(None, "").0,
        201,
        "a non-browser client sends no Origin"
    );

    let form = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"k\"\r\n\r\nx\r\n--b--\r\n";
    let (status, _) = raw(
        addr,
        &format!(
            "POST /rest-api/v1/cluster/config/file HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Origin: http://rebound.example\r\nContent-Type: multipart/form-data; boundary=b\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    );
    assert_eq!(status, 403, "a cross-site form upload");
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_hosts_foreign_targets_and_cross_scheme_origins_are_refused() {
    let karpor = Spawn::serve(EMBEDDED).start();
    let addr = karpor.addr;
    let port = addr.port();
    let send = |target: &str, headers: &str| {
        raw(
            addr,
            &format!("GET {target} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n"),
        )
    };
    let path = "/rest-api/v1/clusters";
    let ok = format!("Host: 127.0.0.1:{port}\r\n");
    assert_eq!(send(path, &ok).0, 200);

    // The Host is an authority and nothing else: `[::1]` followed by junk is no name of ours.
    let (status, body) = send(path, "Host: [::1]anything\r\n");
    assert_eq!(status, 403, "{body}");
    for junk in ["user@127.0.0.1", "127.0.0.1/x", "127.0.0.1:x", "127.0.0.1:"] {
        assert_eq!(send(path, &format!("Host: {junk}\r\n")).0, 403, "{junk}");
    }
    // One Host header, not one for the check and another for whoever reads the second.
    let (status, body) = send(path, &format!("{ok}Host: rebound.example\r\n"));
    assert_eq!(status, 400, "{body}");
    // An absolute-form target names the authority a proxy or a route would trust.
    let (status, body) = send(&format!("http://rebound.example{path}"), &ok);
    assert_eq!(status, 400, "a target that disagrees with the Host: {body}");
    let (status, _) = send(
        &format!("http://rebound.example{path}"),
        "Host: rebound.example\r\n",
    );
    assert_eq!(status, 403, "a foreign target that agrees with the Host");
    let (status, body) = send(&format!("http://127.0.0.1:{port}{path}"), &ok);
    assert_eq!(status, 200, "an absolute-form target of ours: {body}");
    // Probes stay open whatever the Host.
    assert_eq!(send("/livez", "Host: [::1]anything\r\n").0, 200);
    assert_eq!(send("/livez", &format!("{ok}{ok}")).0, 200);

    // An origin of another scheme is another origin: an https page is not this plain
    // HTTP server's (the other direction is the guard's unit test, a TLS server).
    let token = karpor.local_token();
    let body = r#"{"description":"x","fields":["cluster"]}"#;
    let post = |origin: &str| {
        raw(
            addr,
            &format!(
                "POST /rest-api/v1/resource-group-rule/s{} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
                 Authorization: Bearer {token}\r\nContent-Type: application/json\r\nOrigin: {origin}\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                rand_suffix(),
                body.len()
            ),
        )
    };
    let (status, answer) = post(&format!("https://127.0.0.1:{port}"));
    assert_eq!(status, 403, "a cross-scheme origin: {answer}");
    assert_eq!(post(&format!("http://127.0.0.1:{port}")).0, 201);
    assert_eq!(post(&format!("http://localhost:{port}")).0, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_server_refuses_writes_from_plain_http_origins() {
    let dir = tempfile::tempdir().unwrap();
    let cert = karpor_testkit::tls::self_signed(dir.path());
    let config =
        "server: {tls: {cert_file: tls.crt, key_file: tls.key}}\nshutdown: {drain_delay: 1s}\n";
    let karpor = Spawn::serve(config).in_dir(dir.path()).start();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&cert).unwrap())
        .build()
        .unwrap();
    let origin = |scheme: &str| format!("{scheme}://{}", karpor.addr);
    let post = |origin: String| {
        client
            .post(format!(
                "https://{}/rest-api/v1/resource-group-rule/t{}",
                karpor.addr,
                rand_suffix()
            ))
            .bearer_auth(karpor.local_token())
            .header("origin", origin)
            .json(&serde_json::json!({"description": "x", "fields": ["cluster"]}))
            .send()
    };
    let refused = post(origin("http")).await.unwrap();
    assert_eq!(refused.status(), 403, "a plain-HTTP page writing to TLS");
    let accepted = post(origin("https")).await.unwrap();
    assert_eq!(accepted.status(), 201, "{}", accepted.text().await.unwrap());
}
