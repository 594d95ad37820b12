use serde::{Deserialize, Serialize};

use super::{validate_name, Kind, Record};

/// Which clusters, which resources, and how to store them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncRule {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub clusters: ClusterSelector,
    pub resources: Vec<ResourceSelector>,
    /// Empty: every namespace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub label_selector: Option<String>,
    #[serde(default)]
    pub field_selector: Option<String>,
    #[serde(default)]
    pub transform: Transform,
    /// Keep a document marked deleted when its object goes, instead of removing it.
    #[serde(default)]
    pub keep_after_delete: bool,
}

/// `"*"`, `{names: [..]}` or `{selector: "env=prod"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterSelector {
    #[serde(rename = "*")]
    All,
    Names(Vec<String>),
    Selector(String),
}

/// A group/version/resource; `"*"` in any part matches every value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSelector {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub resource: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transform {
    #[serde(default)]
    pub mode: TransformMode,
    /// JSON paths to drop (`spec.template.spec.containers`).
    #[serde(default)]
    pub trim: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TransformMode {
    #[default]
    Full,
    MetadataOnly,
}

impl Record for SyncRule {
    const KIND: Kind = Kind::SyncRule;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| e.to_string())?;
        if let ClusterSelector::Names(names) = &self.clusters {
            for name in names {
                validate_name(name).map_err(|e| format!("clusters: {e}"))?;
            }
        }
        if self.resources.is_empty() {
            return Err("resources is empty: name at least one, or \"*\"".to_owned());
        }
        for r in &self.resources {
            if r.version.is_empty() || r.resource.is_empty() {
                return Err("resources: version and resource are required".to_owned());
            }
        }
        Ok(())
    }
}

/// How to group resources in the insight views: by these fields of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceGroupRule {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub fields: Vec<String>,
}

impl Record for ResourceGroupRule {
    const KIND: Kind = Kind::ResourceGroupRule;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| e.to_string())?;
        if self.fields.is_empty() {
            return Err("fields is empty".to_owned());
        }
        Ok(())
    }
}
