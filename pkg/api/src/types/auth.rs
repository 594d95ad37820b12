//! Who the caller is, as `/authn` answers it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The caller as karpor sees it, and what it may do here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// The token's name in `auth.tokens` (or the local admin token's), or `anonymous`.
    pub user: String,
    /// `guest` or `admin`.
    pub role: String,
    /// No credential was sent (anonymous reads are on).
    pub anonymous: bool,
    /// What this caller may do on this server: `read`, `write` (not in read-only mode),
    /// `admin`, `pod-logs`.
    pub may: Vec<String>,
}
