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
