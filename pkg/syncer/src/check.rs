use std::sync::Arc;

use async_trait::async_trait;
use karpor_health::{CheckOutcome, HealthReporter, Reason};
use karpor_storage::ResourceStorage;

use crate::SyncStatus;

/// The `Syncer` check: the supervisor runs, storage is reachable, and every registered
/// cluster has finished its initial list.
pub struct SyncerCheck {
    status: Arc<SyncStatus>,
    storage: Arc<dyn ResourceStorage>,
}

impl SyncerCheck {
    pub fn new(status: Arc<SyncStatus>, storage: Arc<dyn ResourceStorage>) -> Self {
        SyncerCheck { status, storage }
    }
}

#[async_trait]
impl HealthReporter for SyncerCheck {
    fn name(&self) -> &str {
        "Syncer"
    }

    async fn check(&self) -> CheckOutcome {
        if !self.status.is_running() {
            return CheckOutcome::fail(Reason::Stale, "syncer supervisor is not running");
        }
        if let Err(e) = self.storage.ping().await {
            return CheckOutcome::fail(
                karpor_storage::reason_of(&e),
                format!("syncer cannot reach storage: {e}"),
            );
        }
        let (done, total) = self.status.initial_sync();
        if done < total {
            return CheckOutcome::fail(
                Reason::InitialSync { done, total },
                format!("{done} of {total} clusters finished their first list"),
            );
        }
        CheckOutcome::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Syncer;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn passes_while_running_and_fails_once_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let storage = karpor_storage::connect(&karpor_storage::StorageConfig::Sqlite {
            path: dir.path().join("r.db"),
        })
        .await
        .unwrap();
        let stop = CancellationToken::new();
        let syncer = Syncer::start(storage, stop.clone());
        let check = syncer.check();
        assert_eq!(check.check().await, CheckOutcome::Pass);
        syncer.status().set_initial_sync(2, 3);
        assert!(matches!(
            check.check().await,
            CheckOutcome::Fail(f) if f.reason.to_string() == "initial sync in progress (2/3 clusters)"
        ));
        syncer.status().set_initial_sync(3, 3);
        assert_eq!(check.check().await, CheckOutcome::Pass);
        stop.cancel();
        syncer.join().await;
        assert!(matches!(check.check().await, CheckOutcome::Fail(f) if f.reason == Reason::Stale));
    }
}
