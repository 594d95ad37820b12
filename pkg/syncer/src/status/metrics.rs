//! The syncer's per-cluster metrics, registered in the process's Prometheus registry.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use time::OffsetDateTime;

type Labels = Vec<(&'static str, String)>;

/// A watched type's labels: its cluster, group, version, resource and namespace (empty
/// for every namespace).
#[derive(Debug, Clone)]
pub(crate) struct TypeLabels(Labels);

impl TypeLabels {
    /// `namespace` is empty for every namespace.
    pub(crate) fn new(
        cluster: &str,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
    ) -> Self {
        TypeLabels(vec![
            ("cluster", cluster.to_owned()),
            ("group", group.to_owned()),
            ("version", version.to_owned()),
            ("resource", resource.to_owned()),
            ("namespace", namespace.to_owned()),
        ])
    }

    fn with_state(&self, state: &str) -> Labels {
        let mut labels = self.0.clone();
        labels.push(("state", state.to_owned()));
        labels
    }
}

#[derive(Clone, Default)]
pub struct SyncMetrics {
    state: Family<Labels, Gauge>,
    objects: Family<Labels, Counter>,
    last_event: Family<Labels, Gauge>,
    audited: Family<Labels, Gauge>,
    audit_policy: Gauge,
    type_state: Family<Labels, Gauge>,
    type_objects: Family<Labels, Gauge>,
    type_last_event: Family<Labels, Gauge>,
    members: Gauge,
    owned: Gauge,
    registered: Gauge,
    lease_held: Gauge,
    history_revisions: Family<Labels, Gauge>,
    history_bytes: Family<Labels, Gauge>,
    history_expired: Counter,
}

impl std::fmt::Debug for SyncMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SyncMetrics")
    }
}

fn cluster(name: &str) -> Labels {
    vec![("cluster", name.to_owned())]
}

impl SyncMetrics {
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = SyncMetrics::default();
        registry.register(
            "karpor_syncer_cluster_state",
            "1 for the sync state each registered cluster is in, 0 for the others",
            metrics.state.clone(),
        );
        registry.register(
            "karpor_syncer_objects_synced",
            "Documents written to storage per cluster",
            metrics.objects.clone(),
        );
        registry.register(
            "karpor_syncer_last_event_timestamp_seconds",
            "Unix time of the last watch event per cluster",
            metrics.last_event.clone(),
        );
        registry.register(
            "karpor_syncer_ingest_policy_generation",
            "Generation of the audit policy and relation rules in force (raised by each change)",
            metrics.audit_policy.clone(),
        );
        registry.register(
            "karpor_syncer_cluster_ingest_generation",
            "Policy generation every document of the cluster was last written under; below \
             the policy's while it is re-audited and re-indexed",
            metrics.audited.clone(),
        );
        registry.register(
            "karpor_syncer_type_state",
            "1 for the state each watched type is in (syncing, synced, or the reason it cannot \
             be listed: forbidden, gone, invalid, unauthorized, unreachable), 0 for the others",
            metrics.type_state.clone(),
        );
        registry.register(
            "karpor_syncer_type_objects",
            "Documents of each watched type in storage, as last counted",
            metrics.type_objects.clone(),
        );
        registry.register(
            "karpor_syncer_type_last_event_timestamp_seconds",
            "Unix time of the last watch event per watched type",
            metrics.type_last_event.clone(),
        );
        registry.register(
            "karpor_syncer_members",
            "Live syncer members this syncer sees in the metadata store",
            metrics.members.clone(),
        );
        registry.register(
            "karpor_syncer_owned_clusters",
            "Registered clusters this syncer holds the claim of and syncs",
            metrics.owned.clone(),
        );
        registry.register(
            "karpor_syncer_registered_clusters",
            "Clusters registered in the metadata store",
            metrics.registered.clone(),
        );
        registry.register(
            "karpor_history_revisions",
            "Revisions kept in history per cluster, as last counted",
            metrics.history_revisions.clone(),
        );
        registry.register(
            "karpor_history_bytes",
            "Bytes of patches and last states kept in history per cluster, as last counted",
            metrics.history_bytes.clone(),
        );
        registry.register(
            "karpor_history_expired",
            "Revisions removed from history by age or by each cluster's cap",
            metrics.history_expired.clone(),
        );
        registry.register(
            "karpor_syncer_lease_held",
            "1 while this syncer's membership lease certainly holds, else 0",
            metrics.lease_held.clone(),
        );
        metrics
    }

    /// History's sizes as just counted, and what the pass removed.
    pub(crate) fn history(&self, sizes: &[karpor_storage::HistorySize], expired: u64) {
        self.history_revisions.clear();
        self.history_bytes.clear();
        for size in sizes {
            let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.history_revisions
                .get_or_create(&cluster(&size.cluster))
                .set(gauge(size.revisions));
            self.history_bytes
                .get_or_create(&cluster(&size.cluster))
                .set(gauge(size.bytes));
        }
        self.history_expired.inc_by(expired);
    }

    /// Live members seen, clusters owned and registered, and whether the lease holds.
    pub(crate) fn share(&self, members: usize, owned: usize, registered: usize, held: bool) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.members.set(count(members));
        self.owned.set(count(owned));
        self.registered.set(count(registered));
        self.lease_held.set(i64::from(held));
    }

    /// 1 for `state`, 0 for every other of `states`.
    pub(crate) fn set_type_state(&self, labels: &TypeLabels, state: &str, states: &[&str]) {
        for candidate in states {
            self.type_state
                .get_or_create(&labels.with_state(candidate))
                .set(i64::from(*candidate == state));
        }
    }

    pub(crate) fn type_objects(&self, labels: &TypeLabels, objects: u64) {
        self.type_objects
            .get_or_create(&labels.0)
            .set(i64::try_from(objects).unwrap_or(i64::MAX));
    }

    pub(crate) fn type_last_event(&self, labels: &TypeLabels, at: OffsetDateTime) {
        self.type_last_event
            .get_or_create(&labels.0)
            .set(at.unix_timestamp());
    }

    /// Drops a type's series once it is no longer watched.
    pub(crate) fn forget_type(&self, labels: &TypeLabels, states: &[&str]) {
        for state in states {
            self.type_state.remove(&labels.with_state(state));
        }
        self.type_objects.remove(&labels.0);
        self.type_last_event.remove(&labels.0);
    }

    /// 1 for `state`, 0 for every other of `states`.
    pub(crate) fn set_state(&self, name: &str, state: &str, states: &[&str]) {
        for candidate in states {
            self.state
                .get_or_create(&vec![
                    ("cluster", name.to_owned()),
                    ("state", candidate.to_string()),
                ])
                .set(i64::from(*candidate == state));
        }
    }

    pub(crate) fn objects_written(&self, name: &str, n: usize) {
        self.objects.get_or_create(&cluster(name)).inc_by(n as u64);
    }

    pub(crate) fn last_event(&self, name: &str, at: OffsetDateTime) {
        self.last_event
            .get_or_create(&cluster(name))
            .set(at.unix_timestamp());
    }

    pub(crate) fn audit_policy(&self, generation: u64) {
        self.audit_policy.set(generation as i64);
    }

    pub(crate) fn audited(&self, name: &str, generation: u64) {
        self.audited
            .get_or_create(&cluster(name))
            .set(generation as i64);
    }

    /// Drops a deregistered cluster's series (`states`: every state it may have had).
    pub(crate) fn forget(&self, name: &str, states: &[&str]) {
        for state in states {
            self.state.remove(&vec![
                ("cluster", name.to_owned()),
                ("state", state.to_string()),
            ]);
        }
        self.objects.remove(&cluster(name));
        self.last_event.remove(&cluster(name));
        self.audited.remove(&cluster(name));
    }
}
