//! The API's config sections, composed into the binary's config file: `auth` and
//! `server.limits`. Validation that needs the whole file lives in the binary.

use std::time::Duration;

use karpor_core::SecretSource;
use serde::{Deserialize, Serialize};

/// What a caller may do: `guest` reads, `admin` also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Guest,
    Admin,
}

/// The role of a request without a token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Anonymous {
    /// `admin` when the server listens on loopback only (a local tool), `none` otherwise.
    #[default]
    Auto,
    None,
    Guest,
    Admin,
}

impl Anonymous {
    /// The role granted without a token, for a server listening on loopback or not.
    pub fn role(self, loopback: bool) -> Option<Role> {
        match self {
            Anonymous::Auto if loopback => Some(Role::Admin),
            Anonymous::Auto | Anonymous::None => None,
            Anonymous::Guest => Some(Role::Guest),
            Anonymous::Admin => Some(Role::Admin),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub anonymous: Anonymous,
    pub tokens: Vec<TokenConfig>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// Who holds it: for logs, never the token itself.
    pub name: String,
    pub role: Role,
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
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            body_bytes: 4 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            concurrency: 256,
        }
    }
}
