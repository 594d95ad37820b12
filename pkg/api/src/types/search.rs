//! A search's page of objects.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchItem {
    pub cluster: String,
    /// The object as stored (or its custom columns).
    #[schema(value_type = Object)]
    pub object: Value,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub sync_at: OffsetDateTime,
    pub deleted: bool,
    /// The object's audit findings (`rule`, `severity`, `title`, `message`,
    /// `remediation`); empty when clean.
    #[schema(value_type = Vec<Object>)]
    pub issues: Vec<karpor_audit::Finding>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchPage {
    pub items: Vec<SearchItem>,
    /// What was searched: the SQL (with the keyword's condition, as Karpor shows it), the
    /// DSL text, or the keyword.
    pub sql_query: String,
    pub total: u64,
    /// `eq`: `total` counts every match; `gte`: counting stopped at 10,000 and `total` is a
    /// lower bound (as Elasticsearch says it). Pages are exact either way.
    #[serde(default)]
    pub total_relation: TotalRelation,
    pub current_page: u64,
    pub page_size: u64,
}

/// Whether a total is every match or a lower bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TotalRelation {
    #[default]
    Eq,
    Gte,
}

impl TotalRelation {
    pub fn of(exact: bool) -> TotalRelation {
        if exact {
            TotalRelation::Eq
        } else {
            TotalRelation::Gte
        }
    }
}
