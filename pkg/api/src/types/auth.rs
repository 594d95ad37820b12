//! Who the caller is, as `/authn` answers it.

use karpor_core::access::AccessPolicy;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// The caller as karpor sees it, and what it may do here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// The token's name in `auth.tokens` (or the local admin token's), the user a
    /// Kubernetes token or an OIDC token names, or `anonymous`.
    pub user: String,
    /// As the identity provider gave them.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The highest role its grants give: `viewer`, `editor` or `admin`.
    pub role: String,
    /// No credential was sent (anonymous reads are on).
    pub anonymous: bool,
    /// What this caller may do on this server: `read`, `edit` and `write` (not in
    /// read-only mode), `admin`, `pod-logs`.
    pub may: Vec<String>,
    /// The policies that let it in (none for a token's own role or anonymous reads).
    #[serde(default)]
    pub policies: Vec<String>,
    /// Where it may read: each grant, joined.
    #[serde(default)]
    pub scope: Vec<GrantView>,
}

/// One part of the fleet a caller may see; an absent list is all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantView {
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_labels: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    /// Secrets' metadata is in it.
    pub secrets: bool,
}

/// An access policy as the API answers it: the policy, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicyView {
    /// The policy's fields (`AccessPolicy`). Documented as an object: the record's schema
    /// refuses other keys, which a view adds.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub policy: AccessPolicy,
    /// From the config file (`auth.policies`): read-only here.
    pub configured: bool,
    /// A stored policy's version and last change.
    pub version: Option<i64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub updated_at: Option<OffsetDateTime>,
}
