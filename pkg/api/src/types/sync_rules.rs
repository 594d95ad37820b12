//! Sync rules as answered (core's record with karpor's fields beside) and a dry run's
//! answer. A rule's body is core's `SyncRule` itself, its `name` the path's.

use karpor_core::model::SyncRule;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// A rule as answered: its fields, and karpor's `version` and times (none for a
/// built-in rule).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncRuleView {
    /// The rule's fields (`SyncRule`). Documented as an object: the record's schema
    /// refuses other keys, which a view adds.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub rule: SyncRule,
    /// Built into karpor: in force while no rule is stored; store one of the same name
    /// to change it.
    pub built_in: bool,
    /// Whether the syncer follows it now (a built-in rule only while none is stored).
    pub in_force: bool,
    /// The stored record's version (compare-and-swap: `?version=`); null when built in.
    pub version: Option<i64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub created_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub updated_at: Option<OffsetDateTime>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SyncRuleList {
    pub items: Vec<SyncRuleView>,
    pub total: usize,
}

/// What a rule would select.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DryRunView {
    pub rule: String,
    pub clusters: Vec<ClusterDryRun>,
}

/// What a rule would select in one cluster.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClusterDryRun {
    pub cluster: String,
    /// Whether the rule's `clusters` selects this cluster.
    pub selected: bool,
    pub resources: Vec<SelectionView>,
    /// Why the cluster could not be asked (its kubeconfig, or no answer in time).
    pub error: Option<String>,
}

/// One type the rule selects, and its objects in the cluster now.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectionView {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
    /// The namespaces it would be watched in; empty: all.
    pub namespaces: Vec<String>,
    /// The rule that would watch it beside the other rules in force: this one, or one
    /// that names the type more precisely (or as precisely, first by name).
    pub watched_by: String,
    /// Objects the rule's selectors select now, counted by the cluster.
    pub objects: Option<u64>,
    /// Why they could not be counted: `forbidden`, `gone`, `invalid` (a selector the API
    /// server refuses), `unauthorized`, `unreachable`.
    pub error: Option<String>,
}
