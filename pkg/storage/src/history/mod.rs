//! History: every change of an object kept as a revision. A revision holds the patch
//! from its object back to the one before (RFC 6902), so the newest state is the
//! document itself (or, once the object went, its deletion revision's last state) and
//! older states are rebuilt by walking back. Expiring the oldest revisions therefore never
//! breaks what is left.
//!
//! Revisions are written by the backends inside the writes the syncer already makes
//! (`upsert`, `delete`, `soft_delete`, `purge_unseen`), from the stored document and the
//! new one: a write that is fenced writes none, one that finds the object unchanged (the
//! same resourceVersion, or nothing but it changed) writes none, and a revision's key is
//! the object's cluster, uid, resourceVersion and change, so two writers (a hand-over, a
//! retried batch) never write one twice.

mod rebuild;

use async_trait::async_trait;
use karpor_search::Expr;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::document::{fenced, HistoryNote, ResourceDocument};
use crate::{Bucket, ResourceStorage, StorageError};

pub use rebuild::{ObjectAt, Rebuilt};

/// How an object changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Created,
    Updated,
    Deleted,
}

impl Change {
    pub const ALL: [Change; 3] = [Change::Created, Change::Updated, Change::Deleted];

    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Deleted => "deleted",
        }
    }

    pub fn parse(text: &str) -> Option<Change> {
        Change::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// One revision as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub change: Change,
    /// When karpor saw it.
    #[serde(with = "time::serde::rfc3339")]
    pub seen_at: OffsetDateTime,
    pub late: bool,
    pub managers: Vec<String>,
    /// From this revision's object back to the previous revision's; `None` for a creation
    /// and a deletion (whose object is `state`).
    pub back: Option<Value>,
    /// The whole object: a deletion's last state.
    pub state: Option<Value>,
    #[serde(with = "time::serde::rfc3339")]
    pub keep_until: OffsetDateTime,
}

impl Revision {
    fn of(document: &ResourceDocument, change: Change, note: &HistoryNote) -> Revision {
        Revision {
            cluster: document.cluster.clone(),
            api_version: document.api_version.clone(),
            kind: document.kind.clone(),
            namespace: document.namespace.clone(),
            name: document.name.clone(),
            uid: document.uid.clone(),
            resource_version: document.resource_version.clone(),
            change,
            seen_at: document.sync_at,
            late: note.late,
            managers: note.managers.clone(),
            back: None,
            state: None,
            keep_until: note.keep_until,
        }
    }

    /// The bytes it takes as stored (its patch and state as JSON text), for the sizes
    /// reported in metrics.
    pub(crate) fn stored_bytes(&self) -> usize {
        let text = |v: &Option<Value>| v.as_ref().map_or(0, |v| v.to_string().len());
        text(&self.back) + text(&self.state)
    }

    /// A deletion: the document's last state.
    pub(crate) fn deletion(
        last: &ResourceDocument,
        resource_version: Option<&str>,
        at: OffsetDateTime,
        note: &HistoryNote,
    ) -> Revision {
        let mut revision = Revision::of(last, Change::Deleted, note);
        if let Some(version) = resource_version {
            revision.resource_version = version.to_owned();
        }
        revision.seen_at = at;
        revision.state = Some(last.object.clone());
        revision
    }
}

/// The revision a write of `new` over `stored` makes, when it makes one: none without a
/// note, for a fenced write, or when nothing but the resourceVersion changed.
pub(crate) fn revise(
    stored: Option<&ResourceDocument>,
    new: &ResourceDocument,
) -> Option<Revision> {
    let note = new.history.as_ref()?;
    let Some(stored) = stored else {
        return (!note.preexisting).then(|| Revision::of(new, Change::Created, note));
    };
    if fenced(&stored.resource_version, &new.resource_version) || (stored.deleted && new.deleted) {
        return None;
    }
    // Marked deleted (a rule's keep-after-delete): its version may be the stored one.
    if new.deleted {
        return Some(Revision::deletion(
            stored,
            Some(&new.resource_version),
            new.sync_at,
            note,
        ));
    }
    if stored.resource_version == new.resource_version
        || same_but_version(&stored.object, &new.object)
    {
        return None;
    }
    let back = json_patch::diff(&new.object, &stored.object);
    let mut revision = Revision::of(new, Change::Updated, note);
    revision.back = Some(serde_json::to_value(back).unwrap_or(Value::Null));
    Some(revision)
}

/// The ids of the documents whose writes ask for history: those the backends read first,
/// to compare with.
pub(crate) fn compared_ids(documents: &[ResourceDocument]) -> Vec<String> {
    documents
        .iter()
        .filter(|d| d.history.is_some())
        .map(ResourceDocument::id)
        .collect()
}

/// Whether two objects differ in nothing but `metadata.resourceVersion`.
fn same_but_version(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    a.len() == b.len()
        && a.iter()
            .all(|(key, value)| match (key.as_str(), b.get(key)) {
                ("metadata", Some(other)) => same_metadata(value, other),
                (_, other) => other == Some(value),
            })
}

fn same_metadata(a: &Value, b: &Value) -> bool {
    const VERSION: &str = "resourceVersion";
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let others = |m: &serde_json::Map<String, Value>| m.keys().filter(|k| *k != VERSION).count();
    others(a) == others(b)
        && a.iter()
            .filter(|(key, _)| *key != VERSION)
            .all(|(key, value)| b.get(key) == Some(value))
}

/// An object by name in a cluster: every uid it had, so a deleted and recreated object's
/// history reads on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    pub cluster: String,
    /// Compared case-insensitively.
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

/// Changes a query selects: `filter` over cluster, apiVersion, kind, namespace, name and
/// uid (and a caller's scope), seen in `[since, until)`, of the given change types (all
/// when empty).
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeQuery {
    pub filter: Expr,
    pub since: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
    pub changes: Vec<Change>,
}

/// Why a change query's filter is refused, for every backend.
pub(crate) fn unsupported_filter() -> StorageError {
    StorageError::Invalid(
        "changes are filtered by cluster, apiVersion, kind, namespace, name, uid and time only"
            .to_owned(),
    )
}

/// A page of changes, newest first, and how many match.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePage {
    /// Without their patch and state: a list says what changed, an object's history how.
    pub items: Vec<Revision>,
    pub total: u64,
}

/// What a change query comes to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeCounts {
    pub by_kind: Vec<Bucket>,
    pub by_change: Vec<Bucket>,
}

/// How much history a cluster holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistorySize {
    pub cluster: String,
    pub revisions: u64,
    /// Patches and states, as JSON text.
    pub bytes: u64,
}

/// How much history one cluster keeps at most; its oldest revisions go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryCaps {
    pub revisions: u64,
    /// Of patches and states, as JSON text.
    pub bytes: u64,
}

impl HistoryCaps {
    /// How many of a cluster's oldest revisions go to bring it within both caps. Bytes
    /// are brought within by the cluster's mean revision size, so a cluster whose newest
    /// revisions are the larger comes within its cap over the next expiries.
    pub(crate) fn over(&self, size: &HistorySize) -> u64 {
        let by_count = size.revisions.saturating_sub(self.revisions);
        let bytes_over = size.bytes.saturating_sub(self.bytes);
        let by_bytes = match (bytes_over, size.revisions) {
            (0, _) | (_, 0) => 0,
            (over, revisions) => {
                let mean = size.bytes.div_ceil(revisions).max(1);
                over.div_ceil(mean).min(revisions)
            }
        };
        by_count.max(by_bytes)
    }
}

/// Reads of history, and its expiry. Writes go with the document writes.
#[async_trait]
pub trait HistoryStorage: ResourceStorage {
    /// An object's revisions (every uid it had) seen after `since` and at or before
    /// `until`, newest first,
    /// at most `limit`.
    async fn object_revisions(
        &self,
        object: &ObjectName,
        since: Option<OffsetDateTime>,
        until: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Revision>, StorageError>;

    /// Changes `query` selects, newest first (then by cluster, uid, resourceVersion),
    /// rows `from..from + size`.
    async fn changes(
        &self,
        query: &ChangeQuery,
        from: u64,
        size: u64,
    ) -> Result<ChangePage, StorageError>;

    /// The changes `query` selects, counted by kind and by change type.
    async fn change_counts(&self, query: &ChangeQuery) -> Result<ChangeCounts, StorageError>;

    /// Removes revisions kept until before `now`, then each cluster's oldest beyond
    /// `caps`; returns how many went.
    async fn expire(&self, now: OffsetDateTime, caps: HistoryCaps) -> Result<u64, StorageError>;

    /// Revisions and bytes per cluster.
    async fn history_sizes(&self) -> Result<Vec<HistorySize>, StorageError>;

    /// The newest `limit` revisions of an object, each with its object.
    async fn history(
        &self,
        object: &ObjectName,
        limit: usize,
    ) -> Result<Vec<Rebuilt>, StorageError> {
        let revisions = self.object_revisions(object, None, None, limit).await?;
        rebuild::rebuild(self, revisions).await
    }

    /// The object as it was at `at`: `None` when it did not exist then (or history does
    /// not reach back so far).
    async fn object_at(
        &self,
        object: &ObjectName,
        at: OffsetDateTime,
    ) -> Result<Option<ObjectAt>, StorageError> {
        rebuild::object_at(self, object, at).await
    }
}

#[cfg(test)]
mod tests;
