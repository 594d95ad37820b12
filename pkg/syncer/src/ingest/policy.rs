//! What every object is written with besides itself: the audit policy (its findings) and
//! the relation rules (the keys the topology finds it under). A change of either raises
//! the generation: each cluster relists under the new policy (its documents re-audited
//! and re-indexed) without holding up readiness, and counts as done once every watcher
//! has listed again.

use std::sync::Arc;

use karpor_audit::AuditConfig;
use karpor_core::model::RelationRule;
use tokio::sync::watch;

/// The ingest policy's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Ingest {
    pub audit: AuditConfig,
    /// The relation rules in force (built-in ones included).
    pub relations: Vec<RelationRule>,
    /// What history keeps for rules that do not say (`syncer.history`).
    pub history: crate::HistorySettings,
}

#[derive(Debug, Clone)]
pub(crate) struct IngestPolicy {
    pub generation: u64,
    pub ingest: Arc<Ingest>,
}

pub(crate) type PolicySeen = watch::Receiver<IngestPolicy>;
