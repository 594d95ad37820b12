//! The trigrams a keyword term is narrowed by, chosen by how many documents hold each.
//! Any of a term's trigrams gives a superset of its matches (`instr` then checks each
//! candidate), but the index reads every list it intersects: at 1,000,000 documents the
//! five of `app-123` took 16 ms, where `app` and `pp-` are in every name, against 1.2 ms
//! for the two rarer ones. A trigram's frequency is estimated from the first rows of its
//! list: where its `SAMPLE`th match lies among all rowids.

use std::collections::BTreeMap;

use karpor_search::Expr;
use sqlx::sqlite::Sqlite;
use sqlx::{Row, Transaction};

use super::from_sqlx;
use super::translate::{fts_all, trigram_list};
use crate::StorageError;

/// Matches read of each trigram's list to estimate its frequency.
const SAMPLE: i64 = 256;
/// Trigrams weighed at most, spread over the term: a term of 256 bytes has up to 254, and
/// a few rare ones narrow as well as all of them.
const WEIGHED: usize = 16;
/// Trigrams kept beside the rarest: those at most this many times as frequent narrow the
/// candidates further for little more reading.
const WITHIN: f64 = 8.0;

/// The chosen trigrams of each keyword term of `expr` that has more than one.
pub(super) async fn chosen(
    tx: &mut Transaction<'_, Sqlite>,
    expr: &Expr,
) -> Result<BTreeMap<String, Vec<String>>, StorageError> {
    let mut terms = Vec::new();
    keyword_terms(expr, &mut terms);
    let mut chosen = BTreeMap::new();
    let mut last = None;
    for term in terms {
        let trigrams = trigram_list(term);
        if trigrams.len() < 2 || chosen.contains_key(term) {
            continue;
        }
        let last = match last {
            Some(last) => last,
            None => {
                let found: i64 =
                    sqlx::query_scalar("SELECT coalesce(max(rowid), 0) FROM resources")
                        .fetch_one(&mut **tx)
                        .await
                        .map_err(from_sqlx)?;
                *last.insert(found)
            }
        };
        let weighed = spread(trigrams);
        let mut estimated = Vec::with_capacity(weighed.len());
        for trigram in weighed {
            let row = sqlx::query(
                "SELECT count(*), coalesce(max(rowid), 0) FROM (SELECT rowid FROM \
                 resources_keywords WHERE resources_keywords MATCH ? LIMIT ?)",
            )
            .bind(fts_all(std::slice::from_ref(&trigram)))
            .bind(SAMPLE)
            .fetch_one(&mut **tx)
            .await
            .map_err(from_sqlx)?;
            let (seen, reached): (i64, i64) = (
                row.try_get(0).map_err(from_sqlx)?,
                row.try_get(1).map_err(from_sqlx)?,
            );
            estimated.push((frequency(seen, reached, last), trigram));
        }
        estimated.sort_by(|a, b| a.0.total_cmp(&b.0));
        let rarest = estimated.first().map_or(0.0, |(f, _)| *f);
        let kept = estimated
            .into_iter()
            .filter(|(f, _)| *f <= rarest.max(1.0) * WITHIN)
            .map(|(_, t)| t)
            .collect();
        chosen.insert(term.to_owned(), kept);
    }
    Ok(chosen)
}

/// Documents estimated to hold a trigram whose first `seen` matches (at most `SAMPLE`)
/// end at rowid `reached`, of rowids up to `last`: exact below the sample.
fn frequency(seen: i64, reached: i64, last: i64) -> f64 {
    if seen < SAMPLE || reached <= 0 {
        seen as f64
    } else {
        seen as f64 * last as f64 / reached as f64
    }
}

/// At most `WEIGHED` of `trigrams`, evenly spaced over the term.
fn spread(trigrams: Vec<String>) -> Vec<String> {
    if trigrams.len() <= WEIGHED {
        return trigrams;
    }
    let len = trigrams.len();
    (0..WEIGHED)
        .map(|i| trigrams[i * len / WEIGHED].clone())
        .collect()
}

fn keyword_terms<'a>(expr: &'a Expr, into: &mut Vec<&'a str>) {
    match expr {
        Expr::Keyword(term) => into.push(term),
        Expr::And(all) | Expr::Or(all) => all.iter().for_each(|e| keyword_terms(e, into)),
        Expr::Not(inner) | Expr::Scope(inner) => keyword_terms(inner, into),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap as Map;

    use time::OffsetDateTime;

    use super::*;
    use crate::document::ResourceDocument;
    use crate::sqlite::SqliteStorage;
    use crate::{ResourceStorage, SearchStorage};

    /// Every name holds `app-`; a few hold `-7` after it, and the content of others says
    /// `app` and `7` as words.
    fn document(i: usize) -> ResourceDocument {
        ResourceDocument {
            cluster: "c".to_owned(),
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            namespace: ["a", "b"][i % 2].to_owned(),
            name: format!("app-{i}"),
            uid: format!("{i:05}"),
            labels: Map::from([("app".to_owned(), format!("app-{}", i % 40))]),
            annotations: Map::new(),
            owner_references: Vec::new(),
            creation_timestamp: None,
            deletion_timestamp: None,
            resource_version: "1".to_owned(),
            sync_at: OffsetDateTime::UNIX_EPOCH,
            deleted: i.is_multiple_of(11),
            object: serde_json::json!({"spec": {"text": if i.is_multiple_of(13) { "app 7" } else { "x" }}}),
            issues: Vec::new(),
            refs: Vec::new(),
            history: None,
        }
    }

    /// What keyword search is defined to find: the term in the name, the namespace or a
    /// label's `key=value`, or its words in the content.
    fn expected(term: &str, docs: &[ResourceDocument]) -> Vec<String> {
        let mut ids: Vec<(String, String)> = docs
            .iter()
            .filter(|d| !d.deleted)
            .filter(|d| {
                d.name.contains(term)
                    || d.namespace.contains(term)
                    || d.labels
                        .iter()
                        .any(|(k, v)| format!("{k}={v}").contains(term))
                    || (term == "app-7" && d.object.to_string().contains("app 7"))
            })
            .map(|d| {
                (
                    crate::document::document_id(&d.cluster, &d.uid),
                    d.name.clone(),
                )
            })
            .collect();
        ids.sort();
        ids.into_iter().map(|(_, name)| name).collect()
    }

    /// With common trigrams left out and the page counting its own matches, pages and
    /// totals are those of the definition, for terms with rare and common trigrams, alone
    /// and with another condition.
    #[tokio::test]
    async fn chosen_trigrams_and_counted_pages_answer_as_defined() {
        let dir = tempfile::tempdir().unwrap();
        let storage = SqliteStorage::open(&dir.path().join("r.db")).await.unwrap();
        let docs: Vec<_> = (0..1500).map(document).collect();
        for batch in docs.chunks(500) {
            storage.upsert(batch).await.unwrap();
        }
        for term in ["app-7", "app-13", "pp-14", "app=app-37"] {
            let mut tx = storage.pool.begin().await.unwrap();
            let query = karpor_search::keyword(term).unwrap();
            let chosen = chosen(&mut tx, &query.filter).await.unwrap();
            drop(tx);
            assert!(
                chosen[term].len() < trigram_list(term).len(),
                "{term}: {chosen:?}"
            );
            let all = expected(term, &docs);
            assert!(all.len() > 20, "{term}");
            for (from, size) in [(0, 20), (15, 10), (all.len() as u64 - 3, 10)] {
                for cap in [None, Some(5)] {
                    let found = storage
                        .search_counted(&query, from, size, cap)
                        .await
                        .unwrap();
                    let names: Vec<_> = found.items.iter().map(|d| d.name.clone()).collect();
                    let page: Vec<_> = all
                        .iter()
                        .skip(from as usize)
                        .take(size as usize)
                        .cloned()
                        .collect();
                    assert_eq!(names, page, "{term} from {from}");
                    let total = cap.map_or(all.len() as u64, |c| c.min(all.len() as u64));
                    assert_eq!(found.total, total, "{term} from {from} cap {cap:?}");
                }
            }
        }
    }

    #[test]
    fn a_long_term_is_weighed_by_trigrams_spread_over_it() {
        let long = trigram_list(&(0..80).map(|i| format!("{i:03}")).collect::<String>());
        assert!(long.len() > 2 * WEIGHED);
        let weighed = spread(long.clone());
        assert_eq!(weighed.len(), WEIGHED);
        assert_eq!(weighed.first(), long.first());
        assert!(weighed.iter().all(|t| long.contains(t)));
        let short = trigram_list("app-123");
        assert_eq!(spread(short.clone()), short);
    }

    #[test]
    fn a_full_sample_is_scaled_by_how_far_it_reached() {
        assert_eq!(frequency(10, 900, 1000), 10.0);
        assert_eq!(frequency(SAMPLE, 256, 1_000_000), 1_000_000.0);
        assert_eq!(frequency(SAMPLE, 512_000, 1_000_000), 500.0);
    }
}
