//! What a caller may see, as a term of every storage query. A handler reads documents only
//! through [`Visible`], made per request from the caller's [`Scope`]: it adds the scope to
//! each query (so totals, pages, counts and graphs count only what is visible) and drops
//! what a lookup by id finds outside it. The unscoped storage ([`Unscoped`]) can be read
//! only here, so a route cannot forget the scope.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use karpor_core::model::{Cluster, LabelSelector};
use karpor_search::{Expr, Field, Op, Query, Value};
use karpor_storage::{
    AuditTotals, Bucket, ChangeQuery, ResourceDocument, SearchResult, SearchStorage, Storage,
    StorageError,
};

use crate::envelope::ApiError;
use crate::{AppState, Role};

/// Kubernetes' names for the two kinds a scope treats apart.
const SECRET: &str = "Secret";
const NAMESPACE: &str = "Namespace";

/// One part of the fleet a caller may see, with the role it has there. `None` is all.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grant {
    pub(crate) role: Role,
    pub(crate) clusters: Option<BTreeSet<String>>,
    pub(crate) cluster_labels: Option<LabelSelector>,
    pub(crate) namespaces: Option<BTreeSet<String>>,
    /// Lower case: kinds compare case-insensitively, as in queries.
    pub(crate) kinds: Option<BTreeSet<String>>,
    pub(crate) secrets: bool,
}

impl Grant {
    pub(crate) fn everything(role: Role) -> Grant {
        Grant {
            role,
            clusters: None,
            cluster_labels: None,
            namespaces: None,
            kinds: None,
            secrets: true,
        }
    }

    fn is_everything(&self) -> bool {
        self.clusters.is_none()
            && self.cluster_labels.is_none()
            && self.namespaces.is_none()
            && self.kinds.is_none()
            && self.secrets
    }
}

/// Everything a caller's grants cover, joined.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scope {
    grants: Vec<Grant>,
}

impl Scope {
    pub(crate) fn of(grants: Vec<Grant>) -> Scope {
        Scope { grants }
    }

    /// The whole fleet, with `role` everywhere.
    #[cfg(test)]
    pub(crate) fn everything(role: Role) -> Scope {
        Scope::of(vec![Grant::everything(role)])
    }

    pub(crate) fn is_everything(&self) -> bool {
        self.grants.iter().any(Grant::is_everything)
    }

    /// As `/authn` shows it.
    pub(crate) fn views(&self) -> Vec<crate::types::GrantView> {
        let list =
            |set: &Option<BTreeSet<String>>| set.as_ref().map(|s| s.iter().cloned().collect());
        self.grants
            .iter()
            .map(|g| crate::types::GrantView {
                role: g.role.as_str().to_owned(),
                clusters: list(&g.clusters),
                cluster_labels: g.cluster_labels.as_ref().map(ToString::to_string),
                namespaces: list(&g.namespaces),
                kinds: list(&g.kinds),
                secrets: g.secrets,
            })
            .collect()
    }

    /// Whether the scope holds anything of a cluster, given the clusters' labels.
    pub(crate) fn clusters_seen(
        &self,
        labels: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let grants = self.resolve(labels);
        move |cluster| grants.iter().any(|g| g.holds_cluster(cluster))
    }

    pub(crate) fn needs_cluster_labels(&self) -> bool {
        self.grants.iter().any(|g| g.cluster_labels.is_some())
    }

    /// The grants with cluster labels replaced by the clusters they match.
    fn resolve(&self, clusters: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Resolved> {
        self.grants
            .iter()
            .map(|grant| {
                let clusters = match (&grant.clusters, &grant.cluster_labels) {
                    (names, None) => names.clone(),
                    (names, Some(selector)) => Some(
                        clusters
                            .iter()
                            .filter(|(_, labels)| selector.matches(labels))
                            .map(|(name, _)| name.clone())
                            .chain(names.iter().flatten().cloned())
                            .collect(),
                    ),
                };
                Resolved {
                    role: grant.role,
                    clusters,
                    namespaces: grant.namespaces.clone(),
                    kinds: grant.kinds.clone(),
                    secrets: grant.secrets,
                }
            })
            .collect()
    }
}

/// A grant over named clusters only.
#[derive(Debug, Clone)]
struct Resolved {
    role: Role,
    clusters: Option<BTreeSet<String>>,
    namespaces: Option<BTreeSet<String>>,
    kinds: Option<BTreeSet<String>>,
    secrets: bool,
}

fn texts(values: &BTreeSet<String>) -> Vec<Value> {
    values.iter().cloned().map(Value::Text).collect()
}

fn is(field: Field, text: &str) -> Expr {
    Expr::Compare {
        field,
        op: Op::Eq,
        value: Value::Text(text.to_owned()),
    }
}

fn any_of(field: Field, values: &BTreeSet<String>) -> Expr {
    Expr::In {
        field,
        values: texts(values),
        negated: false,
    }
}

impl Resolved {
    /// `None` when it holds nothing (no cluster matched).
    fn filter(&self) -> Option<Expr> {
        let mut terms = Vec::new();
        if let Some(clusters) = &self.clusters {
            if clusters.is_empty() {
                return None;
            }
            terms.push(any_of(Field::Cluster, clusters));
        }
        if let Some(namespaces) = &self.namespaces {
            // A Namespace object has no namespace: checked first, so other rows are
            // decided without their name.
            terms.push(Expr::Or(vec![
                any_of(Field::Namespace, namespaces),
                Expr::And(vec![
                    is(Field::Namespace, ""),
                    is(Field::Kind, NAMESPACE),
                    any_of(Field::Name, namespaces),
                ]),
            ]));
        }
        if let Some(kinds) = &self.kinds {
            terms.push(any_of(Field::Kind, kinds));
        }
        if !self.secrets {
            terms.push(Expr::Not(Box::new(is(Field::Kind, SECRET))));
        }
        Some(match terms.len() {
            0 => Expr::All,
            1 => terms.remove(0),
            _ => Expr::And(terms),
        })
    }

    fn holds_cluster(&self, cluster: &str) -> bool {
        self.clusters.as_ref().is_none_or(|c| c.contains(cluster))
    }

    fn holds(&self, object: &Object<'_>) -> bool {
        let kind = object.kind.to_ascii_lowercase();
        self.holds_cluster(object.cluster)
            && self.namespaces.as_ref().is_none_or(|namespaces| {
                object.namespace.is_some_and(|ns| namespaces.contains(ns))
                    || (object.kind.eq_ignore_ascii_case(NAMESPACE)
                        && namespaces.contains(object.name))
            })
            && self
                .kinds
                .as_ref()
                .is_none_or(|kinds| kinds.contains(&kind))
            && (self.secrets || !object.kind.eq_ignore_ascii_case(SECRET))
    }
}

/// An object as a scope judges it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Object<'a> {
    pub cluster: &'a str,
    /// `None` (or empty) for a cluster-scoped object.
    pub namespace: Option<&'a str>,
    pub kind: &'a str,
    pub name: &'a str,
}

impl<'a> Object<'a> {
    fn of(document: &'a ResourceDocument) -> Object<'a> {
        Object {
            cluster: &document.cluster,
            namespace: Some(document.namespace.as_str()).filter(|n| !n.is_empty()),
            kind: &document.kind,
            name: &document.name,
        }
    }
}

/// The resource storage, unscoped: only [`Visible`] reads it.
#[derive(Clone)]
pub(crate) struct Unscoped(Arc<dyn Storage>);

impl Unscoped {
    pub(crate) fn new(storage: Arc<dyn Storage>) -> Self {
        Unscoped(storage)
    }

    pub(crate) fn backend(&self) -> &'static str {
        self.0.backend()
    }
}

/// The storage as one caller may see it.
pub(crate) struct Visible {
    storage: Arc<dyn Storage>,
    /// `None`: everything.
    grants: Option<Vec<Resolved>>,
}

impl Visible {
    /// What `scope` sees of `storage`; `clusters` (name → labels) matter only to grants
    /// that select clusters by label.
    fn new(
        storage: &Unscoped,
        scope: &Scope,
        clusters: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Visible {
        Visible {
            storage: storage.0.clone(),
            grants: (!scope.is_everything()).then(|| scope.resolve(clusters)),
        }
    }

    /// The scope as a query term; `None` for everything.
    fn filter(&self) -> Option<Expr> {
        let grants = self.grants.as_ref()?;
        let mut any: Vec<Expr> = grants.iter().filter_map(Resolved::filter).collect();
        if any.contains(&Expr::All) {
            return None;
        }
        Some(match any.len() {
            // Matches nothing, on every backend.
            0 => Expr::Not(Box::new(Expr::All)),
            1 => any.remove(0),
            _ => Expr::Or(any),
        })
    }

    /// `query` narrowed to the scope (a term the backend checks, never searches by).
    pub(crate) fn scoped(&self, mut query: Query) -> Query {
        if let Some(scope) = self.filter() {
            query.filter = Expr::And(vec![query.filter, Expr::Scope(Box::new(scope))]);
        }
        query
    }

    /// Whether the caller sees anything of the cluster (a namespaced scope does).
    pub(crate) fn cluster(&self, name: &str) -> bool {
        self.grants
            .as_ref()
            .is_none_or(|g| g.iter().any(|g| g.holds_cluster(name)))
    }

    /// Whether the caller sees the object.
    pub(crate) fn object(&self, object: Object<'_>) -> bool {
        self.object_as(object, Role::Viewer)
    }

    /// Whether the caller has at least `role` where the object is.
    pub(crate) fn object_as(&self, object: Object<'_>, role: Role) -> bool {
        match &self.grants {
            None => true,
            Some(grants) => grants.iter().any(|g| g.role >= role && g.holds(&object)),
        }
    }

    pub(crate) fn is_everything(&self) -> bool {
        self.grants.is_none()
    }

    /// A document by id, when the caller sees it.
    pub(crate) async fn get(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<Option<ResourceDocument>, StorageError> {
        let found = self.storage.get(cluster, uid).await?;
        Ok(found.filter(|d| self.object(Object::of(d))))
    }

    /// Documents not marked deleted that the caller sees, of one cluster or all.
    pub(crate) async fn count(&self, cluster: Option<&str>) -> Result<u64, StorageError> {
        if self.is_everything() {
            return self.storage.count(cluster).await;
        }
        let mut terms = vec![Expr::Compare {
            field: Field::Deleted,
            op: Op::Eq,
            value: Value::Bool(false),
        }];
        if let Some(cluster) = cluster {
            terms.push(is(Field::Cluster, cluster));
        }
        let query = Query {
            filter: Expr::And(terms),
            order_by: Vec::new(),
            limit: None,
            offset: None,
        };
        Ok(self.search(&query, 0, 0).await?.total)
    }
}

/// History, as the caller may see it: each revision judged by the object it is of (its
/// own cluster, namespace, kind and name, not the ones asked for), changes only within the
/// scope.
impl Visible {
    fn sees(&self, revision: &karpor_storage::Revision) -> bool {
        self.object(Object {
            cluster: &revision.cluster,
            namespace: Some(revision.namespace.as_str()).filter(|n| !n.is_empty()),
            kind: &revision.kind,
            name: &revision.name,
        })
    }

    /// The newest `limit` revisions of an object the caller sees.
    pub(crate) async fn history(
        &self,
        name: &karpor_storage::ObjectName,
        limit: usize,
    ) -> Result<Vec<karpor_storage::Rebuilt>, StorageError> {
        let mut rebuilt = self.storage.history(name, limit).await?;
        rebuilt.retain(|r| self.sees(&r.revision));
        Ok(rebuilt)
    }

    /// The object as it was at `at`; `None` outside the scope.
    pub(crate) async fn object_at(
        &self,
        name: &karpor_storage::ObjectName,
        at: time::OffsetDateTime,
    ) -> Result<Option<karpor_storage::ObjectAt>, StorageError> {
        let found = self.storage.object_at(name, at).await?;
        Ok(found.filter(|found| {
            let object = &found.object;
            let metadata = &object["metadata"];
            // Storage found it by these names: they stand in where the object omits one.
            self.object(Object {
                cluster: &name.cluster,
                namespace: metadata["namespace"]
                    .as_str()
                    .or(Some(name.namespace.as_str()))
                    .filter(|n| !n.is_empty()),
                kind: object["kind"].as_str().unwrap_or(&name.kind),
                name: metadata["name"].as_str().unwrap_or(&name.name),
            })
        }))
    }

    fn scoped_changes(&self, query: &ChangeQuery) -> ChangeQuery {
        let mut query = query.clone();
        if let Some(scope) = self.filter() {
            query.filter = Expr::And(vec![query.filter, Expr::Scope(Box::new(scope))]);
        }
        query
    }

    pub(crate) async fn changes(
        &self,
        query: &ChangeQuery,
        from: u64,
        size: u64,
    ) -> Result<karpor_storage::ChangePage, StorageError> {
        self.storage
            .changes(&self.scoped_changes(query), from, size)
            .await
    }

    pub(crate) async fn change_counts(
        &self,
        query: &ChangeQuery,
    ) -> Result<karpor_storage::ChangeCounts, StorageError> {
        self.storage
            .change_counts(&self.scoped_changes(query))
            .await
    }
}

#[async_trait]
impl SearchStorage for Visible {
    async fn search_counted(
        &self,
        query: &Query,
        from: u64,
        size: u64,
        count_up_to: Option<u64>,
    ) -> Result<SearchResult, StorageError> {
        self.storage
            .search_counted(&self.scoped(query.clone()), from, size, count_up_to)
            .await
    }

    async fn audit_totals(&self, query: &Query) -> Result<AuditTotals, StorageError> {
        self.storage.audit_totals(&self.scoped(query.clone())).await
    }

    async fn terms(
        &self,
        field: &Field,
        query: &Query,
        size: usize,
    ) -> Result<Vec<Bucket>, StorageError> {
        self.storage
            .terms(field, &self.scoped(query.clone()), size)
            .await
    }
}

/// Clusters' labels, for grants that select clusters by label.
async fn cluster_labels(
    state: &AppState,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, ApiError> {
    let clusters = state.metastore.list_all::<Cluster>().await?;
    Ok(clusters
        .into_iter()
        .map(|c| (c.record.name, c.record.labels))
        .collect())
}

impl FromRequestParts<AppState> for Visible {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(scope) = parts.extensions.get::<Arc<Scope>>().cloned() else {
            tracing::error!("a scoped read was reached without a caller");
            return Err(ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "access is not configured",
            ));
        };
        let clusters = if scope.needs_cluster_labels() && !scope.is_everything() {
            cluster_labels(state).await?
        } else {
            BTreeMap::new()
        };
        Ok(Visible::new(&state.storage, &scope, &clusters))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(role: Role) -> Grant {
        Grant::everything(role)
    }

    fn visible(grants: Vec<Grant>) -> Visible {
        let clusters = BTreeMap::from([
            (
                "one".to_owned(),
                BTreeMap::from([("env".to_owned(), "prod".to_owned())]),
            ),
            ("two".to_owned(), BTreeMap::new()),
        ]);
        let storage = Unscoped::new(Arc::new(NoStorage));
        Visible::new(&storage, &Scope::of(grants), &clusters)
    }

    struct NoStorage;

    #[async_trait]
    impl karpor_storage::ResourceStorage for NoStorage {
        fn backend(&self) -> &'static str {
            "none"
        }
        async fn ping(&self) -> Result<(), StorageError> {
            Ok(())
        }
        async fn upsert(&self, _: &[ResourceDocument]) -> Result<(), StorageError> {
            Ok(())
        }
        async fn delete(
            &self,
            _: &str,
            _: &str,
            _: Option<&str>,
            _: Option<&karpor_storage::HistoryNote>,
        ) -> Result<bool, StorageError> {
            Ok(false)
        }
        async fn get(&self, _: &str, _: &str) -> Result<Option<ResourceDocument>, StorageError> {
            Ok(None)
        }
        async fn count(&self, _: Option<&str>) -> Result<u64, StorageError> {
            Ok(0)
        }
        async fn delete_cluster(&self, _: &str) -> Result<u64, StorageError> {
            Ok(0)
        }
        async fn purge_unseen(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: Option<&str>,
            _: time::OffsetDateTime,
            _: Option<&karpor_storage::HistoryNote>,
        ) -> Result<u64, StorageError> {
            Ok(0)
        }

        async fn versions(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: Option<&str>,
        ) -> Result<karpor_storage::VersionDigest, StorageError> {
            Ok(karpor_storage::VersionDigest::default())
        }
    }

    #[async_trait]
    impl karpor_storage::HistoryStorage for NoStorage {
        async fn object_revisions(
            &self,
            _: &karpor_storage::ObjectName,
            _: Option<time::OffsetDateTime>,
            _: Option<time::OffsetDateTime>,
            _: usize,
        ) -> Result<Vec<karpor_storage::Revision>, StorageError> {
            Ok(Vec::new())
        }
        async fn changes(
            &self,
            _: &karpor_storage::ChangeQuery,
            _: u64,
            _: u64,
        ) -> Result<karpor_storage::ChangePage, StorageError> {
            Ok(karpor_storage::ChangePage {
                items: Vec::new(),
                total: 0,
            })
        }
        async fn change_counts(
            &self,
            _: &karpor_storage::ChangeQuery,
        ) -> Result<karpor_storage::ChangeCounts, StorageError> {
            Ok(Default::default())
        }
        async fn expire(
            &self,
            _: time::OffsetDateTime,
            _: karpor_storage::HistoryCaps,
        ) -> Result<u64, StorageError> {
            Ok(0)
        }
        async fn history_sizes(&self) -> Result<Vec<karpor_storage::HistorySize>, StorageError> {
            Ok(Vec::new())
        }
    }

    #[async_trait]
    impl SearchStorage for NoStorage {
        async fn search_counted(
            &self,
            _: &Query,
            _: u64,
            _: u64,
            _: Option<u64>,
        ) -> Result<SearchResult, StorageError> {
            Ok(SearchResult {
                items: Vec::new(),
                total: 0,
                exact: true,
            })
        }
        async fn audit_totals(&self, _: &Query) -> Result<AuditTotals, StorageError> {
            Ok(AuditTotals::default())
        }
        async fn terms(&self, _: &Field, _: &Query, _: usize) -> Result<Vec<Bucket>, StorageError> {
            Ok(Vec::new())
        }
    }

    fn object<'a>(
        cluster: &'a str,
        namespace: Option<&'a str>,
        kind: &'a str,
        name: &'a str,
    ) -> Object<'a> {
        Object {
            cluster,
            namespace,
            kind,
            name,
        }
    }

    #[test]
    fn everything_adds_no_term_and_nothing_matches_nothing() {
        let all = visible(vec![grant(Role::Viewer)]);
        assert!(all.filter().is_none());
        let none = visible(vec![Grant {
            cluster_labels: Some("env=dev".parse().unwrap()),
            ..grant(Role::Viewer)
        }]);
        assert_eq!(none.filter(), Some(Expr::Not(Box::new(Expr::All))));
        assert!(!none.cluster("one"));
        assert!(!none.object(object("one", Some("a"), "Pod", "p")));
    }

    #[test]
    fn a_grant_holds_its_clusters_namespaces_and_kinds_and_secrets_only_when_granted() {
        let team = visible(vec![Grant {
            cluster_labels: Some("env=prod".parse().unwrap()),
            namespaces: Some(BTreeSet::from(["web".to_owned()])),
            kinds: Some(BTreeSet::from([
                "pod".to_owned(),
                "secret".to_owned(),
                "namespace".to_owned(),
            ])),
            secrets: false,
            ..grant(Role::Viewer)
        }]);
        assert!(team.cluster("one") && !team.cluster("two"));
        assert!(team.object(object("one", Some("web"), "Pod", "p")));
        assert!(team.object(object("one", None, "Namespace", "web")));
        assert!(!team.object(object("one", None, "Namespace", "db")));
        assert!(!team.object(object("one", Some("db"), "Pod", "p")));
        assert!(!team.object(object("two", Some("web"), "Pod", "p")));
        assert!(!team.object(object("one", Some("web"), "Deployment", "d")));
        assert!(!team.object(object("one", Some("web"), "Secret", "s")));
        assert!(!team.object(object("one", None, "Node", "n")));
        assert!(!team.object_as(object("one", Some("web"), "Pod", "p"), Role::Editor));
        let filter = team.filter().unwrap().clone();
        assert!(filter.mentions(&Field::Cluster) && filter.mentions(&Field::Namespace));
    }
}
