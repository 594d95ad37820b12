//! Objects as they were: from the newest state (the document, or a deletion's last state)
//! back through each revision's patch.

use serde_json::Value;
use time::OffsetDateTime;

use super::{Change, HistoryStorage, ObjectName, Revision};
use crate::StorageError;

/// Revisions walked back at most to rebuild one object at a time.
pub(crate) const MAX_WALK: usize = 10_000;

/// A revision with the object as it was then (what changed is between it and the next
/// older one's, once the reader has redacted both).
#[derive(Debug, Clone, PartialEq)]
pub struct Rebuilt {
    pub revision: Revision,
    /// `None` when it cannot be rebuilt (the object was changed while history was off for
    /// it, so a patch no longer applies).
    pub object: Option<Value>,
}

/// An object as it was at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectAt {
    pub object: Value,
    /// The revision it was at; `None` when it was as before the oldest kept revision.
    pub revision: Option<Revision>,
}

/// Each revision (newest first) with its object.
pub(crate) async fn rebuild<S: HistoryStorage + ?Sized>(
    storage: &S,
    revisions: Vec<Revision>,
) -> Result<Vec<Rebuilt>, StorageError> {
    let mut out: Vec<Rebuilt> = Vec::with_capacity(revisions.len());
    let mut done = 0;
    while done < revisions.len() {
        // One uid's run: a name's uids never overlap in time.
        let uid = revisions[done].uid.clone();
        let end = revisions[done..]
            .iter()
            .position(|r| r.uid != uid)
            .map_or(revisions.len(), |n| done + n);
        let run = &revisions[done..end];
        let mut state = newest_state(storage, &run[0]).await?;
        for revision in run {
            let (object, before) = step(revision, state);
            out.push(Rebuilt {
                revision: revision.clone(),
                object,
            });
            state = before;
        }
        done = end;
    }
    Ok(out)
}

/// The object at `revision` and the one before it, from the object at `revision` as
/// known (`None`: not known).
fn step(revision: &Revision, at: Option<Value>) -> (Option<Value>, Option<Value>) {
    match revision.change {
        // A deletion changes nothing: its last state is also the state before.
        Change::Deleted => {
            let state = revision.state.clone().or(at);
            (state.clone(), state)
        }
        Change::Created => (at.map(|o| versioned(o, revision)), None),
        Change::Updated => {
            let before = at
                .as_ref()
                .and_then(|object| back(object, revision.back.as_ref()?));
            (at.map(|o| versioned(o, revision)), before)
        }
    }
}

/// The object with the revision's resourceVersion: a later change of nothing but the
/// version wrote no revision, so the state walked back to may carry that later one.
fn versioned(mut object: Value, revision: &Revision) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if metadata.contains_key("resourceVersion") {
            metadata.insert(
                "resourceVersion".to_owned(),
                Value::String(revision.resource_version.clone()),
            );
        }
    }
    object
}

/// `object` with a revision's patch back applied; `None` when it does not apply.
fn back(object: &Value, patch: &Value) -> Option<Value> {
    let patch: json_patch::Patch = serde_json::from_value(patch.clone()).ok()?;
    let mut before = object.clone();
    json_patch::patch(&mut before, &patch).ok()?;
    Some(before)
}

/// The object as its newest revision left it: a deletion's last state, or the document.
async fn newest_state<S: HistoryStorage + ?Sized>(
    storage: &S,
    newest: &Revision,
) -> Result<Option<Value>, StorageError> {
    if newest.change == Change::Deleted {
        return Ok(newest.state.clone());
    }
    let document = storage.get(&newest.cluster, &newest.uid).await?;
    Ok(document.map(|d| d.object))
}

pub(crate) async fn object_at<S: HistoryStorage + ?Sized>(
    storage: &S,
    name: &ObjectName,
    at: OffsetDateTime,
) -> Result<Option<ObjectAt>, StorageError> {
    let before = storage.object_revisions(name, None, Some(at), 1).await?;
    let after = storage
        .object_revisions(name, Some(at), None, MAX_WALK)
        .await?;
    let (uid, revision) = match before.into_iter().next() {
        Some(r) if r.change == Change::Deleted => return Ok(None),
        Some(r) => (r.uid.clone(), Some(r)),
        // Nothing kept from before: as before the oldest kept revision, if that was not
        // its creation (checked by its creationTimestamp below).
        None => match after.last() {
            Some(oldest) if oldest.change != Change::Created => (oldest.uid.clone(), None),
            _ => return Ok(None),
        },
    };
    let later: Vec<&Revision> = after.iter().filter(|r| r.uid == uid).collect();
    let newest = later.first().copied().or(revision.as_ref());
    let Some(newest) = newest else {
        return Ok(None);
    };
    let mut state = newest_state(storage, newest).await?;
    for revision in later {
        state = step(revision, state).1;
    }
    let Some(object) = state else {
        return Ok(None);
    };
    let object = match &revision {
        Some(r) if r.change != Change::Deleted => versioned(object, r),
        _ => object,
    };
    if revision.is_none() && !created_by(&object, at) {
        return Ok(None);
    }
    Ok(Some(ObjectAt { object, revision }))
}

/// Whether the object says it was created at or before `at`.
fn created_by(object: &Value, at: OffsetDateTime) -> bool {
    object["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok())
        .is_some_and(|created| created <= at)
}
