//! Elasticsearch or OpenSearch through the official client. The index and its mapping are
//! created on first use; writes go in bulk, retried with backoff on 429 and 5xx until
//! every document is acknowledged.

mod history;
mod translate;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use elasticsearch::auth::Credentials;
use elasticsearch::cluster::ClusterHealthParts;
use elasticsearch::http::request::JsonBody;
use elasticsearch::http::response::Response;
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::indices::{
    IndicesCreateParts, IndicesPutIndexTemplateParts, IndicesPutMappingParts,
};
use elasticsearch::params::{Conflicts, Refresh, VersionType};
use elasticsearch::{
    BulkParts, CountParts, DeleteByQueryParts, DeleteParts, Elasticsearch, GetParts, SearchParts,
};
use karpor_search::{Field, Query};
use serde_json::{json, Value as Json};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::config::{ElasticConfig, RefreshPolicy};
use crate::document::{document_id, fence_version, HistoryNote, ResourceDocument};
use crate::history::{revise, Revision};
use crate::window::{capped_total, total, window};
use crate::{
    aggregatable, AuditTotals, Bucket, ResourceStorage, SearchResult, SearchStorage, StorageError,
    VersionDigest,
};

const BULK_ATTEMPTS: u32 = 8;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Elasticsearch's default `index.max_result_window`.
const MAX_WINDOW: u64 = 10_000;
/// A write refused by external versioning: the stored version is newer (fenced).
const VERSION_CONFLICT: u16 = 409;

pub(crate) struct ElasticStorage {
    client: Elasticsearch,
    index: String,
    refresh: RefreshPolicy,
    /// The template and index are known to exist; cleared whenever the server cannot be
    /// reached, because the one that comes back may have lost them.
    prepared: AtomicBool,
}

fn transport_error(e: elasticsearch::Error) -> StorageError {
    if e.is_timeout() {
        return StorageError::Timeout;
    }
    // The causes say why (refused, reset, DNS): keep them for the log.
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    StorageError::Unavailable(text)
}

/// Fails unless the answer is a success, with the body's error in the message.
async fn success(response: Response, what: &str) -> Result<Json, StorageError> {
    let code = response.status_code().as_u16();
    let body: Json = response.json().await.unwrap_or(Json::Null);
    match code {
        200..=299 => Ok(body),
        401 | 403 => Err(StorageError::Unauthorized(format!(
            "{what} answered {code}"
        ))),
        429 | 500..=599 => Err(StorageError::Unavailable(format!(
            "{what} answered {code}: {}",
            body["error"]
        ))),
        _ => Err(StorageError::Invalid(format!(
            "{what} answered {code}: {}",
            body["error"]
        ))),
    }
}

/// Pairs counted when grouping by a label or an annotation: the documents that have the
/// key also have others, whose pairs come back too and are dropped.
const MAP_PAIRS: usize = 10_000;

/// A time as the index stores it (the one place times are formatted for Elasticsearch).
fn rfc3339_text(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn rfc3339(t: Option<OffsetDateTime>) -> Json {
    t.map(rfc3339_text).map(Json::String).unwrap_or(Json::Null)
}

/// The indexed form of a document: search fields, and the document itself (not indexed).
fn source(d: &ResourceDocument) -> Json {
    let pairs = |m: &std::collections::BTreeMap<String, String>| -> Vec<String> {
        m.iter().map(|(k, v)| format!("{k}={v}")).collect()
    };
    let counts = d.severity_counts();
    json!({
        "id": d.id(),
        "cluster": d.cluster,
        "apiVersion": d.api_version,
        "kind": d.kind,
        "namespace": d.namespace,
        "name": d.name,
        "uid": d.uid,
        "resourceVersion": d.resource_version,
        "creationTimestamp": rfc3339(d.creation_timestamp),
        "deletionTimestamp": rfc3339(d.deletion_timestamp),
        "syncAt": rfc3339(Some(d.sync_at)),
        "deleted": d.deleted,
        "labelPairs": pairs(&d.labels),
        "labelKeys": d.labels.keys().collect::<Vec<_>>(),
        "annotationPairs": pairs(&d.annotations),
        "annotationKeys": d.annotations.keys().collect::<Vec<_>>(),
        "content": d.content(),
        "issueRules": d.issues.iter().map(|f| f.rule.as_str()).collect::<std::collections::BTreeSet<_>>(),
        "issueSeverities": d.issues.iter().map(|f| f.severity.as_str()).collect::<std::collections::BTreeSet<_>>(),
        "issuesLow": counts.low,
        "issuesMedium": counts.medium,
        "issuesHigh": counts.high,
        "score": d.score(),
        "refs": d.refs.iter().collect::<std::collections::BTreeSet<_>>(),
        "ownerKinds": d.refs.iter().filter(|r| r.starts_with(crate::COUNTED_REFS)).collect::<std::collections::BTreeSet<_>>(),
        "document": d,
    })
}

fn mapping() -> Json {
    let keyword = json!({"type": "keyword"});
    let date = json!({"type": "date"});
    let long = json!({"type": "long"});
    json!({
        "settings": {"analysis": {"normalizer": {"karpor_lowercase": {
            "type": "custom", "filter": ["lowercase"]
        }}}},
        "mappings": {"dynamic": false, "properties": {
            "id": keyword, "cluster": keyword, "apiVersion": keyword,
            "kind": {"type": "keyword", "fields": {"lower": {
                "type": "keyword", "normalizer": "karpor_lowercase"
            }}},
            "namespace": keyword, "name": keyword, "uid": keyword, "resourceVersion": keyword,
            "creationTimestamp": date, "deletionTimestamp": date, "syncAt": date,
            "deleted": {"type": "boolean"},
            "labelPairs": keyword, "labelKeys": keyword,
            "annotationPairs": keyword, "annotationKeys": keyword,
            "content": {"type": "text"},
            "issueRules": keyword, "issueSeverities": keyword,
            "issuesLow": long, "issuesMedium": long, "issuesHigh": long,
            "score": {"type": "double"},
            "refs": keyword, "ownerKinds": keyword,
            "document": {"type": "object", "enabled": false}
        }}
    })
}

fn decode(hit_source: &Json) -> Result<ResourceDocument, StorageError> {
    serde_json::from_value(hit_source["document"].clone())
        .map_err(|e| StorageError::Corrupt(e.to_string()))
}

/// The bulk action of one document: versioned externally by its resourceVersion, so an
/// older one is refused with 409 and the same one is written again (`external_gte`); one
/// that is not a number is written unconditionally (the server's own version then counts
/// on from the stored one).
fn index_action(id: &str, d: &ResourceDocument) -> Json {
    match fence_version(&d.resource_version) {
        Some(version) => json!({"index": {
            "_id": id, "version": version, "version_type": "external_gte"
        }}),
        None => json!({"index": {"_id": id}}),
    }
}

/// A document waiting to be written: its id, its bulk action and its source.
type Pending = (String, Json, Json);

/// Whether a failed bulk may be tried again.
enum BulkFailure {
    Retry(StorageError),
    Fatal(StorageError),
}

impl ElasticStorage {
    pub(crate) fn new(config: &ElasticConfig) -> Result<Self, StorageError> {
        let url = config
            .endpoint()
            .map_err(|issue| StorageError::Misconfigured(issue.to_string()))?;
        let mut transport = TransportBuilder::new(SingleNodeConnectionPool::new(url))
            .timeout(Duration::from_secs(10));
        if let Some(user) = &config.username {
            let password = match &config.password {
                Some(p) => p
                    .resolve()
                    .map_err(|e| StorageError::Misconfigured(e.to_string()))?
                    .expose()
                    .to_owned(),
                None => String::new(),
            };
            transport = transport.auth(Credentials::Basic(user.clone(), password));
        }
        let transport = transport
            .build()
            .map_err(|e| StorageError::Misconfigured(e.to_string()))?;
        Ok(ElasticStorage {
            client: Elasticsearch::new(transport),
            index: config.index.clone(),
            refresh: config.refresh,
            prepared: AtomicBool::new(false),
        })
    }

    fn refresh(&self) -> Refresh {
        match self.refresh {
            RefreshPolicy::WaitFor => Refresh::WaitFor,
            RefreshPolicy::True => Refresh::True,
            RefreshPolicy::False => Refresh::False,
        }
    }

    /// Installs the index template and creates the index, once per contact with the
    /// server; an existing index is used as it is. The template gives the mapping to the
    /// index however it comes to be made, so a server that lost the index recreates it
    /// right on the next write.
    async fn ready(&self) -> Result<(), StorageError> {
        if self.prepared.load(Ordering::Acquire) {
            return Ok(());
        }
        // Two callers may both prepare: both steps are idempotent.
        self.prepare().await?;
        self.prepared.store(true, Ordering::Release);
        Ok(())
    }

    fn lost_contact(&self) {
        self.prepared.store(false, Ordering::Release);
    }

    async fn prepare(&self) -> Result<(), StorageError> {
        self.prepare_index(&self.index, mapping()).await?;
        self.prepare_index(&self.revisions_index(), history::mapping())
            .await
    }

    /// The template of `index` and the index itself, with `mapping`.
    async fn prepare_index(&self, index: &str, mapping: Json) -> Result<(), StorageError> {
        let response = self
            .client
            .indices()
            .put_index_template(IndicesPutIndexTemplateParts::Name(&format!(
                "{index}-template"
            )))
            .body(json!({"index_patterns": [index], "template": mapping}))
            .send()
            .await
            .map_err(transport_error)?;
        success(response, "index template").await?;
        let response = self
            .client
            .indices()
            .create(IndicesCreateParts::Index(index))
            .body(mapping.clone())
            .send()
            .await
            .map_err(transport_error)?;
        let code = response.status_code().as_u16();
        let body: Json = response.json().await.unwrap_or(Json::Null);
        let exists = body["error"]["type"] == "resource_already_exists_exception";
        if exists {
            // An index an older karpor made lacks the fields added since: adding fields
            // to a mapping is allowed, and a no-op when they are there.
            let response = self
                .client
                .indices()
                .put_mapping(IndicesPutMappingParts::Index(&[index]))
                .body(json!({"properties": mapping["mappings"]["properties"]}))
                .send()
                .await
                .map_err(transport_error)?;
            success(response, "index mapping").await?;
            Ok(())
        } else if (200..300).contains(&code) {
            Ok(())
        } else {
            Err(StorageError::Misconfigured(format!(
                "cannot create index {index}: {code} {}",
                body["error"]
            )))
        }
    }

    /// One bulk request of (id, action, source); returns the documents to send again (429
    /// and 5xx items).
    async fn bulk_once(
        &self,
        batch: &[Pending],
        refresh: Refresh,
    ) -> Result<Vec<Pending>, BulkFailure> {
        let mut body: Vec<JsonBody<Json>> = Vec::with_capacity(batch.len() * 2);
        for (_, action, doc) in batch {
            body.push(action.clone().into());
            body.push(doc.clone().into());
        }
        let response = self
            .client
            .bulk(BulkParts::Index(&self.index))
            .refresh(refresh)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                self.lost_contact();
                BulkFailure::Retry(transport_error(e))
            })?;
        let code = response.status_code().as_u16();
        if code == 429 || code >= 500 {
            return Err(BulkFailure::Retry(StorageError::Unavailable(format!(
                "bulk answered {code}"
            ))));
        }
        let answer = success(response, "bulk")
            .await
            .map_err(BulkFailure::Fatal)?;
        let mut again = Vec::new();
        let items = answer["items"].as_array().cloned().unwrap_or_default();
        if items.len() != batch.len() {
            return Err(BulkFailure::Retry(StorageError::Unavailable(format!(
                "bulk answered {} items for {}",
                items.len(),
                batch.len()
            ))));
        }
        for (item, pending) in items.iter().zip(batch) {
            // Keyed by its action: `index` for a document or a deletion, `create` for
            // another revision.
            let item = item
                .as_object()
                .and_then(|o| o.values().next())
                .unwrap_or(&Json::Null);
            let status = item["status"].as_u64().unwrap_or(0);
            match u16::try_from(status).unwrap_or(0) {
                200..=299 => {}
                // Fenced: a newer version is stored, or the revision is; the write is done.
                VERSION_CONFLICT => {}
                429 | 500..=599 => again.push(pending.clone()),
                _ => {
                    return Err(BulkFailure::Fatal(StorageError::Invalid(format!(
                        "document {} refused: {}",
                        pending.0, item["error"]
                    ))))
                }
            }
        }
        Ok(again)
    }

    /// One `_search` on the index; the answer's body.
    async fn search_request(&self, body: Json, what: &str) -> Result<Json, StorageError> {
        let response = self
            .client
            .search(SearchParts::Index(&[&self.index]))
            .body(body)
            .send()
            .await
            .map_err(transport_error)?;
        success(response, what).await
    }

    async fn delete_by_query(&self, query: Json) -> Result<u64, StorageError> {
        let index = self.index.clone();
        self.delete_by_query_in(&index, query).await
    }

    async fn delete_by_query_in(&self, index: &str, query: Json) -> Result<u64, StorageError> {
        self.ready().await?;
        let response = self
            .client
            .delete_by_query(DeleteByQueryParts::Index(&[index]))
            .refresh(true)
            .conflicts(Conflicts::Proceed)
            .body(json!({"query": query}))
            .send()
            .await
            .map_err(transport_error)?;
        let answer = success(response, "delete_by_query").await?;
        Ok(answer["deleted"].as_u64().unwrap_or(0))
    }

    /// Writes every entry, retried with backoff on 429 and 5xx until acknowledged.
    async fn bulk(&self, mut pending: Vec<Pending>, refresh: Refresh) -> Result<(), StorageError> {
        if pending.is_empty() {
            return Ok(());
        }
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=BULK_ATTEMPTS {
            let outcome = match self.ready().await {
                Ok(()) => self.bulk_once(&pending, refresh).await,
                Err(e) => Err(BulkFailure::Retry(e)),
            };
            match outcome {
                Ok(again) if again.is_empty() => return Ok(()),
                Ok(again) => pending = again,
                Err(BulkFailure::Fatal(e)) => return Err(e),
                Err(BulkFailure::Retry(e)) if attempt == BULK_ATTEMPTS => return Err(e),
                Err(BulkFailure::Retry(e)) => {
                    tracing::warn!(error = %e, attempt, "bulk write failed; retrying");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        Err(StorageError::Unavailable(format!(
            "{} documents still refused after {BULK_ATTEMPTS} attempts",
            pending.len()
        )))
    }

    /// Removes a document, fenced by its version; `false` when none was removed.
    async fn delete_document(
        &self,
        cluster: &str,
        uid: &str,
        resource_version: Option<&str>,
    ) -> Result<bool, StorageError> {
        self.ready().await?;
        let id = document_id(cluster, uid);
        let mut request = self
            .client
            .delete(DeleteParts::IndexId(&self.index, &id))
            .refresh(self.refresh());
        // Fenced as upserts are; the server also keeps the tombstone's version a while
        // (`index.gc_deletes`), refusing an older write of the deleted document meanwhile.
        if let Some(version) = resource_version.and_then(fence_version) {
            request = request
                .version(version)
                .version_type(VersionType::ExternalGte);
        }
        let response = request.send().await.map_err(transport_error)?;
        if matches!(response.status_code().as_u16(), 404 | VERSION_CONFLICT) {
            return Ok(false);
        }
        success(response, "delete").await.map(|_| true)
    }
}

#[async_trait]
impl ResourceStorage for ElasticStorage {
    fn backend(&self) -> &'static str {
        "elasticsearch"
    }

    /// `_cluster/health`: green and yellow serve (yellow is a single node's normal
    /// state), red does not. The `status` field is the one to read.
    async fn ping(&self) -> Result<(), StorageError> {
        let response = self
            .client
            .cluster()
            .health(ClusterHealthParts::None)
            .send()
            .await
            .map_err(|e| {
                self.lost_contact();
                transport_error(e)
            })?;
        let body = success(response, "_cluster/health").await?;
        match body["status"].as_str() {
            Some("green" | "yellow") => Ok(()),
            Some("red") => Err(StorageError::StatusRed),
            _ => Err(StorageError::Unavailable(
                "_cluster/health answered without a status".to_owned(),
            )),
        }
    }

    async fn upsert(&self, documents: &[ResourceDocument]) -> Result<(), StorageError> {
        if documents.is_empty() {
            return Ok(());
        }
        let pending: Vec<Pending> = documents
            .iter()
            .map(|d| {
                let id = d.id();
                (id.clone(), index_action(&id, d), source(d))
            })
            .collect();
        if documents.iter().any(|d| d.history.is_some()) {
            self.ready().await?;
            // Compared with the stored document, then the batch's own earlier version.
            let mut known = self.stored(documents).await?;
            let index = self.revisions_index();
            let mut revisions = Vec::new();
            for d in documents.iter().filter(|d| d.history.is_some()) {
                let id = d.id();
                if let Some(revision) = revise(known.get(&id), d) {
                    revisions.push(history::pending(&index, &revision));
                }
                known.insert(id, d.clone());
            }
            // Before the documents: a batch that fails after its revisions compares the
            // same stored documents again and writes the same revisions (created once).
            self.write_revisions(revisions).await?;
        }
        self.bulk(pending, self.refresh()).await
    }

    async fn delete(
        &self,
        cluster: &str,
        uid: &str,
        resource_version: Option<&str>,
        history: Option<&HistoryNote>,
    ) -> Result<bool, StorageError> {
        let last = match history {
            Some(_) => self.get(cluster, uid).await?.filter(|d| !d.deleted),
            None => None,
        };
        let deleted = self.delete_document(cluster, uid, resource_version).await?;
        if let (true, Some(last), Some(note)) = (deleted, last, history) {
            let revision =
                Revision::deletion(&last, resource_version, OffsetDateTime::now_utc(), note);
            self.write_revisions(vec![history::pending(&self.revisions_index(), &revision)])
                .await?;
        }
        Ok(deleted)
    }

    async fn get(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<Option<ResourceDocument>, StorageError> {
        self.ready().await?;
        let response = self
            .client
            .get(GetParts::IndexId(&self.index, &document_id(cluster, uid)))
            .send()
            .await
            .map_err(transport_error)?;
        if response.status_code().as_u16() == 404 {
            return Ok(None);
        }
        let body = success(response, "get").await?;
        if body["found"] == false {
            return Ok(None);
        }
        decode(&body["_source"]).map(Some)
    }

    async fn count(&self, cluster: Option<&str>) -> Result<u64, StorageError> {
        self.ready().await?;
        let mut filters = vec![json!({"term": {"deleted": false}})];
        if let Some(cluster) = cluster {
            filters.push(json!({"term": {"cluster": cluster}}));
        }
        let response = self
            .client
            .count(CountParts::Index(&[&self.index]))
            .body(json!({"query": {"bool": {"filter": filters}}}))
            .send()
            .await
            .map_err(transport_error)?;
        let body = success(response, "count").await?;
        Ok(body["count"].as_u64().unwrap_or(0))
    }

    async fn delete_cluster(&self, cluster: &str) -> Result<u64, StorageError> {
        let revisions = self.revisions_index();
        self.delete_by_query_in(&revisions, json!({"term": {"cluster": cluster}}))
            .await?;
        self.delete_by_query(json!({"term": {"cluster": cluster}}))
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
        let mut filter = vec![
            json!({"term": {"cluster": cluster}}),
            json!({"term": {"apiVersion": api_version}}),
            json!({"term": {"kind": kind}}),
            json!({"range": {"syncAt": {"lt": rfc3339(Some(synced_before))}}}),
        ];
        if let Some(namespace) = namespace {
            filter.push(json!({"term": {"namespace": namespace}}));
        }
        let query = json!({"bool": {"filter": filter}});
        if let Some(note) = history {
            // Their deletions first: a purge that fails after them is retried, and the
            // same revisions are not written twice.
            self.ready().await?;
            self.record_deletions(&query, note).await?;
        }
        self.delete_by_query(query).await
    }

    async fn versions(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<VersionDigest, StorageError> {
        const PAGE: usize = 5_000;
        self.ready().await?;
        let mut filter = vec![
            json!({"term": {"cluster": cluster}}),
            json!({"term": {"apiVersion": api_version}}),
            json!({"term": {"kind": kind}}),
            json!({"term": {"deleted": false}}),
        ];
        if let Some(namespace) = namespace {
            filter.push(json!({"term": {"namespace": namespace}}));
        }
        let mut digest = VersionDigest::default();
        let mut after: Option<Json> = None;
        // Page by page in id order: a type's documents are never all in memory at once.
        loop {
            let mut body = json!({
                "query": {"bool": {"filter": filter}},
                "_source": ["uid", "resourceVersion"],
                "size": PAGE,
                "sort": [{"id": "asc"}],
                "track_total_hits": false,
            });
            if let Some(after) = &after {
                body["search_after"] = after.clone();
            }
            let answer = self.search_request(body, "document versions").await?;
            let hits = answer["hits"]["hits"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for hit in &hits {
                let text = |field: &str| hit["_source"][field].as_str().unwrap_or_default();
                digest.add(text("uid"), text("resourceVersion"));
            }
            match hits.last() {
                Some(last) if hits.len() == PAGE => after = Some(last["sort"].clone()),
                _ => return Ok(digest),
            }
        }
    }
}

#[async_trait]
impl SearchStorage for ElasticStorage {
    async fn search_counted(
        &self,
        query: &Query,
        from: u64,
        size: u64,
        count_up_to: Option<u64>,
    ) -> Result<SearchResult, StorageError> {
        self.ready().await?;
        let rows = window(query, from, size);
        if rows.from.saturating_add(rows.size) > MAX_WINDOW {
            return Err(StorageError::Invalid(format!(
                "results beyond the first {MAX_WINDOW} cannot be paged to: narrow the query"
            )));
        }
        let track = count_up_to.map_or(json!(true), |cap| json!(cap));
        let body = json!({
            "query": translate::filter(&query.filter),
            "sort": translate::sort(&query.order_by),
            "from": rows.from,
            "size": rows.size,
            "track_total_hits": track,
        });
        let answer = self.search_request(body, "search").await?;
        let hits = answer["hits"]["hits"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let items = hits
            .iter()
            .map(|hit| decode(&hit["_source"]))
            .collect::<Result<_, _>>()?;
        let matches = answer["hits"]["total"]["value"].as_u64().unwrap_or(0);
        let (total, exact) = match (count_up_to, answer["hits"]["total"]["relation"].as_str()) {
            // "gte": counting stopped at the cap; one more than it stands for "more".
            (Some(cap), Some("gte")) => capped_total(query, cap + 1, cap),
            (Some(cap), _) => capped_total(query, matches, cap),
            (None, _) => (total(query, matches), true),
        };
        Ok(SearchResult {
            items,
            total,
            exact,
        })
    }

    async fn audit_totals(&self, query: &Query) -> Result<AuditTotals, StorageError> {
        self.ready().await?;
        // Documents written before auditing have none of these fields: they are clean.
        let sum = |field: &str, missing: f64| json!({"sum": {"field": field, "missing": missing}});
        let body = json!({
            "size": 0,
            "track_total_hits": true,
            "query": translate::filter(&query.filter),
            "aggs": {
                "score": sum("score", karpor_audit::PERFECT_SCORE),
                "low": sum("issuesLow", 0.0),
                "medium": sum("issuesMedium", 0.0),
                "high": sum("issuesHigh", 0.0),
            }
        });
        let answer = self.search_request(body, "audit totals").await?;
        let aggs = &answer["aggregations"];
        let count = |name: &str| aggs[name]["value"].as_f64().unwrap_or(0.0).round() as u64;
        Ok(AuditTotals {
            resources: answer["hits"]["total"]["value"].as_u64().unwrap_or(0),
            score_sum: aggs["score"]["value"].as_f64().unwrap_or(0.0),
            findings: karpor_audit::SeverityCounts {
                low: count("low"),
                medium: count("medium"),
                high: count("high"),
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
        self.ready().await?;
        // A map's values are `key=value` pairs in one keyword field: count the pairs of
        // the documents that have the key, then keep that key's.
        let (aggregated, prefix, wanted) = match field {
            Field::Label(key) => ("labelPairs", Some(format!("{key}=")), MAP_PAIRS),
            Field::Annotation(key) => ("annotationPairs", Some(format!("{key}=")), MAP_PAIRS),
            other => (translate::sort_field(other), None, size),
        };

        let mut filter = translate::filter(&query.filter);
        if let Some(prefix) = &prefix {
            filter = json!({"bool": {"filter": [filter, {"prefix": {aggregated: prefix}}]}});
        }
        let terms = json!({
            "field": aggregated,
            "size": wanted,
            "order": [{"_count": "desc"}, {"_key": "asc"}]
        });
        let body = json!({
            "size": 0,
            "query": filter,
            "aggs": {"terms": {"terms": terms}}
        });
        let answer = self.search_request(body, "terms").await?;
        let buckets = answer["aggregations"]["terms"]["buckets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut found: Vec<Bucket> = buckets
            .iter()
            .filter_map(|b| {
                let key = b["key"].as_str().unwrap_or_default();
                let key = match &prefix {
                    Some(prefix) => key.strip_prefix(prefix.as_str())?,
                    None => key,
                };
                Some(Bucket {
                    key: key.to_owned(),
                    count: b["doc_count"].as_u64().unwrap_or(0),
                })
            })
            .collect();
        found.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        found.truncate(size);
        Ok(found)
    }
}
