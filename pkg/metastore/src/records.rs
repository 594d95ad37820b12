//! Typed access to the store, the same for every backend: validation, the envelope with
//! creation and update times, and sealing of credentials.

use std::sync::Arc;
use std::time::Duration;

use karpor_core::model::{validate_name, Record, Seed};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::crypto::{is_sealed, Sealer};
use crate::store::{
    ChangeStream, Claim, ListRequest, Member, MemberLease, MetadataStore, Revision,
};
use crate::StoreError;

/// A record as stored: the user's record, its version and its times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored<T> {
    pub record: T,
    pub version: Revision,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<Stored<T>>,
    pub next: Option<String>,
}

/// What each backend keeps as a record's text.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Envelope<T> {
    pub record: T,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// The metadata store as the rest of karpor uses it.
#[derive(Clone)]
pub struct Metastore {
    store: Arc<dyn MetadataStore>,
    sealer: Option<Arc<Sealer>>,
}

impl Metastore {
    pub fn new(store: Arc<dyn MetadataStore>, sealer: Option<Sealer>) -> Self {
        Metastore {
            store,
            sealer: sealer.map(Arc::new),
        }
    }

    pub fn backend(&self) -> &Arc<dyn MetadataStore> {
        &self.store
    }

    /// The same store with every backend operation counted and timed in `registry`.
    pub fn metered(self, registry: &mut prometheus_client::registry::Registry) -> Metastore {
        let ops = karpor_core::metrics::Operations::new(
            registry,
            "karpor_metastore",
            "Metadata store",
            self.store.backend(),
        );
        Metastore {
            store: Arc::new(crate::metered::Metered {
                inner: self.store,
                ops,
            }),
            sealer: self.sealer,
        }
    }

    pub async fn get<T: Record>(&self, name: &str) -> Result<Option<Stored<T>>, StoreError> {
        match self.store.get(T::KIND, name).await? {
            Some(raw) => Ok(Some(self.decode(&raw.data, raw.version)?)),
            None => Ok(None),
        }
    }

    /// A page of records in name order.
    pub async fn list<T: Record>(&self, request: &ListRequest) -> Result<Page<T>, StoreError> {
        let page = self.store.list(T::KIND, request).await?;
        let items = page
            .items
            .iter()
            .map(|raw| self.decode(&raw.data, raw.version))
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items,
            next: page.next,
        })
    }

    /// Every record of a kind, page by page.
    pub async fn list_all<T: Record>(&self) -> Result<Vec<Stored<T>>, StoreError> {
        let mut all = Vec::new();
        let mut request = ListRequest::default();
        loop {
            let page = self.list::<T>(&request).await?;
            all.extend(page.items);
            match page.next {
                Some(next) => request.after = Some(next),
                None => return Ok(all),
            }
        }
    }

    pub async fn create<T: Record>(&self, record: T) -> Result<Stored<T>, StoreError> {
        let now = now();
        self.put_new(record, now, now).await
    }

    /// Makes a built-in `record` unless it was made before: once made, it stays as users
    /// leave it, deleted included (a [`Seed`] marks it). `true` when it was made now; a
    /// record of that name a user made first is left as it is.
    pub async fn seed<T: Record>(&self, record: T) -> Result<bool, StoreError> {
        let marker = Seed::of(&record);
        if self.get::<Seed>(&marker.name).await?.is_some() {
            return Ok(false);
        }
        let made = match self.create(record).await {
            Ok(_) => true,
            // Another replica made it, or a user did: either way it is there.
            Err(StoreError::AlreadyExists { .. }) => false,
            Err(e) => return Err(e),
        };
        match self.create(marker).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => Ok(made),
            Err(e) => Err(e),
        }
    }

    /// Replaces a record if it is still at `expected`: `Conflict` otherwise.
    pub async fn update<T: Record>(
        &self,
        record: T,
        expected: Revision,
    ) -> Result<Stored<T>, StoreError> {
        record.validate().map_err(StoreError::Invalid)?;
        let current = self
            .get::<T>(record.name())
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: T::KIND,
                name: record.name().to_owned(),
            })?;
        if current.version != expected {
            return Err(StoreError::Conflict {
                kind: T::KIND,
                name: record.name().to_owned(),
                expected,
            });
        }
        let envelope = Envelope {
            record,
            created_at: current.created_at,
            updated_at: now(),
        };
        let data = self.encode(&envelope)?;
        let version = self
            .store
            .update(T::KIND, envelope.record.name(), &data, expected)
            .await?;
        Ok(Stored {
            record: envelope.record,
            version,
            created_at: envelope.created_at,
            updated_at: envelope.updated_at,
        })
    }

    pub async fn delete<T: Record>(
        &self,
        name: &str,
        expected: Option<Revision>,
    ) -> Result<(), StoreError> {
        self.store.delete(T::KIND, name, expected).await
    }

    /// Follow every change after `after` (see [`MetadataStore::watch`]).
    pub async fn watch(&self, after: Revision) -> Result<ChangeStream, StoreError> {
        self.store.watch(after).await
    }

    pub async fn revision(&self) -> Result<Revision, StoreError> {
        self.store.revision().await
    }

    /// Joins as `member` (a DNS-1123 label) for `ttl` (see [`MetadataStore::join`]).
    pub async fn join(&self, member: &str, ttl: Duration) -> Result<MemberLease, StoreError> {
        validate_name(member).map_err(|e| StoreError::Invalid(format!("member: {e}")))?;
        if ttl.is_zero() {
            return Err(StoreError::Invalid("a member lease needs a TTL".to_owned()));
        }
        self.store.join(member, ttl).await
    }

    pub async fn renew(&self, lease: &MemberLease) -> Result<(), StoreError> {
        self.store.renew(lease).await
    }

    pub async fn leave(&self, lease: &MemberLease) -> Result<(), StoreError> {
        self.store.leave(lease).await
    }

    pub async fn members(&self) -> Result<Vec<Member>, StoreError> {
        self.store.members().await
    }

    pub async fn claims(&self) -> Result<Vec<Claim>, StoreError> {
        self.store.claims().await
    }

    /// Claims a cluster for the lease's member (see [`MetadataStore::claim`]).
    pub async fn claim(
        &self,
        lease: &MemberLease,
        cluster: &str,
    ) -> Result<Option<Revision>, StoreError> {
        validate_name(cluster).map_err(|e| StoreError::Invalid(format!("cluster: {e}")))?;
        self.store.claim(lease, cluster).await
    }

    pub async fn release(&self, lease: &MemberLease, cluster: &str) -> Result<(), StoreError> {
        self.store.release(lease, cluster).await
    }

    /// Replaces a record, whatever its version, with given times (an import that
    /// overwrites keeps the exported times).
    pub(crate) async fn put_over<T: Record>(
        &self,
        record: T,
        created_at: OffsetDateTime,
        updated_at: OffsetDateTime,
    ) -> Result<Stored<T>, StoreError> {
        record.validate().map_err(StoreError::Invalid)?;
        let Some(current) = self.get::<T>(record.name()).await? else {
            return self.put_new(record, created_at, updated_at).await;
        };
        let envelope = Envelope {
            record,
            created_at,
            updated_at,
        };
        let data = self.encode(&envelope)?;
        let version = self
            .store
            .update(T::KIND, envelope.record.name(), &data, current.version)
            .await?;
        Ok(Stored {
            record: envelope.record,
            version,
            created_at,
            updated_at,
        })
    }

    /// Writes a record with given times (import keeps them).
    pub(crate) async fn put_new<T: Record>(
        &self,
        record: T,
        created_at: OffsetDateTime,
        updated_at: OffsetDateTime,
    ) -> Result<Stored<T>, StoreError> {
        record.validate().map_err(StoreError::Invalid)?;
        let envelope = Envelope {
            record,
            created_at,
            updated_at,
        };
        let data = self.encode(&envelope)?;
        let version = self
            .store
            .create(T::KIND, envelope.record.name(), &data)
            .await?;
        Ok(Stored {
            record: envelope.record,
            version,
            created_at,
            updated_at,
        })
    }

    fn encode<T: Record>(&self, envelope: &Envelope<T>) -> Result<String, StoreError> {
        let mut sealed = Envelope {
            record: envelope.record.clone(),
            created_at: envelope.created_at,
            updated_at: envelope.updated_at,
        };
        if let Some(sealer) = &self.sealer {
            for secret in sealed.record.secrets_mut() {
                *secret = sealer.seal(secret);
            }
        }
        serde_json::to_string(&sealed).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn decode<T: Record>(&self, data: &str, version: Revision) -> Result<Stored<T>, StoreError> {
        let mut envelope: Envelope<T> = serde_json::from_str(data).map_err(|e| {
            StoreError::Corrupt(format!("{} record does not parse: {e}", T::KIND.as_str()))
        })?;
        for secret in envelope.record.secrets_mut() {
            if let Some(sealer) = &self.sealer {
                *secret = sealer.open(secret)?;
            } else if is_sealed(secret) {
                return Err(StoreError::Misconfigured(
                    "records are encrypted but metadata.encryption_key_file is not set".to_owned(),
                ));
            }
        }
        Ok(Stored {
            record: envelope.record,
            version,
            created_at: envelope.created_at,
            updated_at: envelope.updated_at,
        })
    }
}

fn now() -> OffsetDateTime {
    // Whole microseconds: every backend's text round-trips them exactly.
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1000 * 1000)
        .unwrap_or(now)
}
