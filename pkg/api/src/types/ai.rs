//! The AI routes' bodies (Karpor's) and their stream's frames.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::StreamedEvent;

/// One frame of an AI stream (Karpor's): `start`, then `chunk`s of text as the model
/// writes them, then `complete` with the whole text, or `error` with why it stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AiFrame {
    /// `start`, `chunk`, `error` or `complete`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// `POST /insight/yaml/interpret/stream`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InterpretYamlBody {
    /// One Kubernetes object as YAML (or JSON).
    pub yaml: String,
    /// `en` (default), `zh`, `de`, `pt` or `ko`.
    #[serde(default)]
    pub language: Option<String>,
    /// karpor's: the object's audit findings, one line each, explained with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
}

/// `POST /insight/issue/interpret/stream`: the `data` of `/insight/audit`, as Karpor's
/// dashboard sends it back.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterpretIssuesBody {
    pub audit_data: AuditSummaryBody,
    #[serde(default)]
    pub language: Option<String>,
}

/// The parts of an audit answer read for its explanation.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditSummaryBody {
    #[serde(default)]
    pub issue_total: u64,
    #[serde(default)]
    pub resource_total: u64,
    #[serde(default)]
    pub by_severity: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    pub issue_groups: Vec<IssueGroupBody>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssueGroupBody {
    pub issue: IssueBody,
    #[serde(default)]
    pub resource_groups: Vec<AffectedBody>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct IssueBody {
    pub title: String,
    #[serde(default)]
    pub severity: String,
    #[serde(default)]
    pub scanner: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct AffectedBody {
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
}

/// `POST /insight/aggregator/event/diagnosis/stream`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct DiagnoseEventsBody {
    pub events: Vec<StreamedEvent>,
    #[serde(default)]
    pub language: Option<String>,
}

/// `POST /insight/aggregator/log/diagnosis/stream`: the lines a client has (Karpor's
/// dashboard sends what it shows).
#[derive(Debug, Deserialize, ToSchema)]
pub struct DiagnoseLogsBody {
    /// The log's lines, oldest first.
    pub logs: Vec<String>,
    #[serde(default)]
    pub language: Option<String>,
}

/// `POST /insight/aggregator/log/pod/{cluster}/{namespace}/{name}/diagnosis/stream`:
/// karpor reads the pod's log itself; the body says only the answer's language.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct DiagnosePodLogBody {
    /// `en` (default), `zh`, `de`, `pt` or `ko`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}
