//! How much work in member clusters callers may cause: live calls are rate-limited per
//! member cluster (a token bucket: 429 with `Retry-After` beyond it), streams (events and
//! pod logs) are capped per caller and in total, and a log stream's pace, length and
//! size are capped too. Counted in metrics:
//! `karpor_api_live_calls_total{cluster,outcome}`, `karpor_api_event_streams` and
//! `karpor_api_event_streams_refused_total{reason}`.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use karpor_config::ConfigIssue;
use karpor_core::names::ClusterName;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

use crate::envelope::Limited;

/// `server.limits.live`: the work callers may make karpor do in member clusters.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiveLimits {
    /// Live calls (a live detail, an events list, a stream's look) per second to one
    /// member cluster, from all callers together.
    pub calls_per_second: u32,
    /// Calls allowed at once above the rate (a page opening several panels).
    pub burst: u32,
    /// Streams (events, pod logs) one caller (one token; all anonymous callers
    /// together) holds open.
    pub streams_per_caller: usize,
    /// Streams open at once, all callers together.
    pub streams: usize,
    /// Bytes of pod log one stream or download sends per second, at most.
    pub log_bytes_per_second: u32,
    /// How long a followed pod log is streamed before the client must ask again.
    #[serde(with = "humantime_serde")]
    pub log_stream_for: Duration,
    /// The most `tailLines` a pod log request may ask for.
    pub log_tail_lines: u32,
    /// The most bytes of one pod log download.
    pub log_download_bytes: u64,
}

impl Default for LiveLimits {
    fn default() -> Self {
        LiveLimits {
            calls_per_second: 20,
            burst: 40,
            streams_per_caller: 8,
            streams: 256,
            log_bytes_per_second: 1 << 20,
            log_stream_for: Duration::from_secs(30 * 60),
            log_tail_lines: 10_000,
            log_download_bytes: 32 << 20,
        }
    }
}

impl LiveLimits {
    /// The issue, with keys under `server.limits.live`.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        for (key, value) in [
            ("calls_per_second", self.calls_per_second as usize),
            ("burst", self.burst as usize),
            ("streams_per_caller", self.streams_per_caller),
            ("streams", self.streams),
            ("log_bytes_per_second", self.log_bytes_per_second as usize),
            ("log_tail_lines", self.log_tail_lines as usize),
            ("log_download_bytes", self.log_download_bytes as usize),
        ] {
            if value == 0 {
                return Err(ConfigIssue::new(
                    format!("server.limits.live.{key}"),
                    "must be at least 1",
                ));
            }
        }
        if self.log_stream_for < Duration::from_secs(1) {
            return Err(ConfigIssue::new(
                "server.limits.live.log_stream_for",
                "must be at least 1s",
            ));
        }
        Ok(())
    }
}

/// The live limits in force, shared by every request.
#[derive(Clone)]
pub struct LiveBounds(Arc<Inner>);

struct Inner {
    limits: LiveLimits,
    calls: DefaultKeyedRateLimiter<ClusterName>,
    /// Open streams per caller; the total is their sum, kept beside.
    streams: Mutex<Streams>,
    metrics: Metrics,
}

#[derive(Default)]
struct Streams {
    by_caller: HashMap<String, usize>,
    total: usize,
}

type Labels = Vec<(&'static str, String)>;

#[derive(Clone, Default)]
struct Metrics {
    calls: Family<Labels, Counter>,
    open: Gauge,
    refused: Family<Labels, Counter>,
}

impl LiveBounds {
    pub fn new(limits: LiveLimits, registry: &mut Registry) -> Self {
        let metrics = Metrics::default();
        registry.register(
            "karpor_api_live_calls",
            "Calls to member clusters made for API callers, by cluster and outcome (allowed or limited)",
            metrics.calls.clone(),
        );
        registry.register(
            "karpor_api_event_streams",
            "Streams (events, pod logs) open now",
            metrics.open.clone(),
        );
        registry.register(
            "karpor_api_event_streams_refused",
            "Streams (events, pod logs) refused, by reason (caller or total)",
            metrics.refused.clone(),
        );
        Self::with_metrics(limits, metrics)
    }

    fn with_metrics(limits: LiveLimits, metrics: Metrics) -> Self {
        let rate = NonZeroU32::new(limits.calls_per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(limits.burst).unwrap_or(NonZeroU32::MIN);
        let calls = RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst));
        LiveBounds(Arc::new(Inner {
            limits,
            calls,
            streams: Mutex::new(Streams::default()),
            metrics,
        }))
    }

    pub(crate) fn limits(&self) -> &LiveLimits {
        &self.0.limits
    }

    /// Takes one live call to `cluster` from its budget, or refuses with 429.
    pub(crate) fn call(&self, cluster: &ClusterName) -> Result<(), Limited> {
        let outcome = self.0.calls.check_key(cluster);
        let labels = |outcome: &str| {
            vec![
                ("cluster", cluster.to_string()),
                ("outcome", outcome.to_owned()),
            ]
        };
        match outcome {
            Ok(()) => {
                self.0.metrics.calls.get_or_create(&labels("allowed")).inc();
                Ok(())
            }
            Err(not_until) => {
                self.0.metrics.calls.get_or_create(&labels("limited")).inc();
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Err(Limited {
                    message: format!(
                        "too many live calls to cluster {cluster:?} (server.limits.live.calls_per_second)"
                    ),
                    retry_after: wait,
                })
            }
        }
    }

    /// A place for one more stream of `caller`, held until the slot is dropped.
    pub(crate) fn open_stream(&self, caller: &str) -> Result<StreamSlot, Limited> {
        let limits = &self.0.limits;
        let refused = |reason: &str, message: String| {
            let labels = vec![("reason", reason.to_owned())];
            self.0.metrics.refused.get_or_create(&labels).inc();
            Err(Limited {
                message,
                retry_after: Duration::from_secs(5),
            })
        };
        let mut streams = self.0.streams.lock().unwrap_or_else(|e| e.into_inner());
        if streams.total >= limits.streams {
            return refused(
                "total",
                format!(
                    "{} streams are open, the most this server holds (server.limits.live.streams)",
                    streams.total
                ),
            );
        }
        let held = streams.by_caller.entry(caller.to_owned()).or_default();
        if *held >= limits.streams_per_caller {
            let held = *held;
            return refused(
                "caller",
                format!(
                    "{held} streams of yours are open, the most one caller holds (server.limits.live.streams_per_caller)"
                ),
            );
        }
        *held += 1;
        streams.total += 1;
        self.0.metrics.open.inc();
        Ok(StreamSlot {
            bounds: self.clone(),
            caller: caller.to_owned(),
        })
    }
}

/// One open stream; its place is given back when dropped.
pub(crate) struct StreamSlot {
    bounds: LiveBounds,
    caller: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let inner = &self.bounds.0;
        let mut streams = inner.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.total = streams.total.saturating_sub(1);
        if let Some(held) = streams.by_caller.get_mut(&self.caller) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                streams.by_caller.remove(&self.caller);
            }
        }
        inner.metrics.open.dec();
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;

    use super::*;

    fn bounds(calls_per_second: u32, burst: u32, per_caller: usize, total: usize) -> LiveBounds {
        LiveBounds::with_metrics(
            LiveLimits {
                calls_per_second,
                burst,
                streams_per_caller: per_caller,
                streams: total,
                ..LiveLimits::default()
            },
            Metrics::default(),
        )
    }

    #[test]
    fn a_log_stream_shorter_than_a_second_is_refused_naming_the_key() {
        let limits = LiveLimits {
            log_stream_for: Duration::from_millis(500),
            ..LiveLimits::default()
        };
        let issue = limits.validate().unwrap_err();
        assert_eq!(issue.key(), "server.limits.live.log_stream_for");
        assert!(LiveLimits::default().validate().is_ok());
    }

    #[test]
    fn calls_beyond_the_burst_are_refused_per_cluster() {
        let bounds = bounds(1, 3, 1, 1);
        let a: ClusterName = "a".parse().unwrap();
        let b: ClusterName = "b".parse().unwrap();
        for _ in 0..3 {
            bounds.call(&a).unwrap();
        }
        let limited = bounds.call(&a).unwrap_err();
        assert!(limited.retry_after <= Duration::from_secs(1));
        let response = limited.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(response.headers().contains_key(header::RETRY_AFTER));
        bounds.call(&b).unwrap();
    }

    #[test]
    fn streams_are_capped_per_caller_and_in_total_and_given_back() {
        let bounds = bounds(1, 1, 2, 3);
        let first = bounds.open_stream("ann").unwrap();
        let _second = bounds.open_stream("ann").unwrap();
        assert!(bounds.open_stream("ann").is_err(), "per caller");
        let _third = bounds.open_stream("bob").unwrap();
        assert!(bounds.open_stream("cid").is_err(), "in total");
        drop(first);
        let _again = bounds.open_stream("ann").unwrap();
        assert_eq!(bounds.0.metrics.open.get(), 3);
    }
}
