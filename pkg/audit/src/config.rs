//! `audit:` in the config file: rules turned off and severities changed by id.

use std::collections::{BTreeMap, BTreeSet};

use karpor_config::ConfigIssue;
use serde::{Deserialize, Serialize};

use crate::rules::{rule, RuleInfo};
use crate::Severity;

/// The section's name in the config file, before the keys `validate` names.
const SECTION: &str = "audit";

#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Off: no object is audited (findings and scores stay empty and 100).
    pub enabled: bool,
    /// Rule ids never reported.
    pub disabled: BTreeSet<String>,
    /// A severity per rule id, instead of the catalogue's.
    pub severities: BTreeMap<String, Severity>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            disabled: BTreeSet::new(),
            severities: BTreeMap::new(),
        }
    }
}

impl AuditConfig {
    /// For an id no rule has (keys under `audit.`): a misspelt id would
    /// otherwise silently leave its rule on.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        for id in &self.disabled {
            if rule(id).is_none() {
                return Err(ConfigIssue::new(format!("{SECTION}.disabled"), unknown(id)));
            }
        }
        for id in self.severities.keys() {
            if rule(id).is_none() {
                return Err(ConfigIssue::new(
                    format!("{SECTION}.severities.{id}"),
                    unknown(id),
                ));
            }
        }
        Ok(())
    }

    /// The severity a finding of `rule` gets, or `None` when the rule is off.
    pub(crate) fn severity_of(&self, rule: &RuleInfo) -> Option<Severity> {
        if self.disabled.contains(rule.id) {
            return None;
        }
        Some(
            self.severities
                .get(rule.id)
                .copied()
                .unwrap_or(rule.severity),
        )
    }
}

fn unknown(id: &str) -> String {
    format!("unknown rule {id:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{HOST_PID, PRIVILEGED};

    #[test]
    fn unknown_ids_are_named() {
        let config: AuditConfig =
            serde_json::from_str(r#"{"disabled": ["host-pid", "privilegd"]}"#).unwrap();
        let issue = config.validate().unwrap_err();
        assert_eq!(issue.key(), "audit.disabled");
        assert!(issue.problem().contains("\"privilegd\""), "{issue}");

        let config: AuditConfig =
            serde_json::from_str(r#"{"severities": {"host-pid": "Low", "nope": "High"}}"#).unwrap();
        let issue = config.validate().unwrap_err();
        assert_eq!(issue.key(), "audit.severities.nope");
        assert!(issue.problem().contains("\"nope\""), "{issue}");
    }

    #[test]
    fn known_ids_validate_and_apply() {
        let config: AuditConfig = serde_json::from_str(
            r#"{"disabled": ["host-pid"], "severities": {"privileged": "Low"}}"#,
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.severity_of(&HOST_PID), None);
        assert_eq!(config.severity_of(&PRIVILEGED), Some(Severity::Low));
        let defaults = AuditConfig::default();
        defaults.validate().unwrap();
        assert_eq!(defaults.severity_of(&PRIVILEGED), Some(Severity::High));
    }

    #[test]
    fn unknown_fields_and_severities_are_refused() {
        assert!(serde_json::from_str::<AuditConfig>(r#"{"disable": []}"#).is_err());
        assert!(serde_json::from_str::<AuditConfig>(
            r#"{"severities": {"privileged": "Critical"}}"#
        )
        .is_err());
        let empty: AuditConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, AuditConfig::default());
    }
}
