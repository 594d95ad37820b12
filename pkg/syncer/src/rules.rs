//! Which resources of which cluster to watch, and how: sync rules matched against a
//! cluster and resolved against the cluster's discovery (never against plural spellings).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use karpor_core::model::{Cluster, ClusterSelector, ResourceSelector, SyncRule, Transform};
use kube::discovery::{verbs, ApiCapabilities, ApiResource, Scope};

use crate::policy::Ingest;
use crate::transform::{ObjectType, Trimmer};

/// The rule used when the metadata store holds none: the workload, network and config
/// objects people search for, and the disruption budgets `pdb-missing` reads. Events are
/// left out (high churn, little to find).
pub fn default_rule() -> SyncRule {
    let resources = [
        ("", "namespaces"),
        ("", "pods"),
        ("", "services"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("", "nodes"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("apps", "replicasets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("networking.k8s.io", "ingresses"),
        ("policy", "poddisruptionbudgets"),
    ];
    SyncRule {
        name: "default".to_owned(),
        description: "built-in: used while no sync rule is stored".to_owned(),
        clusters: ClusterSelector::All,
        resources: resources
            .into_iter()
            .map(|(group, resource)| ResourceSelector {
                group: group.to_owned(),
                version: "*".to_owned(),
                resource: resource.to_owned(),
            })
            .collect(),
        namespaces: Vec::new(),
        label_selector: None,
        field_selector: None,
        transform: Transform::default(),
        keep_after_delete: false,
    }
}

/// The rules that apply to `cluster`, in name order; the default rule when none is stored.
pub fn rules_for(cluster: &Cluster, stored: &[SyncRule]) -> Vec<SyncRule> {
    if stored.is_empty() {
        return vec![default_rule()];
    }
    let mut rules: Vec<SyncRule> = stored
        .iter()
        .filter(|r| selects(&r.clusters, cluster))
        .cloned()
        .collect();
    rules.sort_by(|a, b| a.name.cmp(&b.name));
    rules
}

fn selects(selector: &ClusterSelector, cluster: &Cluster) -> bool {
    match selector {
        ClusterSelector::All => true,
        ClusterSelector::Names(names) => names.iter().any(|n| n == &cluster.name),
        ClusterSelector::Selector(s) => label_selector_matches(s, &cluster.labels),
    }
}

/// Kubernetes equality-based selector syntax: `a=b`, `a==b`, `a!=b`, `a`, `!a`, joined by
/// commas, all of which must hold.
pub fn label_selector_matches(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|term| !term.is_empty())
        .all(|term| {
            if let Some((k, v)) = term.split_once("!=") {
                labels.get(k.trim()).map(String::as_str) != Some(v.trim())
            } else if let Some((k, v)) = term.split_once('=') {
                let v = v.strip_prefix('=').unwrap_or(v);
                labels.get(k.trim()).map(String::as_str) == Some(v.trim())
            } else if let Some(k) = term.strip_prefix('!') {
                !labels.contains_key(k.trim())
            } else {
                labels.contains_key(term)
            }
        })
}

/// What one rule asks of each watcher it gives rise to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchOptions {
    pub rule: String,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub trimmer: Trimmer,
    pub keep_after_delete: bool,
    /// The audit policy and relation rules the watcher's documents are written with: a
    /// new policy is a new watcher (a relist).
    pub ingest: Arc<Ingest>,
}

/// One watcher: a resource type, in one namespace or all.
#[derive(Debug, Clone)]
pub struct Target {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub options: Arc<WatchOptions>,
}

/// Identifies a watcher; a change of options is a different watcher.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetKey {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub options: Arc<WatchOptions>,
}

impl Target {
    pub fn key(&self) -> TargetKey {
        TargetKey {
            group: self.resource.group.clone(),
            version: self.resource.version.clone(),
            plural: self.resource.plural.clone(),
            namespace: self.namespace.clone(),
            options: self.options.clone(),
        }
    }

    pub fn object_type(&self) -> ObjectType {
        ObjectType {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
        }
    }
}

/// A resource as discovery reports it.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub resource: ApiResource,
    pub capabilities: ApiCapabilities,
    /// Served at the group's preferred version (what a `*` version picks).
    pub preferred: bool,
}

/// The watchers `rules` ask for among `discovered`. A resource type selected by several
/// rules is watched by the first in name order only.
pub fn resolve(rules: &[SyncRule], discovered: &[Discovered], ingest: &Arc<Ingest>) -> Vec<Target> {
    let mut claimed = HashSet::new();
    let mut targets = Vec::new();
    for rule in rules {
        let options = Arc::new(WatchOptions {
            rule: rule.name.clone(),
            label_selector: rule.label_selector.clone().filter(|s| !s.is_empty()),
            field_selector: rule.field_selector.clone().filter(|s| !s.is_empty()),
            trimmer: Trimmer::new(&rule.transform),
            keep_after_delete: rule.keep_after_delete,
            ingest: ingest.clone(),
        });
        for d in discovered {
            let watchable = d.capabilities.supports_operation(verbs::LIST)
                && d.capabilities.supports_operation(verbs::WATCH);
            if !watchable || !rule.resources.iter().any(|s| matches(s, d)) {
                continue;
            }
            let namespaces: Vec<Option<String>> =
                if d.capabilities.scope == Scope::Namespaced && !rule.namespaces.is_empty() {
                    rule.namespaces.iter().cloned().map(Some).collect()
                } else {
                    vec![None]
                };
            // One rule per type: two watchers of overlapping scopes would purge each
            // other's documents after their relists.
            let r = &d.resource;
            if !claimed.insert((r.group.clone(), r.plural.clone())) {
                continue;
            }
            targets.extend(namespaces.into_iter().map(|namespace| Target {
                resource: r.clone(),
                namespace,
                options: options.clone(),
            }));
        }
    }
    targets
}

fn matches(selector: &ResourceSelector, d: &Discovered) -> bool {
    let r = &d.resource;
    let version = if selector.version == "*" {
        d.preferred
    } else {
        selector.version == r.version
    };
    (selector.group == "*" || selector.group == r.group)
        && version
        && (selector.resource == "*" || selector.resource == r.plural)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpor_core::model::Kubeconfig;

    fn audit() -> Arc<Ingest> {
        Arc::new(Ingest::default())
    }

    fn discovered(group: &str, version: &str, kind: &str, plural: &str, ns: bool) -> Discovered {
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        Discovered {
            resource: ApiResource {
                group: group.into(),
                version: version.into(),
                api_version,
                kind: kind.into(),
                plural: plural.into(),
            },
            capabilities: ApiCapabilities {
                scope: if ns {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                },
                subresources: vec![],
                operations: vec![verbs::LIST.into(), verbs::WATCH.into()],
            },
            preferred: version == "v1",
        }
    }

    fn cluster(labels: &[(&str, &str)]) -> Cluster {
        Cluster {
            name: "prod".into(),
            display_name: String::new(),
            description: String::new(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            kubeconfig: Kubeconfig("x".into()),
        }
    }

    fn rule(name: &str, resources: &[(&str, &str, &str)]) -> SyncRule {
        SyncRule {
            name: name.into(),
            resources: resources
                .iter()
                .map(|(g, v, r)| ResourceSelector {
                    group: g.to_string(),
                    version: v.to_string(),
                    resource: r.to_string(),
                })
                .collect(),
            ..default_rule()
        }
    }

    fn all() -> Vec<Discovered> {
        vec![
            discovered("", "v1", "Namespace", "namespaces", false),
            discovered("", "v1", "ConfigMap", "configmaps", true),
            discovered("", "v1", "Endpoints", "endpoints", true),
            discovered("networking.k8s.io", "v1", "Ingress", "ingresses", true),
            discovered("networking.k8s.io", "v1beta1", "Ingress", "ingresses", true),
            discovered("example.com", "v1", "Widget", "widgets", true),
        ]
    }

    fn plurals(targets: &[Target]) -> Vec<String> {
        targets
            .iter()
            .map(|t| match &t.namespace {
                Some(ns) => format!("{}/{}@{ns}", t.resource.api_version, t.resource.plural),
                None => format!("{}/{}", t.resource.api_version, t.resource.plural),
            })
            .collect()
    }

    #[test]
    fn stars_pick_every_watchable_resource_at_its_preferred_version() {
        let mut found = all();
        found[2].capabilities.operations = vec![verbs::LIST.into()];
        let targets = resolve(&[rule("r", &[("*", "*", "*")])], &found, &audit());
        assert_eq!(
            plurals(&targets),
            [
                "v1/namespaces",
                "v1/configmaps",
                "networking.k8s.io/v1/ingresses",
                "example.com/v1/widgets"
            ]
        );
    }

    #[test]
    fn names_come_from_discovery_and_an_exact_version_is_honoured() {
        let targets = resolve(
            &[rule("r", &[("networking.k8s.io", "v1beta1", "ingresses")])],
            &all(),
            &audit(),
        );
        assert_eq!(plurals(&targets), ["networking.k8s.io/v1beta1/ingresses"]);
        assert_eq!(targets[0].resource.kind, "Ingress");
    }

    #[test]
    fn namespaces_split_namespaced_types_only_and_the_first_rule_wins() {
        let mut first = rule("a", &[("", "v1", "configmaps"), ("", "v1", "namespaces")]);
        first.namespaces = vec!["x".into(), "y".into()];
        first.label_selector = Some("app=web".into());
        let second = rule("b", &[("", "v1", "configmaps")]);
        let targets = resolve(&[first, second], &all(), &audit());
        assert_eq!(
            plurals(&targets),
            ["v1/namespaces", "v1/configmaps@x", "v1/configmaps@y"]
        );
        assert!(targets
            .iter()
            .all(|t| t.options.label_selector.as_deref() == Some("app=web")));
    }

    #[test]
    fn clusters_are_chosen_by_name_or_label_and_the_default_applies_when_none_is_stored() {
        let c = cluster(&[("env", "prod"), ("tier", "1")]);
        assert_eq!(rules_for(&c, &[]), vec![default_rule()]);
        let mut by_name = rule("n", &[("", "v1", "pods")]);
        by_name.clusters = ClusterSelector::Names(vec!["prod".into()]);
        let mut by_label = rule("l", &[("", "v1", "pods")]);
        by_label.clusters = ClusterSelector::Selector("env=prod,tier!=2,!canary".into());
        let mut other = rule("o", &[("", "v1", "pods")]);
        other.clusters = ClusterSelector::Selector("env==dev".into());
        let names: Vec<String> = rules_for(&c, &[by_name, other, by_label])
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["l", "n"]);
    }

    #[test]
    fn label_selector_terms() {
        let labels = BTreeMap::from([("a".to_owned(), "1".to_owned())]);
        assert!(label_selector_matches("a", &labels));
        assert!(label_selector_matches("a=1, !b", &labels));
        assert!(!label_selector_matches("a!=1", &labels));
        assert!(!label_selector_matches("b", &labels));
        assert!(label_selector_matches("", &labels));
    }
}
