//! The built-in rules, in force while no sync rule is stored, and what a `*` leaves out:
//! the types and groups a wildcard does not select unless named.

use karpor_core::model::{ClusterSelector, ResourceSelector, SyncRule, Transform, TransformMode};

/// The built-in rule's name: every type, in full.
pub const DEFAULT_RULE: &str = "default";
/// The built-in rule that keeps only the metadata of types whose bodies are large copies
/// of what other objects hold.
pub const DEFAULT_METADATA_RULE: &str = "default-metadata-only";

/// Types a `*` resource does not select, with why: they change so often, or are so many,
/// that they would swamp storage, and what they say is found elsewhere. A selector that
/// names one (`resource: events`) syncs it.
pub(crate) const NOT_BY_WILDCARD: [(&str, &str, &str); 5] = [
    ("", "events", "one per state change of any object, gone after an hour: a stream, not state"),
    ("events.k8s.io", "events", "the same Events under their newer API"),
    (
        "coordination.k8s.io",
        "leases",
        "renewed every few seconds by every node and every leader-elected controller",
    ),
    (
        "",
        "endpoints",
        "rewritten whenever a Pod behind a Service turns ready or not; Services and Pods are synced",
    ),
    ("discovery.k8s.io", "endpointslices", "the same, in slices"),
];

/// Groups a `*` group does not select, with why: they serve again, under a second name,
/// objects another group serves, and one object would be two documents fighting over
/// one id. A selector that names the group syncs it.
pub(crate) const ALIAS_GROUPS: [(&str, &str); 1] = [(
    "extensions",
    "its types are served by apps, networking.k8s.io and policy too (Ingresses since 1.14)",
)];

/// The built-in rules, used while the metadata store holds no sync rule: every watchable
/// type, custom resources included (discovered, so a new CRD is synced without anything
/// to do), but the high-churn ones (`NOT_BY_WILDCARD`); CustomResourceDefinitions and
/// ControllerRevisions as metadata only (their bodies are schemas and copies of pod
/// templates: large, and searched by name).
pub fn default_rules() -> Vec<SyncRule> {
    let selector = |group: &str, resource: &str| ResourceSelector {
        group: group.to_owned(),
        version: "*".to_owned(),
        resource: resource.to_owned(),
    };
    let rule = |name: &str, description: &str, resources| SyncRule {
        name: name.to_owned(),
        description: description.to_owned(),
        clusters: ClusterSelector::All,
        resources,
        namespaces: Vec::new(),
        label_selector: None,
        field_selector: None,
        transform: Transform::default(),
        keep_after_delete: false,
        history: None,
    };
    let mut metadata = rule(
        DEFAULT_METADATA_RULE,
        "built-in, while no sync rule is stored: large bodies kept as metadata only",
        vec![
            selector("apiextensions.k8s.io", "customresourcedefinitions"),
            selector("apps", "controllerrevisions"),
        ],
    );
    metadata.transform.mode = TransformMode::MetadataOnly;
    vec![
        rule(
            DEFAULT_RULE,
            "built-in, while no sync rule is stored: every type but the high-churn ones",
            vec![selector("*", "*")],
        ),
        metadata,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/syncer.md gives the reason for each type a `*` leaves out.
    #[test]
    fn the_docs_list_every_type_a_star_leaves_out() {
        let docs = include_str!("../../../../docs/syncer.md");
        for (group, plural, _) in NOT_BY_WILDCARD {
            let named = if group.is_empty() {
                format!("`{plural}`")
            } else {
                format!("`{plural}.{group}`")
            };
            assert!(
                docs.contains(&named),
                "docs/syncer.md does not explain {named}"
            );
        }
        for (group, _) in ALIAS_GROUPS {
            assert!(docs.contains(&format!("`{group}`")), "{group}");
        }
    }
}
