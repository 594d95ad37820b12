//! Policies (`auth.policies`): who (users, groups, token names, anonymous) gets which role
//! over which part of the fleet (clusters by name or label, namespaces, kinds). A caller
//! no policy names gets nothing. Resolved here into the caller's [`Access`]; what a scope
//! lets through is [`crate::scope`]'s.

use std::collections::BTreeSet;

use karpor_config::ConfigIssue;
use karpor_core::model::LabelSelector;
use karpor_core::names::{ClusterName, KindName, Namespace};
use serde::{Deserialize, Serialize};

use crate::scope::{Grant, Scope};
use crate::Role;

/// One policy of `auth.policies`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// For logs and `/authn`: which policy let a caller in.
    pub name: String,
    pub subjects: Subjects,
    pub role: Role,
    /// Absent: everything. An admin has no scope (what an admin changes is global).
    #[serde(default)]
    pub scope: Option<ScopeConfig>,
}

/// Who a policy is for: any one of these matches.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Subjects {
    /// Users as the identity provider names them (OIDC's username claim, with its
    /// prefix; a Kubernetes token's user, `system:serviceaccount:NS:NAME`).
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// Names of `auth.tokens`.
    pub tokens: Vec<String>,
    /// Callers without a credential.
    pub anonymous: bool,
}

/// A part of the fleet. Each key left out means all; a key given lists what is granted
/// (an empty list would grant nothing, so it is refused).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScopeConfig {
    pub clusters: Option<Vec<ClusterName>>,
    /// Clusters whose labels match (`env=prod,team=a`); with `clusters`, either.
    pub cluster_labels: Option<LabelSelector>,
    /// Objects in these namespaces (and the Namespace objects themselves); cluster-scoped
    /// objects are outside a namespaced scope.
    pub namespaces: Option<Vec<Namespace>>,
    pub kinds: Option<Vec<KindName>>,
    /// Secrets' metadata for a viewer (an editor's scope holds them anyway; their data
    /// is never stored).
    pub secrets: bool,
}

/// What a caller may do: its highest role, and where it may read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Access {
    pub role: Role,
    pub scope: Scope,
    /// The policies that granted it (`auth.tokens` and anonymous reads: none).
    pub policies: Vec<String>,
}

/// Who a caller is, before policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    /// The name of the `auth.tokens` entry presented.
    pub token: Option<String>,
    pub anonymous: bool,
}

impl PolicyConfig {
    fn names(&self, who: &Identity) -> bool {
        let s = &self.subjects;
        (who.anonymous && s.anonymous)
            || (!who.anonymous && s.users.contains(&who.user))
            || who.groups.iter().any(|g| s.groups.contains(g))
            || who.token.as_ref().is_some_and(|t| s.tokens.contains(t))
    }

    fn grant(&self) -> Grant {
        let Some(scope) = &self.scope else {
            return Grant::everything(self.role);
        };
        Grant {
            role: self.role,
            clusters: texts(&scope.clusters),
            cluster_labels: scope.cluster_labels.clone(),
            namespaces: texts(&scope.namespaces),
            kinds: scope
                .kinds
                .as_ref()
                .map(|k| k.iter().map(|k| k.to_ascii_lowercase()).collect()),
            secrets: scope.secrets || self.role >= Role::Editor,
        }
    }

    /// `at`: the policy's key (`auth.policies[3]`).
    fn validate(&self, at: &str, tokens: &[&str]) -> Result<(), ConfigIssue> {
        let key = |field: &str| format!("{at}.{field}");
        if self.name.trim().is_empty() {
            return Err(ConfigIssue::new(key("name"), "must not be empty"));
        }
        let s = &self.subjects;
        if s.users.is_empty() && s.groups.is_empty() && s.tokens.is_empty() && !s.anonymous {
            return Err(ConfigIssue::new(
                key("subjects"),
                "names nobody: give users, groups, tokens or anonymous: true",
            ));
        }
        for (field, list) in [("users", &s.users), ("groups", &s.groups)] {
            if list.iter().any(|v| v.trim().is_empty()) {
                return Err(ConfigIssue::new(
                    key(&format!("subjects.{field}")),
                    "an entry is empty",
                ));
            }
        }
        if let Some(unknown) = s.tokens.iter().find(|t| !tokens.contains(&t.as_str())) {
            return Err(ConfigIssue::new(
                key("subjects.tokens"),
                format!("`{unknown}` is not the name of an entry of auth.tokens"),
            ));
        }
        let Some(scope) = &self.scope else {
            return Ok(());
        };
        if self.role == Role::Admin {
            return Err(ConfigIssue::new(
                key("scope"),
                "an admin's changes are global: an admin policy has no scope (give editor or viewer)",
            ));
        }
        let empty = [
            ("clusters", scope.clusters.as_ref().map(Vec::len)),
            ("namespaces", scope.namespaces.as_ref().map(Vec::len)),
            ("kinds", scope.kinds.as_ref().map(Vec::len)),
        ]
        .into_iter()
        .find(|(_, len)| *len == Some(0));
        if let Some((field, _)) = empty {
            return Err(ConfigIssue::new(
                key(&format!("scope.{field}")),
                "an empty list grants nothing: leave the key out for all, or name some",
            ));
        }
        Ok(())
    }
}

fn texts<T: ToString>(list: &Option<Vec<T>>) -> Option<BTreeSet<String>> {
    list.as_ref()
        .map(|l| l.iter().map(ToString::to_string).collect())
}

/// Names unique, each policy well formed, tokens named existing.
pub(crate) fn validate(policies: &[PolicyConfig], tokens: &[&str]) -> Result<(), ConfigIssue> {
    let mut names = BTreeSet::new();
    for (i, policy) in policies.iter().enumerate() {
        let at = format!("auth.policies[{i}]");
        if !names.insert(policy.name.as_str()) {
            return Err(ConfigIssue::new(
                format!("{at}.name"),
                format!("`{}` is already the name of another policy", policy.name),
            ));
        }
        policy.validate(&at, tokens)?;
    }
    Ok(())
}

/// The policies, and the roles granted outside them (a token's own role, anonymous reads).
#[derive(Debug, Clone, Default)]
pub struct Policies {
    policies: Vec<PolicyConfig>,
}

impl Policies {
    pub fn new(policies: Vec<PolicyConfig>) -> Self {
        Policies { policies }
    }

    /// What `who` may do: `implicit` (a token's role, anonymous reads) everywhere, joined
    /// with every policy naming it; `None` when nothing grants it anything.
    pub(crate) fn resolve(&self, who: &Identity, implicit: Option<Role>) -> Option<Access> {
        let mut grants: Vec<Grant> = implicit.map(Grant::everything).into_iter().collect();
        let mut names = Vec::new();
        for policy in self.policies.iter().filter(|p| p.names(who)) {
            grants.push(policy.grant());
            names.push(policy.name.clone());
        }
        let role = grants.iter().map(|g| g.role).max()?;
        Some(Access {
            role,
            scope: Scope::of(grants),
            policies: names,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> PolicyConfig {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn who(user: &str, groups: &[&str]) -> Identity {
        Identity {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            token: None,
            anonymous: false,
        }
    }

    #[test]
    fn policies_name_users_groups_and_join_into_one_access() {
        let policies = Policies::new(vec![
            policy("{name: a, subjects: {groups: [team-a]}, role: viewer, scope: {clusters: [one], namespaces: [web]}}"),
            policy("{name: b, subjects: {users: [ann]}, role: editor, scope: {kinds: [Deployment]}}"),
        ]);
        assert_eq!(policies.resolve(&who("bob", &[]), None), None);
        let ann = policies.resolve(&who("ann", &["team-a"]), None).unwrap();
        assert_eq!(ann.role, Role::Editor);
        assert_eq!(ann.policies, ["a", "b"]);
        let bob = policies.resolve(&who("bob", &["team-a"]), None).unwrap();
        assert_eq!(bob.role, Role::Viewer);
        // A token's own role joins the policies as a grant of everything.
        let token = policies
            .resolve(&who("bob", &[]), Some(Role::Admin))
            .unwrap();
        assert_eq!(token.role, Role::Admin);
        assert!(token.scope.is_everything());
    }

    #[test]
    fn validation_names_the_key() {
        let check = |yaml: &str| {
            validate(&[policy(yaml)], &["ops"])
                .err()
                .map(|e| e.key().to_owned())
        };
        assert_eq!(
            check("{name: a, subjects: {}, role: viewer}").as_deref(),
            Some("auth.policies[0].subjects")
        );
        assert_eq!(
            check("{name: a, subjects: {tokens: [nope]}, role: viewer}").as_deref(),
            Some("auth.policies[0].subjects.tokens")
        );
        assert_eq!(
            check("{name: a, subjects: {anonymous: true}, role: admin, scope: {}}").as_deref(),
            Some("auth.policies[0].scope")
        );
        assert_eq!(
            check("{name: a, subjects: {groups: [g]}, role: viewer, scope: {namespaces: []}}")
                .as_deref(),
            Some("auth.policies[0].scope.namespaces")
        );
        assert_eq!(
            check("{name: a, subjects: {tokens: [ops]}, role: viewer, scope: {kinds: [Pod]}}"),
            None
        );
        // Names are parsed where they are read.
        assert!(serde_yaml::from_str::<PolicyConfig>(
            "{name: a, subjects: {groups: [g]}, role: viewer, scope: {namespaces: [\"../x\"]}}"
        )
        .is_err());
    }
}
