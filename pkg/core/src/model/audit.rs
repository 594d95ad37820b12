//! The audit policy users change at run time: which rules are off and which severities
//! differ from the catalogue. One record, named [`AuditPolicy::NAME`]; without it the
//! config file's `audit:` section applies.

use karpor_audit::AuditConfig;
use serde::{Deserialize, Serialize};

use super::{Kind, Record};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditPolicy {
    pub name: String,
    #[serde(default)]
    pub config: AuditConfig,
}

impl AuditPolicy {
    /// The one policy's name.
    pub const NAME: &'static str = "default";
}

impl Record for AuditPolicy {
    const KIND: Kind = Kind::AuditPolicy;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        if self.name != Self::NAME {
            return Err(format!("name: the audit policy is named {:?}", Self::NAME));
        }
        self.config.validate().map_err(|issue| {
            let key = issue.key().trim_start_matches("audit.");
            format!("{key}: {}", issue.problem())
        })
    }
}
