//! Insight: counts, a scope's summary (Karpor's variants by scope), an object's
//! provenance, audit findings and score, and the event stream's events.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::resource_groups::ResourceGroup;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub cluster_count: usize,
    pub resource_count: u64,
    pub resource_group_rule_count: usize,
}

/// A term and how many documents have it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Count {
    pub key: String,
    pub count: u64,
}

/// One of Karpor's answers, by the locator's scope (read back in this order: the first
/// shape that fits).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum SummaryAnswer {
    Cluster(ClusterDetail),
    Resource(ResourceSummary),
    Gvk(GvkSummary),
    Namespace(NamespaceSummary),
    Custom(CustomSummary),
}

/// A cluster (Karpor's `ClusterDetail`), from its stored Nodes and Pods. Usage is what
/// pods request (karpor reads no live metrics: `metricsEnabled` is false).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDetail {
    pub node_count: usize,
    /// The API server's `gitVersion`, measured by the syncer every 30 s and by the
    /// cluster's health check (empty when unknown here: the syncer runs apart).
    pub server_version: String,
    pub ready_nodes: usize,
    pub not_ready_nodes: usize,
    /// Bytes the nodes can give to pods (allocatable).
    pub memory_capacity: i64,
    /// Bytes requested by running and pending pods.
    pub memory_usage: f64,
    /// Millicores the nodes can give to pods (allocatable).
    pub cpu_capacity: i64,
    /// Millicores requested by running and pending pods.
    pub cpu_usage: f64,
    pub pods_capacity: i64,
    /// Pods neither succeeded nor failed.
    pub pods_usage: i64,
    /// Milliseconds that measure's call to `/version` took.
    pub latency: i64,
    /// When `serverVersion` and `latency` were measured (absent when never).
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub server_measured_at: Option<OffsetDateTime>,
    pub metrics_enabled: bool,
    pub cpu_metrics: Metrics,
    pub memory_metrics: Metrics,
    pub cluster: String,
    pub resource_count: u64,
    /// `apiVersion/kind` buckets, most first.
    pub count_by_kind: Vec<Count>,
    pub count_by_namespace: Vec<Count>,
    /// The syncer's state of the cluster (`unknown` when it runs apart).
    pub sync_state: String,
}

/// Karpor's metric history (karpor keeps none: always empty).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct Metrics {
    #[schema(value_type = Vec<Object>)]
    pub points: Vec<Value>,
}

/// One resource (Karpor's `ResourceSummary`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSummary {
    pub resource: SummarizedResource,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub creation_timestamp: Option<OffsetDateTime>,
    pub resource_version: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub sync_at: OffsetDateTime,
}

/// The resource a summary is of, with a Pod's status.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummarizedResource {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    /// For a Pod: `Running`, a waiting reason (`CrashLoopBackOff`), `Waiting`,
    /// `Terminated` or `Unknown`, from its first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// One type (in a namespace, when one is given).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GvkSummary {
    pub cluster: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Stored objects of the type (in the namespace, when one is given).
    pub count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A namespace.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSummary {
    pub cluster: String,
    pub namespace: String,
    /// The five commonest types, as `Kind.apiVersion`.
    #[serde(rename = "countByGVK")]
    pub count_by_gvk: BTreeMap<String, u64>,
    pub resource_count: u64,
    pub count_by_kind: Vec<Count>,
}

/// Any other scope: the locator's fields (Karpor's resource group) and the commonest types.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomSummary {
    #[serde(flatten)]
    pub scope: ResourceGroup,
    #[serde(rename = "countByGVK")]
    pub count_by_gvk: BTreeMap<String, u64>,
    pub resource_count: u64,
}

/// An object as `/insight/detail` answers it: its own keys, and `karpor` beside them.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DetailedObject {
    /// The object (Secret values and managed fields `[redacted]`).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub object: Map<String, Value>,
    pub karpor: Provenance,
}

/// Where an answered object came from (its `karpor` key).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub cluster: String,
    /// `stored` (the syncer's copy), `live` (read from the cluster for this answer) or
    /// `history` (as it was at the time asked, rebuilt from its revisions).
    pub source: String,
    /// When the copy was written, or the object read; for `history`, when karpor saw
    /// the revision it was at.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub sync_at: OffsetDateTime,
    pub deleted: bool,
}

/// Karpor's `AuditData`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditData {
    /// Findings in the scope.
    pub issue_total: u64,
    /// Audited resources in the scope, clean ones included.
    pub resource_total: u64,
    /// Findings by severity (`High`, `Medium`, `Low`), severities with none left out.
    pub by_severity: BTreeMap<String, u64>,
    /// One group per rule found: most severe first, then most resources.
    pub issue_groups: Vec<IssueGroup>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssueGroup {
    pub issue: Issue,
    /// The first resources with the finding (at most 100).
    pub resource_groups: Vec<AuditedResource>,
    /// How many resources have it.
    pub resource_total: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    pub scanner: String,
    /// `High`, `Medium` or `Low`, as the policy in force when it was found set it.
    pub severity: String,
    /// The rule's title.
    pub title: String,
    /// What was found in the first resource listed.
    pub message: String,
    /// karpor's: the rule's id and how to fix it.
    pub rule: String,
    pub remediation: String,
}

/// A resource with a finding.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditedResource {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

/// Karpor's `ScoreData`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScoreData {
    /// 0 to 100: the mean of each resource's `100·exp(−0.04·p − 0.06·s)` (p findings,
    /// s the sum of their weights: Low 1, Medium 2, High 3); 100 with no resources.
    pub score: f64,
    pub resource_total: u64,
    pub issues_total: u64,
    pub severity_statistic: BTreeMap<String, u64>,
}

/// Karpor's event of the stream.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamedEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
    pub last_timestamp: String,
    pub first_timestamp: String,
}

/// One line of a pod's log stream (Karpor's `LogEntry`): with `timestamps=true`, the
/// cluster's time of the line apart from its text; `error` alone when the stream broke.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LogLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
