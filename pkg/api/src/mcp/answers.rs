//! What the tools answer: structured results (each with its JSON schema) made from the
//! REST answers, a short text beside each, and every answer bounded in size.

use std::collections::BTreeMap;
use std::fmt::Write;

use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::ErrorData;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::types::{AuditData, IssueGroup, SearchItem};

/// Labels an object's summary shows at most.
const MAX_LABELS: usize = 20;
/// Resources shown under one audit finding.
const GROUP_RESOURCES: usize = 10;
/// Lines of the text beside a structured answer.
const TEXT_LINES: usize = 20;

/// An object in a line: where it is, what it is, how it is.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Summary {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
    /// `metadata.creationTimestamp`.
    pub created: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// `status.phase`, or ready replicas of replicas.
    pub status: Option<String>,
    /// The object is gone from its cluster (kept by a sync rule's `keepAfterDelete`).
    pub deleted: bool,
    /// Its audit findings: `SEVERITY rule: title`.
    pub findings: Vec<String>,
}

impl Summary {
    pub(crate) fn of(
        cluster: &str,
        object: &Value,
        deleted: bool,
        findings: Vec<String>,
    ) -> Summary {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let metadata = &object["metadata"];
        let labels = metadata["labels"]
            .as_object()
            .map(|labels| {
                labels
                    .iter()
                    .take(MAX_LABELS)
                    .map(|(k, v)| (k.clone(), text(v)))
                    .collect()
            })
            .unwrap_or_default();
        Summary {
            cluster: cluster.to_owned(),
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            namespace: text(&metadata["namespace"]),
            name: text(&metadata["name"]),
            created: metadata["creationTimestamp"].as_str().map(str::to_owned),
            labels,
            status: status(object),
            deleted,
            findings,
        }
    }

    fn line(&self) -> String {
        let mut line = format!("{}/{} ", self.cluster, self.kind);
        if !self.namespace.is_empty() {
            let _ = write!(line, "{}/", self.namespace);
        }
        line.push_str(&self.name);
        if let Some(status) = &self.status {
            let _ = write!(line, " [{status}]");
        }
        if !self.findings.is_empty() {
            let _ = write!(line, " ({} findings)", self.findings.len());
        }
        line
    }
}

fn status(object: &Value) -> Option<String> {
    let status = &object["status"];
    if let Some(phase) = status["phase"].as_str() {
        return Some(phase.to_owned());
    }
    let wanted = object["spec"]["replicas"].as_u64()?;
    let ready = status["readyReplicas"].as_u64().unwrap_or(0);
    Some(format!("{ready}/{wanted} ready"))
}

pub(crate) fn finding_lines(item: &SearchItem) -> Vec<String> {
    item.issues
        .iter()
        .map(|f| format!("{} {}: {}", f.severity.as_str(), f.rule, f.title))
        .collect()
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchAnswer {
    /// The query that ran (for `nl`, the SQL the model wrote).
    pub sql_query: String,
    pub total: u64,
    /// `false`: matches were counted up to 10,000 and `total` is at least that many.
    pub total_exact: bool,
    pub page: u32,
    pub page_size: u32,
    pub items: Vec<Summary>,
}

impl SearchAnswer {
    pub(crate) fn text(&self) -> String {
        let shown = self.items.len();
        let more = if self.total_exact { "" } else { "+" };
        let mut text = format!(
            "{}{more} objects match `{}`; page {} holds {shown}.",
            self.total, self.sql_query, self.page
        );
        lines(&mut text, self.items.iter().map(Summary::line));
        text
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Finding {
    pub severity: String,
    pub rule: String,
    pub title: String,
    pub message: String,
    pub remediation: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event {
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    pub message: String,
    pub count: u64,
    pub last_seen: Option<String>,
}

impl Event {
    pub(crate) fn of(event: &Value) -> Event {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        Event {
            kind: text(&event["type"]),
            reason: text(&event["reason"]),
            message: text(&event["message"]),
            count: event["count"].as_u64().unwrap_or(1),
            last_seen: ["lastTimestamp", "eventTime", "firstTimestamp"]
                .iter()
                .find_map(|k| event[*k].as_str().map(str::to_owned)),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Described {
    pub summary: Summary,
    /// The stored object: Secret values and managed fields redacted, long texts cut.
    #[schemars(schema_with = "object")]
    pub object: Value,
    /// Its audit score, 0 to 100.
    pub score: Option<f64>,
    pub findings: Vec<Finding>,
    /// Node ids (`GROUP/VERSION.KIND:NAMESPACE.NAME`) of what owns, selects or names it.
    pub parents: Vec<String>,
    /// Node ids of what it owns, selects or names.
    pub children: Vec<String>,
    /// Its cluster's newest Events about it (read from the cluster now).
    pub events: Vec<Event>,
    /// Parts that could not be read, and why.
    pub unavailable: Vec<String>,
}

impl Described {
    pub(crate) fn text(&self) -> String {
        let mut text = self.summary.line();
        if let Some(score) = self.score {
            let _ = write!(text, "\naudit score {score:.0}");
        }
        lines(
            &mut text,
            self.findings
                .iter()
                .map(|f| format!("{} {}: {}", f.severity, f.rule, f.title)),
        );
        let _ = write!(
            text,
            "\n{} parents, {} children, {} events",
            self.parents.len(),
            self.children.len(),
            self.events.len()
        );
        lines(
            &mut text,
            self.events
                .iter()
                .map(|e| format!("{} {}: {}", e.kind, e.reason, e.message)),
        );
        lines(&mut text, self.unavailable.iter().cloned());
        text
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Graph {
    pub cluster: String,
    /// `resources` (a resource's graph, by node id) or `kinds` (a namespace's or a
    /// cluster's, by kind id).
    pub of: String,
    /// By id: a resource's `resourceGroup`, `parents` and `children`, or a kind's
    /// `resourceGroup`, `count` and `relationship` (other kinds: `parent` or `child`).
    #[schemars(schema_with = "object_of_objects")]
    pub nodes: Map<String, Value>,
}

impl Graph {
    pub(crate) fn text(&self) -> String {
        let mut text = format!(
            "{} nodes ({}) in {}",
            self.nodes.len(),
            self.of,
            self.cluster
        );
        lines(&mut text, self.nodes.keys().cloned());
        text
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditGroup {
    pub severity: String,
    pub rule: String,
    pub title: String,
    pub message: String,
    pub remediation: String,
    /// Resources with it.
    pub resource_total: u64,
    /// The first of them, `CLUSTER/KIND/[NAMESPACE/]NAME`.
    pub resources: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditAnswer {
    /// 0 to 100: 100 is no findings.
    pub score: f64,
    pub resource_total: u64,
    pub issue_total: u64,
    pub by_severity: BTreeMap<String, u64>,
    /// Most severe first.
    pub groups: Vec<AuditGroup>,
}

impl AuditAnswer {
    pub(crate) fn of(data: AuditData, score: f64, limit: usize) -> AuditAnswer {
        let group = |g: IssueGroup| AuditGroup {
            severity: g.issue.severity,
            rule: g.issue.rule,
            title: g.issue.title,
            message: g.issue.message,
            remediation: g.issue.remediation,
            resource_total: g.resource_total,
            resources: g
                .resource_groups
                .into_iter()
                .take(GROUP_RESOURCES)
                .map(|r| {
                    let namespace = if r.namespace.is_empty() {
                        String::new()
                    } else {
                        format!("{}/", r.namespace)
                    };
                    format!("{}/{}/{namespace}{}", r.cluster, r.kind, r.name)
                })
                .collect(),
        };
        AuditAnswer {
            score,
            resource_total: data.resource_total,
            issue_total: data.issue_total,
            by_severity: data.by_severity,
            groups: data
                .issue_groups
                .into_iter()
                .take(limit)
                .map(group)
                .collect(),
        }
    }

    pub(crate) fn text(&self) -> String {
        let mut text = format!(
            "score {:.0}: {} findings over {} resources",
            self.score, self.issue_total, self.resource_total
        );
        lines(
            &mut text,
            self.groups.iter().map(|g| {
                format!(
                    "{} {} ({} resources): {}",
                    g.severity, g.rule, g.resource_total, g.title
                )
            }),
        );
        text
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterLine {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub labels: BTreeMap<String, String>,
    /// Whether its API server answered karpor's last look; unknown before the first.
    pub healthy: Option<bool>,
    /// The syncer's `state` (`synced`, `syncing`, `unreachable`, ...) with its reason and
    /// counts.
    #[schemars(schema_with = "object")]
    pub sync: Value,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Clusters {
    pub clusters: Vec<ClusterLine>,
}

impl Clusters {
    pub(crate) fn text(&self) -> String {
        let mut text = format!("{} clusters", self.clusters.len());
        lines(
            &mut text,
            self.clusters.iter().map(|c| {
                let health = match c.healthy {
                    Some(true) => "healthy",
                    Some(false) => "unhealthy",
                    None => "health unknown",
                };
                let state = c.sync["state"].as_str().unwrap_or("unknown");
                format!("{}: {health}, sync {state}", c.name)
            }),
        );
        text
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Changes {
    pub total: u64,
    pub page: u32,
    pub page_size: u32,
    /// The window, start (included) to end (excluded).
    pub since: Option<String>,
    pub until: String,
    /// Counts over the whole window: `[{key, count}]`.
    #[schemars(schema_with = "objects")]
    pub by_kind: Value,
    #[schemars(schema_with = "objects")]
    pub by_change: Value,
    /// Newest first: `change` (created, updated, deleted), names, `seenAt`, `managers`
    /// (who changed it, as the object says).
    #[schemars(schema_with = "objects")]
    pub items: Vec<Value>,
}

impl Changes {
    pub(crate) fn text(&self) -> String {
        let mut text = format!("{} changes", self.total);
        lines(
            &mut text,
            self.items.iter().map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
                format!(
                    "{} {} {}/{} {}/{}",
                    s("seenAt"),
                    s("change"),
                    s("cluster"),
                    s("kind"),
                    s("namespace"),
                    s("name")
                )
            }),
        );
        text
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct History {
    pub cluster: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Newest first: `change`, `resourceVersion`, `seenAt`, `managers`, and `diff` (a JSON
    /// patch from the revision before).
    #[schemars(schema_with = "objects")]
    pub revisions: Vec<Value>,
}

impl History {
    pub(crate) fn text(&self) -> String {
        let mut text = format!(
            "{} revisions of {}/{} {}/{}",
            self.revisions.len(),
            self.cluster,
            self.kind,
            self.namespace,
            self.name
        );
        lines(
            &mut text,
            self.revisions.iter().map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                let ops = r["diff"].as_array().map_or(0, Vec::len);
                format!("{} {} ({ops} changes)", s("seenAt"), s("change"))
            }),
        );
        text
    }
}

/// Schemas of the fields that carry a REST answer's JSON as it is: clients read a
/// property's schema as an object, so none is the schema `true`.
fn object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object"})
}

fn objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object"}})
}

fn object_of_objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "additionalProperties": {"type": "object"}})
}

fn lines(text: &mut String, items: impl Iterator<Item = String>) {
    for (i, item) in items.enumerate() {
        if i == TEXT_LINES {
            text.push_str("\n…");
            break;
        }
        text.push_str("\n- ");
        text.push_str(&item);
    }
}

/// Cuts per level: (longest text, most items of a list or map).
const LEVELS: [(usize, usize); 4] = [(4096, 200), (1024, 50), (256, 20), (64, 5)];

/// `value` made to fit `budget` bytes as JSON: long texts cut and long lists shortened,
/// more at each level; `true` when anything was cut.
fn fit(value: &mut Value, budget: usize) -> bool {
    if size(value) <= budget {
        return false;
    }
    for (text, items) in LEVELS {
        cut(value, text, items, 0);
        if size(value) <= budget {
            break;
        }
    }
    true
}

fn size(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

/// Deeper than any answer is: a value below it becomes a marker.
const MAX_DEPTH: usize = 64;

fn cut(value: &mut Value, text: usize, items: usize, depth: usize) {
    if depth > MAX_DEPTH {
        *value = Value::String("…".into());
        return;
    }
    match value {
        Value::String(s) if s.len() > text => {
            let mut end = text;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let cut = s.len() - end;
            s.truncate(end);
            let _ = write!(s, "…[{cut} bytes cut]");
        }
        Value::Array(list) => {
            list.truncate(items);
            for v in list {
                cut(v, text, items, depth + 1);
            }
        }
        Value::Object(map) => {
            // The answer's own keys are few; only a long map of the object's is shortened.
            if map.len() > items.max(LEVELS[0].1) {
                let mut kept = 0;
                map.retain(|_, _| {
                    kept += 1;
                    kept <= items
                });
            }
            for v in map.values_mut() {
                cut(v, text, items, depth + 1);
            }
        }
        _ => {}
    }
}

/// A tool's success: the answer as structured content within `budget` bytes (with
/// `truncated` when it was cut), and its text.
pub(crate) fn answered<T: Serialize>(
    answer: &T,
    text: String,
    budget: usize,
) -> Result<CallToolResult, ErrorData> {
    let mut value = serde_json::to_value(answer).map_err(|e| {
        ErrorData::internal_error(format!("an answer could not be written: {e}"), None)
    })?;
    let truncated = fit(&mut value, budget);
    let mut text = text;
    if truncated {
        if let Value::Object(map) = &mut value {
            map.insert("truncated".into(), Value::Bool(true));
        }
        text.push_str("\n(the answer was cut to fit: ask for a smaller page or one object)");
    }
    let mut result = CallToolResult::structured(value);
    result.content.insert(0, ContentBlock::text(text));
    Ok(result)
}

/// A tool's failure the assistant can act on (a query it may correct, an object that is
/// not there): a result marked as an error, not a protocol error.
pub(crate) fn failed(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_cut_to_its_budget_and_says_so() {
        let mut value = serde_json::json!({
            "items": (0..500).map(|i| serde_json::json!({"name": format!("n{i}"), "data": "x".repeat(5000)})).collect::<Vec<_>>(),
        });
        assert!(fit(&mut value, 64 * 1024));
        assert!(size(&value) <= 64 * 1024, "{}", size(&value));
        let mut small = serde_json::json!({"a": "é".repeat(10)});
        assert!(!fit(&mut small, 1024));
        let mut odd = serde_json::json!({"s": "é".repeat(5000)});
        cut(&mut odd, 4095, 10, 0);
        assert!(odd["s"].as_str().unwrap().ends_with("bytes cut]"));
    }
}
