//! From a Kubernetes object to the document storage keeps: what is always dropped
//! (managed fields, the last-applied annotation, Secret values), what a rule drops
//! (everything but metadata, listed paths), and the fields search filters on.

use std::collections::BTreeMap;

use crate::ingest::policy::Ingest;
use karpor_core::model::KindRef;
use karpor_core::model::{Transform, TransformMode};
use karpor_storage::ResourceDocument;
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// kubectl keeps the whole applied object here, Secret values included.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The type of the objects a watcher sees: list items often lack `apiVersion` and
/// `kind`, so they come from discovery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ObjectType {
    pub api_version: String,
    pub kind: String,
}

impl ObjectType {
    fn is_secret(&self) -> bool {
        self.api_version == "v1" && self.kind == "Secret"
    }
}

/// What no document ever holds, whatever its rule: managed fields, the last-applied
/// annotation, a Secret's values. The hub applies it again to what agents send.
pub(crate) fn drop_always(kind: &ObjectType, root: &mut Map<String, Value>) {
    if let Some(metadata) = root.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove(LAST_APPLIED);
        }
    }
    if kind.is_secret() {
        for field in ["data", "stringData"] {
            if let Some(values) = root.get_mut(field).and_then(Value::as_object_mut) {
                values.values_mut().for_each(|v| *v = Value::Null);
            }
        }
    }
}

/// How one rule's objects are stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct Trimmer {
    metadata_only: bool,
    /// Each path split on dots.
    paths: Vec<Vec<String>>,
}

impl Trimmer {
    pub(crate) fn new(transform: &Transform) -> Self {
        Trimmer {
            metadata_only: transform.mode == TransformMode::MetadataOnly,
            paths: transform
                .trim
                .iter()
                .map(|p| p.split('.').map(str::to_owned).collect())
                .collect(),
        }
    }

    /// The document for `object`, with its audit findings; `None` when it has no uid (not
    /// a stored object).
    pub(crate) fn document(
        &self,
        cluster: &str,
        kind: &ObjectType,
        mut object: Value,
        sync_at: OffsetDateTime,
        ingest: &Ingest,
    ) -> Option<ResourceDocument> {
        let root = object.as_object_mut()?;
        root.insert("apiVersion".into(), kind.api_version.clone().into());
        root.insert("kind".into(), kind.kind.clone().into());
        drop_always(kind, root);
        // Before the rule's trimming, which may drop what the auditors and the relation
        // rules read.
        let issues = karpor_audit::audit(&object, &ingest.audit);
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let refs = karpor_topology::reference_keys(
            &object,
            &KindRef::of(&kind.api_version, &kind.kind),
            namespace,
            &ingest.relations,
        );
        let root = object.as_object_mut()?;
        if self.metadata_only {
            root.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
        }
        for path in &self.paths {
            remove_path(&mut object, path);
        }
        let metadata = object.get("metadata").cloned().unwrap_or_default();
        let text = |key: &str| metadata[key].as_str().unwrap_or_default().to_owned();
        let uid = text("uid");
        if uid.is_empty() {
            return None;
        }
        Some(ResourceDocument {
            cluster: cluster.to_owned(),
            api_version: kind.api_version.clone(),
            kind: kind.kind.clone(),
            namespace: text("namespace"),
            name: text("name"),
            uid,
            labels: string_map(&metadata["labels"]),
            annotations: string_map(&metadata["annotations"]),
            owner_references: metadata["ownerReferences"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            creation_timestamp: timestamp(&metadata["creationTimestamp"]),
            deletion_timestamp: timestamp(&metadata["deletionTimestamp"]),
            resource_version: text("resourceVersion"),
            sync_at,
            deleted: false,
            object,
            issues,
            refs,
            history: None,
        })
    }
}

/// Drops the value at `path`; through arrays, from every element.
fn remove_path(value: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match value {
        Value::Object(map) if rest.is_empty() => {
            map.remove(first);
        }
        Value::Object(map) => {
            if let Some(child) = map.get_mut(first) {
                remove_path(child, rest);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| remove_path(item, path)),
        _ => {}
    }
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(Map::iter)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

fn timestamp(value: &Value) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(value.as_str()?, &Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-29 12:00:00 UTC);

    fn secret_type() -> ObjectType {
        ObjectType {
            api_version: "v1".into(),
            kind: "Secret".into(),
        }
    }

    fn secret() -> Value {
        json!({
            "metadata": {
                "name": "db", "namespace": "prod", "uid": "u-1", "resourceVersion": "42",
                "creationTimestamp": "2026-11-01T10:00:00Z",
                "labels": {"app": "db"},
                "annotations": {LAST_APPLIED: "{\"data\":{\"password\":\"aHVudGVyMg==\"}}", "team": "x"},
                "managedFields": [{"manager": "kubectl"}],
            },
            "type": "Opaque",
            "data": {"password": "aHVudGVyMg=="},
            "stringData": {"token": "hunter2"},
        })
    }

    #[test]
    fn secret_values_and_applied_configuration_never_reach_the_document() {
        let doc = Trimmer::default()
            .document("c1", &secret_type(), secret(), NOW, &Ingest::default())
            .unwrap();
        let text = serde_json::to_string(&doc).unwrap();
        assert!(!text.contains("aHVudGVyMg"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("managedFields"), "{text}");
        assert_eq!(doc.object["data"], json!({"password": null}));
        assert_eq!(doc.object["stringData"], json!({"token": null}));
        assert_eq!(
            doc.annotations,
            BTreeMap::from([("team".into(), "x".into())])
        );
    }

    #[test]
    fn fields_come_from_metadata_and_type_from_discovery() {
        let doc = Trimmer::default()
            .document("c1", &secret_type(), secret(), NOW, &Ingest::default())
            .unwrap();
        assert_eq!(
            (
                doc.cluster.as_str(),
                doc.kind.as_str(),
                doc.api_version.as_str()
            ),
            ("c1", "Secret", "v1")
        );
        assert_eq!(
            (doc.namespace.as_str(), doc.name.as_str(), doc.uid.as_str()),
            ("prod", "db", "u-1")
        );
        assert_eq!(doc.resource_version, "42");
        assert_eq!(
            doc.creation_timestamp,
            Some(datetime!(2026-11-01 10:00:00 UTC))
        );
        assert_eq!(doc.object["kind"], "Secret");
        assert_eq!(doc.sync_at, NOW);
    }

    #[test]
    fn metadata_only_keeps_type_and_metadata() {
        let trimmer = Trimmer::new(&Transform {
            mode: TransformMode::MetadataOnly,
            trim: vec![],
        });
        let kind = ObjectType {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let object = json!({"metadata": {"uid": "u", "name": "n"}, "data": {"k": "v"}});
        let doc = trimmer
            .document("c", &kind, object, NOW, &Ingest::default())
            .unwrap();
        assert_eq!(
            doc.object,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"uid": "u", "name": "n"}})
        );
    }

    #[test]
    fn listed_paths_are_trimmed_through_arrays() {
        let trimmer = Trimmer::new(&Transform {
            mode: TransformMode::Full,
            trim: vec!["spec.containers.env".into(), "status".into()],
        });
        let kind = ObjectType {
            api_version: "v1".into(),
            kind: "Pod".into(),
        };
        let object = json!({
            "metadata": {"uid": "u"},
            "spec": {"containers": [{"name": "a", "env": [1]}, {"name": "b", "env": [2]}]},
            "status": {"phase": "Running"},
        });
        let doc = trimmer
            .document("c", &kind, object, NOW, &Ingest::default())
            .unwrap();
        assert_eq!(
            doc.object["spec"],
            json!({"containers": [{"name": "a"}, {"name": "b"}]})
        );
        assert!(doc.object.get("status").is_none());
    }

    #[test]
    fn an_object_without_uid_is_not_a_document() {
        let kind = ObjectType {
            api_version: "v1".into(),
            kind: "Pod".into(),
        };
        assert!(Trimmer::default()
            .document(
                "c",
                &kind,
                json!({"metadata": {"name": "x"}}),
                NOW,
                &Ingest::default()
            )
            .is_none());
    }
}
