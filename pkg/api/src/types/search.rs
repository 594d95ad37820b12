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

/// A search answered as rows and columns (`select name, namespace from resources ...`,
/// `select namespace, count(*) ... group by namespace`, `select count(*) ...`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchRows {
    /// The select list's columns, as written.
    pub columns: Vec<String>,
    /// A row a document (columns), a value (groups, most documents first) or the one
    /// count, its values in the columns' order: text, a number, true or false, an RFC 3339
    /// time, a list (a document's findings), or null where the document has none.
    #[schema(value_type = Vec<Vec<Object>>)]
    pub rows: Vec<Vec<Value>>,
    /// Rows there are: matching documents for columns (a lower bound past 10,000, with
    /// `totalRelation: gte`), the groups answered for groups, 1 for a count.
    pub total: u64,
    #[serde(default)]
    pub total_relation: TotalRelation,
    /// What was searched.
    pub sql_query: String,
}
