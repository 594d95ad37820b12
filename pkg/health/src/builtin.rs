//! Checks every karpor process has: `Ping` (the HTTP server answers) and `Heartbeat` (a
//! runtime task keeps ticking; a stalled runtime fails liveness).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::reporter::{CheckOutcome, HealthReporter, Reason};

/// The names these checks register under.
pub const PING_CHECK: &str = "Ping";
pub const HEARTBEAT_CHECK: &str = "Heartbeat";

pub struct Ping;

#[async_trait]
impl HealthReporter for Ping {
    fn name(&self) -> &str {
        PING_CHECK
    }

    async fn check(&self) -> CheckOutcome {
        CheckOutcome::Pass
    }
}

/// Fails with `stale` when its ticker task has not run for `stale_after`.
pub struct Heartbeat {
    started: Instant,
    last_tick_ms: Arc<AtomicU64>,
    stale_after: Duration,
}

impl Heartbeat {
    /// Starts the ticker on the current runtime; it stops when `stop` is cancelled.
    pub fn start(interval: Duration, stale_after: Duration, stop: CancellationToken) -> Self {
        let started = Instant::now();
        let last_tick_ms = Arc::new(AtomicU64::new(0));
        let ticks = last_tick_ms.clone();
        tokio::spawn(async move {
            let mut timer = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = timer.tick() => {
                        ticks.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                    }
                }
            }
        });
        Heartbeat {
            started,
            last_tick_ms,
            stale_after,
        }
    }
}

#[async_trait]
impl HealthReporter for Heartbeat {
    fn name(&self) -> &str {
        HEARTBEAT_CHECK
    }

    async fn check(&self) -> CheckOutcome {
        let last = Duration::from_millis(self.last_tick_ms.load(Ordering::Relaxed));
        let silent = self.started.elapsed().saturating_sub(last);
        if silent > self.stale_after {
            CheckOutcome::fail(
                Reason::Stale,
                format!("runtime heartbeat silent for {silent:?}"),
            )
        } else {
            CheckOutcome::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn heartbeat_goes_stale_when_its_ticker_stops() {
        let stop = CancellationToken::new();
        let beat = Heartbeat::start(
            Duration::from_millis(100),
            Duration::from_millis(500),
            stop.clone(),
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(beat.check().await, CheckOutcome::Pass);
        stop.cancel();
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(matches!(
            beat.check().await,
            CheckOutcome::Fail(f) if f.reason == Reason::Stale
        ));
    }
}
