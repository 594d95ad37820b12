//! What every object is written with besides itself: the audit policy (its findings) and
//! the relation rules (the keys the topology finds it under). A change of either raises
//! the generation: each cluster relists under the new policy (its documents re-audited
//! and re-indexed) without holding up readiness, and counts as done once every watcher
//! has listed again.

use std::sync::Arc;

use karpor_audit::AuditConfig;
use karpor_core::model::{AuditPolicy, RelationRule};
use karpor_metastore::{Metastore, StoreError};
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

/// The policy in force: the stored audit policy (else `configured`, the config file's),
/// the stored relation rules with the built-in ones.
pub(crate) async fn read(
    metastore: &Metastore,
    configured: &AuditConfig,
    history: crate::HistorySettings,
) -> Result<Ingest, StoreError> {
    let stored = metastore
        .list_all::<AuditPolicy>()
        .await?
        .into_iter()
        .find(|p| p.record.name == AuditPolicy::NAME);
    let audit = match stored {
        Some(policy) => policy.record.config,
        None => configured.clone(),
    };
    let relations: Vec<RelationRule> = metastore
        .list_all::<RelationRule>()
        .await?
        .into_iter()
        .map(|r| r.record)
        .collect();
    Ok(Ingest {
        audit,
        relations: karpor_topology::in_force(&relations),
        history,
    })
}
