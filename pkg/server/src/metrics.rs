//! `/metrics` (OpenMetrics text) and what this crate measures: every HTTP request by route
//! and status, the process (CPU, memory, open files, start time, threads) read from
//! `/proc` at each scrape, and a build-info gauge. The encoding runs on a blocking thread:
//! it reads `/proc`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Where the metrics are served.
pub(crate) const PATH: &str = "/metrics";

pub(crate) fn routes(registry: Arc<Registry>) -> Router {
    Router::new().route(PATH, get(metrics)).with_state(registry)
}

async fn metrics(State(registry): State<Arc<Registry>>) -> Response {
    let encoded = tokio::task::spawn_blocking(move || {
        let mut body = String::new();
        encode(&mut body, &registry).map(|()| body)
    })
    .await;
    match encoded {
        Ok(Ok(body)) => ([(CONTENT_TYPE, OPENMETRICS)], body).into_response(),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot encode metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "the metrics encoder failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

type HttpLabels = Vec<(&'static str, String)>;

/// `http_server_requests_total` and `http_server_request_duration_seconds`, by method,
/// route (as registered, e.g. `/rest-api/v1/cluster/{name}`) and status.
#[derive(Clone)]
pub struct HttpMetrics {
    requests: Family<HttpLabels, Counter>,
    seconds: Family<HttpLabels, Histogram>,
}

impl HttpMetrics {
    pub fn new(registry: &mut Registry) -> Self {
        let requests = Family::<HttpLabels, Counter>::default();
        // 1 ms to about 33 s: a probe to a request that met its timeout.
        let seconds = Family::<HttpLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "http_server_requests",
            "HTTP requests answered, by method, route and status",
            requests.clone(),
        );
        registry.register_with_unit(
            "http_server_request_duration",
            "How long HTTP requests took to answer, by method, route and status",
            Unit::Seconds,
            seconds.clone(),
        );
        HttpMetrics { requests, seconds }
    }
}

/// Counts and times a request; the route is the matched pattern, never the raw path, so
/// a caller cannot make series at will.
pub(crate) async fn record(
    State(metrics): State<HttpMetrics>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = match request.method().as_str() {
        m @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS") => m.to_owned(),
        _ => "other".to_owned(),
    };
    let response = next.run(request).await;
    let labels = vec![
        ("method", method),
        ("route", route),
        ("status", response.status().as_u16().to_string()),
    ];
    metrics
        .seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    metrics.requests.get_or_create(&labels).inc();
    response
}

/// Registers the process metrics (read at each scrape) and `karpor_build_info`.
pub fn register_process(registry: &mut Registry, version: &str) {
    registry.register_collector(Box::new(ProcessCollector));
    let info = Family::<Vec<(&'static str, String)>, Gauge>::default();
    info.get_or_create(&vec![("version", version.to_owned())])
        .set(1);
    registry.register("karpor_build_info", "The running build (always 1)", info);
}

/// The Prometheus client libraries' standard process metrics, from `/proc/self`.
#[derive(Debug)]
struct ProcessCollector;

/// What `/proc/self` says now.
struct ProcessSample {
    cpu_seconds: f64,
    resident_bytes: i64,
    virtual_bytes: i64,
    start_time_seconds: i64,
    threads: i64,
    open_fds: i64,
    max_fds: i64,
}

impl ProcessSample {
    fn read() -> Option<ProcessSample> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let page = rustix::param::page_size() as i64;
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse::<i64>()
            .ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as i64;
        let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .map_or(-1, |n| n as i64);
        Some(ProcessSample {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            threads: field(20)? as i64,
            start_time_seconds: boot + (field(22)? as f64 / ticks) as i64,
            virtual_bytes: field(23)? as i64,
            resident_bytes: field(24)? as i64 * page,
            open_fds,
            max_fds,
        })
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(sample) = ProcessSample::read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(sample.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu",
            "User and system CPU time spent",
            Some(&Unit::Seconds),
            cpu.metric_type(),
        )?)?;
        for (name, help, unit, value) in [
            (
                "process_resident_memory",
                "Resident memory size",
                Some(Unit::Bytes),
                sample.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size",
                Some(Unit::Bytes),
                sample.virtual_bytes,
            ),
            (
                "process_start_time",
                "Start time of the process since the Unix epoch",
                Some(Unit::Seconds),
                sample.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                None,
                sample.open_fds,
            ),
            (
                "process_max_fds",
                "The open file descriptors limit",
                None,
                sample.max_fds,
            ),
            ("process_threads", "OS threads", None, sample.threads),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(
                name,
                help,
                unit.as_ref(),
                gauge.metric_type(),
            )?)?;
        }
        Ok(())
    }
}
