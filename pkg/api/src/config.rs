//! The API's config sections, composed into the binary's config file: `auth` and
//! `server.limits`. Validation that needs the whole file lives in the binary.

use std::path::PathBuf;
use std::time::Duration;

use karpor_config::ConfigIssue;
use karpor_core::model::MAX_KUBECONFIG_BYTES;
use karpor_core::SecretSource;
use serde::{Deserialize, Serialize};

use crate::oidc::OidcConfig;
use crate::token_review::TokenReviewConfig;
use karpor_core::access::{AccessPolicy, Role};
use karpor_core::trusted::{self, Trusted};

/// The role of a request without a token. Never `admin`: no write without a credential.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Anonymous {
    /// `guest` when the server listens on loopback only (a local tool), with an admin
    /// token made for the local user (`auth.local_token_file`); `none` otherwise.
    #[default]
    Auto,
    None,
    /// Reads everything (`viewer`, its name since policies, reads the same).
    #[serde(alias = "viewer")]
    Guest,
}

impl Anonymous {
    /// The role granted without a token, for a server listening on loopback or not.
    pub fn role(self, loopback: bool) -> Option<Role> {
        match self {
            Anonymous::Auto if loopback => Some(Role::Viewer),
            Anonymous::Auto | Anonymous::None => None,
            Anonymous::Guest => Some(Role::Viewer),
        }
    }

    /// Whether a local admin token is made: `auto` on loopback, with no admin token
    /// configured.
    pub fn makes_local_token(self, loopback: bool, tokens: &[TokenConfig]) -> bool {
        self == Anonymous::Auto && loopback && !tokens.iter().any(|t| t.role == Some(Role::Admin))
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub anonymous: Anonymous,
    pub tokens: Vec<TokenConfig>,
    /// Where the admin token of a local install is made (see [`Anonymous::Auto`]).
    pub local_token_file: PathBuf,
    /// The role that may read pod logs (the workloads' own data), where its scope holds
    /// the pod: `admin`, `editor`, or `viewer` for every caller who may read.
    pub pod_logs: Role,
    /// Who gets which role where ([`crate::policy`]).
    pub policies: Vec<AccessPolicy>,
    /// More policies, a YAML list as `policies` (a ConfigMap's file): read at start,
    /// joined to `policies`.
    pub policies_file: Option<PathBuf>,
    /// Kubernetes tokens, checked by a registered cluster.
    pub token_review: Option<TokenReviewConfig>,
    /// OIDC ID tokens from one issuer.
    pub oidc: Option<OidcConfig>,
}

impl AuthConfig {
    /// Names present and unique, every token resolving, no two tokens alike (one
    /// token, one role).
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        let mut names = std::collections::HashSet::new();
        let mut values = Vec::new();
        for (i, token) in self.tokens.iter().enumerate() {
            let key = |field: &str| format!("auth.tokens[{i}].{field}");
            if token.name.trim().is_empty() {
                return Err(ConfigIssue::new(key("name"), "must not be empty"));
            }
            if !names.insert(token.name.as_str()) {
                return Err(ConfigIssue::new(
                    key("name"),
                    format!("`{}` is already the name of another token", token.name),
                ));
            }
            let value = token
                .token
                .resolve()
                .map_err(|e| ConfigIssue::new(key("token"), e))?;
            if let Some(j) = values.iter().position(|v| *v == value) {
                return Err(ConfigIssue::new(
                    key("token"),
                    format!("the same token as auth.tokens[{j}]"),
                ));
            }
            values.push(value);
        }
        let names: Vec<&str> = self.tokens.iter().map(|t| t.name.as_str()).collect();
        crate::policy::validate(&self.policies, &names)?;
        if let Some(review) = &self.token_review {
            review.validate()?;
        }
        if let Some(oidc) = &self.oidc {
            oidc.validate()?;
        }
        Ok(())
    }
}

/// Largest policies file read.
const MAX_POLICIES_FILE_BYTES: u64 = 1024 * 1024;

impl AuthConfig {
    /// Joins the policies of `policies_file` to `policies`, so the rest of karpor sees
    /// one list; a problem names the file, the entry and its field.
    pub fn read_policies_file(&mut self) -> Result<(), ConfigIssue> {
        const KEY: &str = "auth.policies_file";
        let Some(path) = &self.policies_file else {
            return Ok(());
        };
        let user = trusted::User::current();
        trusted::check(path, Trusted::File, "policies file", &user)
            .map_err(|problem| ConfigIssue::new(KEY, problem))?;
        let at = |problem: &dyn std::fmt::Display| {
            ConfigIssue::new(KEY, format!("{}: {problem}", path.display()))
        };
        let file = std::fs::File::open(path).map_err(|e| at(&e))?;
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(file, MAX_POLICIES_FILE_BYTES + 1),
            &mut text,
        )
        .map_err(|e| at(&e))?;
        if text.len() as u64 > MAX_POLICIES_FILE_BYTES {
            return Err(at(&"larger than 1 MiB"));
        }
        let policies: Vec<AccessPolicy> = if text.trim().is_empty() {
            Vec::new()
        } else {
            serde_saphyr::from_str(&text).map_err(|e| at(&e))?
        };
        for (i, policy) in policies.iter().enumerate() {
            if let Err((field, problem)) = policy.problem() {
                return Err(at(&format!("[{i}].{field}: {problem}")));
            }
        }
        self.policies.extend(policies);
        Ok(())
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            anonymous: Anonymous::Auto,
            tokens: Vec::new(),
            local_token_file: PathBuf::from(crate::local_token::DEFAULT_LOCAL_TOKEN_FILE),
            pod_logs: Role::Admin,
            policies: Vec::new(),
            policies_file: None,
            token_review: None,
            oidc: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// Who holds it: for logs, never the token itself.
    pub name: String,
    /// Its role everywhere; without one, the policies naming the token decide.
    #[serde(default)]
    pub role: Option<Role>,
    pub token: SecretSource,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest request body; a cluster's kubeconfig (up to 2 MiB) travels in JSON, so
    /// keep it above that.
    pub body_bytes: usize,
    /// Longest a REST API request may take before it is answered 503.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// REST API requests served at once; more wait (within the timeout).
    pub concurrency: usize,
    /// Work in member clusters on callers' behalf.
    pub live: crate::LiveLimits,
    /// What one caller's assistant may ask of `/mcp`.
    pub mcp: crate::McpLimits,
}

impl LimitsConfig {
    /// For what types cannot say.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        let fail =
            |key: &str, what: String| Err(ConfigIssue::new(format!("server.limits.{key}"), what));
        if self.body_bytes < MAX_KUBECONFIG_BYTES {
            return fail(
                "body_bytes",
                format!(
                    "{} is below a kubeconfig's limit ({MAX_KUBECONFIG_BYTES} bytes): clusters could not be added",
                    self.body_bytes
                ),
            );
        }
        if self.request_timeout.is_zero() {
            return fail("request_timeout", "must be above zero".into());
        }
        if self.concurrency == 0 {
            return fail("concurrency", "must be at least 1".into());
        }
        self.live.validate()?;
        self.mcp.validate()
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            body_bytes: 4 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            concurrency: 256,
            live: crate::LiveLimits::default(),
            mcp: crate::McpLimits::default(),
        }
    }
}
