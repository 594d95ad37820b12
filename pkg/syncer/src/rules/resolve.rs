//! Which resources of which cluster to watch, and how: sync rules matched against a
//! cluster and resolved against the cluster's discovery (never against plural spellings)
//! into targets, one watcher each.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Arc;

use karpor_core::model::{
    Cluster, ClusterSelector, OverLimit, ResourceSelector, RuleLimits, SyncRule,
};
use kube::discovery::{ApiResource, Scope};

use crate::ingest::policy::Ingest;
use crate::ingest::transform::{ObjectType, Trimmer};
use crate::rules::built_in::{default_rules, ALIAS_GROUPS, NOT_BY_WILDCARD};
use crate::rules::discovery::Discovered;

/// A rule as a cluster sync follows it, with its stored version (none for a built-in).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VersionedRule {
    pub rule: SyncRule,
    pub version: Option<i64>,
}

/// A cluster's rules, as the supervisor hands them to its sync (a change is applied
/// without restarting it).
pub(crate) type RulesSeen = tokio::sync::watch::Receiver<Arc<Vec<VersionedRule>>>;

/// The rules that apply to `cluster`, in name order; the built-in ones when none is
/// stored.
pub(crate) fn rules_for(cluster: &Cluster, stored: &[SyncRule]) -> Vec<SyncRule> {
    if stored.is_empty() {
        return default_rules();
    }
    let mut rules: Vec<SyncRule> = stored
        .iter()
        .filter(|r| selects(&r.clusters, cluster))
        .cloned()
        .collect();
    rules.sort_by(|a, b| a.name.cmp(&b.name));
    rules
}

/// Whether a rule's cluster selector picks `cluster`.
pub fn selects(selector: &ClusterSelector, cluster: &Cluster) -> bool {
    match selector {
        ClusterSelector::All => true,
        ClusterSelector::Names(names) => names.iter().any(|n| n == &cluster.name),
        ClusterSelector::Selector(s) => s.matches(&cluster.labels),
    }
}

/// What one rule asks of each watcher it gives rise to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct WatchOptions {
    pub rule: String,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub trimmer: Trimmer,
    pub keep_after_delete: bool,
    /// How long its changes are kept in history; `None`: not at all.
    pub history: Option<std::time::Duration>,
    /// The audit policy and relation rules the watcher's documents are written with: a
    /// new policy is a new watcher (a relist).
    pub ingest: Arc<Ingest>,
}

/// One watcher: a resource type, in one namespace or all.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub namespace: Option<String>,
    pub options: Arc<WatchOptions>,
}

/// Identifies a watcher; a change of options is a different watcher.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TargetKey {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub options: Arc<WatchOptions>,
}

impl TargetKey {
    /// The watcher in a few bytes: its type, namespace and every option its documents are
    /// written with, and this binary's version (a newer one may write them otherwise).
    /// Equal fingerprints write equal documents of equal objects.
    pub(crate) fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(env!("CARGO_PKG_VERSION").as_bytes());
        hash.update([0]);
        // Debug holds every field; none is a hash map, so it is the same in every run.
        hash.update(format!("{self:?}").as_bytes());
        let bytes: [u8; 32] = hash.finalize().into();
        bytes[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl Target {
    pub(crate) fn key(&self) -> TargetKey {
        TargetKey {
            group: self.resource.group.clone(),
            version: self.resource.version.clone(),
            plural: self.resource.plural.clone(),
            namespace: self.namespace.clone(),
            options: self.options.clone(),
        }
    }

    pub(crate) fn object_type(&self) -> ObjectType {
        ObjectType {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
        }
    }
}

/// The watchers `rules` ask for among `discovered`, in discovery's order. A resource
/// type selected by several rules is watched once, by the rule that names it most
/// precisely (its resource named over `*`, then its group, then its version), the first
/// in name order among equals: two watchers of overlapping scopes would purge each
/// other's documents after their lists.
pub(crate) fn resolve(
    rules: &[SyncRule],
    discovered: &[Discovered],
    ingest: &Arc<Ingest>,
) -> Vec<Target> {
    targets(rules, discovered, &claims(rules, discovered), ingest)
}

/// As [`resolve`], unless the rules are over `limits`: too many, one too large (a rule
/// stored before the limits were lowered, or imported), or together more watches than
/// `watches_per_cluster`. Counted before any target is made, so a hostile rule costs
/// nothing. `Err` says which limit, in words for the cluster's status and log.
pub(crate) fn resolve_within(
    rules: &[SyncRule],
    discovered: &[Discovered],
    ingest: &Arc<Ingest>,
    limits: &RuleLimits,
) -> Result<Vec<Target>, String> {
    if rules.len() > limits.rules_per_cluster {
        let over = OverLimit {
            field: "sync rules selecting the cluster".to_owned(),
            count: rules.len(),
            limit: limits.rules_per_cluster,
            key: "rules_per_cluster",
        };
        return Err(over.to_string());
    }
    for rule in rules {
        limits
            .check_sync_rule(rule)
            .map_err(|over| format!("sync rule {:?}: {over}", rule.name))?;
    }
    let claims = claims(rules, discovered);
    let watches: usize = claims
        .iter()
        .map(|&(at, rule)| watches_of(&discovered[at], &rules[rule]))
        .sum();
    if watches > limits.watches_per_cluster {
        let over = OverLimit {
            field: "watches the sync rules resolve to".to_owned(),
            count: watches,
            limit: limits.watches_per_cluster,
            key: "watches_per_cluster",
        };
        return Err(over.to_string());
    }
    Ok(targets(rules, discovered, &claims, ingest))
}

/// Which rule watches each discovered type, as `(index in discovered, index in rules)`,
/// in discovery's order.
fn claims(rules: &[SyncRule], discovered: &[Discovered]) -> Vec<(usize, usize)> {
    // (group, plural) to its best claim and where it was discovered.
    let mut claims: HashMap<(&str, &str), (Claim, usize)> = HashMap::new();
    for (at, d) in discovered.iter().enumerate() {
        if !d.watchable() {
            continue;
        }
        for (index, rule) in rules.iter().enumerate() {
            let Some(precision) = rule.resources.iter().filter_map(|s| precision(s, d)).max()
            else {
                continue;
            };
            let claim = (precision, Reverse(index));
            let key = (d.resource.group.as_str(), d.resource.plural.as_str());
            match claims.get(&key) {
                Some((best, _)) if *best >= claim => {}
                _ => {
                    claims.insert(key, (claim, at));
                }
            }
        }
    }
    let mut won: Vec<(usize, usize)> = claims
        .into_values()
        .map(|((_, Reverse(rule)), at)| (at, rule))
        .collect();
    won.sort_unstable();
    won
}

/// Watchers of one type under one rule: one per listed namespace, or one for all.
fn watches_of(d: &Discovered, rule: &SyncRule) -> usize {
    if d.capabilities.scope == Scope::Namespaced && !rule.namespaces.is_empty() {
        rule.namespaces.len()
    } else {
        1
    }
}

/// One target per claim won (per listed namespace).
fn targets(
    rules: &[SyncRule],
    discovered: &[Discovered],
    won: &[(usize, usize)],
    ingest: &Arc<Ingest>,
) -> Vec<Target> {
    let options: Vec<Arc<WatchOptions>> = rules
        .iter()
        .map(|rule| {
            Arc::new(WatchOptions {
                rule: rule.name.clone(),
                label_selector: rule.label_selector.clone().filter(|s| !s.is_empty()),
                field_selector: rule.field_selector.clone().filter(|s| !s.is_empty()),
                trimmer: Trimmer::new(&rule.transform),
                keep_after_delete: rule.keep_after_delete,
                history: ingest.history.keep_for(rule.history),
                ingest: ingest.clone(),
            })
        })
        .collect();
    let mut targets = Vec::new();
    for &(at, index) in won {
        let (d, rule) = (&discovered[at], &rules[index]);
        let namespaces: Vec<Option<String>> =
            if d.capabilities.scope == Scope::Namespaced && !rule.namespaces.is_empty() {
                rule.namespaces.iter().cloned().map(Some).collect()
            } else {
                vec![None]
            };
        targets.extend(namespaces.into_iter().map(|namespace| Target {
            resource: d.resource.clone(),
            namespaced: d.capabilities.scope == Scope::Namespaced,
            namespace,
            options: options[index].clone(),
        }));
    }
    targets
}

/// How precisely a selector names a type: resource, group, version named (not `*`).
type Precision = (bool, bool, bool);

/// A rule's claim on a type: the more precise wins, then the earlier rule.
type Claim = (Precision, Reverse<usize>);

/// `None` when `selector` does not select `d`.
fn precision(selector: &ResourceSelector, d: &Discovered) -> Option<Precision> {
    let r = &d.resource;
    let version = if selector.version == "*" {
        d.preferred
    } else {
        selector.version == r.version
    };
    let group = selector.group == r.group
        || (selector.group == "*" && !ALIAS_GROUPS.iter().any(|(g, _)| *g == r.group));
    let resource = selector.resource == r.plural
        || (selector.resource == "*"
            && !NOT_BY_WILDCARD
                .iter()
                .any(|(g, plural, _)| *g == r.group && *plural == r.plural));
    (version && group && resource).then_some((
        selector.resource != "*",
        selector.group != "*",
        selector.version != "*",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::built_in::{DEFAULT_METADATA_RULE, DEFAULT_RULE};
    use karpor_core::model::{Kubeconfig, Record};
    use kube::discovery::{verbs, ApiCapabilities};

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
            mode: Default::default(),
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
            ..default_rules().remove(0)
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
        assert_eq!(rules_for(&c, &[]), default_rules());
        let mut by_name = rule("n", &[("", "v1", "pods")]);
        by_name.clusters = ClusterSelector::Names(vec!["prod".into()]);
        let mut by_label = rule("l", &[("", "v1", "pods")]);
        by_label.clusters = ClusterSelector::Selector("env=prod,tier!=2,!canary".parse().unwrap());
        let mut other = rule("o", &[("", "v1", "pods")]);
        other.clusters = ClusterSelector::Selector("env==dev".parse().unwrap());
        let names: Vec<String> = rules_for(&c, &[by_name, other, by_label])
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["l", "n"]);
    }

    #[test]
    fn a_star_leaves_out_high_churn_types_and_alias_groups_until_named() {
        let found = vec![
            discovered("", "v1", "Event", "events", true),
            discovered("events.k8s.io", "v1", "Event", "events", true),
            discovered("coordination.k8s.io", "v1", "Lease", "leases", true),
            discovered("", "v1", "Endpoints", "endpoints", true),
            discovered(
                "discovery.k8s.io",
                "v1",
                "EndpointSlice",
                "endpointslices",
                true,
            ),
            discovered("extensions", "v1", "Ingress", "ingresses", true),
            discovered("", "v1", "Pod", "pods", true),
        ];
        let every = resolve(&[rule("r", &[("*", "*", "*")])], &found, &audit());
        assert_eq!(plurals(&every), ["v1/pods"]);
        let core = resolve(&[rule("r", &[("", "*", "*")])], &found, &audit());
        assert_eq!(plurals(&core), ["v1/pods"]);
        let named = resolve(
            &[rule("r", &[("*", "*", "events"), ("extensions", "*", "*")])],
            &found,
            &audit(),
        );
        assert_eq!(
            plurals(&named),
            [
                "v1/events",
                "events.k8s.io/v1/events",
                "extensions/v1/ingresses"
            ]
        );
    }

    #[test]
    fn the_most_precise_rule_wins_a_type_then_the_first_by_name() {
        let rules = [
            rule("a-everything", &[("*", "*", "*")]),
            rule("b-group", &[("networking.k8s.io", "*", "*")]),
            rule("c-configmaps", &[("", "*", "configmaps")]),
            rule("d-configmaps", &[("", "v1", "configmaps")]),
        ];
        let targets = resolve(&rules, &all(), &audit());
        let owners: Vec<(String, &str)> = targets
            .iter()
            .map(|t| (t.resource.plural.clone(), t.options.rule.as_str()))
            .collect();
        assert_eq!(
            owners,
            [
                ("namespaces".to_owned(), "a-everything"),
                ("configmaps".to_owned(), "d-configmaps"),
                ("ingresses".to_owned(), "b-group"),
                ("widgets".to_owned(), "a-everything"),
            ]
            .iter()
            .map(|(p, r)| (p.clone(), *r))
            .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_built_in_rules_sync_custom_resources_and_keep_only_metadata_of_large_bodies() {
        let mut found = all();
        found.push(discovered(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        ));
        found.push(discovered("", "v1", "Event", "events", true));
        let targets = resolve(&default_rules(), &found, &audit());
        let owners: Vec<(&str, &str)> = targets
            .iter()
            .map(|t| (t.resource.kind.as_str(), t.options.rule.as_str()))
            .collect();
        assert_eq!(
            owners,
            [
                ("Namespace", DEFAULT_RULE),
                ("ConfigMap", DEFAULT_RULE),
                ("Ingress", DEFAULT_RULE),
                ("Widget", DEFAULT_RULE),
                ("CustomResourceDefinition", DEFAULT_METADATA_RULE),
            ]
        );
        for rule in default_rules() {
            assert_eq!(rule.validate(), Ok(()), "{}", rule.name);
        }
    }

    #[test]
    fn rules_over_the_limits_resolve_to_nothing_and_say_which_limit() {
        let limits = RuleLimits {
            watches_per_cluster: 4,
            rules_per_cluster: 2,
            ..RuleLimits::default()
        };
        let every = rule("r", &[("*", "*", "*")]);
        let fits = resolve_within(std::slice::from_ref(&every), &all(), &audit(), &limits);
        assert_eq!(plurals(&fits.unwrap()).len(), 4);
        // Namespaces once, and three namespaced types in each of two namespaces.
        let mut wide = every.clone();
        wide.namespaces = vec!["a".into(), "b".into()];
        let over = resolve_within(&[wide], &all(), &audit(), &limits).unwrap_err();
        assert_eq!(
            over,
            "watches the sync rules resolve to: 7 is over the limit of 4 (syncer.limits.watches_per_cluster)"
        );
        let three = [
            every.clone(),
            rule("s", &[("", "v1", "configmaps")]),
            rule("t", &[("", "v1", "pods")]),
        ];
        let over = resolve_within(&three, &all(), &audit(), &limits).unwrap_err();
        assert!(
            over.ends_with("(syncer.limits.rules_per_cluster)"),
            "{over}"
        );
        let mut large = every;
        large.namespaces = (0..101).map(|i| format!("n{i}")).collect();
        let over = resolve_within(&[large], &all(), &audit(), &RuleLimits::default()).unwrap_err();
        assert!(
            over.starts_with("sync rule \"r\": namespaces: 101"),
            "{over}"
        );
    }
}
