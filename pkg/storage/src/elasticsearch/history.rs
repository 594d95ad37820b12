//! History on Elasticsearch and OpenSearch: an index of revisions beside the documents'
//! (`INDEX-revisions`), each revision's id its object's cluster and uid and, for an update,
//! its resourceVersion, created once (a second write of it is a conflict, and done).
//!
//! Revisions are written often and read rarely, so they are never refreshed at write:
//! where the storage's `refresh` promises read-your-writes (`true`, `wait_for`), a history
//! read refreshes the revisions index first. (A refresh at every write cost the
//! Elasticsearch-API test server time in proportion to the index: 240 ms a batch at
//! 16,000 revisions, against 3 ms without.)

use std::collections::HashMap;

use async_trait::async_trait;
use elasticsearch::indices::IndicesRefreshParts;
use elasticsearch::params::Refresh;
use elasticsearch::{MgetParts, SearchParts};
use karpor_search::{Expr, Field, Op, Value};
use serde_json::{json, Value as Json};
use time::OffsetDateTime;

use super::{decode, rfc3339_text, success, transport_error, ElasticStorage, Pending, MAX_WINDOW};
use crate::config::RefreshPolicy;
use crate::document::{fence_version, HistoryNote, ResourceDocument};
use crate::history::{
    Change, ChangeCounts, ChangePage, ChangeQuery, HistoryCaps, HistorySize, HistoryStorage,
    ObjectName, Revision,
};
use crate::{Bucket, StorageError};

/// Kinds or change types counted at most.
const COUNTED: usize = 1_000;

/// The revisions index of the documents' index `index`.
pub(super) fn index_of(index: &str) -> String {
    format!("{index}-revisions")
}

pub(super) fn mapping() -> Json {
    let keyword = json!({"type": "keyword"});
    let date = json!({"type": "date"});
    json!({
        "settings": {"analysis": {"normalizer": {"karpor_lowercase": {
            "type": "custom", "filter": ["lowercase"]
        }}}},
        "mappings": {"dynamic": false, "properties": {
            "cluster": keyword, "uid": keyword, "resourceVersion": keyword,
            "version": {"type": "long"}, "apiVersion": keyword,
            "kind": {"type": "keyword", "fields": {"lower": {
                "type": "keyword", "normalizer": "karpor_lowercase"
            }}},
            "namespace": keyword, "name": keyword, "change": keyword,
            "seenAt": date, "keepUntil": date, "late": {"type": "boolean"},
            "bytes": {"type": "long"},
            "revision": {"type": "object", "enabled": false}
        }}
    })
}

/// An update's id is its version's; an object is created once and deleted once, whatever
/// writers race (a writer paused past its lease may land a write after the next owner's
/// relist removed the object, and the relist after it would find it gone again).
fn revision_id(r: &Revision) -> String {
    match r.change {
        Change::Updated => format!("{}/{}/{}/updated", r.cluster, r.uid, r.resource_version),
        Change::Created | Change::Deleted => {
            format!("{}/{}/{}", r.cluster, r.uid, r.change.as_str())
        }
    }
}

/// The bulk entry writing a revision: created once, except that a deletion of a newer
/// version replaces an older one (its state is the object's last).
pub(super) fn pending(index: &str, r: &Revision) -> Pending {
    let id = revision_id(r);
    let action = match (r.change, fence_version(&r.resource_version)) {
        (Change::Deleted, Some(version)) => json!({"index": {
            "_index": index, "_id": id, "version": version, "version_type": "external_gte"
        }}),
        _ => json!({"create": {"_index": index, "_id": id}}),
    };
    let source = json!({
        "cluster": r.cluster, "uid": r.uid, "resourceVersion": r.resource_version,
        "version": fence_version(&r.resource_version), "apiVersion": r.api_version,
        "kind": r.kind, "namespace": r.namespace, "name": r.name,
        "change": r.change.as_str(), "seenAt": rfc3339_text(r.seen_at),
        "keepUntil": rfc3339_text(r.keep_until), "late": r.late,
        "bytes": r.stored_bytes(), "revision": r,
    });
    (id, action, source)
}

fn decode_revision(source: &Json) -> Result<Revision, StorageError> {
    serde_json::from_value(source["revision"].clone())
        .map_err(|e| StorageError::Corrupt(e.to_string()))
}

/// `expr` as a query on the revisions index: the fields a revision has.
fn filter(expr: &Expr) -> Result<Json, StorageError> {
    let all = |items: &[Expr]| items.iter().map(filter).collect::<Result<Vec<_>, _>>();
    Ok(match expr {
        Expr::All => json!({"match_all": {}}),
        Expr::And(items) => json!({"bool": {"filter": all(items)?}}),
        Expr::Or(items) => json!({"bool": {"should": all(items)?, "minimum_should_match": 1}}),
        Expr::Not(inner) => json!({"bool": {"must_not": [filter(inner)?]}}),
        Expr::Scope(inner) => filter(inner)?,
        Expr::Compare { field, op, value } => {
            let (name, value) = term(field, value)?;
            match op {
                Op::Eq => json!({"term": {name: value}}),
                Op::NotEq => json!({"bool": {"must_not": [{"term": {name: value}}]}}),
                Op::Lt => json!({"range": {name: {"lt": value}}}),
                Op::LtEq => json!({"range": {name: {"lte": value}}}),
                Op::Gt => json!({"range": {name: {"gt": value}}}),
                Op::GtEq => json!({"range": {name: {"gte": value}}}),
            }
        }
        Expr::In {
            field,
            values,
            negated,
        } => {
            let mut name = "";
            let mut terms = Vec::with_capacity(values.len());
            for value in values {
                let (field_name, value) = term(field, value)?;
                name = field_name;
                terms.push(value);
            }
            let any = json!({"terms": {name: terms}});
            if *negated {
                json!({"bool": {"must_not": [any]}})
            } else {
                any
            }
        }
        _ => return Err(crate::history::unsupported_filter()),
    })
}

fn term(field: &Field, value: &Value) -> Result<(&'static str, Json), StorageError> {
    Ok(match (field, value) {
        (Field::Cluster, Value::Text(t)) => ("cluster", json!(t)),
        (Field::ApiVersion, Value::Text(t)) => ("apiVersion", json!(t)),
        (Field::Kind, Value::Text(t)) => ("kind.lower", json!(t.to_lowercase())),
        (Field::Namespace, Value::Text(t)) => ("namespace", json!(t)),
        (Field::Name, Value::Text(t)) => ("name", json!(t)),
        (Field::Uid, Value::Text(t)) => ("uid", json!(t)),
        (Field::SyncAt, Value::Time(t)) => ("seenAt", json!(rfc3339_text(*t))),
        _ => return Err(crate::history::unsupported_filter()),
    })
}

fn change_filter(query: &ChangeQuery) -> Result<Json, StorageError> {
    let mut all = vec![filter(&query.filter)?];
    let mut range = serde_json::Map::new();
    if let Some(since) = query.since {
        range.insert("gte".into(), json!(rfc3339_text(since)));
    }
    if let Some(until) = query.until {
        range.insert("lt".into(), json!(rfc3339_text(until)));
    }
    if !range.is_empty() {
        all.push(json!({"range": {"seenAt": range}}));
    }
    if !query.changes.is_empty() {
        let changes: Vec<&str> = query.changes.iter().map(|c| c.as_str()).collect();
        all.push(json!({"terms": {"change": changes}}));
    }
    Ok(json!({"bool": {"filter": all}}))
}

impl ElasticStorage {
    pub(super) fn revisions_index(&self) -> String {
        index_of(&self.index)
    }

    /// Writes revisions, unrefreshed (see the module's note).
    pub(super) async fn write_revisions(
        &self,
        revisions: Vec<Pending>,
    ) -> Result<(), StorageError> {
        self.bulk(revisions, Refresh::False).await
    }

    async fn refresh_revisions(&self, index: &str) -> Result<(), StorageError> {
        let response = self
            .client
            .indices()
            .refresh(IndicesRefreshParts::Index(&[index]))
            .send()
            .await
            .map_err(transport_error)?;
        success(response, "refresh").await.map(|_| ())
    }

    async fn search_revisions(&self, body: Json, what: &str) -> Result<Json, StorageError> {
        self.ready().await?;
        let index = self.revisions_index();
        if self.refresh != RefreshPolicy::False {
            self.refresh_revisions(&index).await?;
        }
        let response = self
            .client
            .search(SearchParts::Index(&[&index]))
            .body(body)
            .send()
            .await
            .map_err(transport_error)?;
        success(response, what).await
    }

    /// The stored documents of those in `documents` that ask for history, by id.
    pub(super) async fn stored(
        &self,
        documents: &[ResourceDocument],
    ) -> Result<HashMap<String, ResourceDocument>, StorageError> {
        let ids = crate::history::compared_ids(documents);
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let response = self
            .client
            .mget(MgetParts::Index(&self.index))
            .body(json!({"ids": ids}))
            .send()
            .await
            .map_err(transport_error)?;
        let answer = success(response, "mget").await?;
        let mut found = HashMap::new();
        for doc in answer["docs"].as_array().into_iter().flatten() {
            if doc["found"] == true {
                let document = decode(&doc["_source"])?;
                found.insert(document.id(), document);
            }
        }
        Ok(found)
    }

    /// A deletion revision for each document `query` selects that is not marked
    /// deleted, a page at a time (a relist after an outage may purge many).
    pub(super) async fn record_deletions(
        &self,
        query: &Json,
        note: &HistoryNote,
    ) -> Result<(), StorageError> {
        const PAGE: usize = 500;
        let now = OffsetDateTime::now_utc();
        let index = self.revisions_index();
        let mut after: Option<Json> = None;
        loop {
            let mut body = json!({"query": query, "size": PAGE, "sort": [{"id": "asc"}]});
            if let Some(after) = &after {
                body["search_after"] = after.clone();
            }
            let answer = self.search_request(body, "documents to purge").await?;
            let hits = answer["hits"]["hits"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut deletions = Vec::with_capacity(hits.len());
            for hit in &hits {
                let document = decode(&hit["_source"])?;
                if !document.deleted {
                    deletions.push(pending(
                        &index,
                        &Revision::deletion(&document, None, now, note),
                    ));
                }
            }
            self.write_revisions(deletions).await?;
            match hits.last() {
                Some(last) if hits.len() == PAGE => after = Some(last["sort"].clone()),
                _ => return Ok(()),
            }
        }
    }
}

#[async_trait]
impl HistoryStorage for ElasticStorage {
    async fn object_revisions(
        &self,
        object: &ObjectName,
        since: Option<OffsetDateTime>,
        until: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Revision>, StorageError> {
        let mut range = serde_json::Map::new();
        if let Some(since) = since {
            range.insert("gt".into(), json!(rfc3339_text(since)));
        }
        if let Some(until) = until {
            range.insert("lte".into(), json!(rfc3339_text(until)));
        }
        let body = json!({
            "query": {"bool": {"filter": [
                {"term": {"cluster": object.cluster}},
                {"term": {"namespace": object.namespace}},
                {"term": {"name": object.name}},
                {"term": {"kind.lower": object.kind.to_lowercase()}},
                {"range": {"seenAt": range}},
            ]}},
            "sort": [{"seenAt": "desc"}, {"version": {"order": "desc", "missing": "_last"}}],
            "size": limit.min(MAX_WINDOW as usize),
        });
        let answer = self.search_revisions(body, "object history").await?;
        answer["hits"]["hits"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|hit| decode_revision(&hit["_source"]))
            .collect()
    }

    async fn changes(
        &self,
        query: &ChangeQuery,
        from: u64,
        size: u64,
    ) -> Result<ChangePage, StorageError> {
        if from.saturating_add(size) > MAX_WINDOW {
            return Err(StorageError::Invalid(format!(
                "changes beyond the first {MAX_WINDOW} cannot be paged to: narrow the window"
            )));
        }
        let body = json!({
            "query": change_filter(query)?,
            "sort": [{"seenAt": "desc"}, {"cluster": "asc"}, {"uid": "asc"},
                {"version": {"order": "desc", "missing": "_last"}}],
            "from": from, "size": size, "track_total_hits": true,
        });
        let answer = self.search_revisions(body, "changes").await?;
        let items = answer["hits"]["hits"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|hit| {
                let mut revision = decode_revision(&hit["_source"])?;
                revision.back = None;
                revision.state = None;
                Ok(revision)
            })
            .collect::<Result<_, StorageError>>()?;
        Ok(ChangePage {
            items,
            total: answer["hits"]["total"]["value"].as_u64().unwrap_or(0),
        })
    }

    async fn change_counts(&self, query: &ChangeQuery) -> Result<ChangeCounts, StorageError> {
        let terms = |field: &str| {
            json!({"terms": {"field": field, "size": COUNTED,
                "order": [{"_count": "desc"}, {"_key": "asc"}]}})
        };
        let body = json!({
            "size": 0, "query": change_filter(query)?,
            "aggs": {"kind": terms("kind"), "change": terms("change")},
        });
        let answer = self.search_revisions(body, "change counts").await?;
        let buckets = |name: &str| -> Vec<Bucket> {
            answer["aggregations"][name]["buckets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| Bucket {
                    key: b["key"].as_str().unwrap_or_default().to_owned(),
                    count: b["doc_count"].as_u64().unwrap_or(0),
                })
                .collect()
        };
        Ok(ChangeCounts {
            by_kind: buckets("kind"),
            by_change: buckets("change"),
        })
    }

    async fn expire(&self, now: OffsetDateTime, caps: HistoryCaps) -> Result<u64, StorageError> {
        let index = self.revisions_index();
        let mut removed = self
            .delete_by_query_in(
                &index,
                json!({"range": {"keepUntil": {"lt": rfc3339_text(now)}}}),
            )
            .await?;
        for size in self.history_sizes().await? {
            let over = caps.over(&size);
            if over == 0 {
                continue;
            }
            // The newest of the oldest `over` (at most a window's): everything up to it goes.
            let body = json!({
                "query": {"term": {"cluster": size.cluster}},
                "sort": [{"seenAt": "asc"}], "size": 1,
                "from": over.min(MAX_WINDOW) - 1, "_source": false,
            });
            let answer = self.search_revisions(body, "oldest revisions").await?;
            let Some(last) = answer["hits"]["hits"][0]["sort"][0].as_i64() else {
                continue;
            };
            let until = OffsetDateTime::from_unix_timestamp_nanos(i128::from(last) * 1_000_000)
                .unwrap_or(OffsetDateTime::UNIX_EPOCH);
            removed += self
                .delete_by_query_in(
                    &index,
                    json!({"bool": {"filter": [
                        {"term": {"cluster": size.cluster}},
                        {"range": {"seenAt": {"lte": rfc3339_text(until)}}},
                    ]}}),
                )
                .await?;
        }
        Ok(removed)
    }

    async fn history_sizes(&self) -> Result<Vec<HistorySize>, StorageError> {
        let body = json!({
            "size": 0,
            "aggs": {"clusters": {
                "terms": {"field": "cluster", "size": COUNTED, "order": {"_key": "asc"}},
                "aggs": {"bytes": {"sum": {"field": "bytes"}}},
            }},
        });
        let answer = self.search_revisions(body, "history sizes").await?;
        Ok(answer["aggregations"]["clusters"]["buckets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| HistorySize {
                cluster: b["key"].as_str().unwrap_or_default().to_owned(),
                revisions: b["doc_count"].as_u64().unwrap_or(0),
                bytes: b["bytes"]["value"].as_f64().unwrap_or(0.0) as u64,
            })
            .collect())
    }
}
