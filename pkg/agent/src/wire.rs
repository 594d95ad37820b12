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

/// `POST`, a [`karpor_syncer::TypeScope`]: the digest of what storage holds of it
/// ([`karpor_storage::VersionDigest`]), for a first list after a restart to compare with.
pub const VERSIONS: &str = "/versions";

/// Requests (join, renew, plan, writes, versions) one agent has under way at once; the
/// hub answers more with 429. An agent uses at most its one writer's batch, a plan poll,
/// a renewal and [`VERSIONS_AT_ONCE`].
pub const EXCHANGES_PER_AGENT: usize = 8;
/// `versions` requests one agent has under way at once: each is a scan of storage.
pub const VERSIONS_AT_ONCE: usize = 2;

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

/// A [`karpor_syncer::TypeScope`] as the hub reads it: each name parsed before it
/// reaches a storage query.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VersionsRequest {
    pub api_version: karpor_core::names::ApiVersion,
    pub kind: karpor_core::names::KindName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<karpor_core::names::Namespace>,
}

/// What a committed batch did.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Written {
    /// Documents the batch's purges and sweeps removed.
    pub removed: u64,
}

/// `GET`: the control stream, hub to agent, one [`Control`] per line, for as long as the
/// agent stays connected.
pub const CONTROL: &str = "/control";
/// `POST /replies/{id}`: the answer to the live read `id` ([`LiveRequest`]): a
/// [`ReplyHead`] line, then the answer's bytes (JSON, or a log's text).
pub const REPLIES: &str = "/replies";
/// The route of one reply, in axum's path syntax.
pub const REPLY_ROUTE: &str = "/replies/{id}";

/// The longest line of the control stream, and of a reply's head.
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// The largest answer to an object or events read (a log is bounded by its own limits).
pub const MAX_REPLY_BYTES: usize = 4 * 1024 * 1024;
/// How often the hub writes on an idle control stream, so both ends see a dead link.
pub const CONTROL_PING: std::time::Duration = std::time::Duration::from_secs(10);
/// How long the agent waits for a line of the control stream before it reconnects.
pub const CONTROL_IDLE: std::time::Duration = std::time::Duration::from_secs(30);
/// The most events an agent answers for one read.
pub const MAX_EVENTS: usize = 1_000;
/// Live reads one agent serves at once (and the hub sends it at once).
pub const MAX_READS_AT_ONCE: usize = 32;
/// The longest a live read may run, whatever the hub asks (a followed log's stream).
pub const MAX_READ_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);
/// The largest log an agent sends when the hub asks for no byte limit and no follow.
pub const MAX_LOG_BYTES: i64 = 64 * 1024 * 1024;

/// One line of the control stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    content = "of",
    rename_all = "camelCase",
    deny_unknown_fields
)]
pub enum Control {
    /// A live read to serve and reply to.
    Read(LiveRequest),
    /// The hub no longer waits for this read's reply.
    Cancel(u64),
    /// The hub's storage was unreachable and is back, and may have lost what it had
    /// acknowledged: every type lists again and is sent whole.
    Resync,
    /// Nothing to do: the link is alive.
    Ping,
}

/// A live read the hub asks of the agent, to be answered within `within_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LiveRequest {
    pub id: u64,
    pub within_ms: u64,
    pub read: LiveRead,
}

/// The reads an agent serves: nothing else can be asked, whatever the hub sends (no
/// exec, attach, port-forward, proxy or write has a shape here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "read",
    content = "of",
    rename_all = "camelCase",
    deny_unknown_fields
)]
pub enum LiveRead {
    Object(karpor_kube::reads::ObjectRef),
    Events(karpor_kube::reads::EventsRef),
    Log(karpor_kube::reads::LogRef),
}

/// How a live read went, the first line of its reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase", deny_unknown_fields)]
pub enum ReplyHead {
    /// The answer follows: an object's JSON, a JSON list of events, or a log's text.
    Ok,
    /// The cluster has no such object.
    NotFound,
    /// The cluster serves no such kind.
    NoKind,
    /// The request does not fit the kind (a namespace for a cluster-scoped kind).
    Scope { message: String },
    /// The member API server answered this status.
    Status { code: u16, message: String },
    /// The agent does not serve this request.
    Refused { message: String },
    /// The member cluster did not answer.
    Failed { message: String },
}
