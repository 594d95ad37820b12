//! The keys a document is indexed under, so storage answers "who owns or names this
//! object" by lookup: `owner:UID` for each owner reference (and `owner-kind:GROUP/KIND`,
//! so a graph of kinds knows who owns what), and `ref:GROUP/KIND/NAMESPACE/NAME` for each
//! object a reference rule finds named in it; a selector's holder is indexed under
//! `sel:KEY=VALUE` for each pair it selects by, so the selectors that may select an
//! object are found by its labels.

use std::collections::BTreeSet;

use karpor_core::model::{KindRef, Relation, RelationRule};
use serde_json::Value;

use crate::path;

/// Most keys one object is indexed under: bounds what a hostile object can make storage
/// index.
const MAX_KEYS: usize = 500;

/// An object a reference names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub kind: KindRef,
    /// Empty for a cluster-scoped kind.
    pub namespace: String,
    pub name: String,
}

pub fn owner_key(uid: &str) -> String {
    format!("owner:{uid}")
}

/// The key of an owner's kind.
pub fn owner_kind_key(kind: &KindRef) -> String {
    format!("{OWNER_KIND}{}/{}", kind.group, kind.kind)
}

/// The key of one pair a selector selects by.
pub fn selector_key(key: &str, value: &str) -> String {
    format!("sel:{key}={value}")
}

/// What an owner-kind key starts with.
pub const OWNER_KIND: &str = "owner-kind:";

/// The target a `ref:` key names.
pub fn parse_reference_key(key: &str) -> Option<Target> {
    let rest = key.strip_prefix("ref:")?;
    let mut parts = rest.splitn(4, '/');
    let (group, kind, namespace, name) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    Some(Target {
        kind: KindRef::new(group, kind),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

pub fn reference_key(kind: &KindRef, namespace: &str, name: &str) -> String {
    format!("ref:{}/{}/{namespace}/{name}", kind.group, kind.kind)
}

/// What a reference rule finds named in `object` (in `namespace`); nothing for other
/// relations.
pub fn references(rule: &RelationRule, object: &Value, namespace: &str) -> Vec<Target> {
    let Relation::Reference {
        path: at,
        name,
        namespace: namespace_path,
        kind,
    } = &rule.relation
    else {
        return Vec::new();
    };
    let mut found = BTreeSet::new();
    for value in path::values(object, at) {
        let target_name = if name.is_empty() {
            value.as_str()
        } else {
            path::text(value, name)
        };
        let Some(target_name) = target_name.filter(|n| !n.is_empty()) else {
            continue;
        };
        if !kind.is_empty() && path::text(value, kind) != Some(rule.child.kind.as_str()) {
            continue;
        }
        let target_namespace = if rule.child_cluster_scoped {
            String::new()
        } else if namespace_path.is_empty() {
            namespace.to_owned()
        } else {
            path::text(value, namespace_path)
                .unwrap_or(namespace)
                .to_owned()
        };
        found.insert(Target {
            kind: rule.child.clone(),
            namespace: target_namespace,
            name: target_name.to_owned(),
        });
    }
    found.into_iter().collect()
}

/// Every key `object` (of `kind`, in `namespace`) is indexed under, with `rules` in force.
pub fn reference_keys(
    object: &Value,
    kind: &KindRef,
    namespace: &str,
    rules: &[RelationRule],
) -> Vec<String> {
    let mut keys = BTreeSet::new();
    for owner in path::values(object, "metadata.ownerReferences[*]") {
        if let Some(uid) = owner["uid"].as_str() {
            keys.insert(owner_key(uid));
        }
        if let (Some(api_version), Some(kind)) =
            (owner["apiVersion"].as_str(), owner["kind"].as_str())
        {
            keys.insert(owner_kind_key(&KindRef::of(api_version, kind)));
        }
    }
    for rule in rules.iter().filter(|r| r.parent == *kind) {
        for target in references(rule, object, namespace) {
            keys.insert(reference_key(&target.kind, &target.namespace, &target.name));
        }
        if let Relation::Selector { path: at } = &rule.relation {
            for (k, v) in crate::selector_at(object, at).unwrap_or_default() {
                keys.insert(selector_key(&k, &v));
            }
        }
    }
    keys.into_iter().take(MAX_KEYS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin_rules;
    use serde_json::json;

    #[test]
    fn a_pod_is_indexed_under_its_owner_and_what_it_names() {
        let pod = json!({
            "metadata": {"name": "web-1", "namespace": "shop",
                         "ownerReferences": [{"uid": "rs-uid", "apiVersion": "apps/v1", "kind": "ReplicaSet"}]},
            "spec": {
                "nodeName": "node-1",
                "serviceAccountName": "web",
                "volumes": [{"configMap": {"name": "settings"}},
                            {"secret": {"secretName": "tls"}},
                            {"persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{"envFrom": [{"configMapRef": {"name": "env"}}],
                                "env": [{"valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}],
                "imagePullSecrets": [{"name": "registry"}]
            }
        });
        let keys = reference_keys(&pod, &KindRef::new("", "Pod"), "shop", &builtin_rules());
        let want = [
            "owner-kind:apps/ReplicaSet",
            "owner:rs-uid",
            "ref:/ConfigMap/shop/env",
            "ref:/ConfigMap/shop/settings",
            "ref:/Node//node-1",
            "ref:/PersistentVolumeClaim/shop/data",
            "ref:/Secret/shop/db",
            "ref:/Secret/shop/registry",
            "ref:/Secret/shop/tls",
            "ref:/ServiceAccount/shop/web",
        ];
        assert_eq!(keys, want);
    }

    #[test]
    fn a_selector_holder_is_indexed_by_its_pairs() {
        let service = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web", "tier": "fe"}}});
        let keys = reference_keys(
            &service,
            &KindRef::new("", "Service"),
            "shop",
            &builtin_rules(),
        );
        assert_eq!(keys, ["sel:app=web", "sel:tier=fe"]);
    }

    #[test]
    fn reference_keys_read_back() {
        let key = reference_key(&KindRef::new("", "Node"), "", "node-1");
        assert_eq!(
            parse_reference_key(&key),
            Some(Target {
                kind: KindRef::new("", "Node"),
                namespace: String::new(),
                name: "node-1".into()
            })
        );
        assert_eq!(parse_reference_key("owner:x"), None);
    }

    #[test]
    fn a_kind_condition_and_a_namespace_path_are_honoured() {
        let binding = json!({
            "metadata": {"name": "b", "namespace": "shop"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": "other"},
                         {"kind": "User", "name": "alice"}]
        });
        let keys = reference_keys(
            &binding,
            &KindRef::new("rbac.authorization.k8s.io", "RoleBinding"),
            "shop",
            &builtin_rules(),
        );
        assert_eq!(
            keys,
            [
                "ref:/ServiceAccount/other/web",
                "ref:rbac.authorization.k8s.io/ClusterRole//view"
            ]
        );
    }
}
