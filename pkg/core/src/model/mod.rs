//! karpor's records: what the metadata store keeps. The store adds the version and the
//! creation and update times; these types are what users write.

mod agent;
mod audit;
mod cluster;
mod limits;
mod name;
mod relations;
mod rules;
mod seed;
mod selector;

pub use agent::{
    AgentAuthority, AgentEnrollment, AgentSession, JoinGrant, PendingJoin, AUTHORITY_RECORD,
};
pub use audit::AuditPolicy;
pub use cluster::{Cluster, ClusterMode, Kubeconfig, MAX_KUBECONFIG_BYTES};
pub use limits::{OverLimit, RuleLimits, LIMITS_SECTION};
pub use name::{validate_name, NameError, NAME_PATTERN};
pub use relations::{validate_path, KindRef, Relation, RelationRule};
pub use rules::{
    ClusterSelector, ResourceGroupRule, ResourceSelector, RuleHistory, SyncRule, Transform,
    TransformMode, MAX_HISTORY_KEEP,
};
pub use seed::Seed;
pub use selector::{LabelSelector, SelectorError};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The kinds of record, each its own namespace of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Cluster,
    SyncRule,
    ResourceGroupRule,
    AuditPolicy,
    RelationRule,
    Seed,
    AccessPolicy,
    AgentEnrollment,
    AgentAuthority,
    AgentSession,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Cluster,
        Kind::SyncRule,
        Kind::ResourceGroupRule,
        Kind::AuditPolicy,
        Kind::RelationRule,
        Kind::Seed,
        Kind::AccessPolicy,
        Kind::AgentEnrollment,
        Kind::AgentAuthority,
        Kind::AgentSession,
    ];

    /// The stable name used in keys, tables and exports.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Cluster => "clusters",
            Kind::SyncRule => "syncrules",
            Kind::ResourceGroupRule => "resourcegrouprules",
            Kind::AuditPolicy => "auditpolicies",
            Kind::RelationRule => "relationrules",
            Kind::Seed => "seeds",
            Kind::AccessPolicy => "accesspolicies",
            Kind::AgentEnrollment => "agentenrollments",
            Kind::AgentAuthority => "agentauthorities",
            Kind::AgentSession => "agentsessions",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A record type the metadata store keeps.
pub trait Record: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    const KIND: Kind;

    fn name(&self) -> &str;

    /// Checks what types cannot: names, sizes, selectors.
    fn validate(&self) -> Result<(), String>;

    /// Credentials to encrypt at rest, when a key is configured.
    fn secrets_mut(&mut self) -> Vec<&mut String> {
        Vec::new()
    }
}
