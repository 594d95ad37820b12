//! Counts and latencies of a store's operations, for the backends' metered wrappers:
//! `{prefix}_operations_total{backend,operation,outcome}` and
//! `{prefix}_operation_duration_seconds{backend,operation}`.

use std::future::Future;
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, &'static str)>;

/// One store's operation metrics.
#[derive(Clone)]
pub struct Operations {
    backend: &'static str,
    total: Family<Labels, Counter>,
    seconds: Family<Labels, Histogram>,
}

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Operations({})", self.backend)
    }
}

impl Operations {
    /// Registers the two families under `prefix` (`karpor_storage`, `karpor_metastore`).
    pub fn new(registry: &mut Registry, prefix: &str, what: &str, backend: &'static str) -> Self {
        let total = Family::<Labels, Counter>::default();
        // 0.5 ms to about 16 s: an indexed read to a slow bulk write.
        let seconds = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            format!("{prefix}_operations"),
            format!("{what} operations, by outcome (ok or error)"),
            total.clone(),
        );
        registry.register_with_unit(
            format!("{prefix}_operation_duration"),
            format!("How long {what} operations took"),
            Unit::Seconds,
            seconds.clone(),
        );
        Operations {
            backend,
            total,
            seconds,
        }
    }

    /// Runs `work`, counting it and timing it as `operation`.
    pub async fn observe<T, E>(
        &self,
        operation: &'static str,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let started = Instant::now();
        let result = work.await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        self.seconds
            .get_or_create(&vec![("backend", self.backend), ("operation", operation)])
            .observe(started.elapsed().as_secs_f64());
        self.total
            .get_or_create(&vec![
                ("backend", self.backend),
                ("operation", operation),
                ("outcome", outcome),
            ])
            .inc();
        result
    }
}
