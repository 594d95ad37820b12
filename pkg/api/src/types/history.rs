//! History: an object's revisions and what changed in a scope.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::insight::Count;

/// One revision of an object.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionView {
    /// `created`, `updated` or `deleted`.
    pub change: String,
    /// The object's uid: a name deleted and created again has a new one.
    pub uid: String,
    pub resource_version: String,
    /// When karpor saw the change.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub seen_at: OffsetDateTime,
    /// Seen at a relist, not as it happened (karpor was away or its watch restarted):
    /// it happened before `seenAt`.
    pub late: bool,
    /// Who changed it, where the object says (its newest `managedFields` managers).
    pub managers: Vec<String>,
    /// What changed from the revision before, as a JSON patch (RFC 6902), for updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub diff: Option<Value>,
    /// The object as it was (Secret values and managed fields `[redacted]`), with
    /// `objects=true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub object: Option<Value>,
}

/// An object's revisions, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryAnswer {
    pub cluster: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub revisions: Vec<RevisionView>,
}

/// One change in a scope.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeView {
    /// `created`, `updated` or `deleted`.
    pub change: String,
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub seen_at: OffsetDateTime,
    pub late: bool,
    pub managers: Vec<String>,
}

/// What changed in a scope over a window, newest first, with counts by kind and by
/// change type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangesAnswer {
    pub items: Vec<ChangeView>,
    pub total: u64,
    pub current_page: u64,
    pub page_size: u64,
    /// The window's start; `null` for a `query` that sets none (every change kept).
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub until: OffsetDateTime,
    pub by_kind: Vec<Count>,
    pub by_change: Vec<Count>,
}
