//! Policies, from the config file (`auth.policies`) and stored as records through the API
//! ([`crate::access_policies`]): who gets which role over which part of the fleet
//! (`karpor_core::access::AccessPolicy`). A caller no policy names gets nothing. Resolved
//! here into the caller's [`Access`]; what a scope lets through is [`crate::scope`]'s.

use std::collections::BTreeSet;

use std::sync::Arc;

use karpor_config::ConfigIssue;
use karpor_core::access::{AccessPolicy, Role};
use tokio::sync::watch;

use crate::scope::{Grant, Scope};

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

/// The grant a policy gives.
fn grant(policy: &AccessPolicy) -> Grant {
    let Some(scope) = &policy.scope else {
        return Grant::everything(policy.role);
    };
    Grant {
        role: policy.role,
        clusters: texts(&scope.clusters),
        cluster_labels: scope.cluster_labels.clone(),
        namespaces: texts(&scope.namespaces),
        kinds: scope
            .kinds
            .as_ref()
            .map(|k| k.iter().map(|k| k.to_ascii_lowercase()).collect()),
        secrets: scope.secrets || policy.role >= Role::Editor,
    }
}

fn names_caller(policy: &AccessPolicy, who: &Identity) -> bool {
    policy.names(&who.user, &who.groups, who.token.as_deref(), who.anonymous)
}

fn texts<T: ToString>(list: &Option<Vec<T>>) -> Option<BTreeSet<String>> {
    list.as_ref()
        .map(|l| l.iter().map(ToString::to_string).collect())
}

/// Names unique, each policy well formed, tokens named existing.
pub(crate) fn validate(policies: &[AccessPolicy], tokens: &[&str]) -> Result<(), ConfigIssue> {
    let mut names = BTreeSet::new();
    for (i, policy) in policies.iter().enumerate() {
        let at = format!("auth.policies[{i}]");
        if !names.insert(policy.name.as_str()) {
            return Err(ConfigIssue::new(
                format!("{at}.name"),
                format!("`{}` is already the name of another policy", policy.name),
            ));
        }
        if let Err((field, problem)) = policy.problem() {
            return Err(ConfigIssue::new(format!("{at}.{field}"), problem));
        }
        let tokens_named = &policy.subjects.tokens;
        if let Some(unknown) = tokens_named.iter().find(|t| !tokens.contains(&t.as_str())) {
            return Err(ConfigIssue::new(
                format!("{at}.subjects.tokens"),
                format!("`{unknown}` is not the name of an entry of auth.tokens"),
            ));
        }
    }
    Ok(())
}

/// The stored policies as last read, shared by every request.
pub(crate) type StoredPolicies = watch::Receiver<Arc<Vec<AccessPolicy>>>;

/// The config file's policies and the stored ones.
#[derive(Debug, Clone, Default)]
pub struct Policies {
    configured: Vec<AccessPolicy>,
    stored: Option<StoredPolicies>,
}

impl Policies {
    pub fn new(configured: Vec<AccessPolicy>) -> Self {
        Policies {
            configured,
            stored: None,
        }
    }

    /// Stored policies join the configured ones.
    pub(crate) fn with_stored(mut self, stored: StoredPolicies) -> Self {
        self.stored = Some(stored);
        self
    }

    /// Whether there is any, configured or stored.
    pub(crate) fn any(&self) -> bool {
        !self.configured.is_empty() || self.stored.as_ref().is_some_and(|s| !s.borrow().is_empty())
    }

    /// The names of the config file's policies (a stored one may not take one).
    pub(crate) fn configured(&self) -> &[AccessPolicy] {
        &self.configured
    }

    /// What `who` may do: `implicit` (a token's role, anonymous reads) everywhere, joined
    /// with every policy naming it; `None` when nothing grants it anything.
    pub(crate) fn resolve(&self, who: &Identity, implicit: Option<Role>) -> Option<Access> {
        let mut grants: Vec<Grant> = implicit.map(Grant::everything).into_iter().collect();
        let mut names = Vec::new();
        let stored = self.stored.as_ref().map(|s| s.borrow().clone());
        let all = self
            .configured
            .iter()
            .chain(stored.iter().flat_map(|s| s.iter()));
        for policy in all.filter(|p| names_caller(p, who)) {
            let mut grant = grant(policy);
            // No write without a credential, whatever a policy says (such policies are
            // refused where they are written, too).
            if who.anonymous {
                grant.role = Role::Viewer;
            }
            grants.push(grant);
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

    fn policy(yaml: &str) -> AccessPolicy {
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
            check("{name: a, subjects: {tokens: [ops]}, role: viewer, scope: {kinds: [Pod]}}"),
            None
        );
    }
}
