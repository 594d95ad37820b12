//! When the agent lists every type again at the hub's request.

use std::time::Duration;

use tokio::time::Instant;

/// The least time between two relists the hub asks for.
pub(super) const RELIST_AT_MOST_EVERY: Duration = Duration::from_secs(30);

/// The hub's resync requests, at most one relist per [`RELIST_AT_MOST_EVERY`]: a request
/// within it is put off, not dropped, so a hub asking again and again (a hostile one
/// among them) costs the member cluster a list of every type that often at most.
#[derive(Default)]
pub(super) struct Relists {
    last: Option<Instant>,
    due: Option<Instant>,
}

impl Relists {
    pub(super) fn asked(&mut self) {
        let now = Instant::now();
        let allowed = self
            .last
            .map_or(now, |last| (last + RELIST_AT_MOST_EVERY).max(now));
        if allowed > now && self.due.is_none() {
            tracing::info!(wait = ?(allowed - now),
                "the hub asked for another resync; listing again once {RELIST_AT_MOST_EVERY:?} have passed since the last");
        }
        self.due = Some(self.due.map_or(allowed, |due| due.min(allowed)));
    }

    /// Ready when a relist is due; never, when none is asked for.
    pub(super) async fn due(&self) {
        match self.due {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    pub(super) fn done(&mut self) {
        self.last = Some(Instant::now());
        self.due = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_relist_within_the_bound_is_put_off_not_dropped() {
        let mut relists = Relists::default();
        assert_eq!(relists.due, None, "nothing asked");
        let first = Instant::now();
        relists.asked();
        assert_eq!(relists.due, Some(first), "the first request is due at once");
        relists.done();
        relists.asked();
        assert_eq!(
            relists.due,
            Some(first + RELIST_AT_MOST_EVERY),
            "the next waits"
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        relists.asked();
        assert_eq!(
            relists.due,
            Some(first + RELIST_AT_MOST_EVERY),
            "asked again meanwhile: one relist, not put off further"
        );
        tokio::time::advance(RELIST_AT_MOST_EVERY).await;
        relists.due().await;
        relists.done();
        assert_eq!(relists.due, None);
        relists.asked();
        assert_eq!(relists.due, Some(Instant::now() + RELIST_AT_MOST_EVERY));
    }
}
