//! A namespace's, a cluster's or a resource group's graph of kinds (Karpor's cluster
//! topology): each kind stored there with its count, and which kinds are its parents or children, by the
//! relation rules and by the owner kinds its objects name. Three aggregations and one
//! per kind, whatever the number of objects.

use std::collections::BTreeMap;

use karpor_core::model::{KindRef, Relation, RelationRule};
use karpor_search::{Expr, Field, Op, Query, Value};
use karpor_storage::{SearchStorage, StorageError};
use karpor_topology::OWNER_KIND;

use crate::scope::Visible;
use crate::types::{KindNode, TopologyResource};

/// Most kinds in one graph.
const MAX_KINDS: usize = 200;
/// Most versions of one kind.
const MAX_VERSIONS: usize = 10;
/// Most owner kinds of one kind.
const MAX_OWNERS: usize = 50;

/// Karpor's kind id: `GROUP.VERSION.KIND` (`.v1.Pod`, `apps.v1.Deployment`).
fn kind_id(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    format!("{group}.{version}.{kind}")
}

fn with(query: &Query, field: Field, value: &str) -> Query {
    let mut narrowed = query.clone();
    narrowed.filter = Expr::And(vec![
        query.filter.clone(),
        Expr::Compare {
            field,
            op: Op::Eq,
            value: Value::Text(value.to_owned()),
        },
    ]);
    narrowed
}

/// The graph of kinds over `scope` (stored, undeleted documents of one cluster): its nodes
/// say `cluster` and, when the scope is one namespace's, `namespace`.
pub(crate) async fn graph(
    storage: &Visible,
    rules: &[RelationRule],
    scope: &Query,
    cluster: &str,
    namespace: Option<&str>,
) -> Result<BTreeMap<String, KindNode>, StorageError> {
    let scope = with(scope, Field::Cluster, cluster);
    // (kind, apiVersion) → count, and each kind's ids by group.
    let mut nodes: BTreeMap<String, KindNode> = BTreeMap::new();
    let mut by_kind: BTreeMap<KindRef, Vec<String>> = BTreeMap::new();
    for kind in storage.terms(&Field::Kind, &scope, MAX_KINDS).await? {
        let of_kind = with(&scope, Field::Kind, &kind.key);
        for version in storage
            .terms(&Field::ApiVersion, &of_kind, MAX_VERSIONS)
            .await?
        {
            let id = kind_id(&version.key, &kind.key);
            by_kind
                .entry(KindRef::of(&version.key, &kind.key))
                .or_default()
                .push(id.clone());
            nodes.insert(
                id,
                KindNode {
                    resource_group: TopologyResource {
                        cluster: cluster.to_owned(),
                        api_version: version.key.clone(),
                        kind: kind.key.clone(),
                        namespace: namespace.unwrap_or_default().to_owned(),
                        name: String::new(),
                    },
                    count: version.count,
                    relationship: BTreeMap::new(),
                },
            );
        }
    }
    let mut edges = Vec::new();
    for rule in rules {
        if matches!(rule.relation, Relation::OwnerReference) {
            continue;
        }
        if let (Some(parents), Some(children)) =
            (by_kind.get(&rule.parent), by_kind.get(&rule.child))
        {
            for p in parents {
                for c in children {
                    edges.push((p.clone(), c.clone()));
                }
            }
        }
    }
    for (kind, ids) in &by_kind {
        let of_kind = with(&scope, Field::Kind, &kind.kind);
        for owner in storage.terms(&Field::Ref, &of_kind, MAX_OWNERS).await? {
            let Some((group, owner_kind)) = owner
                .key
                .strip_prefix(OWNER_KIND)
                .and_then(|k| k.split_once('/'))
            else {
                continue;
            };
            if let Some(owners) = by_kind.get(&KindRef::new(group, owner_kind)) {
                for o in owners {
                    for id in ids {
                        edges.push((o.clone(), id.clone()));
                    }
                }
            }
        }
    }
    for (parent, child) in edges {
        if parent == child {
            continue;
        }
        // Parents first win, as in Karpor, when two kinds relate both ways.
        if let Some(node) = nodes.get_mut(&child) {
            node.relationship
                .entry(parent.clone())
                .or_insert_with(|| "parent".to_owned());
        }
        if let Some(node) = nodes.get_mut(&parent) {
            node.relationship
                .entry(child)
                .or_insert_with(|| "child".to_owned());
        }
    }
    Ok(nodes)
}
