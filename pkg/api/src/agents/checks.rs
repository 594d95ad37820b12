//! `Cluster/NAME` for the clusters in agent mode, as this hub sees them: connected (its
//! agent holds a control stream here), disconnected (it has joined; its documents are
//! kept and may be stale), or never joined. Not critical, as every cluster's check: one
//! member down must not take the explorer out of service. The checks follow the
//! registered clusters.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use karpor_core::model::{Cluster, ClusterMode};
use karpor_core::names::ClusterName;
use karpor_health::{CheckOutcome, HealthChecker, HealthReporter, Membership, Reason};
use karpor_metastore::Metastore;
use karpor_syncer::cluster_check;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use crate::AgentHub;

/// How often the checks are matched to the registered agent clusters.
const FOLLOW_EVERY: Duration = Duration::from_secs(5);

struct AgentClusterCheck {
    name: String,
    cluster: ClusterName,
    hub: AgentHub,
}

#[async_trait]
impl HealthReporter for AgentClusterCheck {
    fn name(&self) -> &str {
        &self.name
    }

    fn critical(&self) -> bool {
        false
    }

    async fn check(&self) -> CheckOutcome {
        let left = match self.hub.sessions.connected(&self.cluster) {
            Ok(()) => return CheckOutcome::Pass,
            Err(left) => left,
        };
        if self.hub.sessions.connected_anywhere(&self.cluster).await {
            // Held by another replica: live reads are forwarded there.
            return CheckOutcome::Pass;
        }
        match self.hub.enrollment.joined_at(&self.cluster).await {
            Ok(None) => CheckOutcome::fail(
                Reason::NeverJoined,
                "no agent has joined with this cluster's token",
            ),
            Ok(Some(_)) => {
                let since = left
                    .and_then(|t| t.format(&Rfc3339).ok())
                    .map(|t| format!(" since {t}"))
                    .unwrap_or_default();
                CheckOutcome::fail(
                    Reason::Disconnected,
                    format!("its agent is not connected to this hub{since}; its documents are kept and may be stale"),
                )
            }
            Err(e) => CheckOutcome::fail(Reason::Unreachable, e.to_string()),
        }
    }
}

/// Keeps one `Cluster/NAME` check per cluster registered in agent mode, until `stop`.
pub async fn follow_agent_clusters(
    metastore: Metastore,
    hub: AgentHub,
    health: HealthChecker,
    stop: CancellationToken,
) {
    let mut checked = BTreeSet::new();
    loop {
        match metastore.list_all::<Cluster>().await {
            Ok(clusters) => {
                let agents: BTreeSet<ClusterName> = clusters
                    .into_iter()
                    .filter(|c| c.record.mode == ClusterMode::Agent)
                    .filter_map(|c| c.record.name.parse().ok())
                    .collect();
                for gone in checked.difference(&agents) {
                    health.deregister(&cluster_check(gone));
                }
                for new in agents.difference(&checked) {
                    let check = AgentClusterCheck {
                        name: cluster_check(new),
                        cluster: new.clone(),
                        hub: hub.clone(),
                    };
                    health.register(Arc::new(check), Membership::READYZ, None);
                }
                checked = agents;
            }
            Err(e) => tracing::warn!(error = %e, "cannot list the agent clusters for their checks"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(FOLLOW_EVERY) => {}
        }
    }
}
