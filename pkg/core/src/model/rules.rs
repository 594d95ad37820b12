use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{validate_name, Kind, LabelSelector, Record};

/// Which clusters, which resources, and how to store them.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncRule {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub clusters: ClusterSelector,
    pub resources: Vec<ResourceSelector>,
    /// Empty: every namespace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub label_selector: Option<String>,
    #[serde(default)]
    pub field_selector: Option<String>,
    #[serde(default)]
    pub transform: Transform,
    /// Keep a document marked deleted when its object goes, instead of removing it.
    #[serde(default)]
    pub keep_after_delete: bool,
    /// What history keeps of its objects' changes; absent: the syncer's `history`
    /// section decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<RuleHistory>,
}

/// A rule's own history setting: `{keep: 30d}`, or `{enabled: false}` for noisy types.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleHistory {
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// How long a change is kept (`30d`, `12h`); absent: the syncer's `history.keep`.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schema(value_type = Option<String>, example = "30d"))]
    pub keep: Option<Duration>,
}

fn enabled() -> bool {
    true
}

/// The longest a rule may keep history: a year (the syncer's section has the same bound).
pub const MAX_HISTORY_KEEP: Duration = Duration::from_secs(366 * 24 * 3600);

/// `"*"`, `{names: [..]}` or `{selector: "env=prod"}` (read as a [`LabelSelector`], so a
/// selector that is not one is refused where the rule is read).
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterSelector {
    #[serde(rename = "*")]
    All,
    Names(Vec<String>),
    Selector(LabelSelector),
}

/// A group/version/resource; `"*"` in any part matches every value.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSelector {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub resource: String,
}

#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transform {
    #[serde(default)]
    pub mode: TransformMode,
    /// JSON paths to drop (`spec.template.spec.containers`).
    #[serde(default)]
    pub trim: Vec<String>,
}

#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TransformMode {
    #[default]
    Full,
    MetadataOnly,
}

impl Record for SyncRule {
    const KIND: Kind = Kind::SyncRule;

    fn name(&self) -> &str {
        &self.name
    }

    /// Each problem names its field (`resources[1].version: ...`), so a user finds it in
    /// the file they wrote.
    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| format!("name: {e}"))?;
        match &self.clusters {
            ClusterSelector::All | ClusterSelector::Selector(_) => {}
            ClusterSelector::Names(names) => {
                for (i, name) in names.iter().enumerate() {
                    validate_name(name).map_err(|e| format!("clusters.names[{i}]: {e}"))?;
                }
            }
        }
        if self.resources.is_empty() {
            return Err(
                "resources: empty; name at least one ({group, version, resource}, each may be \"*\")"
                    .to_owned(),
            );
        }
        for (i, r) in self.resources.iter().enumerate() {
            r.validate().map_err(|e| format!("resources[{i}].{e}"))?;
        }
        for (i, namespace) in self.namespaces.iter().enumerate() {
            validate_name(namespace).map_err(|e| format!("namespaces[{i}]: {e}"))?;
        }
        for (field, selector) in [
            ("labelSelector", &self.label_selector),
            ("fieldSelector", &self.field_selector),
        ] {
            if let Some(selector) = selector {
                validate_object_selector(selector).map_err(|e| format!("{field}: {e}"))?;
            }
        }
        if let Some(keep) = self.history.and_then(|h| h.keep) {
            if keep.is_zero() || keep > MAX_HISTORY_KEEP {
                return Err(format!(
                    "history.keep: {} is not between 1s and 366d",
                    humantime_serde::re::humantime::format_duration(keep)
                ));
            }
        }
        for (i, path) in self.transform.trim.iter().enumerate() {
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(format!(
                    "transform.trim[{i}]: {path:?} is not a dot path (spec.template.spec.containers)"
                ));
            }
        }
        Ok(())
    }
}

impl ResourceSelector {
    /// `field: problem`, for the rule to prefix with the selector's place.
    fn validate(&self) -> Result<(), String> {
        if self.group != "*" && !is_group(&self.group) {
            return Err(format!(
                "group: {:?} is not an API group (\"\" is the core group, \"*\" every group)",
                self.group
            ));
        }
        if self.version.is_empty() {
            return Err("version: required (a version such as v1, or \"*\" for the one the API server prefers)".to_owned());
        }
        if self.version != "*" && validate_name(&self.version).is_err() {
            return Err(format!("version: {:?} is not an API version", self.version));
        }
        if self.resource.is_empty() {
            return Err(
                "resource: required (a plural name such as deployments, or \"*\")".to_owned(),
            );
        }
        if self.resource != "*" && validate_name(&self.resource).is_err() {
            return Err(format!(
                "resource: {:?} is not a resource's plural name (lowercase, as `kubectl api-resources` lists it)",
                self.resource
            ));
        }
        Ok(())
    }
}

/// An API group: a lowercase DNS subdomain (`apps`, `example.com`), or empty for the core
/// group.
fn is_group(group: &str) -> bool {
    group.is_empty()
        || (group.len() <= 253 && group.split('.').all(|part| validate_name(part).is_ok()))
}

/// Object selectors go to the API server as they are (it parses them, set terms
/// included): only what cannot be one is refused here.
fn validate_object_selector(selector: &str) -> Result<(), String> {
    if selector.len() > MAX_SELECTOR {
        return Err(format!("longer than {MAX_SELECTOR} characters"));
    }
    if selector.chars().any(char::is_control) {
        return Err("holds control characters".to_owned());
    }
    Ok(())
}

/// Longer label or field selectors than this are refused: no real one is near it.
const MAX_SELECTOR: usize = 4096;

/// How to group resources in the insight views: by these fields of a document.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceGroupRule {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub fields: Vec<String>,
}

impl ResourceGroupRule {
    /// The rules karpor makes at its first start (a user may delete them): Karpor's
    /// `namespace` rule, which its Insight page opens on.
    pub fn built_ins() -> Vec<ResourceGroupRule> {
        vec![ResourceGroupRule {
            name: "namespace".to_owned(),
            description: "Default resource group rule for namespace".to_owned(),
            fields: vec!["namespace".to_owned()],
        }]
    }
}

impl Record for ResourceGroupRule {
    const KIND: Kind = Kind::ResourceGroupRule;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| e.to_string())?;
        if self.fields.is_empty() {
            return Err("fields is empty".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> SyncRule {
        let selector = |group: &str, version: &str, resource: &str| ResourceSelector {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        };
        SyncRule {
            name: "apps".into(),
            description: String::new(),
            clusters: ClusterSelector::Selector(
                "env=prod, tier!=2, !canary, example.com/team"
                    .parse()
                    .unwrap(),
            ),
            resources: vec![
                selector("apps", "*", "deployments"),
                selector("*", "*", "*"),
            ],
            namespaces: vec!["web".into()],
            label_selector: Some("app in (a, b)".into()),
            field_selector: None,
            transform: Transform {
                mode: TransformMode::Full,
                trim: vec!["spec.template".into()],
            },
            keep_after_delete: false,
            history: None,
        }
    }

    #[test]
    fn a_good_rule_passes_and_each_problem_names_its_field() {
        assert_eq!(rule().validate(), Ok(()));
        type Break = fn(&mut SyncRule);
        let cases: [(Break, &str); 9] = [
            (|r| r.name = "Apps".into(), "name: "),
            (
                |r| r.clusters = ClusterSelector::Names(vec!["ok".into(), "Not ok".into()]),
                "clusters.names[1]: ",
            ),
            (|r| r.resources.clear(), "resources: empty"),
            (
                |r| r.resources[1].version.clear(),
                "resources[1].version: required",
            ),
            (
                |r| r.resources[0].group = "Apps".into(),
                "resources[0].group: ",
            ),
            (
                |r| r.resources[1].resource = "Pods".into(),
                "resources[1].resource: ",
            ),
            (|r| r.namespaces.push("a_b".into()), "namespaces[1]: "),
            (
                |r| r.field_selector = Some("a=\u{0}".into()),
                "fieldSelector: ",
            ),
            (
                |r| r.transform.trim.push("spec..x".into()),
                "transform.trim[1]: ",
            ),
        ];
        for (break_it, field) in cases {
            let mut r = rule();
            break_it(&mut r);
            let problem = r.validate().unwrap_err();
            assert!(
                problem.starts_with(field),
                "{problem:?} should start {field:?}"
            );
        }
    }
}
