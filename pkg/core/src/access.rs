//! Access policies: who (users, groups, token names, anonymous callers) gets which role
//! over which part of the fleet (clusters by name or label, namespaces, kinds). Written in
//! the config file (`auth.policies`) or stored as records through the API; the API
//! resolves them per caller ([docs/access.md](../../../docs/access.md)).

use serde::{Deserialize, Serialize};

use crate::model::{validate_name, Kind, LabelSelector, Record};
use crate::names::{ClusterName, KindName, Namespace};

/// What a caller may do: a `viewer` reads (what its scope holds), an `editor` also writes
/// the shared views (resource group rules), an `admin` does everything. `guest` is read
/// as `viewer`, its name before policies.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[serde(alias = "guest")]
    Viewer,
    Editor,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }
}

/// One policy.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AccessPolicy {
    /// For logs and `/authn`: which policy let a caller in.
    pub name: String,
    pub subjects: Subjects,
    pub role: Role,
    /// Absent: everything. An admin has no scope (what an admin changes is global).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<PolicyScope>,
}

/// Who a policy is for: any one of these matches.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Subjects {
    /// Users as the identity provider names them (OIDC's username claim, with its
    /// prefix; a Kubernetes token's user, `system:serviceaccount:NS:NAME`).
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// Names of `auth.tokens` entries (the config file's; a name none has matches none).
    pub tokens: Vec<String>,
    /// Callers without a credential.
    pub anonymous: bool,
}

/// A part of the fleet. Each key left out means all; a key given lists what is granted
/// (an empty list would grant nothing, so it is refused).
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyScope {
    #[cfg_attr(feature = "schema", schema(value_type = Option<Vec<String>>))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<ClusterName>>,
    /// Clusters whose labels match (`env=prod,team=a`); with `clusters`, either.
    #[serde(
        rename = "clusterLabels",
        alias = "cluster_labels",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_labels: Option<LabelSelector>,
    /// Objects in these namespaces (and the Namespace objects themselves); cluster-scoped
    /// objects are outside a namespaced scope.
    #[cfg_attr(feature = "schema", schema(value_type = Option<Vec<String>>))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<Namespace>>,
    #[cfg_attr(feature = "schema", schema(value_type = Option<Vec<String>>))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<KindName>>,
    /// Secrets' metadata for a viewer (an editor's scope holds them anyway; their data
    /// is never stored).
    pub secrets: bool,
}

/// Most entries in one of a policy's lists.
const MAX_ENTRIES: usize = 1000;

impl AccessPolicy {
    /// Whether it names the caller.
    pub fn names(
        &self,
        user: &str,
        groups: &[String],
        token: Option<&str>,
        anonymous: bool,
    ) -> bool {
        let s = &self.subjects;
        (anonymous && s.anonymous)
            || (!anonymous && s.users.iter().any(|u| u == user))
            || groups.iter().any(|g| s.groups.contains(g))
            || token.is_some_and(|t| s.tokens.iter().any(|n| n == t))
    }

    /// `Err((field, problem))`: what types cannot say.
    pub fn problem(&self) -> Result<(), (String, String)> {
        let fail = |field: &str, problem: &str| Err((field.to_owned(), problem.to_owned()));
        if let Err(e) = validate_name(&self.name) {
            return Err(("name".to_owned(), e.to_string()));
        }
        let s = &self.subjects;
        if s.users.is_empty() && s.groups.is_empty() && s.tokens.is_empty() && !s.anonymous {
            return fail(
                "subjects",
                "names nobody: give users, groups, tokens or anonymous: true",
            );
        }
        if s.anonymous && self.role != Role::Viewer {
            return fail(
                "subjects.anonymous",
                "a caller without a credential never writes: a policy naming anonymous callers gives viewer only",
            );
        }
        for (field, list) in [
            ("users", &s.users),
            ("groups", &s.groups),
            ("tokens", &s.tokens),
        ] {
            if list.iter().any(|v| v.trim().is_empty()) {
                return fail(&format!("subjects.{field}"), "an entry is empty");
            }
            if list.len() > MAX_ENTRIES {
                return fail(&format!("subjects.{field}"), "more than 1000 entries");
            }
        }
        let Some(scope) = &self.scope else {
            return Ok(());
        };
        if self.role == Role::Admin {
            return fail(
                "scope",
                "an admin's changes are global: an admin policy has no scope (give editor or viewer)",
            );
        }
        for (field, len) in [
            ("clusters", scope.clusters.as_ref().map(Vec::len)),
            ("namespaces", scope.namespaces.as_ref().map(Vec::len)),
            ("kinds", scope.kinds.as_ref().map(Vec::len)),
        ] {
            match len {
                Some(0) => {
                    return fail(
                        &format!("scope.{field}"),
                        "an empty list grants nothing: leave the key out for all, or name some",
                    )
                }
                Some(n) if n > MAX_ENTRIES => {
                    return fail(&format!("scope.{field}"), "more than 1000 entries")
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Record for AccessPolicy {
    const KIND: Kind = Kind::AccessPolicy;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        self.problem()
            .map_err(|(field, problem)| format!("{field}: {problem}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> AccessPolicy {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn problems_name_the_field_and_names_are_parsed_where_read() {
        let field = |yaml: &str| policy(yaml).problem().err().map(|(f, _)| f);
        assert_eq!(
            field("{name: a, subjects: {}, role: viewer}").as_deref(),
            Some("subjects")
        );
        assert_eq!(
            field("{name: a, subjects: {groups: [g]}, role: admin, scope: {}}").as_deref(),
            Some("scope")
        );
        assert_eq!(
            field("{name: a, subjects: {anonymous: true}, role: editor}").as_deref(),
            Some("subjects.anonymous")
        );
        assert_eq!(
            field("{name: a, subjects: {groups: [g]}, role: viewer, scope: {namespaces: []}}")
                .as_deref(),
            Some("scope.namespaces")
        );
        assert_eq!(
            field("{name: a, subjects: {tokens: [ops]}, role: guest, scope: {kinds: [Pod]}}"),
            None
        );
        assert!(serde_yaml::from_str::<AccessPolicy>(
            "{name: a, subjects: {groups: [g]}, role: viewer, scope: {namespaces: [\"../x\"]}}"
        )
        .is_err());
        // The config file's key and the API's name the same field.
        let a = policy(
            "{name: a, subjects: {groups: [g]}, role: viewer, scope: {cluster_labels: env=prod}}",
        );
        let b = policy(
            "{name: a, subjects: {groups: [g]}, role: viewer, scope: {clusterLabels: env=prod}}",
        );
        assert_eq!(a, b);
    }
}
