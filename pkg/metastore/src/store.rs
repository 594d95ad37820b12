//! The backend-facing trait: records as JSON text under a kind and a name, versioned by
//! the store's revision, and a change feed in revision order. Typed access, timestamps
//! and encryption live above it in [`crate::Metastore`], once for every backend.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use karpor_core::model::Kind;

use crate::StoreError;

/// A store-wide, increasing number. A record's version is the revision of its last
/// write (etcd's mod revision; the SQL backends keep the same counter).
pub type Revision = i64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    pub name: String,
    pub version: Revision,
    pub data: String,
}

/// A page of names in ascending order, after a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// Only names after this one (the previous page's `next`).
    pub after: Option<String>,
    pub limit: usize,
}

impl Default for ListRequest {
    fn default() -> Self {
        ListRequest {
            after: None,
            limit: 100,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPage {
    pub items: Vec<RawRecord>,
    /// The cursor of the next page; `None` on the last.
    pub next: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    Put,
    Delete,
}

impl ChangeOp {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeOp::Put => "put",
            ChangeOp::Delete => "delete",
        }
    }
}

/// One write, as the change feed delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub revision: Revision,
    pub kind: Kind,
    pub name: String,
    pub op: ChangeOp,
}

pub type ChangeStream = BoxStream<'static, Result<Change, StoreError>>;

/// A member's hold on the store: alive while renewed within `ttl`. Its claims end with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberLease {
    pub member: String,
    /// etcd's lease id; on SQL the revision the member joined at. A member that joins
    /// again under the same name gets another id, so a stale lease never passes for it.
    pub id: i64,
    /// As the backend granted it (etcd rounds up to whole seconds and enforces a minimum).
    pub ttl: Duration,
}

/// A live member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub id: i64,
}

/// A cluster owned by a live member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub cluster: String,
    pub member: String,
    /// The store revision the claim was made at: a later owner always has a larger one,
    /// so writes fenced by it can tell a stale owner from the current one.
    pub epoch: Revision,
}

#[async_trait]
pub trait MetadataStore: Send + Sync + 'static {
    /// The backend's config name (`sqlite`, `etcd`, `mysql`).
    fn backend(&self) -> &'static str;

    /// A cheap round trip to the backend.
    async fn ping(&self) -> Result<(), StoreError>;

    async fn get(&self, kind: Kind, name: &str) -> Result<Option<RawRecord>, StoreError>;

    async fn list(&self, kind: Kind, request: &ListRequest) -> Result<RawPage, StoreError>;

    /// `AlreadyExists` when the name is taken. Returns the new version.
    async fn create(&self, kind: Kind, name: &str, data: &str) -> Result<Revision, StoreError>;

    /// Compare-and-swap: `Conflict` unless the stored version is `expected`.
    async fn update(
        &self,
        kind: Kind,
        name: &str,
        data: &str,
        expected: Revision,
    ) -> Result<Revision, StoreError>;

    /// With `expected`, only if the stored version is still that.
    async fn delete(
        &self,
        kind: Kind,
        name: &str,
        expected: Option<Revision>,
    ) -> Result<(), StoreError>;

    /// The store's current revision: list, then `watch` from here, and nothing is missed.
    async fn revision(&self) -> Result<Revision, StoreError>;

    /// Every change after `after`, in order, then new ones as they happen.
    async fn watch(&self, after: Revision) -> Result<ChangeStream, StoreError>;

    /// A lease for `member`, alive for `ttl` unless renewed. `MemberAlive` while another
    /// live lease holds the name; an expired one is replaced. Never in the change feed.
    async fn join(&self, member: &str, ttl: Duration) -> Result<MemberLease, StoreError>;

    /// Alive for another `ttl` from now; `LeaseLost` once it expired or was revoked.
    async fn renew(&self, lease: &MemberLease) -> Result<(), StoreError>;

    /// Revokes the lease: its member and claims are gone at once. A lost lease is no error.
    async fn leave(&self, lease: &MemberLease) -> Result<(), StoreError>;

    /// Live members, by name.
    async fn members(&self) -> Result<Vec<Member>, StoreError>;

    /// Claims of live members, by cluster.
    async fn claims(&self) -> Result<Vec<Claim>, StoreError>;

    /// Makes `cluster` ours unless a live other member holds it: `Some(epoch)` when it is
    /// now (or already was) ours, `None` when it is another's; `LeaseLost` when our lease
    /// is gone. Atomic: of members racing for a free cluster, exactly one gets `Some`.
    async fn claim(
        &self,
        lease: &MemberLease,
        cluster: &str,
    ) -> Result<Option<Revision>, StoreError>;

    /// Gives `cluster` up if it is ours; anyone else's claim is left alone.
    async fn release(&self, lease: &MemberLease, cluster: &str) -> Result<(), StoreError>;
}
