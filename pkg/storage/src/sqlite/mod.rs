//! The embedded default: documents in their own SQLite file beside the metadata database
//! (resyncing storage never touches the records of clusters and rules), JSON1 for labels
//! and annotations, FTS5 for full text, indexes for the common filters.

mod counters;
mod equalities;
mod facets;
mod history;
mod places;
mod probe;
mod translate;
mod trigrams;

use std::path::Path;

use async_trait::async_trait;
use karpor_search::{Field, Query};
use sqlx::sqlite::{SqliteArguments, SqlitePool};
use sqlx::{Arguments, AssertSqlSafe, Row};
use time::OffsetDateTime;

use crate::document::{document_id, fence_version, millis, HistoryNote, ResourceDocument};
use crate::history::revise;
use crate::window::{capped_total, total, window};
use crate::{
    aggregatable, AuditTotals, Bucket, ResourceStorage, SearchResult, SearchStorage, StorageError,
    VersionDigest,
};
use translate::{
    filter, has_keyword_conjunct, keywords, order, page_scope, sort_column, Param, ScopeUse, Sql,
};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

pub(crate) struct SqliteStorage {
    /// Reads: several connections.
    pool: SqlitePool,
    /// Writes: one connection (SQLite has one writer at a time anyway).
    writer: SqlitePool,
    /// Whether full text may be narrowed by place yet (places.rs).
    placed: places::Placed,
}

fn from_sqlx(e: sqlx::Error) -> StorageError {
    match e {
        sqlx::Error::PoolTimedOut => StorageError::Timeout,
        other => StorageError::Unavailable(other.to_string()),
    }
}

fn arguments(params: Vec<Param>) -> Result<SqliteArguments, StorageError> {
    let mut args = SqliteArguments::default();
    for p in params {
        let added = match p {
            Param::Text(s) => args.add(s),
            Param::Int(i) => args.add(i),
            Param::Null => args.add(None::<i64>),
        };
        added.map_err(|e| StorageError::Invalid(e.to_string()))?;
    }
    Ok(args)
}

/// A document's findings as `resource_issues` pairs: each rule once, with its severity.
fn issue_pairs(d: &ResourceDocument) -> serde_json::Value {
    let pairs: std::collections::BTreeMap<&str, &str> = d
        .issues
        .iter()
        .map(|f| (f.rule.as_str(), f.severity.as_str()))
        .collect();
    serde_json::json!(pairs)
}

/// The first text after every text that starts with `prefix`.
fn prefix_end(prefix: &str) -> String {
    let mut end = prefix.to_owned();
    if let Some(last) = end.pop() {
        end.push(char::from_u32(last as u32 + 1).unwrap_or(char::MAX));
    }
    end
}

/// A document's reference keys, once each.
fn ref_keys(d: &ResourceDocument) -> serde_json::Value {
    let keys: std::collections::BTreeSet<&str> = d.refs.iter().map(String::as_str).collect();
    serde_json::json!(keys)
}

/// Rows of a grouping statement (`k`, the value; `c`, its count) as buckets.
fn buckets(rows: &[sqlx::sqlite::SqliteRow]) -> Result<Vec<Bucket>, StorageError> {
    rows.iter()
        .map(|row| {
            Ok(Bucket {
                key: row.try_get("k").map_err(from_sqlx)?,
                count: row.try_get::<i64, _>("c").map_err(from_sqlx)? as u64,
            })
        })
        .collect()
}

fn decode(doc: &str) -> Result<ResourceDocument, StorageError> {
    serde_json::from_str(doc).map_err(|e| StorageError::Corrupt(e.to_string()))
}

/// The reading connections: several.
async fn open_pool(path: &Path) -> Result<SqlitePool, String> {
    open_connections(path, 4).await
}

/// The writing connection: one (SQLite has one writer at a time anyway).
async fn open_writer(path: &Path) -> Result<SqlitePool, String> {
    open_connections(path, 1).await
}

/// Opens the file as `karpor_core::sqlite::open_pool` does, with sorts kept in memory and
/// each connection's own cache small: the syncer shares this process and its memory
/// budget is per synced object. No connection maps the file: a map counts each page it
/// touches as the process's own, and four readers' maps each came to hold most of the
/// file (a peak of 3,280 B a synced object at 100,000); through each connection's own
/// small cache the same queries stay under 50 ms at 1,000,000 documents
/// (docs/benchmarks.md).
async fn open_connections(path: &Path, connections: u32) -> Result<SqlitePool, String> {
    karpor_core::sqlite::open_pool_tuned(path, connections, |options| {
        options
            .pragma("mmap_size", "0")
            .pragma("cache_size", "-4096")
            .pragma("temp_store", "memory")
    })
    .await
}

impl SqliteStorage {
    pub(crate) async fn open(path: &Path) -> Result<Self, StorageError> {
        let writer = open_writer(path)
            .await
            .map_err(StorageError::Misconfigured)?;
        MIGRATIONS.run(&writer).await.map_err(|e| {
            StorageError::Misconfigured(format!("migrating {}: {e}", path.display()))
        })?;
        let pool = open_pool(path).await.map_err(StorageError::Misconfigured)?;
        let placed = places::Placed::start(&writer).await?;
        Ok(SqliteStorage {
            pool,
            writer,
            placed,
        })
    }

    /// A statement's filter, built as `base` says, narrowing full text by place once every
    /// document's full text holds its places.
    fn sql(&self, mut base: Sql) -> Sql {
        base.text_placed = self.placed.all();
        base
    }

    /// Deletes the matching rows, their pairs and their full text; returns how many.
    /// `condition` is this module's own SQL text with `?` for every value in `params`.
    /// With `history`, each one not already marked deleted keeps its last state as a
    /// deletion revision (of `version`, else its own).
    async fn delete_where(
        &self,
        condition: &str,
        params: Vec<Param>,
        history: Option<(&HistoryNote, Option<&str>)>,
    ) -> Result<u64, StorageError> {
        let mut tx = self.writer.begin().await.map_err(from_sqlx)?;
        if let Some((note, version)) = history {
            let mut all = vec![
                version.map_or(Param::Null, |v| Param::Text(v.to_owned())),
                version.map_or(Param::Null, |v| {
                    fence_version(v).map_or(Param::Null, Param::Int)
                }),
                Param::Int(millis(OffsetDateTime::now_utc())),
                Param::Int(i64::from(note.late)),
                Param::Text(serde_json::to_string(&note.managers).unwrap_or_default()),
                Param::Int(millis(note.keep_until)),
            ];
            all.extend(params.iter().cloned());
            sqlx::query_with(
                AssertSqlSafe(format!(
                    "INSERT INTO revisions (cluster, uid, resource_version, version, \
                     api_version, kind, kind_lower, namespace, name, change, seen_at, late, \
                     managers, back, state, bytes, keep_until) \
                     SELECT r.cluster, r.uid, coalesce(?, r.resource_version), \
                     coalesce(?, r.version), r.api_version, r.kind, r.kind_lower, \
                     r.namespace, r.name, 'deleted', ?, ?, ?, NULL, d.body -> '$.object', \
                     length(d.body -> '$.object'), ? \
                     FROM resources r JOIN resource_docs d ON d.doc = r.rowid \
                     WHERE r.deleted = 0 AND {condition} {}",
                    history::WRITTEN_ONCE
                )),
                arguments(all)?,
            )
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
        }
        let unplaced = (!self.placed.all()).then_some(("resources_fts_unplaced", "doc"));
        for (table, column) in [
            ("resources_fts", "rowid"),
            ("resources_keywords", "rowid"),
            ("resource_docs", "doc"),
            ("resource_labels", "doc"),
            ("resource_annotations", "doc"),
            ("resource_issues", "doc"),
            ("resource_refs", "doc"),
        ]
        .into_iter()
        .chain(unplaced)
        {
            sqlx::query_with(
                AssertSqlSafe(format!(
                    "DELETE FROM {table} WHERE {column} IN \
                     (SELECT rowid FROM resources r WHERE {condition})"
                )),
                arguments(params.clone())?,
            )
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
        }
        let deleted = sqlx::query_with(
            AssertSqlSafe(format!("DELETE FROM resources AS r WHERE {condition}")),
            arguments(params)?,
        )
        .execute(&mut *tx)
        .await
        .map_err(from_sqlx)?;
        tx.commit().await.map_err(from_sqlx)?;
        Ok(deleted.rows_affected())
    }
}

#[async_trait]
impl ResourceStorage for SqliteStorage {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<(), StorageError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(from_sqlx)
    }

    async fn upsert(&self, documents: &[ResourceDocument]) -> Result<(), StorageError> {
        // The write lock first: the history read below would otherwise start a read
        // transaction that another writer's commit makes impossible to upgrade (busy).
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(from_sqlx)?;
        // What history compares each write with: the stored document, then the batch's
        // own earlier version of it.
        let mut known = history::stored(&mut tx, documents).await?;
        let mut revisions = Vec::new();
        // The last version of each document in the batch, by rowid: the pair and full
        // text tables are then written for the whole batch in a few statements over JSON
        // arrays (json_each) instead of a few statements a document.
        let mut written = std::collections::BTreeMap::new();
        for d in documents {
            let doc = serde_json::to_string(d).map_err(|e| StorageError::Corrupt(e.to_string()))?;
            let labels = serde_json::to_string(&d.labels).unwrap_or_default();
            let annotations = serde_json::to_string(&d.annotations).unwrap_or_default();
            let counts = d.severity_counts();
            // Fenced: an older version than the stored one updates nothing and returns no
            // row; a NULL on either side (not a number) writes as before fencing.
            let row = sqlx::query(
                "INSERT INTO resources (id, cluster, api_version, kind, kind_lower, namespace, name, \
                 uid, resource_version, creation_ts, deletion_ts, sync_at, deleted, keywords, \
                 score, issues_low, issues_medium, issues_high, version) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (id) DO UPDATE SET cluster = excluded.cluster, \
                 api_version = excluded.api_version, kind = excluded.kind, \
                 kind_lower = excluded.kind_lower, namespace = excluded.namespace, \
                 name = excluded.name, uid = excluded.uid, \
                 resource_version = excluded.resource_version, \
                 creation_ts = excluded.creation_ts, deletion_ts = excluded.deletion_ts, \
                 sync_at = excluded.sync_at, deleted = excluded.deleted, \
                 keywords = excluded.keywords, score = excluded.score, \
                 issues_low = excluded.issues_low, issues_medium = excluded.issues_medium, \
                 issues_high = excluded.issues_high, version = excluded.version \
                 WHERE excluded.version IS NULL OR resources.version IS NULL \
                 OR excluded.version >= resources.version \
                 RETURNING rowid",
            )
            .bind(d.id())
            .bind(&d.cluster)
            .bind(&d.api_version)
            .bind(&d.kind)
            .bind(d.kind.to_lowercase())
            .bind(&d.namespace)
            .bind(&d.name)
            .bind(&d.uid)
            .bind(&d.resource_version)
            .bind(d.creation_timestamp.map(millis))
            .bind(d.deletion_timestamp.map(millis))
            .bind(millis(d.sync_at))
            .bind(d.deleted)
            .bind(keywords(&d.name, &d.namespace, &d.labels))
            .bind(d.score())
            .bind(counts.low as i64)
            .bind(counts.medium as i64)
            .bind(counts.high as i64)
            .bind(fence_version(&d.resource_version))
            .fetch_optional(&mut *tx)
            .await
            .map_err(from_sqlx)?;
            // Skipped: its document, pairs and text stay those of the newer version.
            let Some(row) = row else {
                continue;
            };
            let rowid: i64 = row.try_get(0).map_err(from_sqlx)?;
            if d.history.is_some() {
                let id = d.id();
                revisions.extend(revise(known.get(&id), d));
                known.insert(id, d.clone());
            }
            sqlx::query(
                "INSERT OR REPLACE INTO resource_docs (doc, labels, annotations, body) \
                 VALUES (?, ?, ?, ?)",
            )
            .bind(rowid)
            .bind(labels)
            .bind(annotations)
            .bind(doc)
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
            written.insert(rowid, d);
        }
        let rowids = serde_json::to_string(&written.keys().collect::<Vec<_>>())
            .map_err(|e| StorageError::Corrupt(e.to_string()))?;
        let rows = |row: &dyn Fn(&ResourceDocument) -> serde_json::Value| {
            let all: Vec<serde_json::Value> = written
                .iter()
                .map(|(rowid, d)| serde_json::json!([rowid, row(d)]))
                .collect();
            serde_json::Value::Array(all).to_string()
        };
        for (table, pairs) in [
            (
                "resource_labels",
                rows(&|d| serde_json::json!([d.labels, d.namespace, d.cluster])),
            ),
            (
                "resource_annotations",
                rows(&|d| serde_json::json!(d.annotations)),
            ),
            ("resource_issues", rows(&|d| issue_pairs(d))),
            ("resource_refs", rows(&|d| ref_keys(d))),
        ] {
            // The table names are the constants above.
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE doc IN (SELECT value FROM json_each(?))"
            )))
            .bind(&rowids)
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
            // Pairs come as JSON objects; the reference keys as a JSON array; labels as
            // their object, the namespace and the cluster (their rows hold both).
            let insert = if table == "resource_refs" {
                "INSERT INTO resource_refs (doc, key) \
                 SELECT d.value ->> 0, p.value \
                 FROM json_each(?) d, json_each(d.value -> 1) p"
                    .to_owned()
            } else if table == "resource_labels" {
                "INSERT INTO resource_labels (doc, key, value, namespace, cluster) \
                 SELECT d.value ->> 0, p.key, p.value, d.value ->> '$[1][1]', \
                 d.value ->> '$[1][2]' \
                 FROM json_each(?) d, json_each(d.value -> '$[1][0]') p"
                    .to_owned()
            } else {
                format!(
                    "INSERT INTO {table} (doc, key, value) \
                     SELECT d.value ->> 0, p.key, p.value \
                     FROM json_each(?) d, json_each(d.value -> 1) p"
                )
            };
            sqlx::query(AssertSqlSafe(insert))
                .bind(pairs)
                .execute(&mut *tx)
                .await
                .map_err(from_sqlx)?;
        }
        for (table, column, text) in [
            (
                "resources_fts",
                "content",
                rows(&|d| serde_json::json!(places::full_text(d))),
            ),
            (
                "resources_keywords",
                "keywords",
                rows(&|d| serde_json::json!(keywords(&d.name, &d.namespace, &d.labels))),
            ),
        ] {
            // The table and column names are the constants above.
            sqlx::query(AssertSqlSafe(format!(
                "INSERT OR REPLACE INTO {table} (rowid, {column}) \
                 SELECT value ->> 0, value ->> 1 FROM json_each(?)"
            )))
            .bind(text)
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
        }
        if !self.placed.all() {
            // Written with their places now: off the list of those without.
            sqlx::query(
                "DELETE FROM resources_fts_unplaced WHERE doc IN (SELECT value FROM json_each(?))",
            )
            .bind(&rowids)
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
        }
        history::insert(&mut tx, &revisions).await?;
        tx.commit().await.map_err(from_sqlx)
    }

    async fn delete(
        &self,
        cluster: &str,
        uid: &str,
        resource_version: Option<&str>,
        history: Option<&HistoryNote>,
    ) -> Result<bool, StorageError> {
        let id = Param::Text(document_id(cluster, uid));
        let history = history.map(|note| (note, resource_version));
        let Some(version) = resource_version.and_then(fence_version) else {
            return Ok(self.delete_where("r.id = ?", vec![id], history).await? > 0);
        };
        // Fenced as upserts are: a newer stored version stays.
        let condition = "r.id = ? AND (r.version IS NULL OR r.version <= ?)";
        Ok(self
            .delete_where(condition, vec![id, Param::Int(version)], history)
            .await?
            > 0)
    }

    async fn get(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<Option<ResourceDocument>, StorageError> {
        let row = sqlx::query(
            "SELECT d.body FROM resources r JOIN resource_docs d ON d.doc = r.rowid WHERE r.id = ?",
        )
        .bind(document_id(cluster, uid))
        .fetch_optional(&self.pool)
        .await
        .map_err(from_sqlx)?;
        row.map(|r| decode(&r.try_get::<String, _>(0).map_err(from_sqlx)?))
            .transpose()
    }

    async fn count(&self, cluster: Option<&str>) -> Result<u64, StorageError> {
        counters::documents(&self.pool, cluster).await
    }

    async fn delete_cluster(&self, cluster: &str) -> Result<u64, StorageError> {
        sqlx::query("DELETE FROM revisions WHERE cluster = ?")
            .bind(cluster)
            .execute(&self.writer)
            .await
            .map_err(from_sqlx)?;
        self.delete_where("r.cluster = ?", vec![Param::Text(cluster.to_owned())], None)
            .await
    }

    async fn purge_unseen(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        synced_before: OffsetDateTime,
        history: Option<&HistoryNote>,
    ) -> Result<u64, StorageError> {
        let mut params = vec![
            Param::Text(cluster.to_owned()),
            Param::Text(api_version.to_owned()),
            Param::Text(kind.to_owned()),
            Param::Int(millis(synced_before)),
        ];
        let mut condition =
            "r.cluster = ? AND r.api_version = ? AND r.kind = ? AND r.sync_at < ?".to_owned();
        if let Some(namespace) = namespace {
            condition.push_str(" AND r.namespace = ?");
            params.push(Param::Text(namespace.to_owned()));
        }
        self.delete_where(&condition, params, history.map(|note| (note, None)))
            .await
    }

    async fn versions(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<VersionDigest, StorageError> {
        use futures::TryStreamExt;
        const OF_TYPE: &str = "SELECT uid, resource_version FROM resources \
            WHERE cluster = ? AND api_version = ? AND kind = ? AND deleted = 0";
        const IN_NAMESPACE: &str = "SELECT uid, resource_version FROM resources \
            WHERE cluster = ? AND api_version = ? AND kind = ? AND deleted = 0 AND namespace = ?";
        let query = sqlx::query(if namespace.is_some() {
            IN_NAMESPACE
        } else {
            OF_TYPE
        })
        .bind(cluster)
        .bind(api_version)
        .bind(kind);
        let query = match namespace {
            Some(namespace) => query.bind(namespace),
            None => query,
        };
        // Streamed: a type's rows are never all in memory at once.
        let mut rows = query.fetch(&self.pool);
        let mut digest = VersionDigest::default();
        while let Some(row) = rows.try_next().await.map_err(from_sqlx)? {
            let uid: String = row.try_get(0).map_err(from_sqlx)?;
            let version: String = row.try_get(1).map_err(from_sqlx)?;
            digest.add(&uid, &version);
        }
        Ok(digest)
    }
}

#[async_trait]
impl SearchStorage for SqliteStorage {
    async fn search_counted(
        &self,
        query: &Query,
        from: u64,
        size: u64,
        count_up_to: Option<u64>,
    ) -> Result<SearchResult, StorageError> {
        let rows = window(query, from, size);
        // A count alone (`select count(*)`), of a scope the counters hold.
        if rows.size == 0 && query.limit.is_none() && query.offset.is_none() {
            if let Some(scope) = facets::faceted(&query.filter) {
                let count = facets::count(&self.pool, &scope).await?;
                let (total, exact) = match count_up_to {
                    Some(cap) => capped_total(query, count.min(cap.saturating_add(1)), cap),
                    None => (total(query, count), true),
                };
                return Ok(SearchResult {
                    items: Vec::new(),
                    total,
                    exact,
                });
            }
        }
        // One read transaction: the page, its documents and the count see the same rows.
        let mut tx = self.pool.begin().await.map_err(from_sqlx)?;
        let chosen_trigrams = trigrams::chosen(&mut tx, &query.filter).await?;
        let mut where_ = self.sql(Sql::default());
        where_.chosen_trigrams = chosen_trigrams.clone();
        filter(&query.filter, &mut where_, page_scope(&query.filter));
        // A keyword's page is sorted from the set of all its matches: the statement then
        // counts them too (`count(*) OVER ()`), where a second statement built the set
        // again (one statement of 39 ms against 51 ms and 44 ms for `app-123` at
        // 1,000,000 documents).
        let counted_with_page = has_keyword_conjunct(&query.filter);
        let mut counted_by_page = None;
        // The page as rowids first: its sort or index walk reads only the narrow table.
        // `filter` and `order` write only karpor's own SQL, every value bound (translate.rs).
        let probed = match probe::full_text_conjunct(&query.filter) {
            Some((words, rest)) if probe::worth_probing(query, &rows) => {
                probe::page(&mut tx, &words, &rest, &rows).await?
            }
            _ => None,
        };
        // A keyword's page walked in id order, when its count may stop at a cap (an exact
        // count reads every match anyway, and the page's own statement counts them).
        let probed = match probed {
            None if counted_with_page
                && count_up_to.is_some()
                && probe::worth_probing(query, &rows) =>
            {
                probe::keyword_page(&mut tx, &where_, &rows).await?
            }
            probed => probed,
        };
        let page = match probed {
            Some(page) => page,
            None => {
                let mut params = where_.params;
                params.push(Param::Int(i64::try_from(rows.size).unwrap_or(i64::MAX)));
                params.push(Param::Int(i64::try_from(rows.from).unwrap_or(i64::MAX)));
                let count = if counted_with_page {
                    "count(*) OVER ()"
                } else {
                    "NULL"
                };
                let found: Vec<(i64, Option<i64>)> = sqlx::query_as_with(
                    AssertSqlSafe(format!(
                        "SELECT r.rowid, {count} FROM resources r WHERE {} ORDER BY {} \
                         LIMIT ? OFFSET ?",
                        where_.text,
                        order(&query.order_by)
                    )),
                    arguments(params)?,
                )
                .fetch_all(&mut *tx)
                .await
                .map_err(from_sqlx)?;
                counted_by_page = found.first().and_then(|(_, count)| *count);
                found.into_iter().map(|(rowid, _)| rowid).collect()
            }
        };
        let mut items = Vec::with_capacity(page.len());
        for rowid in &page {
            let body: String = sqlx::query("SELECT body FROM resource_docs WHERE doc = ?")
                .bind(rowid)
                .fetch_one(&mut *tx)
                .await
                .map_err(from_sqlx)?
                .try_get(0)
                .map_err(from_sqlx)?;
            items.push(decode(&body)?);
        }
        // A short page that starts inside the matches ends them: no count needed.
        let short = (page.len() as u64) < rows.size && (!page.is_empty() || rows.from == 0);
        let count = if short {
            rows.from + page.len() as u64
        } else if let Some(count) = counted_by_page {
            count.max(0) as u64
        } else {
            let (rows_counted, mut params) =
                match probe::full_text_first(&query.filter, count_up_to) {
                    Some(sql) => (sql.text, sql.params),
                    None => {
                        let mut counted = self.sql(match count_up_to {
                            Some(_) => Sql::capped_count(),
                            None => Sql::whole(),
                        });
                        counted.chosen_trigrams = chosen_trigrams;
                        filter(&query.filter, &mut counted, ScopeUse::Find);
                        (
                            format!("resources r WHERE {}", counted.text),
                            counted.params,
                        )
                    }
                };
            // Up to a cap, the count stops at the first match past it.
            let text = match count_up_to {
                Some(cap) => {
                    params.push(Param::Int(
                        i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX),
                    ));
                    format!("SELECT count(*) FROM (SELECT 1 FROM {rows_counted} LIMIT ?)")
                }
                None => format!("SELECT count(*) FROM {rows_counted}"),
            };
            sqlx::query_with(AssertSqlSafe(text), arguments(params)?)
                .fetch_one(&mut *tx)
                .await
                .map_err(from_sqlx)?
                .try_get::<i64, _>(0)
                .map_err(from_sqlx)? as u64
        };
        tx.commit().await.map_err(from_sqlx)?;
        // Past the cap even a short page's own count is told as the cap, as Elasticsearch
        // tells it: both backends answer a page the same.
        let (total, exact) = match count_up_to {
            Some(cap) => capped_total(query, count, cap),
            None => (total(query, count), true),
        };
        Ok(SearchResult {
            items,
            total,
            exact,
        })
    }

    async fn audit_totals(&self, query: &Query) -> Result<AuditTotals, StorageError> {
        if let Some(scope) = counters::counted(&query.filter) {
            return counters::totals(&self.pool, &scope).await;
        }
        let mut sql = self.sql(Sql::whole());
        filter(&query.filter, &mut sql, ScopeUse::Find);
        // A filter of karpor's own SQL with every value bound; scores summed as the
        // counters sum them.
        let statement = format!(
            "SELECT count(*) AS n, \
             coalesce(sum(CAST(round(r.score * {}) AS INTEGER)), 0) AS score, \
             total(r.issues_low) AS low, total(r.issues_medium) AS medium, \
             total(r.issues_high) AS high FROM resources r WHERE {}",
            counters::SCORE_SCALE,
            sql.text
        );
        let row = sqlx::query_with(AssertSqlSafe(statement), arguments(sql.params)?)
            .fetch_one(&self.pool)
            .await
            .map_err(from_sqlx)?;
        let count = |name: &str| -> Result<u64, StorageError> {
            Ok(row.try_get::<f64, _>(name).map_err(from_sqlx)? as u64)
        };
        Ok(AuditTotals {
            resources: row.try_get::<i64, _>("n").map_err(from_sqlx)? as u64,
            score_sum: row.try_get::<i64, _>("score").map_err(from_sqlx)? as f64
                / counters::SCORE_SCALE,
            findings: karpor_audit::SeverityCounts {
                low: count("low")?,
                medium: count("medium")?,
                high: count("high")?,
            },
        })
    }

    async fn terms(
        &self,
        field: &Field,
        query: &Query,
        size: usize,
    ) -> Result<Vec<Bucket>, StorageError> {
        if !aggregatable(field) {
            return Err(crate::not_aggregatable(field));
        }
        if *field == Field::Issue {
            if let Some(scope) = counters::counted(&query.filter) {
                if let Some(rules) = counters::rules(&self.pool, &scope, size).await? {
                    return Ok(rules);
                }
            }
        }
        if let Some(scope) = facets::faceted(&query.filter) {
            if let Some(groups) = facets::groups(&self.pool, field, &scope, size).await? {
                return Ok(groups);
            }
        }
        if let (Field::Label(key), Some(scope)) = (field, facets::labelled(&query.filter)) {
            return facets::label_groups(&self.pool, key, &scope, size).await;
        }
        // Fixed table and column names, and a filter of karpor's own SQL with every
        // value bound (a map's key first: it comes first in the text).
        let mut sql = self.sql(Sql::whole());
        filter(&query.filter, &mut sql, ScopeUse::Find);
        let (statement, mut params) = match field {
            Field::Label(key) | Field::Annotation(key) => {
                let table = if matches!(field, Field::Label(_)) {
                    "resource_labels"
                } else {
                    "resource_annotations"
                };
                let statement = format!(
                    "SELECT p.value AS k, count(*) AS c FROM resources r \
                     JOIN {table} p ON p.doc = r.rowid WHERE p.key = ? AND ({}) \
                     GROUP BY p.value ORDER BY c DESC, k ASC LIMIT ?",
                    sql.text
                );
                let mut params = vec![Param::Text(key.clone())];
                params.extend(sql.params);
                (statement, params)
            }
            Field::Ref => {
                // The bounds of the prefix: an index range of `resource_refs_key`.
                let statement = format!(
                    "SELECT p.key AS k, count(*) AS c FROM resources r \
                     JOIN resource_refs p ON p.doc = r.rowid \
                     WHERE p.key >= ? AND p.key < ? AND ({}) \
                     GROUP BY p.key ORDER BY c DESC, k ASC LIMIT ?",
                    sql.text
                );
                let mut params = vec![
                    Param::Text(crate::COUNTED_REFS.to_owned()),
                    Param::Text(prefix_end(crate::COUNTED_REFS)),
                ];
                params.extend(sql.params);
                (statement, params)
            }
            Field::Issue | Field::Severity => {
                let column = if *field == Field::Issue {
                    "key"
                } else {
                    "value"
                };
                let statement = format!(
                    "SELECT p.{column} AS k, count(*) AS c FROM resources r \
                     JOIN resource_issues p ON p.doc = r.rowid WHERE ({}) \
                     GROUP BY p.{column} ORDER BY c DESC, k ASC LIMIT ?",
                    sql.text
                );
                (statement, sql.params)
            }
            _ => {
                let column = sort_column(field);
                let statement = format!(
                    "SELECT {column} AS k, count(*) AS c FROM resources r WHERE {} \
                     GROUP BY {column} ORDER BY c DESC, k ASC LIMIT ?",
                    sql.text
                );
                (statement, sql.params)
            }
        };
        params.push(Param::Int(i64::try_from(size).unwrap_or(i64::MAX)));
        let rows = sqlx::query_with(AssertSqlSafe(statement), arguments(params)?)
            .fetch_all(&self.pool)
            .await
            .map_err(from_sqlx)?;
        buckets(&rows)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn doc(uid: &str, name: &str, labels: &[(&str, &str)]) -> ResourceDocument {
        let at = OffsetDateTime::UNIX_EPOCH;
        ResourceDocument {
            cluster: "c".to_owned(),
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            namespace: "ns".to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            annotations: BTreeMap::new(),
            owner_references: Vec::new(),
            creation_timestamp: Some(at),
            deletion_timestamp: None,
            resource_version: "1".to_owned(),
            sync_at: at,
            deleted: false,
            object: serde_json::json!({}),
            issues: Vec::new(),
            refs: Vec::new(),
            history: None,
        }
    }

    async fn names(storage: &SqliteStorage, term: &str) -> Vec<String> {
        let query = karpor_search::keyword(term).unwrap();
        let found = storage.search(&query, 0, 10).await.unwrap();
        assert_eq!(found.total as usize, found.items.len());
        found.items.into_iter().map(|d| d.name).collect()
    }

    /// Keyword search takes three paths (trigrams, a short term, a term with a line
    /// break); each must find a substring of the name, the namespace or one label only.
    #[tokio::test]
    async fn keyword_terms_match_within_one_item_only() {
        let dir = tempfile::tempdir().unwrap();
        let storage = SqliteStorage::open(&dir.path().join("r.db")).await.unwrap();
        storage
            .upsert(&[
                doc("1", "web", &[("app", "shop")]),
                doc("2", "api", &[("note", "a\nb"), ("tier", "fe")]),
                doc("3", "xy", &[]),
            ])
            .await
            .unwrap();
        assert_eq!(names(&storage, "app=sh").await, ["web"]);
        assert_eq!(names(&storage, "y").await, ["xy"]);
        assert_eq!(names(&storage, "=f").await, ["api"]);
        assert_eq!(names(&storage, "e=a\nb").await, ["api"]);
        // Adjacent items of one document are not one string.
        assert!(names(&storage, "web\nns").await.is_empty());
        assert!(names(&storage, "ns\nap").await.is_empty());
        assert!(names(&storage, "b\ntier").await.is_empty());
        // Updates and deletes leave nothing behind in the trigram index or the pairs; of
        // two versions in one batch the last is kept.
        storage
            .upsert(&[doc("1", "web", &[("app", "cart")]), doc("1", "web", &[])])
            .await
            .unwrap();
        assert!(names(&storage, "app=sh").await.is_empty());
        assert!(names(&storage, "app=ca").await.is_empty());
        let labelled =
            karpor_search::parse("select * from resources where labels.app = 'shop'").unwrap();
        assert_eq!(storage.search(&labelled, 0, 10).await.unwrap().total, 0);
        assert!(storage.delete("c", "2", None, None).await.unwrap());
        assert!(names(&storage, "=f").await.is_empty());
    }

    /// A database written before fencing gets each row's version from its text when it
    /// is opened, and is fenced from then on.
    #[tokio::test]
    async fn a_database_from_before_fencing_is_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let pool = open_pool(&path).await.unwrap();
        MIGRATIONS.run_to(3, &pool).await.unwrap();
        let newer = ResourceDocument {
            resource_version: "20".to_owned(),
            ..doc("1", "web", &[("gen", "new")])
        };
        let opaque = ResourceDocument {
            resource_version: "abc".to_owned(),
            ..doc("2", "api", &[])
        };
        for (rowid, d) in [(1, &newer), (2, &opaque)] {
            sqlx::query(
                "INSERT INTO resources (rowid, id, cluster, api_version, kind, kind_lower, \
                 namespace, name, uid, resource_version, sync_at, deleted, keywords) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, '')",
            )
            .bind(rowid)
            .bind(d.id())
            .bind(&d.cluster)
            .bind(&d.api_version)
            .bind(&d.kind)
            .bind(d.kind.to_lowercase())
            .bind(&d.namespace)
            .bind(&d.name)
            .bind(&d.uid)
            .bind(&d.resource_version)
            .execute(&pool)
            .await
            .unwrap();
            sqlx::query("INSERT INTO resource_docs VALUES (?, '{}', '{}', ?)")
                .bind(rowid)
                .bind(serde_json::to_string(d).unwrap())
                .execute(&pool)
                .await
                .unwrap();
        }
        pool.close().await;

        let storage = SqliteStorage::open(&path).await.unwrap();
        let versions: Vec<(String, Option<i64>)> =
            sqlx::query_as("SELECT id, version FROM resources ORDER BY id")
                .fetch_all(&storage.pool)
                .await
                .unwrap();
        assert_eq!(
            versions,
            [("c/1".to_owned(), Some(20)), ("c/2".to_owned(), None)]
        );
        let older = ResourceDocument {
            resource_version: "10".to_owned(),
            ..doc("1", "web", &[("gen", "old")])
        };
        let numbered = ResourceDocument {
            resource_version: "5".to_owned(),
            ..doc("2", "api", &[])
        };
        storage.upsert(&[older, numbered.clone()]).await.unwrap();
        assert_eq!(storage.get("c", "1").await.unwrap(), Some(newer));
        assert_eq!(storage.get("c", "2").await.unwrap(), Some(numbered));
    }
}
