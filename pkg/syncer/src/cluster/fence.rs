//! The fence a cluster run's writer checks before every batch: until when this member's
//! lease is certainly alive. This member's lease ([`crate::fleet::lease`]) moves it with
//! each renewal; a process paused or cut off from the metadata store past that moment
//! stops writing before anything else, since another member may hold its clusters by then.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// Until when this member's lease is certainly alive, on the process's monotonic clock
/// (which keeps counting while the process is stopped), and which lease that is: a sync
/// started under a lease since lost stays fenced off after the member joins again.
#[derive(Debug)]
pub(crate) struct Fence {
    base: Instant,
    /// Milliseconds after `base`; 0 = not held.
    until: AtomicU64,
    /// The lease's id.
    lease: AtomicI64,
}

impl Fence {
    pub(crate) fn new() -> Arc<Fence> {
        Arc::new(Fence {
            base: Instant::now(),
            until: AtomicU64::new(0),
            lease: AtomicI64::new(0),
        })
    }

    /// Whether lease `id` is certainly alive now.
    pub(crate) fn holds(&self, id: i64) -> bool {
        let now = self.base.elapsed().as_millis() as u64;
        self.lease.load(Ordering::Acquire) == id && now < self.until.load(Ordering::Acquire)
    }

    /// The lease held now, if it certainly is.
    pub(crate) fn held(&self) -> Option<i64> {
        let id = self.lease.load(Ordering::Acquire);
        self.holds(id).then_some(id)
    }

    /// Lease `id` held until `sent + ttl`, less a tenth for clocks that run at slightly
    /// different rates.
    pub(crate) fn extend(&self, id: i64, sent: Instant, ttl: Duration) {
        let until = sent.saturating_duration_since(self.base) + ttl - ttl / 10;
        if self.lease.swap(id, Ordering::AcqRel) != id {
            self.until.store(0, Ordering::Release);
        }
        self.until
            .fetch_max(until.as_millis() as u64, Ordering::AcqRel);
    }

    pub(crate) fn drop_hold(&self) {
        self.until.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_fence_holds_for_the_ttl_from_the_renewal_sent_less_a_tenth() {
        let fence = Fence::new();
        assert!(!fence.holds(7));
        let sent = Instant::now();
        fence.extend(7, sent, Duration::from_secs(10));
        tokio::time::advance(Duration::from_millis(8_900)).await;
        assert!(fence.holds(7));
        assert_eq!(fence.held(), Some(7));
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(!fence.holds(7));
        assert_eq!(fence.held(), None);
        // A renewal never shortens it; dropping the hold ends it at once.
        fence.extend(7, Instant::now(), Duration::from_secs(10));
        fence.extend(7, sent, Duration::from_secs(10));
        assert!(fence.holds(7));
        fence.drop_hold();
        assert!(!fence.holds(7));
        // A new lease fences off what ran under the old one.
        fence.extend(8, Instant::now(), Duration::from_secs(10));
        assert!(fence.holds(8));
        assert!(!fence.holds(7));
    }
}
