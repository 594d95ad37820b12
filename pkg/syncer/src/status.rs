use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// What the syncer can say about itself, shared with its check, the API and metrics.
#[derive(Debug, Default)]
pub struct SyncStatus {
    running: AtomicBool,
    clusters: AtomicUsize,
    initially_synced: AtomicUsize,
}

impl SyncStatus {
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    pub(crate) fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::SeqCst);
    }

    /// Records how many clusters are registered and how many have finished their first
    /// full list; the watchers call it as clusters come, go and finish listing.
    pub fn set_initial_sync(&self, synced: usize, total: usize) {
        self.clusters.store(total, Ordering::SeqCst);
        self.initially_synced
            .store(synced.min(total), Ordering::SeqCst);
    }

    /// How many registered clusters have finished their first full list, of how many.
    pub fn initial_sync(&self) -> (usize, usize) {
        (
            self.initially_synced.load(Ordering::SeqCst),
            self.clusters.load(Ordering::SeqCst),
        )
    }
}

pub(crate) struct RunningGuard(pub Arc<SyncStatus>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.set_running(false);
    }
}
