//! What crosses the agent listener, hub and agent alike: the routes' paths and bodies.
//! Every connection starts at the agent; the hub answers.

use karpor_syncer::Write;
use serde::{Deserialize, Serialize};

/// Where the agent routes live on the hub's agent listener.
pub const PREFIX: &str = "/agent/v1";
/// `POST`, with a join token: a first certificate.
pub const JOIN: &str = "/join";
/// `POST`, with a current certificate: the next one.
pub const RENEW: &str = "/renew";
/// `GET`: what the agent syncs ([`karpor_syncer::SyncPlan`]).
pub const PLAN: &str = "/plan";
/// `POST`: a batch of writes, answered once storage committed them.
pub const WRITES: &str = "/writes";

/// The most writes one batch may hold; the agent's writer sends one at a time.
pub const MAX_WRITES: usize = 64;
/// The most documents all the writes of one batch may hold together.
pub const MAX_DOCUMENTS: usize = 1_000;
/// The largest body the agent listener reads: a writer's batch is at most 4 MiB of
/// documents (its size is estimated), so twice that.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinRequest {
    /// `karpor-join.CLUSTER.SECRET`.
    pub token: String,
    /// A PEM certificate request over the agent's key.
    pub request: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenewRequest {
    pub request: String,
}

/// A certificate for the agent, and the authority it chains to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Certified {
    pub certificate: String,
    pub authority: String,
    /// When the certificate expires, in seconds since the epoch.
    pub not_after: i64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteBatch {
    pub writes: Vec<Write>,
}

impl WriteBatch {
    /// Documents in every write of the batch.
    pub fn documents(&self) -> usize {
        self.writes
            .iter()
            .map(|w| match w {
                Write::Upsert { documents } => documents.len(),
                _ => 0,
            })
            .sum()
    }
}

/// What a committed batch did.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Written {
    /// Documents the batch's purges and sweeps removed.
    pub removed: u64,
}
