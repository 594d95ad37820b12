//! What a cluster's targets cover, and the sweep that removes every other document of the
//! cluster: types no longer selected (a rule narrowed, retargeted or deleted, a CRD
//! gone), namespaces no longer listed, versions no longer watched. A list's own purge
//! removes what its type no longer has; the sweep removes what no list will ever visit
//! again. It runs when the targets change (and when a cluster sync starts, since the rules
//! may have changed while no syncer ran), once the new watchers have listed, so a type
//! that moves to another version is never missing in between.

use std::collections::{BTreeMap, BTreeSet};

use karpor_search::{Expr, Field, Op, Query, Value};
use karpor_storage::{Storage, StorageError};
use time::OffsetDateTime;

use crate::rules::resolve::Target;

/// Most distinct kinds, versions or namespaces read from storage at once.
const MAX_TERMS: usize = 10_000;

/// Types (by apiVersion and kind) the targets watch, each in every namespace (`None`) or
/// in some.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(
    into = "Vec<crate::cluster::sink::CoveredType>",
    from = "Vec<crate::cluster::sink::CoveredType>"
)]
pub struct Coverage(pub(crate) BTreeMap<(String, String), Option<BTreeSet<String>>>);

impl Coverage {
    pub(crate) fn of<'a>(targets: impl IntoIterator<Item = &'a Target>) -> Coverage {
        let mut covered: BTreeMap<(String, String), Option<BTreeSet<String>>> = BTreeMap::new();
        for target in targets {
            let key = (
                target.resource.api_version.clone(),
                target.resource.kind.clone(),
            );
            match &target.namespace {
                None => {
                    covered.insert(key, None);
                }
                Some(namespace) => {
                    let entry = covered.entry(key).or_insert_with(|| Some(BTreeSet::new()));
                    if let Some(namespaces) = entry {
                        namespaces.insert(namespace.clone());
                    }
                }
            }
        }
        Coverage(covered)
    }
}

/// Removes `cluster`'s documents written before `before` that `coverage` does not cover;
/// how many.
pub(crate) async fn sweep(
    storage: &dyn Storage,
    cluster: &str,
    coverage: &Coverage,
    before: OffsetDateTime,
) -> Result<u64, StorageError> {
    let mut removed = 0;
    let in_cluster = vec![equals(Field::Cluster, cluster)];
    for kind in storage
        .terms(&Field::Kind, &query(&in_cluster), MAX_TERMS)
        .await?
    {
        let mut of_kind = in_cluster.clone();
        of_kind.push(equals(Field::Kind, &kind.key));
        for api_version in storage
            .terms(&Field::ApiVersion, &query(&of_kind), MAX_TERMS)
            .await?
        {
            let key = (api_version.key, kind.key.clone());
            match coverage.0.get(&key) {
                Some(None) => {}
                None => {
                    removed += storage
                        .purge_unseen(cluster, &key.0, &key.1, None, before, None)
                        .await?;
                }
                Some(Some(namespaces)) => {
                    let mut of_type = of_kind.clone();
                    of_type.push(equals(Field::ApiVersion, &key.0));
                    for namespace in storage
                        .terms(&Field::Namespace, &query(&of_type), MAX_TERMS)
                        .await?
                    {
                        if !namespaces.contains(&namespace.key) {
                            removed += storage
                                .purge_unseen(
                                    cluster,
                                    &key.0,
                                    &key.1,
                                    Some(&namespace.key),
                                    before,
                                    None,
                                )
                                .await?;
                        }
                    }
                }
            }
        }
    }
    Ok(removed)
}

pub(crate) fn equals(field: Field, value: &str) -> Expr {
    Expr::Compare {
        field,
        op: Op::Eq,
        value: Value::Text(value.to_owned()),
    }
}

/// Every document the filter matches (deleted ones too, unless it says otherwise).
pub(crate) fn query(filter: &[Expr]) -> Query {
    Query {
        filter: Expr::And(filter.to_vec()),
        order_by: Vec::new(),
        limit: None,
        offset: None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use karpor_storage::{ResourceDocument, StorageConfig};
    use kube::discovery::ApiResource;

    use super::*;
    use crate::ingest::transform::Trimmer;
    use crate::rules::built_in::default_rules;

    fn document(
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> ResourceDocument {
        ResourceDocument {
            cluster: cluster.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("{api_version}-{kind}-{namespace}-{name}"),
            labels: Default::default(),
            annotations: Default::default(),
            owner_references: Vec::new(),
            creation_timestamp: None,
            deletion_timestamp: None,
            resource_version: "1".into(),
            sync_at: crate::cluster::watcher::now_millis() - time::Duration::seconds(5),
            deleted: name.ends_with("-gone"),
            object: serde_json::json!({}),
            issues: Vec::new(),
            refs: Vec::new(),
            history: None,
        }
    }

    fn target(api_version: &str, kind: &str, namespace: Option<&str>) -> Target {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        Target {
            resource: ApiResource {
                group: group.into(),
                version: version.into(),
                api_version: api_version.into(),
                kind: kind.into(),
                plural: format!("{}s", kind.to_lowercase()),
            },
            namespaced: true,
            namespace: namespace.map(str::to_owned),
            options: Arc::new(crate::rules::resolve::WatchOptions {
                rule: "r".into(),
                label_selector: None,
                field_selector: None,
                trimmer: Trimmer::new(&default_rules()[0].transform),
                keep_after_delete: false,
                history: None,
                ingest: Arc::default(),
            }),
        }
    }

    #[tokio::test]
    async fn what_the_targets_do_not_cover_goes_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let storage = karpor_storage::connect(&StorageConfig::Sqlite {
            path: dir.path().join("r.db"),
        })
        .await
        .unwrap();
        storage
            .upsert(&[
                document("c", "v1", "ConfigMap", "a", "kept"),
                document("c", "v1", "ConfigMap", "b", "kept-too"),
                document("c", "v1", "Secret", "a", "kept"),
                document("c", "v1", "Secret", "b", "not-listed"),
                document("c", "v1", "Secret", "b", "not-listed-gone"),
                document("c", "v1", "Pod", "a", "not-selected"),
                document("c", "apps/v1beta1", "Deployment", "a", "old-version"),
                document("c", "apps/v1", "Deployment", "a", "kept"),
                document("other", "v1", "Pod", "a", "other-cluster"),
            ])
            .await
            .unwrap();
        let targets = [
            target("v1", "ConfigMap", None),
            target("v1", "Secret", Some("a")),
            target("v1", "Secret", Some("c")),
            target("apps/v1", "Deployment", None),
        ];
        let removed = sweep(
            storage.as_ref(),
            "c",
            &Coverage::of(&targets),
            crate::cluster::watcher::now_millis(),
        )
        .await
        .unwrap();
        assert_eq!(removed, 4);
        let all = karpor_search::parse(
            "select * from resources where deleted = true or deleted = false ",
        )
        .unwrap();
        let mut names: Vec<String> = storage
            .search(&all, 0, 100)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|d| format!("{}/{}/{}/{}", d.cluster, d.kind, d.namespace, d.name))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "c/ConfigMap/a/kept",
                "c/ConfigMap/b/kept-too",
                "c/Deployment/a/kept",
                "c/Secret/a/kept",
                "other/Pod/a/other-cluster"
            ]
        );
    }
}
