use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{validate_name, Kind, Record};

/// Kubeconfigs above this are refused: no real one is near it, and it bounds what a
/// record can make every backend store.
pub const MAX_KUBECONFIG_BYTES: usize = 2 * 1024 * 1024;

/// A member cluster karpor syncs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    pub name: String,
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// How to reach the cluster: a kubeconfig, with its credentials. Empty for a
    /// cluster in agent mode, whose agent holds its own.
    pub kubeconfig: Kubeconfig,
    /// How the cluster is synced.
    #[serde(default, skip_serializing_if = "ClusterMode::is_kubeconfig")]
    pub mode: ClusterMode,
}

/// How a cluster is synced: by the hub with the cluster's kubeconfig, or by an agent in
/// the cluster that connects out to the hub (the hub then holds no credential of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum ClusterMode {
    #[default]
    Kubeconfig,
    Agent,
}

impl ClusterMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterMode::Kubeconfig => "kubeconfig",
            ClusterMode::Agent => "agent",
        }
    }

    pub fn is_kubeconfig(&self) -> bool {
        *self == ClusterMode::Kubeconfig
    }
}

impl Cluster {
    /// Whether the hub syncs it with its kubeconfig (else its agent does).
    pub fn synced_by_hub(&self) -> bool {
        self.mode == ClusterMode::Kubeconfig
    }
}

/// A kubeconfig's text. Holds credentials: `Debug` never shows it, and the API returns
/// only a masked form.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Kubeconfig(pub String);

impl fmt::Debug for Kubeconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kubeconfig(<{} bytes redacted>)", self.0.len())
    }
}

impl Record for Cluster {
    const KIND: Kind = Kind::Cluster;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| e.to_string())?;
        if self.kubeconfig.0.len() > MAX_KUBECONFIG_BYTES {
            return Err(format!(
                "kubeconfig is {} bytes, above the limit of {MAX_KUBECONFIG_BYTES}",
                self.kubeconfig.0.len()
            ));
        }
        match (self.mode, self.kubeconfig.0.trim().is_empty()) {
            (ClusterMode::Kubeconfig, true) => return Err("kubeconfig is empty".to_owned()),
            (ClusterMode::Agent, false) => {
                return Err(
                    "a cluster in agent mode has no kubeconfig: its agent holds the credential"
                        .to_owned(),
                )
            }
            _ => {}
        }
        Ok(())
    }

    fn secrets_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.kubeconfig.0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(mode: ClusterMode, kubeconfig: &str) -> Cluster {
        Cluster {
            name: "a".to_owned(),
            display_name: String::new(),
            description: String::new(),
            labels: BTreeMap::new(),
            kubeconfig: Kubeconfig(kubeconfig.to_owned()),
            mode,
        }
    }

    #[test]
    fn an_agent_cluster_holds_no_kubeconfig_and_a_hub_synced_one_needs_one() {
        assert!(cluster(ClusterMode::Agent, "").validate().is_ok());
        assert!(cluster(ClusterMode::Agent, "apiVersion: v1")
            .validate()
            .unwrap_err()
            .contains("agent mode"));
        assert!(cluster(ClusterMode::Kubeconfig, " ").validate().is_err());
        // Records written before modes existed read as hub-synced.
        let old: Cluster =
            serde_yaml::from_str("{name: a, kubeconfig: \"apiVersion: v1\"}").unwrap();
        assert!(old.synced_by_hub());
        let text = serde_yaml::to_string(&cluster(ClusterMode::Agent, "")).unwrap();
        assert!(text.contains("mode: agent"), "{text}");
    }
}
