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
    /// How to reach the cluster: a kubeconfig, with its credentials.
    pub kubeconfig: Kubeconfig,
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
        if self.kubeconfig.0.trim().is_empty() {
            return Err("kubeconfig is empty".to_owned());
        }
        Ok(())
    }

    fn secrets_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.kubeconfig.0]
    }
}
