use std::sync::Arc;

use async_trait::async_trait;
use karpor_health::{CheckOutcome, HealthReporter, Reason};
use karpor_storage::Storage;

use crate::cluster::ClientSlot;
use crate::status::{ClusterProgress, SyncState};

use crate::SyncStatus;

/// The `Syncer` check: the supervisor runs, storage is reachable, and every registered
/// cluster has finished its initial list.
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

/// `Cluster/NAME`, one per member cluster, not critical: can its API server be reached
/// with its credentials now.
pub struct ClusterCheck {
    name: String,
    progress: Arc<ClusterProgress>,
    client: ClientSlot,
}

impl ClusterCheck {
    pub fn new(progress: Arc<ClusterProgress>, client: ClientSlot) -> Self {
        ClusterCheck {
            name: format!("Cluster/{}", progress.name()),
            progress,
            client,
        }
    }
}

#[async_trait]
impl HealthReporter for ClusterCheck {
    fn name(&self) -> &str {
        &self.name
    }

    fn critical(&self) -> bool {
        false
    }

    async fn check(&self) -> CheckOutcome {
        let Some(client) = self.client.get() else {
            return match self.progress.state() {
                SyncState::Error(reason) => {
                    CheckOutcome::fail(reason, "the cluster's kubeconfig cannot be used")
                }
                _ => CheckOutcome::Pass,
            };
        };
        match client.apiserver_version().await {
            Ok(_) => CheckOutcome::Pass,
            Err(e) => CheckOutcome::fail(crate::reason::of_kube(&e), e.to_string()),
        }
    }
}
