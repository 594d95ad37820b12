//! Agent mode's identity, hub side and agent side ([docs/agent.md](../../../docs/agent.md)):
//! a single-use join token bound to one cluster ([`token`]), the hub's certificate
//! authority kept in the metadata store ([`authority`]), the identity an agent's
//! certificate carries ([`identity`]), the pin an agent checks the hub against ([`pin`]),
//! the agent's own key ([`key`]) and what it keeps between runs ([`state`]), enrollment
//! over the metadata store: tokens issued, redeemed once, certificates renewed and revoked
//! ([`enrollment`]); the link between them: both ends' TLS ([`tls`]), what crosses it
//! ([`wire`]), both config sections ([`config`]); and the agent role itself ([`role`]).

pub mod authority;
pub mod config;
pub mod enrollment;
pub mod identity;
pub mod key;
pub mod pin;
pub mod role;
pub mod state;
pub mod tls;
pub mod token;
pub mod wire;

use std::time::Duration;

/// How long a join token is accepted unless asked otherwise.
pub const DEFAULT_JOIN_TTL: Duration = Duration::from_secs(60 * 60);
/// The longest a join token may be asked to live.
pub const MAX_JOIN_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an agent's certificate is valid: short, since renewal is automatic.
pub const CERTIFICATE_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// The largest certificate request read; a real one is well under 1 KiB.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// Why an identity step failed. Messages name no secret.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("join token refused: {0}")]
    JoinRefused(&'static str),
    #[error("certificate refused: {0}")]
    CertificateRefused(&'static str),
    /// The token is good; an admin has yet to approve the key (its fingerprint).
    #[error("the join waits for an admin's approval of key {0}")]
    AwaitingApproval(String),
    #[error("malformed: {0}")]
    Malformed(String),
    #[error("certificate authority: {0}")]
    Authority(String),
    #[error("{0}")]
    State(String),
    #[error(transparent)]
    Store(#[from] karpor_metastore::StoreError),
}

fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}
