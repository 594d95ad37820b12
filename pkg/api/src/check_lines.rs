//! Which member clusters' lines `/readyz` shows a caller: once any access policy exists,
//! those its scope holds, for a static token or an anonymous caller (none for any other
//! credential, and none without an accepted one, as a kubelet's probe); without
//! policies, every line, as the health contract has them.
//! What the hidden checks report still counts towards the status.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::HeaderMap;
use karpor_core::model::Cluster;
use karpor_health::{Hidden, LineFilter};
use karpor_metastore::Metastore;
use karpor_syncer::CLUSTER_CHECK_PREFIX;

use crate::auth::{bearer, Authentication};

/// Longest the clusters' labels may take to read (a scope that selects by label).
const LABELS_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) struct ClusterLines {
    pub authentication: Authentication,
    pub metastore: Metastore,
}

fn every_cluster() -> Hidden {
    Box::new(|name| name.starts_with(CLUSTER_CHECK_PREFIX))
}

#[async_trait::async_trait]
impl LineFilter for ClusterLines {
    async fn hidden(&self, headers: &HeaderMap) -> Option<Hidden> {
        if !self.authentication.auth.has_policies() {
            return None;
        }
        // Static tokens and anonymous callers only: a probe's bearer (the health admin
        // token, say) is never sent to the TokenReview cluster or checked against an
        // issuer; another credential sees no cluster line here.
        let Ok(Ok(Some(principal))) =
            bearer(headers).map(|token| self.authentication.auth.known(token))
        else {
            return Some(every_cluster());
        };
        if principal.scope.is_everything() {
            return None;
        }
        let labels = if principal.scope.needs_cluster_labels() {
            match tokio::time::timeout(LABELS_TIMEOUT, self.metastore.list_all::<Cluster>()).await {
                Ok(Ok(clusters)) => clusters
                    .into_iter()
                    .map(|c| (c.record.name, c.record.labels))
                    .collect(),
                _ => return Some(every_cluster()),
            }
        } else {
            BTreeMap::new()
        };
        let seen = principal.scope.clusters_seen(&labels);
        Some(Box::new(move |name| {
            name.strip_prefix(CLUSTER_CHECK_PREFIX)
                .is_some_and(|cluster| !seen(cluster))
        }))
    }
}
