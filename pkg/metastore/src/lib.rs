//! The metadata store: where karpor keeps its clusters, sync rules and resource group
//! rules. One backend-facing trait ([`MetadataStore`]) with three backends (etcd, MySQL,
//! embedded SQLite), chosen by config in [`connect`]; one typed facade ([`Metastore`])
//! over it with validation, timestamps and encryption at rest.

mod config;
mod crypto;
mod error;
mod etcd;
mod export;
mod health;
mod metered;
mod records;
mod sql;
mod store;

use std::sync::Arc;

use crypto::Sealer;

pub use config::{EtcdConfig, EtcdTls, MetastoreConfig};
pub use error::StoreError;
pub use export::{Export, ExportedRecord, Imported, OnConflict};
pub use health::{MetastoreCheck, SERVER_CHECK};
pub use records::{Metastore, Page, Stored};
pub use store::{
    Change, ChangeOp, ChangeStream, Claim, ListRequest, Member, MemberLease, MetadataStore,
    RawPage, RawRecord, Revision,
};

/// Opens the configured backend. Remote backends connect lazily, so a dead etcd or MySQL
/// at start is a failing check rather than a failed start; a local SQLite file that
/// cannot be created, or an unreadable key file, is an error here. The embedded store
/// encrypts credentials with a key made beside it when none is configured.
pub async fn connect(config: &MetastoreConfig) -> Result<Metastore, StoreError> {
    let store: Arc<dyn MetadataStore> = match config {
        MetastoreConfig::Sqlite { path, .. } => Arc::new(sql::open_sqlite(path).await?),
        MetastoreConfig::Mysql { url, .. } => Arc::new(sql::connect_mysql(url).await?),
        MetastoreConfig::Etcd { etcd, .. } => Arc::new(etcd::EtcdStore::new(etcd)?),
    };
    let configured = config.encryption_key_file().cloned();
    let default = config.default_key_file();
    let sealer = tokio::task::spawn_blocking(move || match (configured, default) {
        (Some(path), _) => Sealer::from_key_file(&path).map(Some),
        (None, Some(path)) => {
            let (sealer, made) = Sealer::load_or_create(&path)?;
            if made {
                tracing::info!(key = %path.display(), "made a key to encrypt cluster credentials at rest");
            }
            Ok(Some(sealer))
        }
        (None, None) => {
            tracing::warn!("cluster credentials are stored in clear: set metadata.encryption_key_file");
            Ok(None)
        }
    })
    .await
    .map_err(|e| StoreError::Misconfigured(e.to_string()))??;
    Ok(Metastore::new(store, sealer))
}
