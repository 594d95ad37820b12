//! The four health metrics of the contract, registered in the process's Prometheus
//! registry.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

#[derive(Clone)]
pub struct HealthMetrics {
    status: Family<Labels, Gauge>,
    duration: Family<Labels, Histogram>,
    transitions: Family<Labels, Counter>,
    runs: Family<Labels, Counter>,
}

impl HealthMetrics {
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = HealthMetrics {
            status: Family::default(),
            duration: Family::new_with_constructor(|| {
                // 0.5 ms to ~16 s: covers a cached ping and a check that hits its timeout.
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            transitions: Family::default(),
            runs: Family::default(),
        };
        registry.register(
            "karpor_health_check_status",
            "Last reported state of a health check per endpoint (1 pass, 0 fail)",
            metrics.status.clone(),
        );
        registry.register(
            "karpor_health_check_duration_seconds",
            "Time a health check run took",
            metrics.duration.clone(),
        );
        registry.register(
            "karpor_health_check_transitions",
            "Changes of a health check's reported state",
            metrics.transitions.clone(),
        );
        registry.register(
            "karpor_health_check_runs",
            "Health check runs (cache hits and shared in-flight runs are not counted)",
            metrics.runs.clone(),
        );
        metrics
    }

    pub fn record_run(&self, check: &str) {
        self.runs
            .get_or_create(&vec![("check", check.to_owned())])
            .inc();
    }

    pub fn observe_duration(&self, check: &str, seconds: f64) {
        self.duration
            .get_or_create(&vec![("check", check.to_owned())])
            .observe(seconds);
    }

    pub fn record_transition(&self, check: &str, to_pass: bool) {
        let to = if to_pass { "pass" } else { "fail" };
        self.transitions
            .get_or_create(&vec![("check", check.to_owned()), ("to", to.to_owned())])
            .inc();
    }

    pub fn set_status(&self, check: &str, endpoint: &str, pass: bool) {
        self.status
            .get_or_create(&vec![
                ("check", check.to_owned()),
                ("endpoint", endpoint.to_owned()),
            ])
            .set(i64::from(pass));
    }

    /// Runs recorded for one check, so tests can prove the cache and single flight work.
    pub fn runs(&self, check: &str) -> u64 {
        self.runs
            .get_or_create(&vec![("check", check.to_owned())])
            .get()
    }
}
