//! The audit policy every cluster sync audits with. A change raises the generation: each
//! cluster relists under the new policy (its documents re-audited) without holding up
//! readiness, and counts as audited once every watcher has listed again.

use std::sync::Arc;

use karpor_audit::AuditConfig;
use tokio::sync::watch;

#[derive(Debug, Clone)]
pub(crate) struct AuditPolicyState {
    pub generation: u64,
    pub config: Arc<AuditConfig>,
}

pub(crate) type AuditSeen = watch::Receiver<AuditPolicyState>;
