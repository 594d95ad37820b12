//! A first page of a full-text query found by probing: the rest of the query's rows are
//! walked in its order, a few hundred at most, and each is looked up in the full-text
//! index. A common word matches a large share of the documents, and building the set of
//! all its matches to sort them takes far longer (161 ms for a page of 250,000 matches
//! at 1,000,000 documents, against 3 ms probed). A rare word fills no page within the
//! walk; the caller then takes the usual way, whose set is small for it.

use karpor_search::Expr;
use sqlx::sqlite::Sqlite;
use sqlx::{AssertSqlSafe, Row, Transaction};

use super::translate::{
    filter, finds_by_scope, fts_all, narrows, order, page_scope, Param, ScopeUse, Sql,
};
use super::{arguments, from_sqlx};
use crate::window::Window;
use crate::StorageError;

/// Rows of the rest walked at most.
const WALKED: usize = 256;
/// Rows looked up in the full-text index at once: a page is often full after the first.
const PROBED: usize = 64;

/// The words of a full-text term that is a conjunct of `expr`, and `expr` without it.
pub(super) fn full_text_conjunct(expr: &Expr) -> Option<(Vec<String>, Expr)> {
    match expr {
        Expr::Contains(words) => Some((words.clone(), Expr::All)),
        Expr::And(all) => all.iter().enumerate().find_map(|(i, e)| {
            full_text_conjunct(e).map(|(words, rest)| {
                let mut all = all.clone();
                all[i] = rest;
                (words, Expr::And(all))
            })
        }),
        _ => None,
    }
}

/// The rows a count up to a cap reads, when a full-text term finds them and nothing else
/// (an index, a caller's namespaces) narrows them: `FROM` and `WHERE` text walking the
/// full-text matches first, each row checked for the rest, which stops after the cap.
/// Building the set of every match first took 40 ms for 250,000 at 1,000,000 documents,
/// this 3 ms. An exact count reads every match either way, and the set is then the
/// cheaper (110 ms against 340 ms for 50,000 within a caller's namespaces).
pub(super) fn full_text_first(expr: &Expr, count_up_to: Option<u64>) -> Option<Sql> {
    count_up_to?;
    let (words, rest) = full_text_conjunct(expr)?;
    if narrows(&rest) || finds_by_scope(&rest) {
        return None;
    }
    let mut checked = Sql::default();
    filter(&rest, &mut checked, ScopeUse::Find);
    let mut sql = Sql::default();
    sql.params.push(Param::Text(fts_all(&words)));
    sql.params.extend(checked.params);
    // CROSS JOIN keeps the full-text matches the outer loop.
    sql.text = format!(
        "resources_fts f CROSS JOIN resources r ON r.rowid = f.rowid \
         WHERE f.resources_fts MATCH ? AND {}",
        checked.text
    );
    Some(sql)
}

/// Whether a page is worth probing for: the first few pages in the default order (which
/// walks the id index; another order might sort every row of the rest first).
pub(super) fn worth_probing(query: &karpor_search::Query, rows: &Window) -> bool {
    query.order_by.is_empty() && rows.from + rows.size <= (WALKED / 4) as u64
}

/// The page's rowids in order, when the walk settles it: either it found every row of
/// the page, or it walked every row of the rest (the page is then all there is).
pub(super) async fn page(
    tx: &mut Transaction<'_, Sqlite>,
    words: &[String],
    rest: &Expr,
    rows: &Window,
) -> Result<Option<Vec<i64>>, StorageError> {
    let mut sql = Sql::default();
    filter(rest, &mut sql, page_scope(rest));
    let mut params = sql.params;
    params.push(Param::Int(WALKED as i64));
    // `filter` and `order` write only karpor's own SQL, every value bound.
    let walked: Vec<i64> = sqlx::query_scalar_with(
        AssertSqlSafe(format!(
            "SELECT r.rowid FROM resources r WHERE {} ORDER BY {} LIMIT ?",
            sql.text,
            order(&[])
        )),
        arguments(params)?,
    )
    .fetch_all(&mut **tx)
    .await
    .map_err(from_sqlx)?;
    let wanted = usize::try_from(rows.from + rows.size).unwrap_or(usize::MAX);
    let matching = fts_all(words);
    let mut found = Vec::new();
    for chunk in walked.chunks(PROBED) {
        let list =
            serde_json::to_string(chunk).map_err(|e| StorageError::Corrupt(e.to_string()))?;
        let matched: std::collections::HashSet<i64> = sqlx::query(
            "SELECT w.value FROM json_each(?) w WHERE EXISTS (SELECT 1 FROM resources_fts f \
             WHERE f.rowid = w.value AND f.resources_fts MATCH ?)",
        )
        .bind(list)
        .bind(&matching)
        .fetch_all(&mut **tx)
        .await
        .map_err(from_sqlx)?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()
        .map_err(from_sqlx)?;
        found.extend(chunk.iter().copied().filter(|id| matched.contains(id)));
        if found.len() >= wanted {
            break;
        }
    }
    if found.len() < wanted && walked.len() == WALKED {
        return Ok(None);
    }
    let from = usize::try_from(rows.from).unwrap_or(usize::MAX);
    let size = usize::try_from(rows.size).unwrap_or(usize::MAX);
    Ok(Some(found.into_iter().skip(from).take(size).collect()))
}

/// Rows walked at most for a keyword's page.
const WALKED_FOR_KEYWORD: i64 = 4096;

/// A first page of a keyword query, by walking the rows in id order and checking each
/// against `sql` (the page's filter), when the walk fills it: a keyword common enough to
/// be slow to sort (12,201 matches of `app-123` at 1,000,000 documents, each read for its
/// id: 40 ms) fills a page within a few thousand rows (9 ms with its sets built); a rare
/// one falls back to the sorted set of its matches, which is small for it. Its count is
/// then a statement of its own, which stops at a cap (19 ms for `app-123`).
pub(super) async fn keyword_page(
    tx: &mut Transaction<'_, Sqlite>,
    sql: &Sql,
    rows: &Window,
) -> Result<Option<Vec<i64>>, StorageError> {
    let wanted = rows.from + rows.size;
    let mut params = vec![Param::Int(WALKED_FOR_KEYWORD)];
    params.extend(sql.params.iter().cloned());
    params.push(Param::Int(i64::try_from(wanted).unwrap_or(i64::MAX)));
    // CROSS JOIN keeps the walk the outer loop (else the planner starts from the
    // keyword's matches, 42 ms against 9 ms for `app-123`); the filter's sets are built
    // once. `filter` and `order` write only karpor's own SQL.
    let found: Vec<i64> = sqlx::query_scalar_with(
        AssertSqlSafe(format!(
            "SELECT w.rowid FROM (SELECT r.rowid AS rowid, r.id AS id FROM resources r \
             ORDER BY {} LIMIT ?) w CROSS JOIN resources r ON r.rowid = w.rowid \
             WHERE {} ORDER BY w.id LIMIT ?",
            order(&[]),
            sql.text
        )),
        arguments(params)?,
    )
    .fetch_all(&mut **tx)
    .await
    .map_err(from_sqlx)?;
    if (found.len() as u64) < wanted {
        return Ok(None);
    }
    let from = usize::try_from(rows.from).unwrap_or(usize::MAX);
    let size = usize::try_from(rows.size).unwrap_or(usize::MAX);
    Ok(Some(found.into_iter().skip(from).take(size).collect()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use time::OffsetDateTime;

    use super::*;
    use crate::document::ResourceDocument;
    use crate::sqlite::SqliteStorage;
    use crate::{ResourceStorage, SearchStorage};

    /// Every 5th document says "rare" past any walk's rows, every 2nd "common".
    fn document(i: usize) -> ResourceDocument {
        let mut words = vec!["word"];
        if i.is_multiple_of(2) {
            words.push("common");
        }
        if i.is_multiple_of(5) && i > 4 * WALKED {
            words.push("rare");
        }
        ResourceDocument {
            cluster: "c".to_owned(),
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespace: ["a", "b", "c"][i % 3].to_owned(),
            name: format!("cm-{i}"),
            uid: format!("{i:05}"),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner_references: Vec::new(),
            creation_timestamp: None,
            deletion_timestamp: None,
            resource_version: "1".to_owned(),
            sync_at: OffsetDateTime::UNIX_EPOCH,
            deleted: i.is_multiple_of(7),
            object: serde_json::json!({"data": {"text": words.join(" ")}}),
            issues: Vec::new(),
            refs: Vec::new(),
            history: None,
        }
    }

    /// Pages probed for are the same rows, in the same order, with the same totals, as
    /// slices of the whole answer (too large a page to probe for); a common word is
    /// probed, a rare one falls back.
    #[tokio::test]
    async fn probed_pages_are_slices_of_the_whole_answer() {
        let dir = tempfile::tempdir().unwrap();
        let storage = SqliteStorage::open(&dir.path().join("r.db")).await.unwrap();
        let docs: Vec<_> = (0..1200).map(document).collect();
        storage.upsert(&docs).await.unwrap();
        for (sql, probed) in [
            (
                "select * from resources where contains(content, 'common')",
                true,
            ),
            (
                "select * from resources where contains(content, 'common') and namespace = 'b'",
                true,
            ),
            (
                "select * from resources where contains(content, 'rare')",
                false,
            ),
            (
                "select * from resources where namespace = 'c' and contains(content, 'word rare')",
                false,
            ),
            (
                "select * from resources where contains(content, 'common') limit 30 offset 5",
                true,
            ),
        ] {
            let query = karpor_search::parse(sql).unwrap();
            let whole = storage.search(&query, 0, 1000).await.unwrap();
            assert!(!whole.items.is_empty(), "{sql}");
            for (from, size) in [(0, 10), (10, 10), (7, 20), (40, 24)] {
                let answer = storage.search(&query, from, size).await.unwrap();
                let expected: Vec<_> = whole
                    .items
                    .iter()
                    .skip(from as usize)
                    .take(size as usize)
                    .collect();
                let items: Vec<_> = answer.items.iter().collect();
                assert_eq!(items, expected, "{sql} {from}");
                assert_eq!(answer.total, whole.total, "{sql} {from}");
                let rows = crate::window::window(&query, from, size);
                let (words, rest) = full_text_conjunct(&query.filter).unwrap();
                let mut tx = storage.pool.begin().await.unwrap();
                let found = page(&mut tx, &words, &rest, &rows).await.unwrap();
                assert_eq!(found.is_some(), probed, "{sql} {from}");
            }
        }
    }

    #[test]
    fn the_full_text_conjunct_is_taken_out_of_nested_conjunctions_only() {
        let parsed = |sql: &str| karpor_search::parse(sql).unwrap().filter;
        let (words, rest) = full_text_conjunct(&parsed(
            "select * from resources where contains(content, 'redis 7') and namespace = 'a'",
        ))
        .unwrap();
        assert_eq!(words, ["redis", "7"]);
        assert!(!format!("{rest:?}").contains("Contains"), "{rest:?}");
        for other in [
            "select * from resources where contains(content, 'a') or namespace = 'a'",
            "select * from resources where not contains(content, 'a')",
            "select * from resources where namespace = 'a'",
        ] {
            assert!(full_text_conjunct(&parsed(other)).is_none(), "{other}");
        }
    }
}
