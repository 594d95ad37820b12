//! Checks on every request before any route sees it: the `Host` must be one of the
//! server's names (a DNS-rebinding page names its own), a state-changing request must not
//! come from another origin, and a client's request id is used only when it is short and
//! plain. Probes and metrics answer whatever the `Host`, so kubelets and scrapers that
//! address a pod by IP keep working.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::router::REQUEST_ID;

/// Longest request id taken from a client.
const MAX_REQUEST_ID: usize = 64;
/// Paths open to any `Host`.
const OPEN_PATHS: &[&str] = &["/livez", "/readyz", "/metrics"];

/// The names a request's `Host` may carry (without port).
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    names: Option<Vec<String>>,
}

impl AllowedHosts {
    /// `configured` (`server.allowed_hosts`; `*` allows any), else derived from the
    /// listen address: on loopback its names (`localhost`, `127.0.0.1`, `[::1]`), on one
    /// address that address, on every address (`0.0.0.0`, `::`) any name.
    pub fn new(listen: SocketAddr, configured: &[String]) -> Self {
        if configured.iter().any(|h| h == "*") {
            return AllowedHosts { names: None };
        }
        if !configured.is_empty() {
            return AllowedHosts {
                names: Some(configured.iter().map(|h| h.to_ascii_lowercase()).collect()),
            };
        }
        let ip = listen.ip();
        if ip.is_unspecified() {
            return AllowedHosts { names: None };
        }
        let mut names = vec![host_of_ip(ip)];
        if ip.is_loopback() {
            names.extend(["localhost", "127.0.0.1", "[::1]"].map(str::to_owned));
        }
        AllowedHosts { names: Some(names) }
    }

    fn allows(&self, host: Option<&str>) -> bool {
        match (&self.names, host) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(names), Some(host)) => {
                let name = strip_port(host).to_ascii_lowercase();
                names.contains(&name)
            }
        }
    }
}

fn host_of_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// `example.com:7443` → `example.com`; `[::1]:7443` → `[::1]`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The authority a request was sent to: `Host` (HTTP/1.1) or the URI's (HTTP/2).
fn authority(request: &Request) -> Option<String> {
    request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.to_string()))
}

fn open_path(path: &str) -> bool {
    OPEN_PATHS.iter().any(|p| {
        path == *p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Refuses a foreign `Host` (403) and a cross-origin write (403).
pub(crate) async fn hosts_and_origins(
    State(allowed): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    if open_path(request.uri().path()) {
        return next.run(request).await;
    }
    let host = authority(&request);
    if !allowed.allows(host.as_deref()) {
        tracing::info!(
            host = host.as_deref().unwrap_or_default(),
            "refused a request for a name that is not this server's"
        );
        return refusal(
            request.headers(),
            "the Host header is not one of this server's names (server.allowed_hosts)",
        );
    }
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if !safe && cross_origin(request.headers(), host.as_deref()) {
        return refusal(
            request.headers(),
            "a state-changing request from another origin is refused",
        );
    }
    next.run(request).await
}

/// Whether a browser says the request comes from another origin than `host`.
fn cross_origin(headers: &HeaderMap, host: Option<&str>) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return true;
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let Ok(origin) = origin.to_str() else {
        return true;
    };
    let origin_authority = origin.split_once("://").map(|(_, rest)| rest);
    match (origin_authority, host) {
        (Some(from), Some(host)) => !from.eq_ignore_ascii_case(host),
        // `Origin: null` (a sandboxed frame, a file) or no Host to compare.
        _ => true,
    }
}

fn refusal(headers: &HeaderMap, message: &str) -> Response {
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let trace = headers
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let body = json!({
        "success": false, "message": message, "data": null, "traceID": trace,
        "startTime": now, "endTime": now, "costTime": "0s",
    });
    (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
}

/// Drops a client's `x-request-id` that is long or not plain (letters, digits, `-`, `_`,
/// `.`, `:`), so the id layer makes a new one: ids reach logs and answers, and a
/// caller must not be able to forge lines in either.
pub(crate) async fn plain_request_id(mut request: Request, next: Next) -> Response {
    let plain = |v: &HeaderValue| {
        let bytes = v.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    };
    if request.headers().get_all(&REQUEST_ID).iter().count() > 1
        || request
            .headers()
            .get(&REQUEST_ID)
            .is_some_and(|v| !plain(v))
    {
        request.headers_mut().remove(&REQUEST_ID);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(addr: &str) -> SocketAddr {
        addr.parse().unwrap()
    }

    #[test]
    fn loopback_allows_its_own_names_only() {
        let hosts = AllowedHosts::new(listen("127.0.0.1:7443"), &[]);
        for ok in [
            "localhost:7443",
            "127.0.0.1:7443",
            "[::1]:7443",
            "LOCALHOST",
        ] {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "evil.example:7443",
            "127.0.0.1.evil.example",
            "localhost.evil",
        ] {
            assert!(!hosts.allows(Some(refused)), "{refused}");
        }
        assert!(!hosts.allows(None));
    }

    #[test]
    fn every_address_allows_any_name_unless_configured() {
        assert!(AllowedHosts::new(listen("0.0.0.0:7443"), &[]).allows(Some("karpor.svc")));
        let named = AllowedHosts::new(listen("0.0.0.0:7443"), &["karpor.example".into()]);
        assert!(named.allows(Some("karpor.example:443")));
        assert!(!named.allows(Some("other.example")));
        assert!(AllowedHosts::new(listen("127.0.0.1:1"), &["*".into()]).allows(Some("x")));
    }

    #[test]
    fn origins_must_match_the_host_for_writes() {
        let mut headers = HeaderMap::new();
        assert!(!cross_origin(&headers, Some("localhost:7443")));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://localhost:7443"),
        );
        assert!(!cross_origin(&headers, Some("localhost:7443")));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(cross_origin(&headers, Some("localhost:7443")));
        headers.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(cross_origin(&headers, Some("localhost:7443")));
        let mut fetch = HeaderMap::new();
        fetch.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(cross_origin(&fetch, Some("localhost:7443")));
    }

    #[test]
    fn probes_and_metrics_are_open_paths() {
        for path in ["/livez", "/readyz", "/readyz/Storage", "/metrics"] {
            assert!(open_path(path), "{path}");
        }
        for path in ["/", "/readyzz", "/rest-api/v1/clusters", "/metricsx"] {
            assert!(!open_path(path), "{path}");
        }
    }
}
