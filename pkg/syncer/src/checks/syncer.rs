//! The `Syncer` check of a process that runs the syncer: the supervisor runs, storage
//! answers, every registered cluster has a live syncer, and this syncer's clusters have
//! finished their first list.

use std::sync::Arc;

use async_trait::async_trait;
use karpor_health::{CheckOutcome, HealthReporter, Reason};
use karpor_storage::Storage;

use crate::SyncStatus;

/// The name of the syncer's check.
pub const SYNCER_CHECK: &str = "Syncer";

/// The `Syncer` check: the supervisor runs, storage is reachable, no registered cluster
/// has gone without a live syncer for longer than the lease TTL, and every cluster this
/// syncer holds has finished its initial list (`k/n` of its own share).
pub struct SyncerCheck {
    status: Arc<SyncStatus>,
    storage: Arc<dyn Storage>,
}

impl SyncerCheck {
    pub fn new(status: Arc<SyncStatus>, storage: Arc<dyn Storage>) -> Self {
        SyncerCheck { status, storage }
    }
}

#[async_trait]
impl HealthReporter for SyncerCheck {
    fn name(&self) -> &str {
        SYNCER_CHECK
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
        let share = self.status.share();
        if !share.listed {
            // At start, before the first listing: a pass would say clusters it has not
            // seen yet are synced.
            return CheckOutcome::fail(
                Reason::InitialSync { done: 0, total: 0 },
                "the registered clusters are not listed yet",
            );
        }
        if !share.lease_held && share.registered > 0 {
            // Not joined yet, or cut off from the metadata store past its lease: it syncs
            // nothing until it holds one.
            return CheckOutcome::fail(
                Reason::InitialSync {
                    done: 0,
                    total: share.registered,
                },
                "this syncer holds no membership lease",
            );
        }
        if share.unowned_overdue > 0 {
            return CheckOutcome::fail(
                Reason::Unowned,
                format!(
                    "{} of {} registered clusters have had no live syncer for longer than the lease TTL",
                    share.unowned_overdue, share.registered
                ),
            );
        }
        let (done, running) = self.status.initial_sync();
        // Its clusters not started yet (being claimed) hold it too.
        let total = running + share.pending;
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
    use crate::{SyncSettings, SyncState, Syncer, SyncerParts};
    use karpor_health::{HealthChecker, HealthMetrics, Settings};
    use prometheus_client::registry::Registry;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn passes_with_no_cluster_while_running_and_fails_once_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let storage = karpor_storage::connect(&karpor_storage::StorageConfig::Sqlite {
            path: dir.path().join("r.db"),
        })
        .await
        .unwrap();
        let metastore = karpor_metastore::connect(&karpor_metastore::MetastoreConfig::Sqlite {
            path: dir.path().join("m.db"),
            encryption_key_file: None,
        })
        .await
        .unwrap();
        let mut registry = Registry::default();
        let mut syncer = Syncer::new(SyncerParts {
            audit: Default::default(),
            member: "unit".to_owned(),
            clients: crate::client_cache(Default::default()),
            metastore,
            storage,
            health: HealthChecker::new(Settings::default(), HealthMetrics::new(&mut registry)),
            metrics: crate::metrics(&mut registry),
            settings: SyncSettings::default(),
        });
        let stop = CancellationToken::new();
        syncer.start(stop.clone());
        let check = syncer.check();
        // Until the supervisor has listed the (no) registered clusters, it cannot pass.
        let first = check.check().await;
        assert!(
            first == CheckOutcome::Pass
                || matches!(&first, CheckOutcome::Fail(f) if f.reason == Reason::InitialSync { done: 0, total: 0 }),
            "{first:?}"
        );
        let listed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while check.check().await != CheckOutcome::Pass {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            listed.is_ok(),
            "the check passes once the clusters are listed"
        );
        assert_eq!(syncer.status().initial_sync(), (0, 0));
        stop.cancel();
        syncer.join().await;
        assert!(matches!(check.check().await, CheckOutcome::Fail(f) if f.reason == Reason::Stale));
    }

    #[tokio::test]
    async fn a_cluster_holds_readiness_until_its_first_list_or_an_error() {
        let status = SyncStatus::new(crate::SyncMetrics::default());
        let progress = status.track("prod");
        assert_eq!(status.initial_sync(), (0, 1));
        progress.set_state(SyncState::Syncing);
        assert_eq!(status.initial_sync(), (0, 1));
        progress.set_state(SyncState::Error(Reason::Unreachable));
        assert_eq!(
            status.initial_sync(),
            (1, 1),
            "a dead member does not hold readiness"
        );
        progress.set_state(SyncState::Syncing);
        assert_eq!(status.initial_sync(), (0, 1));
        progress.set_state(SyncState::Synced);
        progress.set_state(SyncState::Syncing);
        assert_eq!(
            status.initial_sync(),
            (1, 1),
            "a relist after the first does not"
        );
        status.forget("prod");
        assert_eq!(status.initial_sync(), (0, 0));
    }
}
