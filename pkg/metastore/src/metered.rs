//! The metadata store with every operation counted and timed (`karpor_metastore_*`
//! metrics), around whichever backend the config chose.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use karpor_core::metrics::Operations;
use karpor_core::model::Kind;

use crate::store::{
    ChangeStream, Claim, ListRequest, Member, MemberLease, MetadataStore, RawPage, RawRecord,
    Revision,
};
use crate::StoreError;

pub(crate) struct Metered {
    pub inner: Arc<dyn MetadataStore>,
    pub ops: Operations,
}

#[async_trait]
impl MetadataStore for Metered {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.ops.observe("ping", self.inner.ping()).await
    }

    async fn get(&self, kind: Kind, name: &str) -> Result<Option<RawRecord>, StoreError> {
        self.ops.observe("get", self.inner.get(kind, name)).await
    }

    async fn list(&self, kind: Kind, request: &ListRequest) -> Result<RawPage, StoreError> {
        self.ops
            .observe("list", self.inner.list(kind, request))
            .await
    }

    async fn create(&self, kind: Kind, name: &str, data: &str) -> Result<Revision, StoreError> {
        self.ops
            .observe("create", self.inner.create(kind, name, data))
            .await
    }

    async fn update(
        &self,
        kind: Kind,
        name: &str,
        data: &str,
        expected: Revision,
    ) -> Result<Revision, StoreError> {
        let work = self.inner.update(kind, name, data, expected);
        self.ops.observe("update", work).await
    }

    async fn delete(
        &self,
        kind: Kind,
        name: &str,
        expected: Option<Revision>,
    ) -> Result<(), StoreError> {
        let work = self.inner.delete(kind, name, expected);
        self.ops.observe("delete", work).await
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        self.ops.observe("revision", self.inner.revision()).await
    }

    async fn watch(&self, after: Revision) -> Result<ChangeStream, StoreError> {
        self.ops.observe("watch", self.inner.watch(after)).await
    }

    async fn join(&self, member: &str, ttl: Duration) -> Result<MemberLease, StoreError> {
        self.ops.observe("join", self.inner.join(member, ttl)).await
    }

    async fn renew(&self, lease: &MemberLease) -> Result<(), StoreError> {
        self.ops.observe("renew", self.inner.renew(lease)).await
    }

    async fn leave(&self, lease: &MemberLease) -> Result<(), StoreError> {
        self.ops.observe("leave", self.inner.leave(lease)).await
    }

    async fn members(&self) -> Result<Vec<Member>, StoreError> {
        self.ops.observe("members", self.inner.members()).await
    }

    async fn claims(&self) -> Result<Vec<Claim>, StoreError> {
        self.ops.observe("claims", self.inner.claims()).await
    }

    async fn claim(
        &self,
        lease: &MemberLease,
        cluster: &str,
    ) -> Result<Option<Revision>, StoreError> {
        self.ops
            .observe("claim", self.inner.claim(lease, cluster))
            .await
    }

    async fn release(&self, lease: &MemberLease, cluster: &str) -> Result<(), StoreError> {
        self.ops
            .observe("release", self.inner.release(lease, cluster))
            .await
    }
}
