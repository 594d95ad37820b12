//! Agent mode's records: a cluster's enrollment (its outstanding join token, by digest, and
//! the generation its certificates must carry) and the hub's certificate authority.

use serde::{Deserialize, Serialize};

use super::{validate_name, Kind, Record};

/// The name of the one [`AgentAuthority`] record.
pub const AUTHORITY_RECORD: &str = "hub";

/// A cluster whose objects an agent in it sends: named as the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentEnrollment {
    pub name: String,
    /// Certificates carry the generation they were issued in; one from an older
    /// generation is refused, so raising it revokes every certificate of the cluster.
    pub generation: u64,
    /// The join token not used yet, if any.
    #[serde(default)]
    pub join: Option<JoinGrant>,
    /// When an agent last joined (Unix seconds), if ever.
    #[serde(default)]
    pub joined_at: Option<i64>,
    /// A join held for an admin's approval (`agents.approve_joins`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingJoin>,
}

/// A join that came with the current token and waits for an admin: the key it asked a
/// certificate for, by fingerprint, and whether it was approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingJoin {
    /// `sha256:HEX` of the key's SubjectPublicKeyInfo: what the agent logs.
    pub key: String,
    /// Unix seconds.
    pub requested_at: i64,
    pub approved: bool,
}

/// A join token as the hub keeps it: its digest and expiry, never the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinGrant {
    /// SHA-256 of the token's secret, base64url.
    pub digest: String,
    /// Unix seconds after which the token is refused.
    pub expires_at: i64,
}

impl Record for AgentEnrollment {
    const KIND: Kind = Kind::AgentEnrollment;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| e.to_string())?;
        match &self.join {
            Some(join) if join.digest.len() != 43 => {
                Err("join.digest is not a SHA-256 digest in base64url".to_owned())
            }
            _ => Ok(()),
        }
    }
}

/// The certificate authority agents' and the agent listener's certificates come from,
/// shared by every hub replica through the metadata store.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentAuthority {
    pub name: String,
    pub certificate_pem: String,
    /// Sealed at rest when the store has a key.
    pub key_pem: String,
}

impl std::fmt::Debug for AgentAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentAuthority")
            .field("name", &self.name)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Record for AgentAuthority {
    const KIND: Kind = Kind::AgentAuthority;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        if self.name != AUTHORITY_RECORD {
            return Err(format!(
                "the authority record is named {AUTHORITY_RECORD:?}"
            ));
        }
        if self.certificate_pem.len() > 16 * 1024 || self.key_pem.len() > 16 * 1024 {
            return Err("the authority's certificate or key is above 16 KiB".to_owned());
        }
        Ok(())
    }

    fn secrets_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.key_pem]
    }
}

/// Which hub replica holds a cluster's agent session (its control stream), so another
/// replica forwards live reads there: named as the cluster, written when a session opens
/// and removed when it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSession {
    pub name: String,
    /// The holding replica's `agents.peer_url`.
    pub peer: String,
    /// When the session opened (Unix seconds).
    pub since: i64,
}

impl Record for AgentSession {
    const KIND: Kind = Kind::AgentSession;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| e.to_string())?;
        if !self.peer.starts_with("https://") || self.peer.len() > 2048 {
            return Err("peer is an https:// URL of at most 2048 bytes".to_owned());
        }
        Ok(())
    }
}
