//! The syncer: one supervisor per process that will run a watcher per registered cluster
//! and resource type. Cluster records and watchers arrive with the metadata-store and
//! syncer work; today the supervisor tracks its clusters' initial-sync progress (none are
//! registered yet) and its own liveness, which is what the `Syncer` check reports.

mod check;
mod status;

use std::sync::Arc;

use karpor_storage::ResourceStorage;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use check::SyncerCheck;
pub use status::SyncStatus;

/// A running syncer.
pub struct Syncer {
    status: Arc<SyncStatus>,
    storage: Arc<dyn ResourceStorage>,
    task: JoinHandle<()>,
}

impl Syncer {
    /// Starts the supervisor; it stops when `stop` is cancelled.
    pub fn start(storage: Arc<dyn ResourceStorage>, stop: CancellationToken) -> Self {
        let status = Arc::new(SyncStatus::default());
        let running = status.clone();
        running.set_running(true);
        let task = tokio::spawn(async move {
            // The guard marks the supervisor stopped however the task ends, panics
            // included, so the check can never report a dead syncer as healthy.
            let _guard = status::RunningGuard(running);
            stop.cancelled().await;
            tracing::info!("syncer stopped");
        });
        Syncer {
            status,
            storage,
            task,
        }
    }

    /// The `Syncer` check for this syncer.
    pub fn check(&self) -> SyncerCheck {
        SyncerCheck::new(self.status.clone(), self.storage.clone())
    }

    pub fn status(&self) -> Arc<SyncStatus> {
        self.status.clone()
    }

    /// Waits for the supervisor to finish after its stop token was cancelled.
    pub async fn join(self) {
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "syncer task ended abnormally");
        }
    }
}
