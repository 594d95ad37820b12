//! Audit totals from the counters kept at write time (migration 0008): a query that asks
//! only for a cluster, a namespace, a rule and the deleted flag, each at most once, is a
//! sum over a few counter rows instead of over every document it matches. Any other
//! query is recounted from the documents.

use karpor_search::{Expr, Field};
use sqlx::sqlite::SqlitePool;
use sqlx::Row;

use super::equalities::equalities;
use super::{buckets, from_sqlx};
use crate::{AuditTotals, Bucket, StorageError};

/// Billionths of a point: how scores are summed, by the counters and by a recount alike.
pub(super) const SCORE_SCALE: f64 = 1e9;

/// A scope the counters answer.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Counted {
    cluster: Option<String>,
    namespace: Option<String>,
    rule: Option<String>,
    deleted: Option<bool>,
}

/// The scope of `expr`, when it is one the counters hold.
pub(super) fn counted(expr: &Expr) -> Option<Counted> {
    let terms = equalities(expr)?;
    terms
        .within(&[
            Field::Cluster,
            Field::Namespace,
            Field::Issue,
            Field::Deleted,
        ])
        .then(|| Counted {
            cluster: terms.text(&Field::Cluster),
            namespace: terms.text(&Field::Namespace),
            rule: terms.text(&Field::Issue),
            deleted: terms.deleted(),
        })
}

/// The counter rows of a scope; `rule` is '' for every document.
const ROWS: &str = "(? IS NULL OR cluster = ?) AND (? IS NULL OR namespace = ?) \
                    AND (? IS NULL OR deleted = ?)";

fn bound<'q>(
    statement: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    scope: &'q Counted,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    statement
        .bind(scope.cluster.as_deref())
        .bind(scope.cluster.as_deref())
        .bind(scope.namespace.as_deref())
        .bind(scope.namespace.as_deref())
        .bind(scope.deleted)
        .bind(scope.deleted)
}

pub(super) async fn totals(
    pool: &SqlitePool,
    scope: &Counted,
) -> Result<AuditTotals, StorageError> {
    let statement = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT coalesce(sum(resources), 0), coalesce(sum(score_nanos), 0), \
         coalesce(sum(low), 0), coalesce(sum(medium), 0), coalesce(sum(high), 0) \
         FROM audit_counters WHERE rule = ? AND {ROWS}"
    )))
    .bind(scope.rule.as_deref().unwrap_or_default());
    let row = bound(statement, scope)
        .fetch_one(pool)
        .await
        .map_err(from_sqlx)?;
    let count = |i: usize| -> Result<u64, StorageError> {
        Ok(row.try_get::<i64, _>(i).map_err(from_sqlx)?.max(0) as u64)
    };
    Ok(AuditTotals {
        resources: count(0)?,
        score_sum: row.try_get::<i64, _>(1).map_err(from_sqlx)? as f64 / SCORE_SCALE,
        findings: karpor_audit::SeverityCounts {
            low: count(2)?,
            medium: count(3)?,
            high: count(4)?,
        },
    })
}

/// The documents not marked deleted, of a cluster or of all: a few counter rows (rule ''
/// counts every document), where counting the documents read an index of all of them and
/// mapped its pages into the process, a syncer's own polling included.
pub(super) async fn documents(
    pool: &SqlitePool,
    cluster: Option<&str>,
) -> Result<u64, StorageError> {
    let count: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(resources), 0) FROM audit_counters \
         WHERE rule = '' AND deleted = 0 AND (?1 IS NULL OR cluster = ?1)",
    )
    .bind(cluster)
    .fetch_one(pool)
    .await
    .map_err(from_sqlx)?;
    Ok(count.max(0) as u64)
}

/// The rules with the most documents in a scope that names no rule itself, as
/// `terms(issue)` counts them; `None` for a scope with a rule.
pub(super) async fn rules(
    pool: &SqlitePool,
    scope: &Counted,
    size: usize,
) -> Result<Option<Vec<Bucket>>, StorageError> {
    if scope.rule.is_some() {
        return Ok(None);
    }
    let statement = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT rule AS k, sum(resources) AS c FROM audit_counters \
         WHERE rule <> '' AND {ROWS} GROUP BY rule HAVING c > 0 \
         ORDER BY c DESC, k ASC LIMIT ?"
    )));
    let rows = bound(statement, scope)
        .bind(i64::try_from(size).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await
        .map_err(from_sqlx)?;
    buckets(&rows).map(Some)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use karpor_audit::{Finding, Severity};
    use karpor_search::{Op, Value};
    use time::OffsetDateTime;

    use super::*;
    use crate::document::{HistoryNote, ResourceDocument};
    use crate::sqlite::{open_pool, open_writer, SqliteStorage, MIGRATIONS};
    use crate::{ResourceStorage, SearchStorage};
    use sqlx::AssertSqlSafe;

    /// A small deterministic generator (xorshift): the same writes every run.
    struct Dice(u64);

    impl Dice {
        fn roll(&mut self, sides: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % sides
        }
    }

    const CLUSTERS: [&str; 2] = ["a", "b"];
    const NAMESPACES: [&str; 3] = ["", "web", "db"];
    const KINDS: [(&str, &str); 3] = [("v1", "Pod"), ("v1", "Service"), ("apps/v1", "Deployment")];
    const RULES: [(&str, Severity); 4] = [
        ("privileged", Severity::High),
        ("no-probe", Severity::Low),
        ("latest-tag", Severity::Medium),
        ("host-network", Severity::High),
    ];

    fn document(dice: &mut Dice, version: u64) -> ResourceDocument {
        let at = OffsetDateTime::UNIX_EPOCH;
        let issues = RULES
            .iter()
            .filter(|_| dice.roll(3) == 0)
            .map(|(rule, severity)| Finding {
                rule: (*rule).to_owned(),
                severity: *severity,
                title: String::new(),
                message: String::new(),
                remediation: String::new(),
            })
            .collect();
        let (api_version, kind) = KINDS[dice.roll(3) as usize];
        let labels = (0..dice.roll(3))
            .map(|i| (format!("k{i}"), format!("v{}", dice.roll(3))))
            .collect();
        ResourceDocument {
            cluster: CLUSTERS[dice.roll(2) as usize].to_owned(),
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: NAMESPACES[dice.roll(3) as usize].to_owned(),
            name: "p".to_owned(),
            uid: format!("u{}", dice.roll(30)),
            labels,
            annotations: BTreeMap::new(),
            owner_references: Vec::new(),
            creation_timestamp: None,
            deletion_timestamp: None,
            resource_version: version.to_string(),
            sync_at: at + time::Duration::seconds(dice.roll(10) as i64),
            deleted: dice.roll(5) == 0,
            object: serde_json::json!({}),
            issues,
            refs: Vec::new(),
            history: (dice.roll(2) == 0).then(|| HistoryNote {
                keep_until: at + time::Duration::days(1),
                late: false,
                managers: Vec::new(),
                preexisting: false,
            }),
        }
    }

    fn eq(field: Field, value: &str) -> Expr {
        Expr::Compare {
            field,
            op: Op::Eq,
            value: Value::Text(value.to_owned()),
        }
    }

    fn deleted(deleted: bool) -> Expr {
        Expr::Compare {
            field: Field::Deleted,
            op: Op::Eq,
            value: Value::Bool(deleted),
        }
    }

    /// Each scope with the same as a query no counter answers (the same documents: no
    /// name is empty), which is recounted from the documents.
    fn with_recounts(scopes: Vec<Expr>) -> Vec<(Expr, Expr)> {
        scopes
            .into_iter()
            .map(|scope| {
                let recounted = Expr::And(vec![
                    scope.clone(),
                    Expr::Not(Box::new(eq(Field::Name, ""))),
                ]);
                (scope, recounted)
            })
            .collect()
    }

    /// The scopes of `audit_counters` compared.
    fn scopes() -> Vec<(Expr, Expr)> {
        let live = deleted(false);
        let mut scopes = vec![Expr::All, live.clone()];
        for cluster in CLUSTERS {
            scopes.push(Expr::And(vec![live.clone(), eq(Field::Cluster, cluster)]));
            for namespace in NAMESPACES {
                scopes.push(Expr::And(vec![
                    eq(Field::Cluster, cluster),
                    eq(Field::Namespace, namespace),
                ]));
            }
        }
        for (rule, _) in RULES {
            scopes.push(eq(Field::Issue, rule));
            scopes.push(Expr::And(vec![
                live.clone(),
                eq(Field::Issue, rule),
                eq(Field::Cluster, "a"),
                eq(Field::Namespace, "web"),
            ]));
        }
        with_recounts(scopes)
    }

    /// The scopes of `kind_counters` and `label_counters` compared.
    fn facet_scopes() -> Vec<(Expr, Expr)> {
        with_recounts(vec![
            Expr::All,
            deleted(false),
            deleted(true),
            Expr::And(vec![deleted(false), eq(Field::Cluster, "a")]),
            Expr::And(vec![eq(Field::Cluster, "b"), eq(Field::Namespace, "web")]),
            Expr::And(vec![deleted(false), eq(Field::Kind, "pod")]),
            Expr::And(vec![
                eq(Field::ApiVersion, "apps/v1"),
                eq(Field::Severity, "High"),
            ]),
            Expr::And(vec![
                deleted(false),
                eq(Field::Cluster, "a"),
                eq(Field::Namespace, ""),
                eq(Field::Kind, "Service"),
                eq(Field::Severity, "Low"),
            ]),
        ])
    }

    /// Each scope's count and groups, from the counters and recounted, are the same.
    async fn facets_agree(storage: &SqliteStorage, step: usize) {
        let query = |filter| karpor_search::Query {
            filter,
            order_by: Vec::new(),
            limit: None,
            offset: None,
        };
        for (scope, recounted) in facet_scopes() {
            assert!(
                crate::sqlite::facets::faceted(&scope).is_some(),
                "{scope:?}"
            );
            let counted = storage.search(&query(scope.clone()), 0, 0).await.unwrap();
            let recount = storage
                .search(&query(recounted.clone()), 0, 0)
                .await
                .unwrap();
            assert_eq!(counted.total, recount.total, "step {step}: {scope:?}");
            for field in [
                Field::Cluster,
                Field::Namespace,
                Field::ApiVersion,
                Field::Kind,
                Field::Label("k0".to_owned()),
                Field::Label("k1".to_owned()),
            ] {
                let counted = storage
                    .terms(&field, &query(scope.clone()), 10)
                    .await
                    .unwrap();
                let recount = storage
                    .terms(&field, &query(recounted.clone()), 10)
                    .await
                    .unwrap();
                assert_eq!(counted, recount, "step {step}: {field:?} of {scope:?}");
            }
        }
    }

    /// Each scope's totals and rules, counted and recounted, are the same.
    async fn agree(storage: &SqliteStorage, step: usize) {
        facets_agree(storage, step).await;
        let query = |filter| karpor_search::Query {
            filter,
            order_by: Vec::new(),
            limit: None,
            offset: None,
        };
        for (scope, recounted) in scopes() {
            let counted = storage.audit_totals(&query(scope.clone())).await.unwrap();
            let recount = storage
                .audit_totals(&query(recounted.clone()))
                .await
                .unwrap();
            assert_eq!(counted, recount, "step {step}: {scope:?}");
            let rules = storage
                .terms(&Field::Issue, &query(scope.clone()), 10)
                .await
                .unwrap();
            let recount = storage
                .terms(&Field::Issue, &query(recounted), 10)
                .await
                .unwrap();
            assert_eq!(rules, recount, "step {step}: {scope:?}");
        }
    }

    /// A database written before the counters gets them from its documents when opened.
    #[tokio::test]
    async fn a_database_from_before_the_counters_is_counted_when_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let writer = open_writer(&path).await.unwrap();
        MIGRATIONS.run_to(7, &writer).await.unwrap();
        let pool = open_pool(&path).await.unwrap();
        let storage = SqliteStorage {
            pool,
            writer,
            placed: Default::default(),
        };
        let mut dice = Dice(7);
        // Without history: today's revision writes need migration 0009.
        let batch: Vec<_> = (0..40)
            .map(|v| ResourceDocument {
                history: None,
                ..document(&mut dice, 100 + v)
            })
            .collect();
        // Today's writes also fill the label rows' places and take documents off the list
        // of those without (0010): written with both, then without, as migration 7 left
        // the tables.
        let places = ["namespace", "cluster"];
        for column in places {
            sqlx::query(AssertSqlSafe(format!(
                "ALTER TABLE resource_labels ADD COLUMN {column} TEXT NOT NULL DEFAULT ''"
            )))
            .execute(&storage.writer)
            .await
            .unwrap();
        }
        sqlx::query("CREATE TABLE resources_fts_unplaced (doc INTEGER PRIMARY KEY)")
            .execute(&storage.writer)
            .await
            .unwrap();
        storage.upsert(&batch).await.unwrap();
        sqlx::query("DROP TABLE resources_fts_unplaced")
            .execute(&storage.writer)
            .await
            .unwrap();
        for column in places {
            sqlx::query(AssertSqlSafe(format!(
                "ALTER TABLE resource_labels DROP COLUMN {column}"
            )))
            .execute(&storage.writer)
            .await
            .unwrap();
        }
        MIGRATIONS.run(&storage.writer).await.unwrap();
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_counters")
            .fetch_one(&storage.pool)
            .await
            .unwrap();
        assert!(rows > 0);
        agree(&storage, 0).await;
    }

    /// After every kind of write, in random order, the counters say what a recount of
    /// the documents says, to the billionth of a point.
    #[tokio::test]
    async fn counters_equal_a_recount_after_random_writes_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let storage = SqliteStorage::open(&dir.path().join("r.db")).await.unwrap();
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
        let mut version = 100;
        for step in 0..300 {
            match dice.roll(10) {
                0..=5 => {
                    let batch: Vec<_> = (0..=dice.roll(6))
                        .map(|_| {
                            // Now and then an older version, which fencing skips.
                            version += 1;
                            let older = dice.roll(2) * 50;
                            document(&mut dice, version - older)
                        })
                        .collect();
                    storage.upsert(&batch).await.unwrap();
                }
                6 | 7 => {
                    let cluster = CLUSTERS[dice.roll(2) as usize];
                    let uid = format!("u{}", dice.roll(30));
                    let fence = (dice.roll(2) == 0).then(|| version.to_string());
                    storage
                        .delete(cluster, &uid, fence.as_deref(), None)
                        .await
                        .unwrap();
                }
                8 => {
                    let at = OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(5);
                    let namespace = NAMESPACES[dice.roll(3) as usize];
                    storage
                        .purge_unseen("a", "v1", "Pod", Some(namespace), at, None)
                        .await
                        .unwrap();
                }
                _ if step % 50 == 0 => {
                    storage.delete_cluster("b").await.unwrap();
                }
                _ => {}
            }
            agree(&storage, step).await;
        }
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_counters")
            .fetch_one(&storage.pool)
            .await
            .unwrap();
        assert!(rows > 0, "the counters were used");
    }

    #[test]
    fn only_scopes_of_counted_terms_are_counted() {
        let scope = |sql: &str| counted(&karpor_search::parse(sql).unwrap().filter);
        let live = Counted {
            deleted: Some(false),
            ..Counted::default()
        };
        assert_eq!(counted(&Expr::All), Some(Counted::default()));
        assert_eq!(
            scope("select * from resources where issue = 'p' and cluster = 'c'"),
            Some(Counted {
                cluster: Some("c".to_owned()),
                rule: Some("p".to_owned()),
                ..live
            })
        );
        for other in [
            "select * from resources where kind = 'Pod'",
            "select * from resources where cluster = 'a' or cluster = 'b'",
            "select * from resources where cluster = 'a' and cluster = 'b'",
            "select * from resources where not cluster = 'a'",
            "select * from resources where cluster in ('a')",
        ] {
            assert_eq!(scope(other), None, "{other}");
        }
    }
}
