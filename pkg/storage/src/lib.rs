//! Resource storage: where the syncer writes resource documents and search reads them.
//! Embedded SQLite (FTS5 + JSON1) by default, Elasticsearch or OpenSearch for scale;
//! chosen by config in [`connect`]. Both answer the same queries with the same documents
//! in the same order (the conformance suite holds them to it).

mod config;
mod digest;
mod document;
mod elasticsearch;
mod error;
mod health;
mod history;
mod metered;
mod sqlite;
mod window;

use std::sync::Arc;

use async_trait::async_trait;
use karpor_audit::SeverityCounts;
use karpor_search::{Field, Query};
use time::OffsetDateTime;

pub use config::{ElasticConfig, RefreshPolicy, StorageConfig};
pub use digest::VersionDigest;
pub use document::{document_id, HistoryNote, ResourceDocument};
pub use error::StorageError;
pub use health::{reason_of, StorageCheck, STORAGE_CHECK};
pub use history::{
    Change, ChangeCounts, ChangePage, ChangeQuery, HistoryCaps, HistorySize, HistoryStorage,
    ObjectAt, ObjectName, Rebuilt, Revision,
};
pub use metered::metered;
pub use window::{capped_total, total, window, Window};

/// Writes and reads of documents by id.
#[async_trait]
pub trait ResourceStorage: Send + Sync + 'static {
    /// The backend's config name (`sqlite`, `elasticsearch`).
    fn backend(&self) -> &'static str;

    /// A cheap query that fails when the backend cannot serve.
    async fn ping(&self) -> Result<(), StorageError>;

    /// Inserts or replaces each document by id. `Ok` only once every one is stored.
    /// Fenced: a document whose resourceVersion is older than the stored one's is skipped
    /// (the same version is written again: relists rewrite documents to re-audit them),
    /// so a syncer that comes back after losing its cluster never writes over newer data.
    /// A resourceVersion that is not a number is written unconditionally (see
    /// `fence_version`).
    async fn upsert(&self, documents: &[ResourceDocument]) -> Result<(), StorageError>;

    /// Removes a document; `false` when there was none, or when `resource_version` (the
    /// deleted object's last) is older than the stored one's. `None` removes it whatever
    /// its version. With `history`, its last state is kept as a deletion revision.
    async fn delete(
        &self,
        cluster: &str,
        uid: &str,
        resource_version: Option<&str>,
        history: Option<&HistoryNote>,
    ) -> Result<bool, StorageError>;

    /// Marks a document deleted (kept for a rule's keep-after-delete); `false` when there
    /// was none, or it is newer than `resource_version`. The same for every backend: read,
    /// mark, write back through the fenced `upsert`. The kept document takes the deleted
    /// object's resourceVersion (the deletion's revision), so a stale write of the live
    /// object cannot bring it back.
    async fn soft_delete(
        &self,
        cluster: &str,
        uid: &str,
        at: OffsetDateTime,
        resource_version: Option<&str>,
        history: Option<&HistoryNote>,
    ) -> Result<bool, StorageError> {
        let Some(mut document) = self.get(cluster, uid).await? else {
            return Ok(false);
        };
        if let Some(version) = resource_version {
            if document::fenced(&document.resource_version, version) {
                return Ok(false);
            }
            document.resource_version = version.to_owned();
        }
        document.deleted = true;
        document.deletion_timestamp.get_or_insert(at);
        document.sync_at = at;
        document.history = history.cloned();
        self.upsert(&[document]).await?;
        Ok(true)
    }

    async fn get(&self, cluster: &str, uid: &str)
        -> Result<Option<ResourceDocument>, StorageError>;

    /// Documents not marked deleted, of one cluster or all.
    async fn count(&self, cluster: Option<&str>) -> Result<u64, StorageError>;

    /// Removes every document of a cluster and its history (it was deregistered).
    async fn delete_cluster(&self, cluster: &str) -> Result<u64, StorageError>;

    /// After a completed relist of one type in one cluster (in one namespace, when the
    /// list was of one): removes that type's documents the relist did not write (synced
    /// before it began). No cap. With `history`, each keeps its last state as a deletion
    /// revision (seen at the relist: `history.late`).
    async fn purge_unseen(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        synced_before: OffsetDateTime,
        history: Option<&HistoryNote>,
    ) -> Result<u64, StorageError>;

    /// The digest of one type's documents not marked deleted in `cluster` (in
    /// `namespace`, when given): the scope of [`ResourceStorage::purge_unseen`].
    async fn versions(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<VersionDigest, StorageError>;
}

/// One page of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    pub items: Vec<ResourceDocument>,
    /// Matches in all, within the query's OFFSET and LIMIT.
    pub total: u64,
    /// `false`: `total` is a lower bound (matches were counted only up to a cap; the
    /// page itself is exact).
    pub exact: bool,
}

/// A term and how many documents have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub key: String,
    pub count: u64,
}

/// What a scope's audit comes to, summed over the documents a query selects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditTotals {
    pub resources: u64,
    /// The sum of their scores (a clean document, or one stored before auditing, 100).
    pub score_sum: f64,
    /// Their findings by severity.
    pub findings: SeverityCounts,
}

impl AuditTotals {
    /// The scope's score: the mean of its documents' (100 with none), Karpor's formula.
    pub fn score(&self) -> f64 {
        if self.resources == 0 {
            karpor_audit::PERFECT_SCORE
        } else {
            self.score_sum / self.resources as f64
        }
    }
}

/// Queries over the documents.
#[async_trait]
pub trait SearchStorage: Send + Sync + 'static {
    /// Rows `from..from + size` of the query's matches (inside its OFFSET and LIMIT), in
    /// its order and then by id, with every match counted.
    async fn search(
        &self,
        query: &Query,
        from: u64,
        size: u64,
    ) -> Result<SearchResult, StorageError> {
        self.search_counted(query, from, size, None).await
    }

    /// As [`SearchStorage::search`], with matches counted only up to `count_up_to` when
    /// given: past it the total is that many and not [`SearchResult::exact`]
    /// (Elasticsearch's `track_total_hits`). The page is the same either way.
    async fn search_counted(
        &self,
        query: &Query,
        from: u64,
        size: u64,
        count_up_to: Option<u64>,
    ) -> Result<SearchResult, StorageError>;

    /// Documents, score sum and findings by severity of the query's matches (its ORDER,
    /// LIMIT and OFFSET ignored).
    async fn audit_totals(&self, query: &Query) -> Result<AuditTotals, StorageError>;

    /// The `size` most frequent values of `field` among the matches of `filter`, most
    /// frequent first, ties by value (see [`aggregatable`]). For `issue` and `severity`,
    /// each document counts once per rule or severity it has; for `ref`, once per owner
    /// kind ([`COUNTED_REFS`]).
    async fn terms(
        &self,
        field: &Field,
        query: &Query,
        size: usize,
    ) -> Result<Vec<Bucket>, StorageError>;
}

/// A backend: all three traits.
pub trait Storage: ResourceStorage + SearchStorage + HistoryStorage {}

impl<T: ResourceStorage + SearchStorage + HistoryStorage> Storage for T {}

/// Fields `terms` can count by.
pub fn aggregatable(field: &Field) -> bool {
    field.groupable() || *field == Field::Ref
}

/// What `terms` of `ref` counts: owner kinds (`owner-kind:GROUP/KIND`) only, the keys a
/// graph of kinds needs; the others (one an owner or a name) are not worth counting.
pub const COUNTED_REFS: &str = "owner-kind:";

/// Why a field cannot be counted by, for both backends.
pub(crate) fn not_aggregatable(field: &Field) -> StorageError {
    StorageError::Invalid(format!(
        "cannot count by {}: use cluster, apiVersion, kind, namespace, name, labels.KEY, annotations.KEY, issue or severity",
        field.column()
    ))
}

/// Opens the configured backend. Elasticsearch is reached lazily (its index is created on
/// first use), so a dead cluster at start is a failing check; a local SQLite file that
/// cannot be created is an error.
pub async fn connect(config: &StorageConfig) -> Result<Arc<dyn Storage>, StorageError> {
    Ok(match config {
        StorageConfig::Sqlite { path } => Arc::new(sqlite::SqliteStorage::open(path).await?),
        StorageConfig::Elasticsearch(es) => Arc::new(elasticsearch::ElasticStorage::new(es)?),
    })
}
