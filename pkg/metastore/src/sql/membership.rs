//! Member leases and cluster claims on SQL: `karpor_members` rows that expire by the
//! database's clock (never a client's, which may drift between replicas), and
//! `karpor_claims` rows that count only while their member row, with the same lease id,
//! is unexpired. Joins and new claims take the store's next revision (the lease id, the
//! claim's epoch), so they lock the counter row and run one at a time.

use std::time::Duration;

use sqlx::{AssertSqlSafe, Row};

use super::{Pool, SqlStore, CHANGES_KEPT};
use crate::error::from_sqlx;
use crate::store::{Claim, Member, MemberLease, Revision};
use crate::StoreError;

/// The kind of a join's or claim's change-feed entry: it keeps revisions consecutive (a
/// gap means compaction) and is never delivered.
pub(super) const FEED_KIND: &str = "membership";

/// Where the SQL text says "now", in milliseconds by the database's clock.
const NOW: &str = "NOW_MS";

impl SqlStore {
    /// `text` with the driver's expression for now: a fixed expression, never input.
    fn at_now(&self, text: &'static str) -> AssertSqlSafe<String> {
        let now = match self.pool {
            // UTC arithmetic: UNIX_TIMESTAMP(NOW()) goes through the session's time zone,
            // and is an hour off in a DST change's repeated hour.
            Pool::Mysql(_) => {
                "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
            }
            Pool::Sqlite(_) => "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
        };
        AssertSqlSafe(text.replace(NOW, now))
    }

    pub(super) async fn join_member(
        &self,
        member: &str,
        ttl: Duration,
    ) -> Result<MemberLease, StoreError> {
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
        // Expired members go first, with every claim no live lease holds.
        let expired = self.at_now("DELETE FROM karpor_members WHERE expires_at <= NOW_MS");
        let insert = self.at_now(
            "INSERT INTO karpor_members (name, id, ttl_ms, expires_at) VALUES (?, ?, ?, NOW_MS + ?)",
        );
        let id = on_pool!(&self.pool, p => {
            let mut tx = p.begin().await.map_err(from_sqlx)?;
            let id = next_revision!(tx);
            sqlx::query(expired).execute(&mut *tx).await.map_err(from_sqlx)?;
            sqlx::query("DELETE FROM karpor_claims WHERE lease NOT IN (SELECT id FROM karpor_members)")
                .execute(&mut *tx)
                .await
                .map_err(from_sqlx)?;
            let inserted = sqlx::query(insert)
                .bind(member)
                .bind(id)
                .bind(ttl_ms)
                .bind(ttl_ms)
                .execute(&mut *tx)
                .await;
            match inserted {
                Ok(_) => {}
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(StoreError::MemberAlive(member.to_owned()));
                }
                Err(e) => return Err(from_sqlx(e)),
            }
            record_change!(tx, id, FEED_KIND, member, "put");
            tx.commit().await.map_err(from_sqlx)?;
            id
        });
        Ok(MemberLease {
            member: member.to_owned(),
            id,
            ttl: Duration::from_millis(ttl_ms.unsigned_abs()),
        })
    }

    pub(super) async fn renew_lease(&self, lease: &MemberLease) -> Result<(), StoreError> {
        let renew = self.at_now(
            "UPDATE karpor_members SET expires_at = NOW_MS + ttl_ms \
             WHERE name = ? AND id = ? AND expires_at > NOW_MS",
        );
        let renewed = on_pool!(&self.pool, p => {
            sqlx::query(renew)
                .bind(&lease.member)
                .bind(lease.id)
                .execute(p)
                .await
                .map_err(from_sqlx)?
                .rows_affected()
        });
        if renewed == 0 {
            return Err(StoreError::LeaseLost(lease.member.clone()));
        }
        Ok(())
    }

    pub(super) async fn revoke_lease(&self, lease: &MemberLease) -> Result<(), StoreError> {
        // The member row first: its claims stop counting with it; deleting them is tidying.
        on_pool!(&self.pool, p => {
            sqlx::query("DELETE FROM karpor_members WHERE name = ? AND id = ?")
                .bind(&lease.member)
                .bind(lease.id)
                .execute(p)
                .await
                .map_err(from_sqlx)?;
            sqlx::query("DELETE FROM karpor_claims WHERE lease = ?")
                .bind(lease.id)
                .execute(p)
                .await
                .map_err(from_sqlx)?;
        });
        Ok(())
    }

    pub(super) async fn live_members(&self) -> Result<Vec<Member>, StoreError> {
        let query = self
            .at_now("SELECT name, id FROM karpor_members WHERE expires_at > NOW_MS ORDER BY name");
        on_pool!(&self.pool, p => {
            sqlx::query(query)
                .fetch_all(p)
                .await
                .map_err(from_sqlx)?
                .into_iter()
                .map(|row| Ok(Member { name: row.try_get("name")?, id: row.try_get("id")? }))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(from_sqlx)
        })
    }

    pub(super) async fn live_claims(&self) -> Result<Vec<Claim>, StoreError> {
        let query = self.at_now(
            "SELECT c.cluster, c.member, c.epoch FROM karpor_claims c \
             JOIN karpor_members m ON m.name = c.member AND m.id = c.lease \
             WHERE m.expires_at > NOW_MS ORDER BY c.cluster",
        );
        on_pool!(&self.pool, p => {
            sqlx::query(query)
                .fetch_all(p)
                .await
                .map_err(from_sqlx)?
                .into_iter()
                .map(|row| {
                    Ok(Claim {
                        cluster: row.try_get("cluster")?,
                        member: row.try_get("member")?,
                        epoch: row.try_get("epoch")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(from_sqlx)
        })
    }

    pub(super) async fn claim_cluster(
        &self,
        lease: &MemberLease,
        cluster: &str,
    ) -> Result<Option<Revision>, StoreError> {
        let alive = self.at_now(
            "SELECT id FROM karpor_members WHERE name = ? AND id = ? AND expires_at > NOW_MS",
        );
        let holder = self.at_now(
            "SELECT c.lease, c.epoch, m.id AS live FROM karpor_claims c \
             LEFT JOIN karpor_members m \
             ON m.name = c.member AND m.id = c.lease AND m.expires_at > NOW_MS \
             WHERE c.cluster = ?",
        );
        // The counter row is locked first, so claims run one at a time and each reads
        // what the one before committed; anything but a new claim rolls back unwritten.
        let epoch = on_pool!(&self.pool, p => {
            let mut tx = p.begin().await.map_err(from_sqlx)?;
            let revision = next_revision!(tx);
            let ours = sqlx::query(alive)
                .bind(&lease.member)
                .bind(lease.id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(from_sqlx)?;
            if ours.is_none() {
                return Err(StoreError::LeaseLost(lease.member.clone()));
            }
            let held = sqlx::query(holder)
                .bind(cluster)
                .fetch_optional(&mut *tx)
                .await
                .map_err(from_sqlx)?
                .map(|row| {
                    Ok::<_, sqlx::Error>((
                        row.try_get::<i64, _>("lease")?,
                        row.try_get::<i64, _>("epoch")?,
                        row.try_get::<Option<i64>, _>("live")?,
                    ))
                })
                .transpose()
                .map_err(from_sqlx)?;
            match held {
                Some((holder, epoch, _)) if holder == lease.id => return Ok(Some(epoch)),
                Some((_, _, Some(_))) => return Ok(None),
                // Free, or held by an expired lease: ours from this revision.
                _ => {}
            }
            sqlx::query("DELETE FROM karpor_claims WHERE cluster = ?")
                .bind(cluster)
                .execute(&mut *tx)
                .await
                .map_err(from_sqlx)?;
            sqlx::query("INSERT INTO karpor_claims (cluster, member, lease, epoch) VALUES (?, ?, ?, ?)")
                .bind(cluster)
                .bind(&lease.member)
                .bind(lease.id)
                .bind(revision)
                .execute(&mut *tx)
                .await
                .map_err(from_sqlx)?;
            record_change!(tx, revision, FEED_KIND, cluster, "put");
            tx.commit().await.map_err(from_sqlx)?;
            revision
        });
        Ok(Some(epoch))
    }

    pub(super) async fn release_cluster(
        &self,
        lease: &MemberLease,
        cluster: &str,
    ) -> Result<(), StoreError> {
        on_pool!(&self.pool, p => {
            sqlx::query("DELETE FROM karpor_claims WHERE cluster = ? AND lease = ?")
                .bind(cluster)
                .bind(lease.id)
                .execute(p)
                .await
                .map_err(from_sqlx)?;
        });
        Ok(())
    }
}
