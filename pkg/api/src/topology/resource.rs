//! A resource's graph: from the resource up through what owns, selects or names it, and
//! down through what it owns, selects or names, a number of hops each way (as Karpor
//! walks: parents of parents, children of children, not siblings). Each step is a few
//! storage lookups: by the indexed keys (`owner:UID`, `ref:...`), by identity, or by
//! labels for a selector.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use karpor_core::model::{KindRef, Relation, RelationRule};
use karpor_search::{Expr, Field, Op, Query, Value};
use karpor_storage::{ResourceDocument, SearchStorage, StorageError};
use karpor_topology::{
    owner_key, parse_reference_key, reference_key, selector_at, selector_key, selects,
};

use crate::scope::Visible;
use crate::types::{ResourceNode, TopologyResource};

/// Most objects in one graph: a Node's pods, a namespace's secrets... the rest is left out.
const MAX_NODES: usize = 500;
/// Most objects one lookup brings back.
const PER_LOOKUP: u64 = 500;

/// The objects and edges found.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    pub objects: BTreeMap<String, ResourceDocument>,
    /// (parent id, child id), by document id.
    pub edges: BTreeSet<(String, String)>,
}

/// Karpor's node id: `GROUP/VERSION.KIND:NAMESPACE.NAME` (`/v1.Pod:shop.web-1`,
/// `apps/v1.Deployment:shop.web`, `/v1.Node:.node-1`).
pub(crate) fn node_id(d: &ResourceDocument) -> String {
    let group_version = if d.api_version.contains('/') {
        d.api_version.clone()
    } else {
        format!("/{}", d.api_version)
    };
    format!("{group_version}.{}:{}.{}", d.kind, d.namespace, d.name)
}

impl Graph {
    /// Karpor's `{nodeId: {resourceGroup, parents, children}}`.
    pub(crate) fn nodes(&self) -> BTreeMap<String, ResourceNode> {
        let id = |doc: &str| self.objects.get(doc).map(node_id).unwrap_or_default();
        self.objects
            .iter()
            .map(|(doc_id, d)| {
                // Sorted by node id: the same answer whatever the uids.
                let parents: BTreeSet<String> = self
                    .edges
                    .iter()
                    .filter(|(_, c)| c == doc_id)
                    .map(|(p, _)| id(p))
                    .collect();
                let children: BTreeSet<String> = self
                    .edges
                    .iter()
                    .filter(|(p, _)| p == doc_id)
                    .map(|(_, c)| id(c))
                    .collect();
                let (parents, children) = (
                    parents.into_iter().collect(),
                    children.into_iter().collect(),
                );
                (
                    node_id(d),
                    ResourceNode {
                        resource_group: TopologyResource {
                            cluster: d.cluster.clone(),
                            api_version: d.api_version.clone(),
                            kind: d.kind.clone(),
                            namespace: d.namespace.clone(),
                            name: d.name.clone(),
                        },
                        parents,
                        children,
                    },
                )
            })
            .collect()
    }
}

fn kind_of(d: &ResourceDocument) -> KindRef {
    KindRef::of(&d.api_version, &d.kind)
}

fn eq(field: Field, value: &str) -> Expr {
    Expr::Compare {
        field,
        op: Op::Eq,
        value: Value::Text(value.to_owned()),
    }
}

fn live(mut all: Vec<Expr>) -> Query {
    all.push(Expr::Compare {
        field: Field::Deleted,
        op: Op::Eq,
        value: Value::Bool(false),
    });
    Query {
        filter: Expr::And(all),
        order_by: Vec::new(),
        limit: None,
        offset: None,
    }
}

async fn find(storage: &Visible, query: Query) -> Result<Vec<ResourceDocument>, StorageError> {
    Ok(storage.search(&query, 0, PER_LOOKUP).await?.items)
}

/// Objects of `kind` in `namespace` of `cluster`, of the right group.
fn of_kind(cluster: &str, kind: &KindRef, namespace: Option<&str>, mut more: Vec<Expr>) -> Query {
    more.push(eq(Field::Cluster, cluster));
    more.push(eq(Field::Kind, &kind.kind));
    if let Some(namespace) = namespace {
        more.push(eq(Field::Namespace, namespace));
    }
    live(more)
}

/// What `doc` owns, selects or names.
async fn children(
    storage: &Visible,
    rules: &[RelationRule],
    doc: &ResourceDocument,
) -> Result<Vec<ResourceDocument>, StorageError> {
    let mut found = find(
        storage,
        live(vec![
            eq(Field::Cluster, &doc.cluster),
            eq(Field::Ref, &owner_key(&doc.uid)),
        ]),
    )
    .await?;
    // What it names, as indexed when it was written: by identity, a lookup per kind.
    let mut named: BTreeMap<(KindRef, String), Vec<String>> = BTreeMap::new();
    for target in doc.refs.iter().filter_map(|k| parse_reference_key(k)) {
        named
            .entry((target.kind, target.namespace))
            .or_default()
            .push(target.name);
    }
    for ((kind, namespace), names) in named {
        let names = Expr::In {
            field: Field::Name,
            values: names.into_iter().map(Value::Text).collect(),
            negated: false,
        };
        let query = of_kind(&doc.cluster, &kind, Some(&namespace), vec![names]);
        found.extend(
            find(storage, query)
                .await?
                .into_iter()
                .filter(|d| kind_of(d) == kind),
        );
    }
    let mine = kind_of(doc);
    for rule in rules.iter().filter(|r| r.parent == mine) {
        let Relation::Selector { path } = &rule.relation else {
            continue;
        };
        let Some(selector) = selector_at(&doc.object, path) else {
            continue;
        };
        let labels = selector
            .iter()
            .map(|(k, v)| eq(Field::Label(k.clone()), v))
            .collect();
        let query = of_kind(&doc.cluster, &rule.child, Some(&doc.namespace), labels);
        found.extend(
            find(storage, query)
                .await?
                .into_iter()
                .filter(|d| kind_of(d) == rule.child),
        );
    }
    Ok(found)
}

/// What owns, selects or names `doc`.
async fn parents(
    storage: &Visible,
    rules: &[RelationRule],
    doc: &ResourceDocument,
) -> Result<Vec<ResourceDocument>, StorageError> {
    let mut found = Vec::new();
    for owner in &doc.owner_references {
        if let Some(uid) = owner["uid"].as_str() {
            if let Some(d) = storage.get(&doc.cluster, uid).await? {
                if !d.deleted {
                    found.push(d);
                }
            }
        }
    }
    let mine = kind_of(doc);
    let mut keys = BTreeSet::new();
    for rule in rules.iter().filter(|r| r.child == mine) {
        match &rule.relation {
            Relation::Reference { .. } => {
                let namespace = if rule.child_cluster_scoped {
                    ""
                } else {
                    &doc.namespace
                };
                keys.insert(reference_key(&mine, namespace, &doc.name));
            }
            Relation::Selector { path } => {
                // Only holders that select by one of its labels, then the whole selector.
                if doc.labels.is_empty() {
                    continue;
                }
                let pairs = Expr::In {
                    field: Field::Ref,
                    values: doc
                        .labels
                        .iter()
                        .map(|(k, v)| Value::Text(selector_key(k, v)))
                        .collect(),
                    negated: false,
                };
                let query = of_kind(
                    &doc.cluster,
                    &rule.parent,
                    Some(&doc.namespace),
                    vec![pairs],
                );
                found.extend(find(storage, query).await?.into_iter().filter(|p| {
                    kind_of(p) == rule.parent
                        && selector_at(&p.object, path).is_some_and(|s| selects(&s, &doc.labels))
                }));
            }
            Relation::OwnerReference => {}
        }
    }
    if !keys.is_empty() {
        let query = live(vec![
            eq(Field::Cluster, &doc.cluster),
            Expr::In {
                field: Field::Ref,
                values: keys.into_iter().map(Value::Text).collect(),
                negated: false,
            },
        ]);
        found.extend(find(storage, query).await?);
    }
    Ok(found)
}

/// The graph around `root`: `hops` up its parents and `hops` down its children.
pub(crate) async fn graph(
    storage: &Visible,
    rules: &[RelationRule],
    root: ResourceDocument,
    hops: usize,
) -> Result<Graph, StorageError> {
    let mut graph = Graph::default();
    let root_id = root.id();
    graph.objects.insert(root_id.clone(), root);
    for up in [true, false] {
        let mut queue = VecDeque::from([(root_id.clone(), 0)]);
        let mut seen = BTreeSet::from([root_id.clone()]);
        while let Some((id, depth)) = queue.pop_front() {
            if depth >= hops || graph.objects.len() >= MAX_NODES {
                continue;
            }
            let doc = graph.objects[&id].clone();
            let related = if up {
                parents(storage, rules, &doc).await?
            } else {
                children(storage, rules, &doc).await?
            };
            for other in related {
                let other_id = other.id();
                if other_id == id {
                    continue;
                }
                if !graph.objects.contains_key(&other_id) {
                    if graph.objects.len() >= MAX_NODES {
                        break;
                    }
                    graph.objects.insert(other_id.clone(), other);
                }
                let edge = if up {
                    (other_id.clone(), id.clone())
                } else {
                    (id.clone(), other_id.clone())
                };
                graph.edges.insert(edge);
                if seen.insert(other_id.clone()) {
                    queue.push_back((other_id, depth + 1));
                }
            }
        }
    }
    Ok(graph)
}
