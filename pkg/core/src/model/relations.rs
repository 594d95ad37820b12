//! How objects relate, for the topology: a parent kind to a child kind, through the
//! child's owner references, a label selector the parent holds, or a reference (a name
//! at a path) in the parent. Built-in rules cover the usual kinds; users add rules (for
//! custom resources too) or replace a built-in one by storing a rule of its name.

use serde::{Deserialize, Serialize};

use super::{validate_name, Kind, Record};

#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RelationRule {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Off: the rule (a built-in one, when stored under its name) relates nothing.
    #[serde(default = "enabled")]
    pub enabled: bool,
    pub parent: KindRef,
    pub child: KindRef,
    /// The child kind has no namespace (Node, PersistentVolume, ClusterRole): a reference
    /// names it without one.
    #[serde(default)]
    pub child_cluster_scoped: bool,
    pub relation: Relation,
}

fn enabled() -> bool {
    true
}

/// A kind of object: its API group (empty for the core group) and kind.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindRef {
    #[serde(default)]
    pub group: String,
    pub kind: String,
}

impl KindRef {
    pub fn new(group: &str, kind: &str) -> Self {
        KindRef {
            group: group.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group).
    pub fn of(api_version: &str, kind: &str) -> Self {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        KindRef::new(group, kind)
    }
}

#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Relation {
    /// The child's `metadata.ownerReferences` name the parent's uid.
    OwnerReference,
    /// The parent's label map at `path` (`spec.selector`, `spec.selector.matchLabels`)
    /// selects the children of its namespace whose labels hold every pair.
    Selector { path: String },
    /// The parent names its children: `path` selects reference values (`spec.volumes[*]
    /// .configMap`; `[*]` walks an array, and a key over an array walks it too); in each,
    /// `name` is the child's name (empty: the value itself), `namespace` its namespace
    /// (empty: the parent's), and `kind`, when given, must equal the child's kind.
    #[serde(rename_all = "camelCase")]
    Reference {
        path: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        namespace: String,
        #[serde(default)]
        kind: String,
    },
}

/// `a.b[*].c`: keys of letters, digits, `-` and `_`, each optionally followed by `[*]`.
pub fn validate_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("is empty".to_owned());
    }
    for segment in path.split('.') {
        let key = segment.strip_suffix("[*]").unwrap_or(segment);
        let valid = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(format!(
                "{path:?}: segment {segment:?} is not a key (letters, digits, - and _), optionally followed by [*]"
            ));
        }
    }
    Ok(())
}

impl Record for RelationRule {
    const KIND: Kind = Kind::RelationRule;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| format!("name: {e}"))?;
        for (side, kind) in [("parent", &self.parent), ("child", &self.child)] {
            if kind.kind.trim().is_empty() {
                return Err(format!("{side}.kind: is empty"));
            }
        }
        match &self.relation {
            Relation::OwnerReference => Ok(()),
            Relation::Selector { path } => {
                validate_path(path).map_err(|e| format!("relation.path: {e}"))
            }
            Relation::Reference {
                path,
                name,
                namespace,
                kind,
            } => {
                validate_path(path).map_err(|e| format!("relation.path: {e}"))?;
                for (key, value) in [("name", name), ("namespace", namespace), ("kind", kind)] {
                    if !value.is_empty() {
                        validate_path(value).map_err(|e| format!("relation.{key}: {e}"))?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(relation: Relation) -> RelationRule {
        RelationRule {
            name: "pod-configmaps".into(),
            description: String::new(),
            enabled: true,
            parent: KindRef::new("", "Pod"),
            child: KindRef::new("", "ConfigMap"),
            child_cluster_scoped: false,
            relation,
        }
    }

    #[test]
    fn paths_and_names_are_checked_naming_the_field() {
        let good = rule(Relation::Reference {
            path: "spec.volumes[*].configMap".into(),
            name: "name".into(),
            namespace: String::new(),
            kind: String::new(),
        });
        assert_eq!(good.validate(), Ok(()));
        let bad = rule(Relation::Reference {
            path: "spec..volumes".into(),
            name: "name".into(),
            namespace: String::new(),
            kind: String::new(),
        });
        assert!(bad.validate().unwrap_err().starts_with("relation.path:"));
        let bad = rule(Relation::Selector {
            path: "spec.selector[0]".into(),
        });
        assert!(bad.validate().unwrap_err().starts_with("relation.path:"));
        let mut bad = rule(Relation::OwnerReference);
        bad.child.kind = " ".into();
        assert_eq!(bad.validate(), Err("child.kind: is empty".into()));
        let mut bad = rule(Relation::OwnerReference);
        bad.name = "Pod_Refs".into();
        assert!(bad.validate().unwrap_err().starts_with("name:"));
    }

    #[test]
    fn the_yaml_a_user_writes_reads() {
        let text = "name: db-secrets\nparent: {group: example.com, kind: Database}\n\
                    child: {kind: Secret}\nrelation: {type: reference, path: spec.credentials, name: secretName}\n";
        let rule: RelationRule = serde_yaml::from_str(text).unwrap();
        assert!(rule.enabled);
        assert_eq!(rule.parent, KindRef::new("example.com", "Database"));
        assert_eq!(
            rule.relation,
            Relation::Reference {
                path: "spec.credentials".into(),
                name: "secretName".into(),
                namespace: String::new(),
                kind: String::new()
            }
        );
        assert_eq!(KindRef::of("apps/v1", "Deployment").group, "apps");
        assert_eq!(KindRef::of("v1", "Pod").group, "");
    }
}
