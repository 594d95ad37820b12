//! The backend-facing trait: records as JSON text under a kind and a name, versioned by
//! the store's revision, and a change feed in revision order. Typed access, timestamps
//! and encryption live above it in [`crate::Metastore`], once for every backend.

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
}
