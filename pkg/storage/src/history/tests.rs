use serde_json::json;
use time::macros::datetime;

use super::{revise, Change};
use crate::document::HistoryNote;
use crate::ResourceDocument;

fn note() -> HistoryNote {
    HistoryNote {
        keep_until: datetime!(2030-01-01 0:00 UTC),
        late: false,
        managers: vec!["kubectl".into()],
        preexisting: false,
    }
}

fn document(version: &str, image: &str) -> ResourceDocument {
    ResourceDocument {
        cluster: "c".into(),
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: "shop".into(),
        name: "web".into(),
        uid: "u1".into(),
        labels: Default::default(),
        annotations: Default::default(),
        owner_references: vec![],
        creation_timestamp: None,
        deletion_timestamp: None,
        resource_version: version.into(),
        sync_at: datetime!(2026-12-01 10:00 UTC),
        deleted: false,
        object: json!({"metadata": {"name": "web", "resourceVersion": version},
            "spec": {"image": image}}),
        issues: vec![],
        refs: vec![],
        history: Some(note()),
    }
}

#[test]
fn a_first_write_is_a_creation_and_no_note_writes_nothing() {
    let created = revise(None, &document("1", "a")).unwrap();
    assert_eq!(created.change, Change::Created);
    assert_eq!((created.back, created.state), (None, None));
    let mut quiet = document("1", "a");
    quiet.history = None;
    assert_eq!(revise(None, &quiet), None);
}

#[test]
fn an_update_keeps_the_patch_back() {
    let old = document("1", "a");
    let new = document("2", "b");
    let revision = revise(Some(&old), &new).unwrap();
    assert_eq!(revision.change, Change::Updated);
    let patch: json_patch::Patch = serde_json::from_value(revision.back.unwrap()).unwrap();
    let mut object = new.object.clone();
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object, old.object);
}

#[test]
fn unchanged_fenced_and_version_only_writes_make_none() {
    let stored = document("5", "a");
    assert_eq!(
        revise(Some(&stored), &document("5", "b")),
        None,
        "same version"
    );
    assert_eq!(revise(Some(&stored), &document("4", "b")), None, "fenced");
    assert_eq!(
        revise(Some(&stored), &document("6", "a")),
        None,
        "only the version"
    );
}

#[test]
fn a_mark_of_deletion_keeps_the_last_state() {
    let stored = document("5", "a");
    let mut marked = stored.clone();
    marked.deleted = true;
    let revision = revise(Some(&stored), &marked).unwrap();
    assert_eq!(revision.change, Change::Deleted);
    assert_eq!(revision.state, Some(stored.object.clone()));
    assert_eq!(revise(Some(&marked), &marked), None, "already deleted");
}

#[test]
fn caps_take_the_oldest_beyond_the_count_or_the_bytes() {
    use crate::history::{HistoryCaps, HistorySize};
    let size = |revisions, bytes| HistorySize {
        cluster: "c".into(),
        revisions,
        bytes,
    };
    let caps = HistoryCaps {
        revisions: 100,
        bytes: 10_000,
    };
    assert_eq!(caps.over(&size(50, 5_000)), 0, "within both");
    assert_eq!(caps.over(&size(120, 5_000)), 20, "by count");
    // 200 bytes a revision: 2,000 over is 10 revisions.
    assert_eq!(caps.over(&size(60, 12_000)), 10, "by bytes");
    assert_eq!(caps.over(&size(150, 30_000)), 100, "the larger of the two");
    assert_eq!(caps.over(&size(0, 0)), 0);
    assert_eq!(caps.over(&size(1, 1 << 40)), 1, "never more than there are");
}
