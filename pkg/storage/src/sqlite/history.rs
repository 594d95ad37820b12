//! History on SQLite: the `revisions` table (migration 0007), written in the documents'
//! own transactions, so a document and its revision commit together.

use std::collections::HashMap;

use async_trait::async_trait;
use karpor_search::{Expr, Field, Op, Value};
use sqlx::sqlite::SqliteRow;
use sqlx::{AssertSqlSafe, Row, Sqlite, Transaction};
use time::OffsetDateTime;

use super::{arguments, decode, from_sqlx, Param, SqliteStorage};
use crate::document::{fence_version, millis, ResourceDocument};
use crate::history::{
    Change, ChangeCounts, ChangePage, ChangeQuery, HistoryCaps, HistorySize, HistoryStorage,
    ObjectName, Revision,
};
use crate::{Bucket, StorageError};

const COLUMNS: &str = "cluster, uid, resource_version, api_version, kind, namespace, name, \
    change, seen_at, late, managers, back, state, keep_until";

/// The stored documents of those in `documents` that ask for history, by id.
pub(super) async fn stored(
    tx: &mut Transaction<'_, Sqlite>,
    documents: &[ResourceDocument],
) -> Result<HashMap<String, ResourceDocument>, StorageError> {
    let ids = crate::history::compared_ids(documents);
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query(
        "SELECT r.id, d.body FROM resources r JOIN resource_docs d ON d.doc = r.rowid \
         WHERE r.id IN (SELECT value FROM json_each(?))",
    )
    .bind(serde_json::to_string(&ids).map_err(|e| StorageError::Corrupt(e.to_string()))?)
    .fetch_all(&mut **tx)
    .await
    .map_err(from_sqlx)?;
    rows.iter()
        .map(|row| {
            let id: String = row.try_get(0).map_err(from_sqlx)?;
            let body: String = row.try_get(1).map_err(from_sqlx)?;
            Ok((id, decode(&body)?))
        })
        .collect()
}

/// How a revision is written, after its columns: once (a second write of the same version
/// is ignored), and an object is created once and deleted once, a deletion of a newer
/// version replacing an older one (see `0009_history_once.sql`).
pub(super) const WRITTEN_ONCE: &str = "ON CONFLICT (cluster, uid, change) \
     WHERE change IN ('created', 'deleted') DO UPDATE SET \
     resource_version = excluded.resource_version, version = excluded.version, \
     seen_at = excluded.seen_at, late = excluded.late, managers = excluded.managers, \
     state = excluded.state, bytes = excluded.bytes, keep_until = excluded.keep_until \
     WHERE excluded.change = 'deleted' AND excluded.version > revisions.version \
     ON CONFLICT DO NOTHING";

/// Writes each revision once ([`WRITTEN_ONCE`]), all of them in one statement over a JSON
/// array: a statement costs a round trip to SQLite's thread, and a batch of updates would
/// otherwise pay one more per document for its revision.
pub(super) async fn insert(
    tx: &mut Transaction<'_, Sqlite>,
    revisions: &[Revision],
) -> Result<(), StorageError> {
    if revisions.is_empty() {
        return Ok(());
    }
    let rows: Vec<serde_json::Value> = revisions
        .iter()
        .map(|r| {
            let text = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
            let (back, state) = (text(&r.back), text(&r.state));
            let bytes =
                back.as_ref().map_or(0, String::len) + state.as_ref().map_or(0, String::len);
            serde_json::json!([
                r.cluster,
                r.uid,
                r.resource_version,
                fence_version(&r.resource_version),
                r.api_version,
                r.kind,
                r.kind.to_lowercase(),
                r.namespace,
                r.name,
                r.change.as_str(),
                millis(r.seen_at),
                i64::from(r.late),
                serde_json::to_string(&r.managers).unwrap_or_default(),
                back,
                state,
                bytes,
                millis(r.keep_until),
            ])
        })
        .collect();
    // `WHERE true`: SQLite's grammar needs a WHERE before an upsert clause after a SELECT.
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO revisions (cluster, uid, resource_version, version, \
         api_version, kind, kind_lower, namespace, name, change, seen_at, late, managers, \
         back, state, bytes, keep_until) \
         SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, \
         value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9, value ->> 10, \
         value ->> 11, value ->> 12, value ->> 13, value ->> 14, value ->> 15, value ->> 16 \
         FROM json_each(?) WHERE true {WRITTEN_ONCE}"
    )))
    .bind(serde_json::Value::Array(rows).to_string())
    .execute(&mut **tx)
    .await
    .map_err(from_sqlx)?;
    Ok(())
}

fn time_of(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

fn revision(row: &SqliteRow) -> Result<Revision, StorageError> {
    let json = |column: &str| -> Result<Option<serde_json::Value>, StorageError> {
        let text: Option<String> = row.try_get(column).map_err(from_sqlx)?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| StorageError::Corrupt(e.to_string())))
            .transpose()
    };
    let change: String = row.try_get("change").map_err(from_sqlx)?;
    let managers: String = row.try_get("managers").map_err(from_sqlx)?;
    Ok(Revision {
        cluster: row.try_get("cluster").map_err(from_sqlx)?,
        api_version: row.try_get("api_version").map_err(from_sqlx)?,
        kind: row.try_get("kind").map_err(from_sqlx)?,
        namespace: row.try_get("namespace").map_err(from_sqlx)?,
        name: row.try_get("name").map_err(from_sqlx)?,
        uid: row.try_get("uid").map_err(from_sqlx)?,
        resource_version: row.try_get("resource_version").map_err(from_sqlx)?,
        change: Change::parse(&change)
            .ok_or_else(|| StorageError::Corrupt(format!("a change of type {change:?}")))?,
        seen_at: time_of(row.try_get("seen_at").map_err(from_sqlx)?),
        late: row.try_get("late").map_err(from_sqlx)?,
        managers: serde_json::from_str(&managers).unwrap_or_default(),
        back: json("back")?,
        state: json("state")?,
        keep_until: time_of(row.try_get("keep_until").map_err(from_sqlx)?),
    })
}

/// `expr` as a condition on `revisions`, every value bound: the fields a revision has.
fn condition(expr: &Expr, sql: &mut String, params: &mut Vec<Param>) -> Result<(), StorageError> {
    let join =
        |items: &[Expr], with: &str, empty: &str, sql: &mut String, params: &mut Vec<Param>| {
            if items.is_empty() {
                sql.push_str(empty);
                return Ok(());
            }
            sql.push('(');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    sql.push_str(with);
                }
                condition(item, sql, params)?;
            }
            sql.push(')');
            Ok(())
        };
    match expr {
        Expr::All => sql.push('1'),
        Expr::And(items) => join(items, " AND ", "1", sql, params)?,
        Expr::Or(items) => join(items, " OR ", "0", sql, params)?,
        Expr::Not(inner) => {
            sql.push_str("NOT ");
            join(std::slice::from_ref(inner), "", "1", sql, params)?;
        }
        Expr::Scope(inner) => join(std::slice::from_ref(inner), "", "1", sql, params)?,
        Expr::Compare { field, op, value } => {
            let (column, param) = column(field, value)?;
            let op = match op {
                Op::Eq => "=",
                Op::NotEq => "!=",
                Op::Lt => "<",
                Op::LtEq => "<=",
                Op::Gt => ">",
                Op::GtEq => ">=",
            };
            sql.push_str(&format!("{column} {op} ?"));
            params.push(param);
        }
        Expr::In {
            field,
            values,
            negated,
        } => {
            if values.is_empty() {
                sql.push_str(if *negated { "1" } else { "0" });
                return Ok(());
            }
            let mut column_name = "";
            for value in values {
                let (column, param) = column(field, value)?;
                column_name = column;
                params.push(param);
            }
            let marks = vec!["?"; values.len()].join(", ");
            let not = if *negated { "NOT " } else { "" };
            sql.push_str(&format!("{column_name} {not}IN ({marks})"));
        }
        _ => return Err(crate::history::unsupported_filter()),
    }
    Ok(())
}

/// The column a field is on, and its value bound.
fn column(field: &Field, value: &Value) -> Result<(&'static str, Param), StorageError> {
    Ok(match (field, value) {
        (Field::Cluster, Value::Text(t)) => ("cluster", Param::Text(t.clone())),
        (Field::ApiVersion, Value::Text(t)) => ("api_version", Param::Text(t.clone())),
        (Field::Kind, Value::Text(t)) => ("kind_lower", Param::Text(t.to_lowercase())),
        (Field::Namespace, Value::Text(t)) => ("namespace", Param::Text(t.clone())),
        (Field::Name, Value::Text(t)) => ("name", Param::Text(t.clone())),
        (Field::Uid, Value::Text(t)) => ("uid", Param::Text(t.clone())),
        (Field::SyncAt, Value::Time(t)) => ("seen_at", Param::Int(millis(*t))),
        _ => return Err(crate::history::unsupported_filter()),
    })
}

/// The whole condition of a change query, and its values.
fn change_condition(query: &ChangeQuery) -> Result<(String, Vec<Param>), StorageError> {
    let mut sql = String::new();
    let mut params = Vec::new();
    condition(&query.filter, &mut sql, &mut params)?;
    if let Some(since) = query.since {
        sql.push_str(" AND seen_at >= ?");
        params.push(Param::Int(millis(since)));
    }
    if let Some(until) = query.until {
        sql.push_str(" AND seen_at < ?");
        params.push(Param::Int(millis(until)));
    }
    if !query.changes.is_empty() {
        let marks = vec!["?"; query.changes.len()].join(", ");
        sql.push_str(&format!(" AND change IN ({marks})"));
        params.extend(
            query
                .changes
                .iter()
                .map(|c| Param::Text(c.as_str().to_owned())),
        );
    }
    Ok((sql, params))
}

#[async_trait]
impl HistoryStorage for SqliteStorage {
    async fn object_revisions(
        &self,
        object: &ObjectName,
        since: Option<OffsetDateTime>,
        until: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Revision>, StorageError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM revisions WHERE cluster = ? AND namespace = ? AND name = ? \
             AND kind_lower = ? AND (? IS NULL OR seen_at > ?) AND (? IS NULL OR seen_at <= ?) \
             ORDER BY seen_at DESC, version DESC LIMIT ?"
        )))
        .bind(&object.cluster)
        .bind(&object.namespace)
        .bind(&object.name)
        .bind(object.kind.to_lowercase())
        .bind(since.map(millis))
        .bind(since.map(millis))
        .bind(until.map(millis))
        .bind(until.map(millis))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(from_sqlx)?;
        rows.iter().map(revision).collect()
    }

    async fn changes(
        &self,
        query: &ChangeQuery,
        from: u64,
        size: u64,
    ) -> Result<ChangePage, StorageError> {
        let (condition, params) = change_condition(query)?;
        let mut page_params = params.clone();
        page_params.push(Param::Int(i64::try_from(size).unwrap_or(i64::MAX)));
        page_params.push(Param::Int(i64::try_from(from).unwrap_or(i64::MAX)));
        let mut tx = self.pool.begin().await.map_err(from_sqlx)?;
        // The condition is this module's own SQL, every value bound.
        let rows = sqlx::query_with(
            AssertSqlSafe(format!(
                "SELECT cluster, uid, resource_version, api_version, kind, namespace, name, \
                 change, seen_at, late, managers, NULL AS back, NULL AS state, keep_until \
                 FROM revisions WHERE {condition} \
                 ORDER BY seen_at DESC, cluster, uid, version DESC LIMIT ? OFFSET ?"
            )),
            arguments(page_params)?,
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(from_sqlx)?;
        let total: i64 = sqlx::query_with(
            AssertSqlSafe(format!("SELECT count(*) FROM revisions WHERE {condition}")),
            arguments(params)?,
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(from_sqlx)?
        .try_get(0)
        .map_err(from_sqlx)?;
        Ok(ChangePage {
            items: rows.iter().map(revision).collect::<Result<_, _>>()?,
            total: total as u64,
        })
    }

    async fn change_counts(&self, query: &ChangeQuery) -> Result<ChangeCounts, StorageError> {
        let (condition, params) = change_condition(query)?;
        let mut counts = ChangeCounts::default();
        for (column, into) in [
            ("kind", &mut counts.by_kind),
            ("change", &mut counts.by_change),
        ] {
            let rows = sqlx::query_with(
                AssertSqlSafe(format!(
                    "SELECT {column}, count(*) AS n FROM revisions WHERE {condition} \
                     GROUP BY {column} ORDER BY n DESC, {column}"
                )),
                arguments(params.clone())?,
            )
            .fetch_all(&self.pool)
            .await
            .map_err(from_sqlx)?;
            for row in rows {
                into.push(Bucket {
                    key: row.try_get(0).map_err(from_sqlx)?,
                    count: row.try_get::<i64, _>(1).map_err(from_sqlx)? as u64,
                });
            }
        }
        Ok(counts)
    }

    async fn expire(&self, now: OffsetDateTime, caps: HistoryCaps) -> Result<u64, StorageError> {
        // In slices, so ingest waits for the write lock a short while at most.
        const SLICE: i64 = 5_000;
        let mut removed = 0;
        loop {
            let done = sqlx::query(
                "DELETE FROM revisions WHERE rowid IN \
                 (SELECT rowid FROM revisions WHERE keep_until < ? LIMIT ?)",
            )
            .bind(millis(now))
            .bind(SLICE)
            .execute(&self.writer)
            .await
            .map_err(from_sqlx)?
            .rows_affected();
            removed += done;
            if done < SLICE as u64 {
                break;
            }
        }
        for size in self.history_sizes().await? {
            let over = caps.over(&size);
            if over == 0 {
                continue;
            }
            removed += sqlx::query(
                "DELETE FROM revisions WHERE rowid IN (SELECT rowid FROM revisions \
                 WHERE cluster = ? ORDER BY seen_at LIMIT ?)",
            )
            .bind(&size.cluster)
            .bind(i64::try_from(over).unwrap_or(i64::MAX))
            .execute(&self.writer)
            .await
            .map_err(from_sqlx)?
            .rows_affected();
        }
        Ok(removed)
    }

    async fn history_sizes(&self) -> Result<Vec<HistorySize>, StorageError> {
        let rows = sqlx::query(
            "SELECT cluster, count(*), coalesce(sum(bytes), 0) FROM revisions \
             GROUP BY cluster ORDER BY cluster",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(from_sqlx)?;
        rows.iter()
            .map(|row| {
                Ok(HistorySize {
                    cluster: row.try_get(0).map_err(from_sqlx)?,
                    revisions: row.try_get::<i64, _>(1).map_err(from_sqlx)? as u64,
                    bytes: row.try_get::<i64, _>(2).map_err(from_sqlx)? as u64,
                })
            })
            .collect()
    }
}
