//! Storage with every operation counted and timed (`karpor_storage_*` metrics), around
//! whichever backend the config chose.

use std::sync::Arc;

use async_trait::async_trait;
use karpor_core::metrics::Operations;
use karpor_search::{Field, Query};
use prometheus_client::registry::Registry;
use time::OffsetDateTime;

use crate::document::HistoryNote;
use crate::history::{
    ChangeCounts, ChangePage, ChangeQuery, HistoryCaps, HistorySize, HistoryStorage, ObjectName,
    Revision,
};
use crate::{
    AuditTotals, Bucket, ResourceDocument, ResourceStorage, SearchResult, SearchStorage, Storage,
    StorageError, VersionDigest,
};

/// `storage`, its operations measured in `registry`.
pub fn metered(storage: Arc<dyn Storage>, registry: &mut Registry) -> Arc<dyn Storage> {
    let ops = Operations::new(
        registry,
        "karpor_storage",
        "Resource storage",
        storage.backend(),
    );
    Arc::new(Metered {
        inner: storage,
        ops,
    })
}

struct Metered {
    inner: Arc<dyn Storage>,
    ops: Operations,
}

#[async_trait]
impl ResourceStorage for Metered {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn ping(&self) -> Result<(), StorageError> {
        self.ops.observe("ping", self.inner.ping()).await
    }

    async fn upsert(&self, documents: &[ResourceDocument]) -> Result<(), StorageError> {
        self.ops
            .observe("write", self.inner.upsert(documents))
            .await
    }

    async fn delete(
        &self,
        cluster: &str,
        uid: &str,
        resource_version: Option<&str>,
        history: Option<&HistoryNote>,
    ) -> Result<bool, StorageError> {
        let work = self.inner.delete(cluster, uid, resource_version, history);
        self.ops.observe("delete", work).await
    }

    async fn soft_delete(
        &self,
        cluster: &str,
        uid: &str,
        at: OffsetDateTime,
        resource_version: Option<&str>,
        history: Option<&HistoryNote>,
    ) -> Result<bool, StorageError> {
        let work = self
            .inner
            .soft_delete(cluster, uid, at, resource_version, history);
        self.ops.observe("soft_delete", work).await
    }

    async fn get(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<Option<ResourceDocument>, StorageError> {
        self.ops.observe("get", self.inner.get(cluster, uid)).await
    }

    async fn count(&self, cluster: Option<&str>) -> Result<u64, StorageError> {
        self.ops.observe("count", self.inner.count(cluster)).await
    }

    async fn delete_cluster(&self, cluster: &str) -> Result<u64, StorageError> {
        let work = self.inner.delete_cluster(cluster);
        self.ops.observe("delete_cluster", work).await
    }

    async fn purge_unseen(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        synced_before: OffsetDateTime,
        history: Option<&HistoryNote>,
    ) -> Result<u64, StorageError> {
        let work = self.inner.purge_unseen(
            cluster,
            api_version,
            kind,
            namespace,
            synced_before,
            history,
        );
        self.ops.observe("purge", work).await
    }

    async fn versions(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<VersionDigest, StorageError> {
        let work = self.inner.versions(cluster, api_version, kind, namespace);
        self.ops.observe("versions", work).await
    }
}

#[async_trait]
impl SearchStorage for Metered {
    async fn search_counted(
        &self,
        query: &Query,
        from: u64,
        size: u64,
        count_up_to: Option<u64>,
    ) -> Result<SearchResult, StorageError> {
        let work = self.inner.search_counted(query, from, size, count_up_to);
        self.ops.observe("search", work).await
    }

    async fn terms(
        &self,
        field: &Field,
        query: &Query,
        size: usize,
    ) -> Result<Vec<Bucket>, StorageError> {
        self.ops
            .observe("terms", self.inner.terms(field, query, size))
            .await
    }

    async fn audit_totals(&self, query: &Query) -> Result<AuditTotals, StorageError> {
        self.ops
            .observe("audit_totals", self.inner.audit_totals(query))
            .await
    }
}

#[async_trait]
impl HistoryStorage for Metered {
    async fn object_revisions(
        &self,
        object: &ObjectName,
        since: Option<OffsetDateTime>,
        until: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Revision>, StorageError> {
        let work = self.inner.object_revisions(object, since, until, limit);
        self.ops.observe("object_revisions", work).await
    }

    async fn changes(
        &self,
        query: &ChangeQuery,
        from: u64,
        size: u64,
    ) -> Result<ChangePage, StorageError> {
        let work = self.inner.changes(query, from, size);
        self.ops.observe("changes", work).await
    }

    async fn change_counts(&self, query: &ChangeQuery) -> Result<ChangeCounts, StorageError> {
        let work = self.inner.change_counts(query);
        self.ops.observe("change_counts", work).await
    }

    async fn expire(&self, now: OffsetDateTime, caps: HistoryCaps) -> Result<u64, StorageError> {
        let work = self.inner.expire(now, caps);
        self.ops.observe("expire_history", work).await
    }

    async fn history_sizes(&self) -> Result<Vec<HistorySize>, StorageError> {
        let work = self.inner.history_sizes();
        self.ops.observe("history_sizes", work).await
    }
}
