//! `Cluster/NAME`, one check per member cluster: can its API server be reached with its
//! credentials now. Not critical: one dead member must not take the explorer out of
//! service.

use std::sync::Arc;

use async_trait::async_trait;
use karpor_health::{CheckOutcome, HealthReporter};

use crate::cluster::run::ClientSeen;
use crate::status::clusters::{ClusterProgress, SyncState};

/// Each member cluster's check is named this, then the cluster's name.
pub const CLUSTER_CHECK_PREFIX: &str = "Cluster/";

/// The name of a member cluster's check.
pub fn cluster_check(cluster: &str) -> String {
    format!("{CLUSTER_CHECK_PREFIX}{cluster}")
}

/// `Cluster/NAME`, one per member cluster, not critical: can its API server be reached
/// with its credentials now.
pub(crate) struct ClusterCheck {
    name: String,
    progress: Arc<ClusterProgress>,
    client: ClientSeen,
}

impl ClusterCheck {
    pub(crate) fn new(progress: Arc<ClusterProgress>, client: ClientSeen) -> Self {
        ClusterCheck {
            name: cluster_check(progress.name()),
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
        let client = self.client.borrow().clone();
        let Some(client) = client else {
            return match self.progress.state() {
                SyncState::Error(reason) => {
                    CheckOutcome::fail(reason, "the cluster's kubeconfig cannot be used")
                }
                _ => CheckOutcome::Pass,
            };
        };
        let asked = std::time::Instant::now();
        match client.apiserver_version().await {
            Ok(version) => {
                let latency = asked.elapsed().as_millis() as u64;
                self.progress.server_answered(version.git_version, latency);
                CheckOutcome::Pass
            }
            Err(e) => CheckOutcome::fail(
                crate::status::reason::of_kube(&e),
                karpor_kube::describe(&e),
            ),
        }
    }
}
