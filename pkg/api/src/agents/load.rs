//! What one agent may ask of the hub at once, so that one agent, a compromised one
//! among them, cannot take the listener's places or storage's time from the others:
//! [`wire::EXCHANGES_PER_AGENT`] requests under way (429 beyond), of which
//! [`wire::VERSIONS_AT_ONCE`] scan storage (more wait their turn). Streams (the control
//! stream, replies) are bounded elsewhere: one session per cluster, replies only to
//! requests sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use karpor_agent::wire;
use karpor_core::names::ClusterName;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::envelope::Limited;

/// Each agent cluster's places; an entry per agent cluster that has called, so bounded by
/// the clusters registered in agent mode (a caller is verified before it is counted).
#[derive(Clone, Default)]
pub(super) struct AgentLoad {
    by_cluster: Arc<Mutex<HashMap<ClusterName, Places>>>,
}

#[derive(Clone)]
struct Places {
    exchanges: Arc<Semaphore>,
    scans: Arc<Semaphore>,
}

/// One request's place, given back when dropped.
pub(super) struct Exchange {
    _permit: OwnedSemaphorePermit,
}

/// One storage scan's turn, given back when dropped.
pub(super) struct Scan {
    _permit: OwnedSemaphorePermit,
}

impl AgentLoad {
    fn places(&self, cluster: &ClusterName) -> Places {
        let mut by_cluster = self.by_cluster.lock().unwrap_or_else(|e| e.into_inner());
        by_cluster
            .entry(cluster.clone())
            .or_insert_with(|| Places {
                exchanges: Arc::new(Semaphore::new(wire::EXCHANGES_PER_AGENT)),
                scans: Arc::new(Semaphore::new(wire::VERSIONS_AT_ONCE)),
            })
            .clone()
    }

    /// A place for one more request of `cluster`'s agent, or 429.
    pub(super) fn exchange(&self, cluster: &ClusterName) -> Result<Exchange, Limited> {
        let permit = self.places(cluster).exchanges.try_acquire_owned();
        permit
            .map(|p| Exchange { _permit: p })
            .map_err(|_| Limited {
                message: format!(
                    "{} requests of this agent are under way, the most one agent has at once",
                    wire::EXCHANGES_PER_AGENT
                ),
                retry_after: Duration::from_secs(1),
            })
    }

    /// A turn to scan storage for `cluster`'s agent, once one of its others ends.
    pub(super) async fn scan(&self, cluster: &ClusterName) -> Scan {
        let scans = self.places(cluster).scans;
        let permit = scans.acquire_owned().await.expect("scans are never closed");
        Scan { _permit: permit }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> ClusterName {
        name.parse().unwrap()
    }

    #[test]
    fn requests_are_capped_per_agent_and_given_back() {
        let load = AgentLoad::default();
        let (a, b) = (cluster("a"), cluster("b"));
        let held: Vec<Exchange> = (0..wire::EXCHANGES_PER_AGENT)
            .map(|_| load.exchange(&a).unwrap())
            .collect();
        let refused = load.exchange(&a).err().unwrap();
        assert!(refused.message.contains("under way"), "{}", refused.message);
        assert!(
            load.exchange(&b).is_ok(),
            "another agent has its own places"
        );
        drop(held);
        assert!(load.exchange(&a).is_ok(), "places are given back");
    }

    #[tokio::test]
    async fn scans_past_the_bound_wait_for_a_turn() {
        let load = AgentLoad::default();
        let a = cluster("a");
        let mut turns = Vec::new();
        for _ in 0..wire::VERSIONS_AT_ONCE {
            turns.push(load.scan(&a).await);
        }
        let waiting = tokio::spawn({
            let (load, a) = (load.clone(), a.clone());
            async move { load.scan(&a).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a scan past the bound waits");
        let _other = load.scan(&cluster("b")).await;
        turns.pop();
        waiting.await.unwrap();
    }
}
