//! Each watched type's status within its cluster: listing, synced, or why it cannot be
//! listed. A type the credentials may not list is an error of that type, not of the
//! cluster: the rest keeps syncing.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use time::OffsetDateTime;

use crate::status::metrics::{SyncMetrics, TypeLabels};

/// Why a type cannot be listed or watched now. Codes, not the API server's words: those
/// name users and addresses and go to the log only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeError {
    /// 403: the credentials may not list or watch it.
    Forbidden,
    /// 404: no longer served (a CRD deleted); the next discovery drops it.
    Gone,
    /// 400: the API server refuses the rule's label or field selector for it.
    Invalid,
    /// 401: the credentials are not accepted (the whole cluster's problem too).
    Unauthorized,
    /// The API server does not answer (the whole cluster's problem too).
    Unreachable,
}

impl TypeError {
    pub fn as_str(self) -> &'static str {
        match self {
            TypeError::Forbidden => "forbidden",
            TypeError::Gone => "gone",
            TypeError::Invalid => "invalid",
            TypeError::Unauthorized => "unauthorized",
            TypeError::Unreachable => "unreachable",
        }
    }

    /// An error of this type alone; the others are the cluster's too.
    pub fn of_type_only(self) -> bool {
        matches!(
            self,
            TypeError::Forbidden | TypeError::Gone | TypeError::Invalid
        )
    }
}

/// Where one watched type stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeState {
    /// Its list since its watcher started is not in storage yet.
    Syncing,
    /// Listed, and following changes.
    Synced,
    /// Cannot be listed or watched now; retried with backoff.
    Error(TypeError),
}

impl TypeState {
    pub fn as_str(self) -> &'static str {
        match self {
            TypeState::Syncing => "syncing",
            TypeState::Synced => "synced",
            TypeState::Error(_) => "error",
        }
    }

    /// The metric's state: an error is its reason.
    fn metric(self) -> &'static str {
        match self {
            TypeState::Error(e) => e.as_str(),
            other => other.as_str(),
        }
    }

    pub(crate) const METRIC_STATES: [&'static str; 7] = [
        "syncing",
        "synced",
        "forbidden",
        "gone",
        "invalid",
        "unauthorized",
        "unreachable",
    ];
}

/// What a watcher is of: a type, in one namespace or all.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TypeId {
    pub group: String,
    pub version: String,
    pub resource: String,
    /// Set when the rule lists namespaces: one watcher each.
    pub namespace: Option<String>,
}

/// One watched type's progress, shared by its watcher, the writer and the status.
#[derive(Debug)]
pub(crate) struct TypeProgress {
    id: TypeId,
    api_version: String,
    kind: String,
    namespaced: bool,
    rule: String,
    state: RwLock<TypeState>,
    /// Documents in storage when last counted; `u64::MAX` until then.
    objects: AtomicU64,
    last_event_ms: AtomicI64,
    labels: TypeLabels,
    metrics: SyncMetrics,
}

/// A watched type's status at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeSnapshot {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
    pub namespace: Option<String>,
    /// The sync rule that watches it.
    pub rule: String,
    pub state: TypeState,
    /// Its documents in storage, as last counted (every few seconds while it changes).
    pub objects: Option<u64>,
    pub last_event: Option<OffsetDateTime>,
}

/// What a [`TypeProgress`] is made from.
pub(crate) struct TypeInfo {
    pub id: TypeId,
    pub api_version: String,
    pub kind: String,
    pub namespaced: bool,
    pub rule: String,
}

impl TypeProgress {
    pub(crate) fn new(cluster: &str, info: TypeInfo, metrics: SyncMetrics) -> Self {
        let id = &info.id;
        let namespace = id.namespace.as_deref().unwrap_or_default();
        let labels = TypeLabels::new(cluster, &id.group, &id.version, &id.resource, namespace);
        let progress = TypeProgress {
            id: info.id,
            api_version: info.api_version,
            kind: info.kind,
            namespaced: info.namespaced,
            rule: info.rule,
            state: RwLock::new(TypeState::Syncing),
            objects: AtomicU64::new(u64::MAX),
            last_event_ms: AtomicI64::new(0),
            labels,
            metrics,
        };
        progress.metrics.set_type_state(
            &progress.labels,
            TypeState::Syncing.metric(),
            &TypeState::METRIC_STATES,
        );
        progress
    }

    pub(crate) fn id(&self) -> &TypeId {
        &self.id
    }

    pub(crate) fn api_version(&self) -> &str {
        &self.api_version
    }

    pub(crate) fn kind(&self) -> &str {
        &self.kind
    }

    pub(crate) fn state(&self) -> TypeState {
        *self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_state(&self, state: TypeState) {
        let mut current = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if *current != state {
            *current = state;
            self.metrics
                .set_type_state(&self.labels, state.metric(), &TypeState::METRIC_STATES);
        }
    }

    pub(crate) fn event_seen(&self, at: OffsetDateTime) {
        let ms = (at.unix_timestamp_nanos() / 1_000_000) as i64;
        self.last_event_ms.store(ms, Ordering::Relaxed);
        self.metrics.type_last_event(&self.labels, at);
    }

    pub(crate) fn counted(&self, objects: u64) {
        self.objects.store(objects, Ordering::Relaxed);
        self.metrics.type_objects(&self.labels, objects);
    }

    /// Its metric series go with it.
    pub(crate) fn forget(&self) {
        self.metrics
            .forget_type(&self.labels, &TypeState::METRIC_STATES);
    }

    pub(crate) fn snapshot(&self) -> TypeSnapshot {
        let ms = self.last_event_ms.load(Ordering::Relaxed);
        let objects = self.objects.load(Ordering::Relaxed);
        TypeSnapshot {
            group: self.id.group.clone(),
            version: self.id.version.clone(),
            kind: self.kind.clone(),
            resource: self.id.resource.clone(),
            namespaced: self.namespaced,
            namespace: self.id.namespace.clone(),
            rule: self.rule.clone(),
            state: self.state(),
            objects: (objects != u64::MAX).then_some(objects),
            last_event: (ms > 0)
                .then(|| OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok())
                .flatten(),
        }
    }
}
