//! MySQL (MariaDB) and SQLite behind one implementation: the same SQL text on either
//! pool, written once and expanded per driver by `on_pool!`. Only the migrations differ.
//!
//! Every write runs in one transaction: take the next revision (locking the counter row,
//! which orders concurrent writers), change the record with a version check, append the
//! change, commit. A failed write rolls back whole. Joins and claims take revisions too
//! (`membership.rs`); their feed entries are kept for a gapless feed and never delivered.

mod mysql;
mod sqlite;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use karpor_core::model::Kind;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};
use sqlx::sqlite::SqlitePool;
use sqlx::Row;
use tokio::sync::Notify;

use crate::error::from_sqlx;
use crate::store::{
    Change, ChangeOp, ChangeStream, Claim, ListRequest, Member, MemberLease, MetadataStore,
    RawPage, RawRecord, Revision,
};
use crate::StoreError;

pub(crate) use mysql::{connect_mysql, mysql_options};
pub(crate) use sqlite::open_sqlite;

/// Another process may write (a server and a syncer share MySQL): the feed polls this
/// often; writes in this process wake it at once.
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Changes older than this many revisions are pruned; a watcher that far behind must
/// list again (`Compacted`), as with etcd.
const CHANGES_KEPT: i64 = 10_000;

#[derive(Clone)]
enum Pool {
    Mysql(MySqlPool),
    Sqlite(SqlitePool),
}

/// Runs `$body` with `$p` bound to the concrete pool, for each driver.
macro_rules! on_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            Pool::Mysql($p) => $body,
            Pool::Sqlite($p) => $body,
        }
    };
}

pub(crate) struct SqlStore {
    pool: Pool,
    backend: &'static str,
    /// Wakes this process's watchers after a write.
    written: Arc<Notify>,
    /// For telling a refused MySQL connection from a slow one.
    mysql_options: Option<MySqlConnectOptions>,
}

/// The next revision: increments and reads the counter, holding its row lock.
macro_rules! next_revision {
    ($tx:expr) => {{
        sqlx::query("UPDATE karpor_revision SET value = value + 1 WHERE id = 1")
            .execute(&mut *$tx)
            .await
            .map_err(from_sqlx)?;
        let row = sqlx::query("SELECT value FROM karpor_revision WHERE id = 1")
            .fetch_one(&mut *$tx)
            .await
            .map_err(from_sqlx)?;
        row.try_get::<i64, _>("value").map_err(from_sqlx)?
    }};
}

/// Appends the change (kind and op as stored text) and prunes the old ones, in the
/// write's transaction.
macro_rules! record_change {
    ($tx:expr, $revision:expr, $kind:expr, $name:expr, $op:expr) => {{
        sqlx::query("INSERT INTO karpor_changes (revision, kind, name, op) VALUES (?, ?, ?, ?)")
            .bind($revision)
            .bind($kind)
            .bind($name)
            .bind($op)
            .execute(&mut *$tx)
            .await
            .map_err(from_sqlx)?;
        sqlx::query("DELETE FROM karpor_changes WHERE revision <= ?")
            .bind($revision - CHANGES_KEPT)
            .execute(&mut *$tx)
            .await
            .map_err(from_sqlx)?;
    }};
}

/// The stored version of a record inside a transaction, to tell `NotFound` from `Conflict`.
macro_rules! stored_version {
    ($tx:expr, $kind:expr, $name:expr) => {{
        sqlx::query("SELECT version FROM karpor_records WHERE kind = ? AND name = ?")
            .bind($kind.as_str())
            .bind($name)
            .fetch_optional(&mut *$tx)
            .await
            .map_err(from_sqlx)?
            .map(|row| row.try_get::<i64, _>("version"))
            .transpose()
            .map_err(from_sqlx)?
    }};
}

mod membership;

impl SqlStore {
    fn new(pool: Pool, backend: &'static str, mysql_options: Option<MySqlConnectOptions>) -> Self {
        SqlStore {
            pool,
            backend,
            written: Arc::new(Notify::new()),
            mysql_options,
        }
    }

    fn missing(kind: Kind, name: &str, version: Option<i64>, expected: i64) -> StoreError {
        match version {
            None => StoreError::NotFound {
                kind,
                name: name.to_owned(),
            },
            Some(_) => StoreError::Conflict {
                kind,
                name: name.to_owned(),
                expected,
            },
        }
    }

    /// The record changes after `after`, and the last revision read (membership entries
    /// included), which a watcher skips to when no record change is among them.
    async fn changes_after(&self, after: Revision) -> Result<(Vec<Change>, Revision), StoreError> {
        let rows = on_pool!(&self.pool, p => {
            sqlx::query(
                "SELECT revision, kind, name, op FROM karpor_changes \
                 WHERE revision > ? ORDER BY revision LIMIT 256",
            )
            .bind(after)
            .fetch_all(p)
            .await
            .map_err(from_sqlx)?
            .into_iter()
            .map(|row| {
                Ok::<_, sqlx::Error>((
                    row.try_get::<i64, _>("revision")?,
                    row.try_get::<String, _>("kind")?,
                    row.try_get::<String, _>("name")?,
                    row.try_get::<String, _>("op")?,
                ))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(from_sqlx)?
        });
        // Revisions are consecutive (one change per committed write), so a gap after
        // `after` means the changes it needs were pruned.
        if let Some((first, ..)) = rows.first() {
            if *first > after + 1 {
                return Err(StoreError::Compacted(after));
            }
        }
        let scanned = rows.last().map_or(after, |(revision, ..)| *revision);
        let mut changes = Vec::with_capacity(rows.len());
        for (revision, kind, name, op) in rows {
            if kind == membership::FEED_KIND {
                continue;
            }
            let kind = Kind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown kind {kind:?} in changes")))?;
            let op = if op == "delete" {
                ChangeOp::Delete
            } else {
                ChangeOp::Put
            };
            changes.push(Change {
                revision,
                kind,
                name,
                op,
            });
        }
        Ok((changes, scanned))
    }
}

#[async_trait]
impl MetadataStore for SqlStore {
    fn backend(&self) -> &'static str {
        self.backend
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let result = on_pool!(&self.pool, p => sqlx::query("SELECT 1").execute(p).await.map(drop));
        match result {
            Ok(()) => Ok(()),
            Err(sqlx::Error::PoolTimedOut) => Err(match &self.mysql_options {
                Some(options) => mysql::diagnose_pool_timeout(options).await,
                None => StoreError::Timeout,
            }),
            Err(e) => Err(from_sqlx(e)),
        }
    }

    async fn get(&self, kind: Kind, name: &str) -> Result<Option<RawRecord>, StoreError> {
        let row = on_pool!(&self.pool, p => {
            sqlx::query("SELECT version, data FROM karpor_records WHERE kind = ? AND name = ?")
                .bind(kind.as_str())
                .bind(name)
                .fetch_optional(p)
                .await
                .map_err(from_sqlx)?
                .map(|row| Ok::<_, sqlx::Error>((row.try_get("version")?, row.try_get("data")?)))
                .transpose()
                .map_err(from_sqlx)?
        });
        Ok(row.map(|(version, data)| RawRecord {
            name: name.to_owned(),
            version,
            data,
        }))
    }

    async fn list(&self, kind: Kind, request: &ListRequest) -> Result<RawPage, StoreError> {
        let after = request.after.clone().unwrap_or_default();
        // One more than asked, to know whether another page follows.
        let limit = i64::try_from(request.limit.max(1) + 1).unwrap_or(i64::MAX);
        let mut items = on_pool!(&self.pool, p => {
            sqlx::query(
                "SELECT name, version, data FROM karpor_records \
                 WHERE kind = ? AND name > ? ORDER BY name LIMIT ?",
            )
            .bind(kind.as_str())
            .bind(&after)
            .bind(limit)
            .fetch_all(p)
            .await
            .map_err(from_sqlx)?
            .into_iter()
            .map(|row| {
                Ok::<_, sqlx::Error>(RawRecord {
                    name: row.try_get("name")?,
                    version: row.try_get("version")?,
                    data: row.try_get("data")?,
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(from_sqlx)?
        });
        let next = if items.len() > request.limit.max(1) {
            items.truncate(request.limit.max(1));
            items.last().map(|r| r.name.clone())
        } else {
            None
        };
        Ok(RawPage { items, next })
    }

    async fn create(&self, kind: Kind, name: &str, data: &str) -> Result<Revision, StoreError> {
        let revision = on_pool!(&self.pool, p => {
            let mut tx = p.begin().await.map_err(from_sqlx)?;
            let revision = next_revision!(tx);
            let inserted = sqlx::query(
                "INSERT INTO karpor_records (kind, name, version, data) VALUES (?, ?, ?, ?)",
            )
            .bind(kind.as_str())
            .bind(name)
            .bind(revision)
            .bind(data)
            .execute(&mut *tx)
            .await;
            match inserted {
                Ok(_) => {}
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(StoreError::AlreadyExists { kind, name: name.to_owned() });
                }
                Err(e) => return Err(from_sqlx(e)),
            }
            record_change!(tx, revision, kind.as_str(), name, ChangeOp::Put.as_str());
            tx.commit().await.map_err(from_sqlx)?;
            revision
        });
        self.written.notify_waiters();
        Ok(revision)
    }

    async fn update(
        &self,
        kind: Kind,
        name: &str,
        data: &str,
        expected: Revision,
    ) -> Result<Revision, StoreError> {
        let revision = on_pool!(&self.pool, p => {
            let mut tx = p.begin().await.map_err(from_sqlx)?;
            let revision = next_revision!(tx);
            let updated = sqlx::query(
                "UPDATE karpor_records SET version = ?, data = ? \
                 WHERE kind = ? AND name = ? AND version = ?",
            )
            .bind(revision)
            .bind(data)
            .bind(kind.as_str())
            .bind(name)
            .bind(expected)
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
            if updated.rows_affected() == 0 {
                let stored = stored_version!(tx, kind, name);
                return Err(Self::missing(kind, name, stored, expected));
            }
            record_change!(tx, revision, kind.as_str(), name, ChangeOp::Put.as_str());
            tx.commit().await.map_err(from_sqlx)?;
            revision
        });
        self.written.notify_waiters();
        Ok(revision)
    }

    async fn delete(
        &self,
        kind: Kind,
        name: &str,
        expected: Option<Revision>,
    ) -> Result<(), StoreError> {
        on_pool!(&self.pool, p => {
            let mut tx = p.begin().await.map_err(from_sqlx)?;
            let revision = next_revision!(tx);
            let deleted = sqlx::query(
                "DELETE FROM karpor_records WHERE kind = ? AND name = ? AND (? IS NULL OR version = ?)",
            )
            .bind(kind.as_str())
            .bind(name)
            .bind(expected)
            .bind(expected)
            .execute(&mut *tx)
            .await
            .map_err(from_sqlx)?;
            if deleted.rows_affected() == 0 {
                let stored = stored_version!(tx, kind, name);
                return Err(Self::missing(kind, name, stored, expected.unwrap_or_default()));
            }
            record_change!(tx, revision, kind.as_str(), name, ChangeOp::Delete.as_str());
            tx.commit().await.map_err(from_sqlx)?;
        });
        self.written.notify_waiters();
        Ok(())
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        on_pool!(&self.pool, p => {
            let row = sqlx::query("SELECT value FROM karpor_revision WHERE id = 1")
                .fetch_one(p)
                .await
                .map_err(from_sqlx)?;
            row.try_get::<i64, _>("value").map_err(from_sqlx)
        })
    }

    async fn watch(&self, after: Revision) -> Result<ChangeStream, StoreError> {
        let store = SqlStore {
            pool: self.pool.clone(),
            backend: self.backend,
            written: self.written.clone(),
            mysql_options: None,
        };
        // `None` once the stream has ended (after a `Compacted` error).
        let state = (store, Some(after), VecDeque::new());
        let stream = futures::stream::unfold(state, |(store, last, mut ready)| async move {
            let mut last = last?;
            loop {
                if let Some(change) = ready.pop_front() {
                    let change: Change = change;
                    last = change.revision;
                    return Some((Ok(change), (store, Some(last), ready)));
                }
                // Registered before the query, so a write in between still wakes us.
                let written = store.written.clone();
                let notified = written.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                match store.changes_after(last).await {
                    Ok((changes, _)) if !changes.is_empty() => ready.extend(changes),
                    // Only membership entries: past them, and read on at once.
                    Ok((_, scanned)) if scanned > last => last = scanned,
                    Ok(_) => {
                        tokio::select! {
                            _ = notified => {}
                            _ = tokio::time::sleep(POLL_INTERVAL) => {}
                        }
                    }
                    Err(e @ StoreError::Compacted(_)) => {
                        return Some((Err(e), (store, None, ready)))
                    }
                    Err(e) => {
                        // The store is down: say so, and try again after a pause.
                        tokio::time::sleep(POLL_INTERVAL).await;
                        return Some((Err(e), (store, Some(last), ready)));
                    }
                }
            }
        });
        Ok(stream.boxed())
    }

    async fn join(&self, member: &str, ttl: Duration) -> Result<MemberLease, StoreError> {
        self.join_member(member, ttl).await
    }

    async fn renew(&self, lease: &MemberLease) -> Result<(), StoreError> {
        self.renew_lease(lease).await
    }

    async fn leave(&self, lease: &MemberLease) -> Result<(), StoreError> {
        self.revoke_lease(lease).await
    }

    async fn members(&self) -> Result<Vec<Member>, StoreError> {
        self.live_members().await
    }

    async fn claims(&self) -> Result<Vec<Claim>, StoreError> {
        self.live_claims().await
    }

    async fn claim(
        &self,
        lease: &MemberLease,
        cluster: &str,
    ) -> Result<Option<Revision>, StoreError> {
        self.claim_cluster(lease, cluster).await
    }

    async fn release(&self, lease: &MemberLease, cluster: &str) -> Result<(), StoreError> {
        self.release_cluster(lease, cluster).await
    }
}
