//! The `Syncer` check of a server that runs no syncer itself (`server.syncer: false`):
//! whether every registered cluster is held by a live syncer. A cluster without one for
//! longer than the lease TTL fails it (`unowned`). Not critical by default: the server
//! still answers from storage, which only goes stale (`health.checks` can make it so).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use karpor_core::model::Cluster;
use karpor_health::{CheckOutcome, HealthReporter, Reason};
use karpor_metastore::Metastore;
use tokio::time::Instant;

use crate::checks::syncer::SYNCER_CHECK;

pub struct OwnersCheck {
    metastore: Metastore,
    ttl: Duration,
    /// Registered clusters without a live holder, since when (as first seen here).
    unowned: Mutex<BTreeMap<String, Instant>>,
}

impl OwnersCheck {
    pub fn new(metastore: Metastore, ttl: Duration) -> Self {
        OwnersCheck {
            metastore,
            ttl,
            unowned: Mutex::default(),
        }
    }
}

#[async_trait]
impl HealthReporter for OwnersCheck {
    fn name(&self) -> &str {
        SYNCER_CHECK
    }

    fn critical(&self) -> bool {
        false
    }

    async fn check(&self) -> CheckOutcome {
        let listed = async {
            let clusters = self.metastore.list_all::<Cluster>().await?;
            let claims = self.metastore.claims().await?;
            Ok::<_, karpor_metastore::StoreError>((clusters, claims))
        };
        let (clusters, claims) = match listed.await {
            Ok(listed) => listed,
            // The `Server` check says why; this one cannot tell.
            Err(e) => return CheckOutcome::fail(Reason::Unreachable, e.to_string()),
        };
        let held: BTreeSet<String> = claims.into_iter().map(|c| c.cluster).collect();
        let now = Instant::now();
        let mut unowned = self
            .unowned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let registered: BTreeSet<String> = clusters.into_iter().map(|c| c.record.name).collect();
        unowned.retain(|name, _| registered.contains(name) && !held.contains(name));
        for name in registered.difference(&held) {
            unowned.entry(name.clone()).or_insert(now);
        }
        let overdue: Vec<&str> = unowned
            .iter()
            .filter(|(_, since)| now.duration_since(**since) > self.ttl)
            .map(|(name, _)| name.as_str())
            .collect();
        if overdue.is_empty() {
            return CheckOutcome::Pass;
        }
        CheckOutcome::fail(
            Reason::Unowned,
            format!(
                "no live syncer has held {} for longer than {:?}",
                overdue.join(", "),
                self.ttl
            ),
        )
    }
}
