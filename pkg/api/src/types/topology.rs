//! A topology's nodes (Karpor's shapes) and the relation rules behind it. A relation
//! rule's body is core's `RelationRule` itself, its `name` the path's.

use std::collections::BTreeMap;

use karpor_core::model::RelationRule;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// A topology by cluster name: a resource's graph by node id, or a namespace's or a
/// cluster's graph by kind id.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TopologyAnswer {
    Resources(BTreeMap<String, BTreeMap<String, ResourceNode>>),
    Kinds(BTreeMap<String, BTreeMap<String, KindNode>>),
}

/// Karpor's `ResourceGroup` as topology answers it: one object or one kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyResource {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// One object of a resource's graph (Karpor's `ResourceTopology`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceNode {
    pub resource_group: TopologyResource,
    /// Node ids (`GROUP/VERSION.KIND:NAMESPACE.NAME`) of what owns, selects or names it.
    pub parents: Vec<String>,
    /// Node ids of what it owns, selects or names.
    pub children: Vec<String>,
}

/// One kind of a namespace's or a cluster's graph (Karpor's `ClusterTopology`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KindNode {
    pub resource_group: TopologyResource,
    pub count: u64,
    /// Other kinds' ids (`GROUP.VERSION.KIND`) and whether each is a `parent` or a `child`.
    pub relationship: BTreeMap<String, String>,
}

/// A relation rule as the API answers it: the rule, and karpor's fields beside.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelationRuleView {
    /// The rule's fields (`RelationRule`). Documented as an object: the record's schema
    /// refuses other keys, which a view adds.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub rule: RelationRule,
    /// Karpor knows it without being told (a stored rule of its name replaces it).
    pub built_in: bool,
    /// Stored through this API (then with its version and times).
    pub stored: bool,
    pub version: Option<i64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub updated_at: Option<OffsetDateTime>,
}
