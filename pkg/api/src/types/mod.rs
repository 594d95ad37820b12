//! The API's typed surface: every request body and every answer's `data`, one file per
//! area, serialised both ways so the server writes them and the CLI and tests read them.
//! Their OpenAPI schemas come from these types (and from core's records, with
//! `karpor-core/schema`), each under one name.

mod ai;
mod audit;
mod auth;
pub(crate) mod clusters;
mod envelope;
mod history;
mod insight;
mod resource_groups;
mod search;
mod sync_rules;
mod topology;

pub use ai::{
    AffectedBody, AiFrame, AuditSummaryBody, DiagnoseEventsBody, DiagnoseLogsBody,
    DiagnosePodLogBody, InterpretIssuesBody, InterpretYamlBody, IssueBody, IssueGroupBody,
};
pub use audit::{AuditRuleView, PolicyView, Reaudit};
pub use auth::{AccessPolicyView, GrantView, Identity};
pub use clusters::{
    AgentApproveBody, AgentRevokedView, AgentStatusView, AgentTokenBody, AgentTokenView,
    ClusterAccess, ClusterBody, ClusterList, ClusterListAnswer, ClusterMetadata, ClusterSpec,
    ClusterStatus, ClusterSummary, ClusterView, Credential, PendingJoinView, RuleInForceView,
    SyncView, TypeView, UploadView, ValidateBody, ValidateView,
};
pub use envelope::{Envelope, ObjectOrYaml};
pub use history::{ChangeView, ChangesAnswer, HistoryAnswer, RevisionView};
pub use insight::{
    AuditData, AuditedResource, ClusterDetail, Count, CustomSummary, DetailedObject, GvkSummary,
    Issue, IssueGroup, LogLine, Metrics, NamespaceSummary, Provenance, ResourceSummary, ScoreData,
    Stats, StreamedEvent, SummarizedResource, SummaryAnswer,
};
pub use resource_groups::{
    Group, GroupList, ResourceGroup, ResourceGroupRuleBody, ResourceGroupRuleView,
};
pub use search::{SearchItem, SearchPage, SearchRows, TotalRelation};
pub use sync_rules::{ClusterDryRun, DryRunView, SelectionView, SyncRuleList, SyncRuleView};
pub use topology::{KindNode, RelationRuleView, ResourceNode, TopologyAnswer, TopologyResource};
