//! Checks on every request before any route sees it: the `Host` must be one of the
//! server's names (a DNS-rebinding page names its own), a state-changing request must not
//! come from another origin, and a client's request id is used only when it is short and
//! plain. The authority is read strictly: one `Host`, `host[:port]` and nothing else, and
//! an absolute-form target (or HTTP/2's `:authority`) that agrees with it; an origin is
//! another origin when its scheme differs too. Probes and metrics answer whatever the
//! `Host`, so kubelets and scrapers that address a pod by IP keep working.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The header that carries a request's id, the client's when plain, else one made here.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
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
            (Some(names), Some(host)) => parse_authority(host)
                .is_some_and(|authority| names.contains(&authority.host().to_ascii_lowercase())),
        }
    }
}

/// How a request reached the server, set on each request by the listener (`serve.rs`):
/// an origin of the other scheme is another origin. Plain HTTP when unset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Scheme {
    #[default]
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

fn host_of_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// `text` as `host[:port]`, nothing else. http's authority grammar also admits userinfo
/// (`user@host`) and, after an IPv6 literal, any text (`[::1]anything`); neither names a
/// server, and a check that reads such a value differently from the next reader is no check.
fn parse_authority(text: &str) -> Option<Authority> {
    let authority: Authority = text.parse().ok()?;
    let whole = authority.as_str();
    if whole.contains('@') {
        return None;
    }
    let host = authority.host();
    let port = match &whole[host.len()..] {
        "" => None,
        rest => Some(rest.strip_prefix(':')?),
    };
    let port_ok = port.is_none_or(|p| {
        !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
    });
    (port_ok && valid_host(host)).then_some(authority)
}

/// An IPv6 literal in brackets, or a name of letters, digits, `-`, `.` and `_` (which an
/// IPv4 address is too).
fn valid_host(host: &str) -> bool {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        }
    }
}

const FOREIGN_HOST: &str =
    "the Host header is not one of this server's names (server.allowed_hosts)";

/// A request refused for the authority it names.
#[derive(Debug, PartialEq, Eq)]
struct Refused {
    status: StatusCode,
    message: &'static str,
}

impl Refused {
    const fn malformed(message: &'static str) -> Self {
        Refused {
            status: StatusCode::BAD_REQUEST,
            message,
        }
    }
}

/// The authority a request was sent to: its one `Host` header and its target's authority
/// (an absolute-form target on HTTP/1.1, `:authority` on HTTP/2), which must agree when
/// both are given. A `Host` that is not `host[:port]` names no server of ours (403); two
/// of them, or a target that disagrees, are a malformed request (400).
fn request_authority(headers: &HeaderMap, uri: &Uri) -> Result<Option<Authority>, Refused> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err(Refused::malformed("more than one Host header")),
        (None, _) => None,
        (Some(value), None) => Some(value.to_str().ok().and_then(parse_authority).ok_or(
            Refused {
                status: StatusCode::FORBIDDEN,
                message: FOREIGN_HOST,
            },
        )?),
    };
    let target =
        match uri.authority() {
            None => None,
            Some(authority) => Some(parse_authority(authority.as_str()).ok_or(
                Refused::malformed("the request target's authority is not host[:port]"),
            )?),
        };
    match (host, target) {
        (Some(host), Some(target)) if !same_authority(&host, &target) => Err(Refused::malformed(
            "the request target's authority and the Host header differ",
        )),
        (host, target) => Ok(host.or(target)),
    }
}

fn same_authority(a: &Authority, b: &Authority) -> bool {
    a.host().eq_ignore_ascii_case(b.host()) && a.port_u16() == b.port_u16()
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
    let authority = match request_authority(request.headers(), request.uri()) {
        Ok(authority) => authority,
        Err(refused) => {
            let host = request.headers().get(header::HOST).map(|v| v.as_bytes());
            tracing::info!(
                host = %String::from_utf8_lossy(host.unwrap_or_default()),
                target = %request.uri(),
                problem = refused.message,
                "refused a request for its authority"
            );
            return refusal(request.headers(), refused.status, refused.message);
        }
    };
    let host = authority.as_ref().map(Authority::as_str);
    if !allowed.allows(host) {
        tracing::info!(
            host = host.unwrap_or_default(),
            "refused a request for a name that is not this server's"
        );
        return refusal(request.headers(), StatusCode::FORBIDDEN, FOREIGN_HOST);
    }
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let scheme = forwarded_scheme(request.headers()).unwrap_or_else(|| {
        request
            .extensions()
            .get::<Scheme>()
            .copied()
            .unwrap_or_default()
    });
    if !safe && cross_origin(request.headers(), host, scheme) {
        return refusal(
            request.headers(),
            StatusCode::FORBIDDEN,
            "a state-changing request from another origin is refused",
        );
    }
    next.run(request).await
}

/// The scheme a TLS-terminating proxy (an Ingress) says the browser used: one
/// `X-Forwarded-Proto` of `http` or `https`. A page cannot send this header cross-site
/// without a CORS preflight, which karpor never grants, so it comes from a proxy (or from
/// a client that is no browser, which the Origin check is not about).
fn forwarded_scheme(headers: &HeaderMap) -> Option<Scheme> {
    let mut values = headers.get_all("x-forwarded-proto").iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    match value.to_str().ok()?.trim().to_ascii_lowercase().as_str() {
        "https" => Some(Scheme::Https),
        "http" => Some(Scheme::Http),
        _ => None,
    }
}

/// Whether a browser says the request comes from another origin than `host` reached by
/// `scheme`.
fn cross_origin(headers: &HeaderMap, host: Option<&str>, scheme: Scheme) -> bool {
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
    match host.and_then(parse_authority) {
        Some(host) => !same_origin(origin, &host, scheme),
        None => true,
    }
}

/// An origin is `scheme://host[:port]`, nothing more (`null` from a sandboxed frame or a
/// file is no origin of ours); ports compare with the scheme's default filled in (a
/// browser leaves it out, a `Host` may not).
fn same_origin(origin: &str, host: &Authority, scheme: Scheme) -> bool {
    let Some((from_scheme, from)) = origin.split_once("://") else {
        return false;
    };
    let Some(from) = parse_authority(from) else {
        return false;
    };
    let port = |a: &Authority| a.port_u16().unwrap_or(scheme.default_port());
    from_scheme.eq_ignore_ascii_case(scheme.as_str())
        && from.host().eq_ignore_ascii_case(host.host())
        && port(&from) == port(host)
}

fn refusal(headers: &HeaderMap, status: StatusCode, message: &str) -> Response {
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
    (status, axum::Json(body)).into_response()
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
        assert!(!cross_origin(
            &headers,
            Some("localhost:7443"),
            Scheme::Http
        ));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://localhost:7443"),
        );
        assert!(!cross_origin(
            &headers,
            Some("localhost:7443"),
            Scheme::Http
        ));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(cross_origin(&headers, Some("localhost:7443"), Scheme::Http));
        headers.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(cross_origin(&headers, Some("localhost:7443"), Scheme::Http));
        let mut fetch = HeaderMap::new();
        fetch.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(cross_origin(&fetch, Some("localhost:7443"), Scheme::Http));
    }

    #[test]
    fn a_host_is_host_and_port_and_nothing_else() {
        for (text, host, port) in [
            ("localhost", "localhost", None),
            ("LOCALHOST:7443", "LOCALHOST", Some(7443)),
            ("127.0.0.1:1", "127.0.0.1", Some(1)),
            ("[::1]", "[::1]", None),
            ("[::1]:7443", "[::1]", Some(7443)),
            (
                "karpor.ns.svc.cluster.local:443",
                "karpor.ns.svc.cluster.local",
                Some(443),
            ),
        ] {
            let parsed = parse_authority(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!((parsed.host(), parsed.port_u16()), (host, port), "{text}");
        }
        for refused in [
            "",
            "[::1]anything",
            "[::1]:7443x",
            "[::1]x:7443",
            "[not-v6]",
            "user@localhost",
            "user:pass@localhost:7443",
            "localhost/path",
            "localhost?q",
            "localhost#f",
            "localhost:",
            "localhost:x",
            "localhost:65536",
            "localhost:7443:1",
            ":7443",
            "local host",
            "local%68ost",
            "localhost\\",
        ] {
            assert!(parse_authority(refused).is_none(), "{refused:?}");
        }
    }

    fn host_headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(header::HOST, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn authority_of(hosts: &[&str], target: &str) -> Result<Option<String>, StatusCode> {
        let uri: Uri = target.parse().unwrap();
        request_authority(&host_headers(hosts), &uri)
            .map(|a| a.map(|a| a.to_string()))
            .map_err(|refused| refused.status)
    }

    #[test]
    fn one_host_that_agrees_with_the_target() {
        let ok = |a: &str| Ok(Some(a.to_owned()));
        assert_eq!(
            authority_of(&["localhost:7443"], "/x"),
            ok("localhost:7443")
        );
        assert_eq!(authority_of(&[], "/x"), Ok(None));
        // HTTP/2: `:authority` alone, or with a Host that agrees.
        assert_eq!(
            authority_of(&[], "http://localhost:7443/x"),
            ok("localhost:7443")
        );
        assert_eq!(
            authority_of(&["LOCALHOST:7443"], "http://localhost:7443/x"),
            ok("LOCALHOST:7443")
        );
        let malformed = Err(StatusCode::BAD_REQUEST);
        for (hosts, target) in [
            (&["localhost:7443", "localhost:7443"][..], "/x"),
            (&["localhost:7443", "evil.example"], "/x"),
            (&["localhost:7443"], "http://evil.example/x"),
            (&["localhost:7443"], "http://localhost/x"),
            (&["localhost:7443"], "http://u@localhost:7443/x"),
            (&[], "http://u@localhost:7443/x"),
        ] {
            assert_eq!(authority_of(hosts, target), malformed, "{hosts:?} {target}");
        }
        // A Host that is no authority names no server of ours.
        let foreign = Err(StatusCode::FORBIDDEN);
        assert_eq!(authority_of(&["[::1]anything"], "/x"), foreign);
        let mut opaque = HeaderMap::new();
        opaque.insert(
            header::HOST,
            HeaderValue::from_bytes(b"l\xffcalhost").unwrap(),
        );
        let refused = request_authority(&opaque, &Uri::from_static("/x")).unwrap_err();
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
    }

    #[test]
    fn an_origin_of_another_scheme_is_another_origin() {
        let write_from = |origin: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ORIGIN, HeaderValue::from_static(origin));
            headers
        };
        let host = Some("localhost:7443");
        let http = write_from("http://localhost:7443");
        let https = write_from("https://localhost:7443");
        assert!(!cross_origin(&http, host, Scheme::Http));
        assert!(cross_origin(&http, host, Scheme::Https));
        assert!(!cross_origin(&https, host, Scheme::Https));
        assert!(cross_origin(&https, host, Scheme::Http));
        // Default ports: a browser leaves them out of the origin, a Host may not.
        assert!(!cross_origin(
            &write_from("https://karpor.example"),
            Some("karpor.example:443"),
            Scheme::Https
        ));
        assert!(!cross_origin(
            &write_from("https://karpor.example:443"),
            Some("karpor.example"),
            Scheme::Https
        ));
        assert!(cross_origin(
            &write_from("https://karpor.example"),
            Some("karpor.example:80"),
            Scheme::Https
        ));
        for malformed in [
            "http://localhost:7443/",
            "http://localhost:7443/x",
            "http://u@localhost:7443",
            "http://[::1]x",
            "localhost:7443",
            "//localhost:7443",
        ] {
            assert!(
                cross_origin(&write_from(malformed), host, Scheme::Http),
                "{malformed}"
            );
        }
        assert!(cross_origin(&http, Some("[::1]anything"), Scheme::Http));
    }

    #[test]
    fn a_proxy_says_which_scheme_the_browser_used() {
        let headers = |values: &[&str]| {
            let mut map = HeaderMap::new();
            for v in values {
                map.append("x-forwarded-proto", HeaderValue::from_str(v).unwrap());
            }
            map
        };
        assert_eq!(forwarded_scheme(&headers(&["https"])), Some(Scheme::Https));
        assert_eq!(forwarded_scheme(&headers(&["HTTP"])), Some(Scheme::Http));
        assert_eq!(forwarded_scheme(&headers(&[])), None);
        assert_eq!(forwarded_scheme(&headers(&["https", "http"])), None);
        assert_eq!(forwarded_scheme(&headers(&["ftp"])), None);
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
