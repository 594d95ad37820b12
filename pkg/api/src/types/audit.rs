//! The audit rules under the policy in force, and the policy.

use karpor_audit::AuditConfig;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// One rule of the catalogue under the policy in force.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditRuleView {
    pub id: String,
    /// `security` or `reliability`.
    pub category: String,
    /// The catalogue's severity.
    pub severity: String,
    /// The policy's: the catalogue's unless overridden; null when the rule is off.
    pub effective_severity: Option<String>,
    pub title: String,
    pub rationale: String,
    pub remediation: String,
}

/// The policy in force and where it comes from.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    /// `{enabled, disabled: [rule ids], severities: {rule id: High|Medium|Low}}`.
    #[schema(value_type = Object)]
    pub config: AuditConfig,
    /// `stored` (set through this API) or `config` (the config file's `audit:`).
    pub source: String,
    /// The stored record's version (for `PUT ?version=`), absent for `config`.
    pub version: Option<i64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub updated_at: Option<OffsetDateTime>,
    /// How far the syncer in this process has re-audited under it; null when the syncer
    /// runs in another process.
    pub reaudit: Option<Reaudit>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reaudit {
    /// Raised by each change the syncer has seen.
    pub generation: u64,
    pub clusters: usize,
    /// Clusters whose every document has been written under this policy.
    pub audited: usize,
}
