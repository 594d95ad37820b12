//! A topology's nodes (Karpor's shapes) and the relation rules behind it. A relation
//! rule's body is core's `RelationRule` itself, its `name` the path's.

use std::collections::BTreeMap;

use karpor_core::model::RelationRule;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

/// A topology by cluster name: a resource's graph by node id, or a namespace's, a
/// cluster's or a resource group's graph by kind id.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TopologyAnswer {
    Resources(BTreeMap<String, BTreeMap<String, ResourceNode>>),
    Kinds(BTreeMap<String, BTreeMap<String, KindNode>>),
}

/// Documented as one shape, by cluster then by node id, each node a resource's or a
/// kind's: as two shapes, an answer with no cluster (`{}`) would match both.
impl utoipa::PartialSchema for TopologyAnswer {
    fn schema() -> RefOr<Schema> {
        let node = OneOfBuilder::new()
            .item(Ref::from_schema_name(ResourceNode::name()))
            .item(Ref::from_schema_name(KindNode::name()));
        let node = AdditionalProperties::RefOr(RefOr::T(Schema::OneOf(node.build())));
        let by_node = ObjectBuilder::new().additional_properties(Some(node));
        ObjectBuilder::new()
            .additional_properties(Some(by_node))
            .description(Some(
                "by cluster name, then by node id: a resource's graph (`ResourceNode`s) or a graph of kinds (`KindNode`s)",
            ))
            .into()
    }
}

impl ToSchema for TopologyAnswer {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((ResourceNode::name().into(), ResourceNode::schema()));
        <ResourceNode as ToSchema>::schemas(schemas);
        schemas.push((KindNode::name().into(), KindNode::schema()));
        <KindNode as ToSchema>::schemas(schemas);
    }
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
