//! Resource group rules (Karpor's entity with karpor's `version`) and the groups of one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// A rule as answered: Karpor's entity (`id`, `name`, `description`, `fields`, times)
/// and karpor's `version`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroupRuleView {
    /// The rule's name (Karpor's id is an opaque key; karpor's names are unique).
    pub id: String,
    pub name: String,
    pub description: String,
    pub fields: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
    pub version: i64,
}

/// A rule's body. `name` is the path's (karpor's routes) or the rule's own (Karpor's
/// `POST`/`PUT /resource-group-rule`), which is why it is optional here and not in the
/// record.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceGroupRuleBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    /// Of `cluster`, `apiVersion`, `kind`, `namespace`, `name`, `labels.KEY`,
    /// `annotations.KEY`.
    #[schema(example = json!(["namespace", "labels.app"]))]
    pub fields: Vec<String>,
}

/// One group as Karpor answers it: the value of each field, labels and annotations as
/// maps; a field without a value (the namespace of a cluster-scoped object) is left out.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A group with karpor's count: the value of each of the rule's fields, as named there.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Group {
    pub values: BTreeMap<String, String>,
    pub count: u64,
}

/// Karpor's `{fields, groups}`, and karpor's counted `items` beside.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GroupList {
    pub fields: Vec<String>,
    pub groups: Vec<ResourceGroup>,
    pub rule: String,
    pub items: Vec<Group>,
    pub total: usize,
}
