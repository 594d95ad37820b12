use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header::{self, CONTENT_TYPE};
use axum::http::{HeaderValue, Request, StatusCode};
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use karpor_health::HealthChecker;
use prometheus_client::registry::Registry;
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use tracing::Level;

use crate::guard::{self, AllowedHosts, REQUEST_ID};
use crate::metrics::HttpMetrics;

/// Karpor's route listing: sorted `METHOD\tPATH` lines.
const ENDPOINTS: &str = "/endpoints";
const PAGE: &str = "/";
const PLACEHOLDER_PAGE: &str = include_str!("../../../ui-placeholder/index.html");
/// Where a dashboard build's assets are served (Karpor's dashboard is built for it).
const DASHBOARD_ASSETS: &str = "/public";
/// The page's and a dashboard's: never framed (clickjacking), no `<base>` or plugin
/// injected, no type sniffed.
const PAGE_POLICY: &str = "frame-ancestors 'none'; base-uri 'self'; object-src 'none'";

/// What a process's router is made of.
pub struct RouterParts {
    pub health: HealthChecker,
    /// Unlocks raw failure details on `/readyz/{check}`.
    pub admin_token: Option<String>,
    /// Which checks' lines each caller sees in the full list (the API's scopes).
    pub check_lines: Option<Arc<dyn karpor_health::LineFilter>>,
    pub metrics: Arc<Registry>,
    /// Serve the placeholder page at `/` (the server does; the syncer's probe port not).
    pub with_ui: bool,
    /// With `with_ui`: a dashboard build (Karpor's) served instead of the page, its files
    /// at `/public/...` and its `index.html` at `/` and at every path no route serves
    /// (its router's paths).
    pub dashboard: Option<PathBuf>,
    /// The process's own routes (the REST API), behind the same request id and tracing.
    pub routes: Router,
    /// `routes`' `METHOD\tPATH` lines, listed by `/endpoints` with this crate's own.
    pub endpoints: Vec<String>,
    /// The names a request's `Host` may carry (probes and metrics excepted).
    pub hosts: AllowedHosts,
    /// Every request counted and timed.
    pub http: HttpMetrics,
    /// Every route of this crate answers within this (503 after); `routes` bring their
    /// own limits (the API answers its timeout in its envelope).
    pub request_timeout: Duration,
}

pub fn router(parts: RouterParts) -> Router {
    let mut endpoints = parts.endpoints;
    endpoints.extend(karpor_health::PATHS.iter().map(|p| format!("GET\t{p}")));
    endpoints.push(format!("GET\t{}", crate::metrics::PATH));
    endpoints.push(format!("GET\t{ENDPOINTS}"));
    let own = karpor_health::routes(parts.health, parts.admin_token, parts.check_lines)
        .merge(crate::metrics::routes(parts.metrics));
    let mut page = Router::new();
    if parts.with_ui {
        match &parts.dashboard {
            Some(dir) => {
                let index = ServeFile::new(dir.join("index.html"));
                page = page
                    .route_service(PAGE, index.clone())
                    .nest_service(DASHBOARD_ASSETS, ServeDir::new(dir))
                    .fallback_service(index);
                endpoints.push(format!("GET\t{DASHBOARD_ASSETS}/{{*path}}"));
            }
            None => page = page.route(PAGE, get(|| async { Html(PLACEHOLDER_PAGE) })),
        }
        endpoints.push(format!("GET\t{PAGE}"));
    }
    let page = page
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(PAGE_POLICY),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ));
    let own = own.merge(page);
    endpoints.sort();
    endpoints.dedup();
    let listing = endpoints.join("\n") + "\n";
    let own = own.route(
        ENDPOINTS,
        get(move || async move { ([(CONTENT_TYPE, "text/plain; charset=utf-8")], listing) }),
    );
    // These read no body; the health routes answer within their own deadline, below this.
    let own = own.layer(TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        parts.request_timeout,
    ));
    // Outermost first: a plain request id (the client's, or a new one), a span carrying
    // it (so every log line of the request has it), the id echoed in the response, then
    // the Host and Origin checks.
    // Inside the routers, so the matched route is known.
    let routes = parts
        .routes
        .merge(own)
        .layer(axum::middleware::from_fn_with_state(
            parts.http,
            crate::metrics::record,
        ));
    routes.layer(
        ServiceBuilder::new()
            .layer(axum::middleware::from_fn(guard::plain_request_id))
            .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
            .layer(
                // A 503 is an answer, not an error of karpor's (a failing probe above
                // all): the health transition line is the record.
                TraceLayer::new_for_http()
                    .on_failure(DefaultOnFailure::new().level(Level::DEBUG))
                    .make_span_with(|request: &Request<_>| {
                        let id = request
                            .headers()
                            .get(&REQUEST_ID)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default();
                        tracing::info_span!(
                            "request",
                            request_id = %id,
                            method = %request.method(),
                            path = %request.uri().path(),
                        )
                    }),
            )
            .layer(PropagateRequestIdLayer::new(REQUEST_ID))
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(parts.hosts),
                guard::hosts_and_origins,
            )),
    )
}
