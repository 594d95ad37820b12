//! A resource document: what the syncer writes for each Kubernetes object and search
//! returns. Its id is the cluster plus the object's uid.

use std::collections::BTreeMap;

use karpor_audit::{Finding, SeverityCounts};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDocument {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub owner_references: Vec<Value>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub creation_timestamp: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub deletion_timestamp: Option<OffsetDateTime>,
    pub resource_version: String,
    #[serde(with = "time::serde::rfc3339")]
    pub sync_at: OffsetDateTime,
    /// Kept after the object went (a rule's keep-after-delete), marked so.
    pub deleted: bool,
    /// The object as stored: trimmed by the sync rule, Secret values already removed.
    pub object: Value,
    /// What the auditors found in the object as the syncer read it (before the rule's
    /// trimming); empty for a clean object.
    #[serde(default)]
    pub issues: Vec<Finding>,
    /// The keys the topology finds it under: its owners' uids and what it names
    /// (`owner:UID`, `ref:GROUP/KIND/NAMESPACE/NAME`, see karpor-topology).
    #[serde(default)]
    pub refs: Vec<String>,
    /// What this write asks of history (`None`: keep none); never stored.
    #[serde(skip)]
    pub history: Option<HistoryNote>,
}

impl ResourceDocument {
    pub fn id(&self) -> String {
        document_id(&self.cluster, &self.uid)
    }

    /// Its findings by severity, as storage keeps them for aggregations.
    pub fn severity_counts(&self) -> SeverityCounts {
        SeverityCounts::of(&self.issues)
    }

    /// Its audit score (100 when clean), as storage keeps it for means and `score` filters.
    pub fn score(&self) -> f64 {
        karpor_audit::resource_score(&self.issues)
    }

    /// The object's text as both backends index it for `contains` and keyword search:
    /// the words of every key and scalar value, lowercased, space-separated.
    pub fn content(&self) -> String {
        let mut text = String::new();
        collect_text(&self.object, &mut text);
        karpor_search::words(&text).join(" ")
    }
}

/// What a write asks of history. Given by the syncer with each write its rule keeps
/// history for; never stored in the document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryNote {
    /// When the revision may be removed.
    #[serde(with = "time::serde::rfc3339")]
    pub keep_until: OffsetDateTime,
    /// Seen at a relist, not as it happened (karpor was away or the watch restarted).
    pub late: bool,
    /// Who changed it, where the object says (its `managedFields` managers with the
    /// newest time, read before the rule trims them).
    pub managers: Vec<String>,
    /// The object was there before karpor began watching its cluster: finding nothing
    /// stored is its import, not its creation, and makes no revision (a cluster's first
    /// sync would otherwise record every object as created).
    pub preexisting: bool,
}
pub fn document_id(cluster: &str, uid: &str) -> String {
    format!("{cluster}/{uid}")
}

/// A resourceVersion as the number writes are fenced on. Kubernetes calls it opaque, but
/// it is the etcd revision in practice, so newer is greater. One that is not plain digits
/// within an `i64` (what both backends compare) gives `None`: written unconditionally,
/// as before fencing.
pub(crate) fn fence_version(resource_version: &str) -> Option<i64> {
    if resource_version.is_empty() || !resource_version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    resource_version.parse().ok()
}

/// Whether `stored` is a newer version than `written` (both numbers, see
/// [`fence_version`]): the write of `written` is skipped.
pub(crate) fn fenced(stored: &str, written: &str) -> bool {
    matches!(
        (fence_version(stored), fence_version(written)),
        (Some(stored), Some(written)) if stored > written
    )
}

fn collect_text(value: &Value, out: &mut String) {
    match value {
        Value::Null => {}
        Value::Bool(b) => push(out, &b.to_string()),
        Value::Number(n) => push(out, &n.to_string()),
        Value::String(s) => push(out, s),
        Value::Array(items) => items.iter().for_each(|v| collect_text(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                push(out, k);
                collect_text(v, out);
            }
        }
    }
}

fn push(out: &mut String, text: &str) {
    out.push(' ');
    out.push_str(text);
}

/// Milliseconds since the epoch: the precision both backends keep.
pub(crate) fn millis(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

#[cfg(test)]
mod tests {
    use super::{fence_version, fenced};

    #[test]
    fn only_plain_integers_are_fenced() {
        assert_eq!(fence_version("12345"), Some(12345));
        assert_eq!(fence_version("007"), Some(7));
        assert_eq!(fence_version("9223372036854775807"), Some(i64::MAX));
        for opaque in ["", "+5", "-1", "1.5", "abc", " 1", "9223372036854775808"] {
            assert_eq!(fence_version(opaque), None, "{opaque:?}");
        }
        assert!(fenced("10", "9"));
        assert!(!fenced("10", "10") && !fenced("9", "10"));
        assert!(!fenced("10", "x") && !fenced("x", "9"));
    }
}
