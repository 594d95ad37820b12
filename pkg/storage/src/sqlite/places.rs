//! A document's namespace and cluster as words of its full text, so a full-text term within
//! named namespaces is one lookup of the full-text index, which intersects the words' lists
//! itself. Without them the set of every document holding the words was built first (a
//! quarter of the documents for `redis` at 1,000,000, 37 ms), and then checked against the
//! namespace's rows.
//!
//! A place word starts with `§`, which is not a letter or digit: the words karpor makes of
//! a query ([`karpor_search::words`]) never hold it, so no query matches a place word but
//! through [`within`]. SQLite's `ascii` tokenizer keeps any non-ASCII character inside a
//! word, so each place is one token.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqlitePool;
use tracing::Instrument;

use super::{decode, from_sqlx};
use crate::document::ResourceDocument;
use crate::StorageError;

/// Namespaces a term is narrowed by at most: past this many, the words' own set is used.
const NAMED: usize = 64;
/// Documents whose full text is rewritten in one transaction.
const BATCH: i64 = 200;

fn word(tag: char, place: &str) -> String {
    let mut word = format!("§{tag}");
    for byte in place.bytes() {
        let _ = write!(word, "{byte:02x}");
    }
    word
}

/// What the full-text index holds of a document: its words and its places.
pub(super) fn full_text(d: &ResourceDocument) -> String {
    format!(
        "{} {} {}",
        d.content(),
        word('n', &d.namespace),
        word('c', &d.cluster)
    )
}

/// The FTS5 terms that narrow a match to `namespaces` (any of them) and `cluster`, to be
/// ANDed with its words; `None` when there is nothing to narrow by or too much.
pub(super) fn within(namespaces: Option<&[String]>, cluster: Option<&str>) -> Option<String> {
    let mut terms = Vec::new();
    if let Some(namespaces) = namespaces {
        if namespaces.is_empty() || namespaces.len() > NAMED {
            return None;
        }
        let any: Vec<String> = namespaces
            .iter()
            .map(|ns| format!("\"{}\"", word('n', ns)))
            .collect();
        terms.push(format!("({})", any.join(" OR ")));
    }
    if let Some(cluster) = cluster {
        terms.push(format!("\"{}\"", word('c', cluster)));
    }
    (!terms.is_empty()).then(|| terms.join(" AND "))
}

/// Whether every document's full text holds its places, shared by the storage and the task
/// that writes the rest.
#[derive(Debug, Clone, Default)]
pub(super) struct Placed(Arc<AtomicBool>);

impl Placed {
    pub(super) fn all(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Checks for documents written before places (listed by migration 0010) and, while
    /// there are some, rewrites their full text in the background, a batch at a time
    /// through the writing connection.
    pub(super) async fn start(writer: &SqlitePool) -> Result<Placed, StorageError> {
        let placed = Placed::default();
        if left(writer).await? == 0 {
            placed.0.store(true, Ordering::Release);
            return Ok(placed);
        }
        let task = placed.clone();
        let writer = writer.clone();
        tokio::spawn(
            async move {
                loop {
                    match place_a_batch(&writer).await {
                        Ok(0) => break,
                        Ok(_) => tokio::task::yield_now().await,
                        Err(e) if writer.is_closed() => {
                            tracing::debug!(error = %e, "storage closed");
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "placing full text; retrying");
                            tokio::time::sleep(Duration::from_secs(5)).await;
                        }
                    }
                }
                task.0.store(true, Ordering::Release);
                tracing::info!("every document's full text holds its places");
            }
            .instrument(tracing::info_span!("placing full text")),
        );
        Ok(placed)
    }
}

async fn left(writer: &SqlitePool) -> Result<i64, StorageError> {
    sqlx::query_scalar("SELECT count(*) FROM (SELECT 1 FROM resources_fts_unplaced LIMIT 1)")
        .fetch_one(writer)
        .await
        .map_err(from_sqlx)
}

/// Rewrites one batch; returns how many documents it took off the list.
async fn place_a_batch(writer: &SqlitePool) -> Result<usize, StorageError> {
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(from_sqlx)?;
    let rows: Vec<(i64, Option<String>)> = sqlx::query_as(
        "SELECT u.doc, d.body FROM resources_fts_unplaced u \
         LEFT JOIN resource_docs d ON d.doc = u.doc LIMIT ?",
    )
    .bind(BATCH)
    .fetch_all(&mut *tx)
    .await
    .map_err(from_sqlx)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let taken = rows.len();
    // Decoding and splitting into words is CPU work: off the async threads.
    let (listed, texts) = tokio::task::spawn_blocking(move || {
        let listed: Vec<i64> = rows.iter().map(|(doc, _)| *doc).collect();
        let texts: Result<Vec<serde_json::Value>, StorageError> = rows
            .iter()
            .filter_map(|(doc, body)| Some((doc, body.as_ref()?)))
            .map(|(doc, body)| Ok(serde_json::json!([doc, full_text(&decode(body)?)])))
            .collect();
        texts.map(|texts| (listed, texts))
    })
    .await
    .map_err(|e| StorageError::Unavailable(e.to_string()))??;
    sqlx::query(
        "INSERT OR REPLACE INTO resources_fts (rowid, content) \
         SELECT value ->> 0, value ->> 1 FROM json_each(?)",
    )
    .bind(serde_json::Value::Array(texts).to_string())
    .execute(&mut *tx)
    .await
    .map_err(from_sqlx)?;
    sqlx::query("DELETE FROM resources_fts_unplaced WHERE doc IN (SELECT value FROM json_each(?))")
        .bind(serde_json::json!(listed).to_string())
        .execute(&mut *tx)
        .await
        .map_err(from_sqlx)?;
    tx.commit().await.map_err(from_sqlx)?;
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use time::OffsetDateTime;

    use super::*;
    use crate::sqlite::SqliteStorage;
    use crate::{ResourceStorage, SearchStorage};

    fn document(i: usize) -> ResourceDocument {
        let at = OffsetDateTime::UNIX_EPOCH;
        ResourceDocument {
            cluster: ["one", "two"][i % 2].to_owned(),
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            namespace: ["web", "data", "kube-system"][i % 3].to_owned(),
            name: format!("pod-{i}"),
            uid: format!("uid-{i}"),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner_references: Vec::new(),
            creation_timestamp: Some(at),
            deletion_timestamp: None,
            resource_version: "1".to_owned(),
            sync_at: at,
            deleted: false,
            object: serde_json::json!({"spec": {"image": (["redis", "nginx"][i % 2])}}),
            issues: Vec::new(),
            refs: Vec::new(),
            history: None,
        }
    }

    async fn total(storage: &SqliteStorage, sql: &str) -> u64 {
        let query = karpor_search::parse(sql).unwrap();
        storage.search(&query, 0, 1).await.unwrap().total
    }

    /// A file whose full text has no places (as written before 0010) answers the same
    /// while its documents are placed in the background, and is narrowed by place after.
    #[tokio::test]
    async fn full_text_written_before_places_is_placed_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let documents: Vec<ResourceDocument> =
            (0..(3 * BATCH as usize + 7)).map(document).collect();
        let storage = SqliteStorage::open(&path).await.unwrap();
        assert!(storage.placed.all());
        storage.upsert(&documents).await.unwrap();
        // As before 0010: the words alone, every document listed.
        let words: Vec<serde_json::Value> =
            sqlx::query_as::<_, (i64, String)>("SELECT doc, body FROM resource_docs")
                .fetch_all(&storage.writer)
                .await
                .unwrap()
                .into_iter()
                .map(|(doc, body)| serde_json::json!([doc, decode(&body).unwrap().content()]))
                .collect();
        sqlx::query(
            "INSERT OR REPLACE INTO resources_fts (rowid, content) \
             SELECT value ->> 0, value ->> 1 FROM json_each(?)",
        )
        .bind(serde_json::Value::Array(words).to_string())
        .execute(&storage.writer)
        .await
        .unwrap();
        sqlx::query("INSERT INTO resources_fts_unplaced (doc) SELECT doc FROM resource_docs")
            .execute(&storage.writer)
            .await
            .unwrap();
        let place = format!("\"{}\"", word('n', "web"));
        let placed_words = |storage: &SqliteStorage| {
            let pool = storage.pool.clone();
            let place = place.clone();
            async move {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM resources_fts WHERE resources_fts MATCH ?",
                )
                .bind(place)
                .fetch_one(&pool)
                .await
                .unwrap()
            }
        };
        assert_eq!(placed_words(&storage).await, 0);
        drop(storage);
        let query = "select * from resources where contains(content, 'redis') \
                     and namespace in ('web', 'data') and cluster = 'one'";
        let expected = documents
            .iter()
            .filter(|d| d.object.to_string().contains("redis"))
            .filter(|d| ["web", "data"].contains(&d.namespace.as_str()) && d.cluster == "one")
            .count() as u64;
        let storage = SqliteStorage::open(&path).await.unwrap();
        // Whether or not placing has finished, the answer is the same.
        assert_eq!(total(&storage, query).await, expected);
        // One document written meanwhile is placed by its write.
        storage.upsert(&documents[..1]).await.unwrap();
        for _ in 0..500 {
            if storage.placed.all() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(storage.placed.all());
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM resources_fts_unplaced")
            .fetch_one(&storage.pool)
            .await
            .unwrap();
        assert_eq!(left, 0);
        let in_web = documents.iter().filter(|d| d.namespace == "web").count();
        assert_eq!(placed_words(&storage).await, in_web as i64);
        assert_eq!(total(&storage, query).await, expected);
        // A deletion and an update keep the places right: uid-0 was in web, cluster
        // one, with redis; uid-3 (cluster two) moves from web to data.
        assert!(storage.delete("one", "uid-0", None, None).await.unwrap());
        let mut moved = document(3);
        moved.namespace = "data".to_owned();
        storage.upsert(&[moved]).await.unwrap();
        assert_eq!(placed_words(&storage).await, in_web as i64 - 2);
        assert_eq!(total(&storage, query).await, expected - 1);
    }

    #[test]
    fn a_place_is_one_word_no_query_makes() {
        let place = word('n', "kube-system");
        assert_eq!(place, "§n6b7562652d73797374656d");
        // A query's words are letters and digits only: the place word is none of them.
        assert!(!karpor_search::words(&format!("x {place} y")).contains(&place));
        assert_eq!(word('n', ""), "§n");
    }

    #[test]
    fn narrowing_names_every_namespace_and_the_cluster() {
        let namespaces = ["a".to_owned(), "b".to_owned()];
        assert_eq!(
            within(Some(&namespaces), Some("c")).as_deref(),
            Some("(\"§n61\" OR \"§n62\") AND \"§c63\"")
        );
        assert_eq!(within(None, None), None);
        assert_eq!(within(Some(&[]), Some("c")), None);
        let many: Vec<String> = (0..=NAMED).map(|i| i.to_string()).collect();
        assert_eq!(within(Some(&many), None), None);
    }
}
