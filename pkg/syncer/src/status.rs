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

    /// Registered clusters, and how many have finished their first full list.
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
