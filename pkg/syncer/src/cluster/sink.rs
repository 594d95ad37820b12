//! Where a cluster's writer sends what its watchers saw: storage itself in the hub
//! ([`StorageSink`]), or, in an agent, the hub, which applies the same [`Write`]s to
//! storage under the cluster the agent's certificate names ([`apply`]). A `Write` is what
//! crosses the wire, so it holds data only; what the writer does once one is acknowledged
//! stays with the writer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use karpor_audit::AuditConfig;
use karpor_storage::{HistoryNote, ResourceDocument, Storage, StorageError, VersionDigest};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::cluster::sweep::Coverage;
use crate::ingest::policy::PolicySeen;
use crate::ingest::transform::{drop_always, ObjectType};

/// A write that failed, in words for the log (it is retried until it succeeds).
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Where the writer's batches and barriers go. `write` returns once the write is durable
/// (committed to storage, or acknowledged by the hub after it committed it).
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// How many documents the write removed (a purge's or a sweep's).
    async fn write(&self, cluster: &str, write: &Write) -> Result<u64, SinkError>;

    /// Whether this sink's storage can be read here (to count a cluster's documents):
    /// only the hub's can.
    fn storage(&self) -> Option<&Arc<dyn Storage>>;

    /// The digest of what the sink holds of `scope` in `cluster`, for a first list to
    /// compare itself with; `None` when the sink does not compare (the hub's own syncer
    /// writes its lists again after a restart).
    async fn versions(
        &self,
        _cluster: &str,
        _scope: &TypeScope,
    ) -> Result<Option<VersionDigest>, SinkError> {
        Ok(None)
    }
}

/// One type of a cluster, in one namespace or all: what one list covers and its purge
/// removes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypeScope {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// One write, as the writer sends it and the hub receives it from an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Write {
    /// Documents, in the order their watchers saw them.
    #[serde(rename_all = "camelCase")]
    Upsert { documents: Vec<Upserted> },
    /// The object went; its last resourceVersion fences the delete.
    #[serde(rename_all = "camelCase")]
    Delete {
        uid: String,
        resource_version: Option<String>,
        history: Option<HistoryNote>,
    },
    /// The object went, and its rule keeps deleted objects.
    #[serde(rename_all = "camelCase")]
    SoftDelete {
        uid: String,
        #[serde(with = "time::serde::rfc3339")]
        at: OffsetDateTime,
        resource_version: Option<String>,
        history: Option<HistoryNote>,
    },
    /// A list completed: its type's documents written before it began are gone.
    #[serde(rename_all = "camelCase")]
    Purge {
        api_version: String,
        kind: String,
        namespace: Option<String>,
        #[serde(with = "time::serde::rfc3339")]
        before: OffsetDateTime,
        history: Option<HistoryNote>,
    },
    /// The cluster's documents of what `coverage` no longer covers, written before
    /// `before`, are gone.
    #[serde(rename_all = "camelCase")]
    Sweep {
        coverage: Coverage,
        #[serde(with = "time::serde::rfc3339")]
        before: OffsetDateTime,
    },
}

/// A document and what its write asks of history (which the document itself never
/// carries into storage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Upserted {
    #[serde(flatten)]
    pub document: ResourceDocument,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryNote>,
}

impl Write {
    /// Every document of the write into `cluster`, whatever cluster it named: the one an
    /// agent writes to is the one its certificate names, never one its payload does.
    pub fn into_cluster(mut self, cluster: &str) -> Write {
        if let Write::Upsert { documents } = &mut self {
            for upserted in documents {
                cluster.clone_into(&mut upserted.document.cluster);
            }
        }
        self
    }

    /// A write an agent sent, as the hub applies it: into `cluster` (the certificate's),
    /// each document's object with what no document holds dropped again (a Secret's
    /// values among them) and its type and name taken from the object itself. A document
    /// without a uid, or whose object is not an object, refuses the write.
    pub fn from_agent(self, cluster: &str) -> Result<Write, String> {
        let mut write = self.into_cluster(cluster);
        match &mut write {
            Write::Upsert { documents } => {
                for upserted in documents {
                    checked_document(&mut upserted.document)?;
                }
            }
            Write::Delete { uid, .. } | Write::SoftDelete { uid, .. } if uid.is_empty() => {
                return Err("a delete names no uid".into());
            }
            _ => {}
        }
        Ok(write)
    }
}

/// `document` made to agree with its own object, with what no document holds dropped.
fn checked_document(document: &mut ResourceDocument) -> Result<(), String> {
    let Some(root) = document.object.as_object_mut() else {
        return Err(format!(
            "document {:?}: its object is not an object",
            document.uid
        ));
    };
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let kind = ObjectType {
        api_version: text(root.get("apiVersion")),
        kind: text(root.get("kind")),
    };
    let metadata = root.get("metadata");
    let uid = text(metadata.and_then(|m| m.get("uid")));
    if uid.is_empty() || uid != document.uid {
        return Err(format!(
            "document {:?}: its object's uid differs or is empty",
            document.uid
        ));
    }
    // The fields search filters on are the object's, so a document cannot say it is
    // something its object is not (a Secret passed off as a ConfigMap keeps its values).
    document.api_version.clone_from(&kind.api_version);
    document.kind.clone_from(&kind.kind);
    document.namespace = text(metadata.and_then(|m| m.get("namespace")));
    document.name = text(metadata.and_then(|m| m.get("name")));
    drop_always(&kind, root);
    Ok(())
}

/// Applies `write` to `cluster`'s documents in `storage`; `audit` decides the one finding
/// made across documents (`pdb-missing`). How many documents it removed.
pub async fn apply(
    storage: &dyn Storage,
    cluster: &str,
    write: &Write,
    audit: &AuditConfig,
) -> Result<u64, StorageError> {
    match write {
        Write::Upsert { documents } => {
            let mut batch: Vec<ResourceDocument> = documents
                .iter()
                .map(|u| {
                    let mut document = u.document.clone();
                    cluster.clone_into(&mut document.cluster);
                    document.history = u.history.clone();
                    document
                })
                .collect();
            if let Err(e) = crate::ingest::pdb::apply(storage, cluster, &mut batch, audit).await {
                // The finding waits for the next write of the workload or its budgets.
                tracing::debug!(error = %e, "cannot read budgets for pdb-missing");
            }
            storage.upsert(&batch).await?;
            Ok(0)
        }
        Write::Delete {
            uid,
            resource_version,
            history,
        } => {
            storage
                .delete(cluster, uid, resource_version.as_deref(), history.as_ref())
                .await?;
            Ok(0)
        }
        Write::SoftDelete {
            uid,
            at,
            resource_version,
            history,
        } => {
            let version = resource_version.as_deref();
            storage
                .soft_delete(cluster, uid, *at, version, history.as_ref())
                .await?;
            Ok(0)
        }
        Write::Purge {
            api_version,
            kind,
            namespace,
            before,
            history,
        } => {
            storage
                .purge_unseen(
                    cluster,
                    api_version,
                    kind,
                    namespace.as_deref(),
                    *before,
                    history.as_ref(),
                )
                .await
        }
        Write::Sweep { coverage, before } => {
            crate::cluster::sweep::sweep(storage, cluster, coverage, *before).await
        }
    }
}

/// The hub's own sink: storage, with the ingest policy in force.
pub(crate) struct StorageSink {
    pub storage: Arc<dyn Storage>,
    pub policy: PolicySeen,
}

#[async_trait::async_trait]
impl Sink for StorageSink {
    async fn write(&self, cluster: &str, write: &Write) -> Result<u64, SinkError> {
        let ingest = self.policy.borrow().ingest.clone();
        Ok(apply(self.storage.as_ref(), cluster, write, &ingest.audit).await?)
    }

    fn storage(&self) -> Option<&Arc<dyn Storage>> {
        Some(&self.storage)
    }
}

/// A type a sweep keeps, in every namespace (`namespaces` absent) or in those listed: a
/// [`Coverage`] as it crosses the wire (JSON keys cannot be pairs).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CoveredType {
    api_version: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespaces: Option<BTreeSet<String>>,
}

impl From<Coverage> for Vec<CoveredType> {
    fn from(coverage: Coverage) -> Self {
        coverage
            .0
            .into_iter()
            .map(|((api_version, kind), namespaces)| CoveredType {
                api_version,
                kind,
                namespaces,
            })
            .collect()
    }
}

impl From<Vec<CoveredType>> for Coverage {
    fn from(types: Vec<CoveredType>) -> Self {
        let mut covered = BTreeMap::new();
        for t in types {
            covered.insert((t.api_version, t.kind), t.namespaces);
        }
        Coverage(covered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_write_lands_in_its_own_cluster_as_its_object_says() {
        let object = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "n", "uid": "u1", "managedFields": [{}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "data": {"k": "dmFsdWU="}, "stringData": {"k": "value"}});
        let document = ResourceDocument {
            cluster: "other".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "elsewhere".into(),
            name: "not-s".into(),
            uid: "u1".into(),
            labels: Default::default(),
            annotations: Default::default(),
            owner_references: Vec::new(),
            creation_timestamp: None,
            deletion_timestamp: None,
            resource_version: "1".into(),
            sync_at: OffsetDateTime::UNIX_EPOCH,
            deleted: false,
            object,
            issues: Vec::new(),
            refs: Vec::new(),
            history: None,
        };
        let upsert = |document: ResourceDocument| Write::Upsert {
            documents: vec![Upserted {
                document,
                history: None,
            }],
        };
        let Ok(Write::Upsert { documents }) = upsert(document.clone()).from_agent("mine") else {
            panic!("refused");
        };
        let got = &documents[0].document;
        assert_eq!(
            (
                got.cluster.as_str(),
                got.kind.as_str(),
                got.namespace.as_str(),
                got.name.as_str()
            ),
            ("mine", "Secret", "n", "s")
        );
        assert_eq!(got.object["data"]["k"], serde_json::Value::Null);
        assert_eq!(got.object["stringData"]["k"], serde_json::Value::Null);
        assert!(got.object["metadata"].get("managedFields").is_none());
        assert!(got.object["metadata"]["annotations"]
            .as_object()
            .unwrap()
            .is_empty());
        // A document whose uid is not its object's, or no uid at all, is refused.
        let mut other = document;
        other.uid = "u2".into();
        assert!(upsert(other).from_agent("mine").is_err());
        let delete = Write::Delete {
            uid: String::new(),
            resource_version: None,
            history: None,
        };
        assert!(delete.from_agent("mine").is_err());
    }

    #[test]
    fn a_sweep_reads_back_as_it_was_written() {
        let mut covered = BTreeMap::new();
        covered.insert(("v1".to_owned(), "Pod".to_owned()), None);
        covered.insert(
            ("apps/v1".to_owned(), "Deployment".to_owned()),
            Some(BTreeSet::from(["a".to_owned()])),
        );
        let write = Write::Sweep {
            coverage: Coverage(covered),
            before: OffsetDateTime::UNIX_EPOCH,
        };
        let text = serde_json::to_string(&write).unwrap();
        assert!(text.contains(r#""op":"sweep""#), "{text}");
        let back: Write = serde_json::from_str(&text).unwrap();
        assert_eq!(back, write);
    }

    #[test]
    fn a_write_lands_in_the_cluster_it_is_given() {
        let json = serde_json::json!({
            "op": "upsert",
            "documents": [{
                "cluster": "other", "apiVersion": "v1", "kind": "ConfigMap",
                "namespace": "a", "name": "b", "uid": "u", "labels": {}, "annotations": {},
                "ownerReferences": [], "creationTimestamp": null, "deletionTimestamp": null,
                "resourceVersion": "1", "syncAt": "2026-12-06T00:00:00Z", "deleted": false,
                "object": {},
            }],
        });
        let write: Write = serde_json::from_value(json).unwrap();
        let Write::Upsert { documents } = write.into_cluster("mine") else {
            panic!("not an upsert");
        };
        assert_eq!(documents[0].document.cluster, "mine");
        assert_eq!(documents[0].history, None);
    }
}
