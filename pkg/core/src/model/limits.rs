//! How large a sync rule or a relation rule may be, and how much one cluster's rules may
//! ask of its syncer: the `syncer.limits` section. A sync rule of 1,000 namespaces over
//! every type once opened about 13,500 watches on one cluster (RSS from 80 MB to 1 GB,
//! the storage pool starved, `/livez` 8.5 s); these bounds refuse such a rule where it is
//! written, and a cluster whose rules would still go over them opens nothing.

use karpor_config::ConfigIssue;
use serde::{Deserialize, Serialize};

use super::{Relation, RelationRule, SyncRule};

/// The config section the limits live in, as messages name their keys.
pub const LIMITS_SECTION: &str = "syncer.limits";

/// Each default is far above what a rule written by hand needs, so only a mistake or a
/// generated rule meets it; each says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuleLimits {
    /// Namespaces one sync rule lists. Each listed namespace is one watch per namespaced
    /// type, so beyond a team's handful a label selector, or every namespace (one watch
    /// per type), costs far less.
    pub namespaces_per_rule: usize,
    /// Resource selectors (`{group, version, resource}`) in one sync rule: real rules
    /// name tens at most, and `"*"` covers the rest.
    pub resources_per_rule: usize,
    /// Terms of a sync rule's `labelSelector`, `fieldSelector` and `clusters.selector`
    /// together: the API server evaluates them against every object of every watch.
    pub selectors_per_rule: usize,
    /// Paths in a sync rule's `transform.trim`: each is walked in every document.
    pub trims_per_rule: usize,
    /// Sync rules one cluster follows: a team's few each.
    pub rules_per_cluster: usize,
    /// Watches one cluster's rules resolve to (one per type, times the namespaces a rule
    /// lists). The built-in rules watch every type: about 60 on a bare cluster, and
    /// about 1,500 on the largest (Crossplane providers serve hundreds of custom
    /// resources each). Each watch held about 70 KB in the incident above, so this
    /// bounds one cluster to about 140 MB.
    pub watches_per_cluster: usize,
    /// Relation rules stored beside the built-in ones (a stored rule of a built-in's
    /// name replaces it and is not counted): each document is matched against those of
    /// its kind at ingest, and each hop of a graph reads them. Real installs add tens.
    pub relation_rules: usize,
    /// Segments (`a.b[*].c` is three) of each path in a relation rule: walked in every
    /// document of the parent kind; real paths have five or six.
    pub relation_path_segments: usize,
}

impl Default for RuleLimits {
    fn default() -> Self {
        RuleLimits {
            namespaces_per_rule: 100,
            resources_per_rule: 100,
            selectors_per_rule: 50,
            trims_per_rule: 100,
            rules_per_cluster: 50,
            watches_per_cluster: 2000,
            relation_rules: 200,
            relation_path_segments: 16,
        }
    }
}

/// Something counted above its limit: the field it was counted in, the count, and the
/// limit's config key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverLimit {
    /// Where the count comes from (`namespaces`, `relation.path`, `cluster "prod"`).
    pub field: String,
    pub count: usize,
    pub limit: usize,
    /// The limit's key in [`LIMITS_SECTION`] (`namespaces_per_rule`).
    pub key: &'static str,
}

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} is over the limit of {} ({LIMITS_SECTION}.{})",
            self.field, self.count, self.limit, self.key
        )
    }
}

impl RuleLimits {
    /// Every limit that is zero, by key: none may be (zero would refuse everything).
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        for (key, value) in self.all() {
            if value == 0 {
                return Err(ConfigIssue::new(
                    format!("{LIMITS_SECTION}.{key}"),
                    "must be at least 1",
                ));
            }
        }
        Ok(())
    }

    fn all(&self) -> [(&'static str, usize); 8] {
        [
            ("namespaces_per_rule", self.namespaces_per_rule),
            ("resources_per_rule", self.resources_per_rule),
            ("selectors_per_rule", self.selectors_per_rule),
            ("trims_per_rule", self.trims_per_rule),
            ("rules_per_cluster", self.rules_per_cluster),
            ("watches_per_cluster", self.watches_per_cluster),
            ("relation_rules", self.relation_rules),
            ("relation_path_segments", self.relation_path_segments),
        ]
    }

    /// The first of a sync rule's counts over its limit.
    pub fn check_sync_rule(&self, rule: &SyncRule) -> Result<(), OverLimit> {
        let object_terms: usize = [
            rule.label_selector.as_deref(),
            rule.field_selector.as_deref(),
        ]
        .into_iter()
        .flatten()
        .map(selector_terms)
        .sum();
        let cluster_terms = match &rule.clusters {
            super::ClusterSelector::Selector(s) => s.term_count(),
            _ => 0,
        };
        let counts = [
            (
                "namespaces",
                rule.namespaces.len(),
                self.namespaces_per_rule,
                "namespaces_per_rule",
            ),
            (
                "resources",
                rule.resources.len(),
                self.resources_per_rule,
                "resources_per_rule",
            ),
            (
                "labelSelector, fieldSelector and clusters.selector terms",
                object_terms + cluster_terms,
                self.selectors_per_rule,
                "selectors_per_rule",
            ),
            (
                "transform.trim",
                rule.transform.trim.len(),
                self.trims_per_rule,
                "trims_per_rule",
            ),
        ];
        for (field, count, limit, key) in counts {
            if count > limit {
                return Err(OverLimit {
                    field: field.to_owned(),
                    count,
                    limit,
                    key,
                });
            }
        }
        Ok(())
    }

    /// The first path of a relation rule with more segments than allowed.
    pub fn check_relation_rule(&self, rule: &RelationRule) -> Result<(), OverLimit> {
        let paths: Vec<(&str, &str)> = match &rule.relation {
            Relation::OwnerReference => Vec::new(),
            Relation::Selector { path } => vec![("path", path)],
            Relation::Reference {
                path,
                name,
                namespace,
                kind,
            } => vec![
                ("path", path),
                ("name", name),
                ("namespace", namespace),
                ("kind", kind),
            ],
        };
        for (field, path) in paths {
            let count = path.split('.').filter(|s| !s.is_empty()).count();
            if count > self.relation_path_segments {
                return Err(OverLimit {
                    field: format!("relation.{field}"),
                    count,
                    limit: self.relation_path_segments,
                    key: "relation_path_segments",
                });
            }
        }
        Ok(())
    }

    /// Whether one more stored relation rule (beside `stored`, built-in names left out)
    /// stays within the limit.
    pub fn check_relation_count(&self, stored: usize) -> Result<(), OverLimit> {
        if stored > self.relation_rules {
            return Err(OverLimit {
                field: "relation rules stored".to_owned(),
                count: stored,
                limit: self.relation_rules,
                key: "relation_rules",
            });
        }
        Ok(())
    }
}

/// A selector's terms: its comma-separated parts, commas inside a set term's parentheses
/// (`app in (a, b)`) not counted.
fn selector_terms(selector: &str) -> usize {
    let mut depth = 0usize;
    let mut terms = 1;
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => terms += 1,
            _ => {}
        }
    }
    if selector.trim().is_empty() {
        0
    } else {
        terms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterSelector, KindRef, ResourceSelector, Transform};

    fn rule() -> SyncRule {
        SyncRule {
            name: "r".into(),
            description: String::new(),
            clusters: ClusterSelector::Selector("env=prod,tier!=2".parse().unwrap()),
            resources: vec![ResourceSelector {
                group: "*".into(),
                version: "*".into(),
                resource: "*".into(),
            }],
            namespaces: Vec::new(),
            label_selector: Some("app in (a, b), tier".into()),
            field_selector: Some(String::new()),
            transform: Transform::default(),
            keep_after_delete: false,
            history: None,
        }
    }

    #[test]
    fn each_count_over_its_limit_names_its_field_and_key() {
        let limits = RuleLimits::default();
        assert_eq!(limits.check_sync_rule(&rule()), Ok(()));
        let mut wide = rule();
        wide.namespaces = (0..1000).map(|i| format!("ns-{i}")).collect();
        let over = limits.check_sync_rule(&wide).unwrap_err();
        assert_eq!(
            over.to_string(),
            "namespaces: 1000 is over the limit of 100 (syncer.limits.namespaces_per_rule)"
        );
        let mut wide = rule();
        wide.resources = vec![wide.resources[0].clone(); 101];
        assert_eq!(
            limits.check_sync_rule(&wide).unwrap_err().key,
            "resources_per_rule"
        );
        let mut wide = rule();
        wide.transform.trim = vec!["a".into(); 101];
        assert_eq!(
            limits.check_sync_rule(&wide).unwrap_err().key,
            "trims_per_rule"
        );
    }

    #[test]
    fn selector_terms_are_counted_across_the_rule_and_set_terms_once() {
        assert_eq!(selector_terms("app in (a, b), tier"), 2);
        assert_eq!(selector_terms(""), 0);
        assert_eq!(selector_terms("a=1"), 1);
        let limits = RuleLimits {
            selectors_per_rule: 3,
            ..RuleLimits::default()
        };
        // Two label terms and two cluster terms.
        let over = limits.check_sync_rule(&rule()).unwrap_err();
        assert_eq!((over.count, over.key), (4, "selectors_per_rule"));
    }

    #[test]
    fn relation_paths_and_count() {
        let limits = RuleLimits {
            relation_path_segments: 3,
            relation_rules: 2,
            ..RuleLimits::default()
        };
        let mut relation = RelationRule {
            name: "x".into(),
            description: String::new(),
            enabled: true,
            parent: KindRef::new("", "Pod"),
            child: KindRef::new("", "Secret"),
            child_cluster_scoped: false,
            relation: Relation::Reference {
                path: "spec.volumes[*].secret".into(),
                name: "secretName".into(),
                namespace: String::new(),
                kind: String::new(),
            },
        };
        assert_eq!(limits.check_relation_rule(&relation), Ok(()));
        relation.relation = Relation::Selector {
            path: "a.b.c.d".into(),
        };
        let over = limits.check_relation_rule(&relation).unwrap_err();
        assert_eq!(over.field, "relation.path");
        assert_eq!(over.count, 4);
        assert_eq!(limits.check_relation_count(2), Ok(()));
        assert_eq!(
            limits.check_relation_count(3).unwrap_err().key,
            "relation_rules"
        );
    }

    #[test]
    fn zero_limits_are_refused_naming_the_key() {
        assert_eq!(RuleLimits::default().validate(), Ok(()));
        let zero = RuleLimits {
            watches_per_cluster: 0,
            ..RuleLimits::default()
        };
        assert_eq!(
            zero.validate().unwrap_err().key(),
            "syncer.limits.watches_per_cluster"
        );
    }
}
