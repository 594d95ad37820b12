//! The health routes: `/livez`, `/readyz`, their `/{check}` sub-paths, the query options
//! and content negotiation of the contract.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::header::{ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use subtle::ConstantTimeEq;

use crate::checker::{Endpoint, HealthChecker, ReportRequest};
use crate::upstream::HOP_HEADER;

#[derive(Clone)]
struct RouteState {
    checker: HealthChecker,
    admin_token: Option<Arc<str>>,
    lines: Option<Arc<dyn LineFilter>>,
}

/// Which checks' lines a request may see in the full list, decided by the process from
/// the caller (karpor's API: only the member clusters its scope holds). The checks left
/// out still count towards the status; the one-check sub-paths are not filtered.
#[async_trait::async_trait]
pub trait LineFilter: Send + Sync + 'static {
    /// What to leave out for the request with these headers; `None`: nothing.
    async fn hidden(&self, headers: &HeaderMap) -> Option<Hidden>;
}

/// Whether a check's line is left out, by its name.
pub type Hidden = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// The health routes' paths, as registered (`/endpoints` lists them).
pub const PATHS: [&str; 4] = ["/livez", "/livez/{*check}", "/readyz", "/readyz/{*check}"];

/// The health routes, to be merged into the process's router. `admin_token` unlocks raw
/// failure details on the `/{check}` sub-paths; `lines` filters the full list per caller.
pub fn routes(
    checker: HealthChecker,
    admin_token: Option<String>,
    lines: Option<Arc<dyn LineFilter>>,
) -> Router {
    let state = RouteState {
        checker,
        admin_token: admin_token.map(Arc::from),
        lines,
    };
    Router::new()
        .route(PATHS[0], get(livez))
        // A wildcard: `Cluster/prod` is matched unencoded as well as encoded.
        .route(PATHS[1], get(livez_one))
        .route(PATHS[2], get(readyz))
        .route(PATHS[3], get(readyz_one))
        .with_state(state)
}

async fn livez(State(s): State<RouteState>, RawQuery(q): RawQuery, h: HeaderMap) -> Response {
    respond(&s, Endpoint::Livez, None, q, &h).await
}

async fn livez_one(
    State(s): State<RouteState>,
    Path(check): Path<String>,
    RawQuery(q): RawQuery,
    h: HeaderMap,
) -> Response {
    respond(&s, Endpoint::Livez, Some(check), q, &h).await
}

async fn readyz(State(s): State<RouteState>, RawQuery(q): RawQuery, h: HeaderMap) -> Response {
    respond(&s, Endpoint::Readyz, None, q, &h).await
}

async fn readyz_one(
    State(s): State<RouteState>,
    Path(check): Path<String>,
    RawQuery(q): RawQuery,
    h: HeaderMap,
) -> Response {
    respond(&s, Endpoint::Readyz, Some(check), q, &h).await
}

#[derive(Default)]
struct Options {
    verbose: bool,
    json: bool,
    excludes: Vec<String>,
}

fn parse_options(query: Option<&str>, headers: &HeaderMap) -> Options {
    let mut options = Options::default();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "verbose" => options.verbose = value != "false" && value != "0",
            "exclude" | "excludes" => options.excludes.push(value.into_owned()),
            "format" => options.json = value == "json",
            _ => {}
        }
    }
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if accept.contains("application/health+json") || accept.contains("application/json") {
        options.json = true;
    }
    options
}

fn is_admin(state: &RouteState, headers: &HeaderMap) -> bool {
    let Some(expected) = &state.admin_token else {
        return false;
    };
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    // Constant time, so response timing does not reveal how much of a guess matched.
    presented.as_bytes().ct_eq(expected.as_bytes()).into()
}

async fn respond(
    state: &RouteState,
    endpoint: Endpoint,
    only: Option<String>,
    query: Option<String>,
    headers: &HeaderMap,
) -> Response {
    let options = parse_options(query.as_deref(), headers);
    let single = only.is_some();
    let request = ReportRequest {
        excludes: options.excludes,
        only,
        hop: headers.contains_key(HOP_HEADER),
    };
    let report = match state.checker.report(endpoint, &request).await {
        Ok(mut report) => {
            if let (false, Some(lines)) = (single, &state.lines) {
                if let Some(hidden) = lines.hidden(headers).await {
                    report.withhold(hidden);
                }
            }
            report
        }
        Err(unknown) => {
            let body = format!("unknown check \"{}\"\n", unknown.0);
            return health_response(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", body);
        }
    };
    let status = if report.passed() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    // Raw details only on the one-check sub-paths, and only for an admin.
    let detail = single && is_admin(state, headers);
    if options.json {
        let body = report.to_json(detail).to_string();
        return health_response(status, "application/health+json", body);
    }
    let body = if endpoint == Endpoint::Livez && !options.verbose && !single {
        report.to_short_text().to_owned()
    } else {
        report.to_text(detail)
    };
    health_response(status, "text/plain; charset=utf-8", body)
}

fn health_response(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
