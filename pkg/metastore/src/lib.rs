//! The metadata store: where karpor keeps its clusters and rules. One trait, three
//! backends (etcd, MySQL, embedded SQLite), chosen by config in [`connect`].

mod config;
mod error;
mod etcd;
mod health;
mod mysql;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;

pub use config::{EtcdConfig, EtcdTls, MetastoreConfig};
pub use error::StoreError;
pub use health::MetastoreCheck;

/// The store behind the `Server` check. Records and the change feed come with the
/// metadata-store work; today a backend can say whether it is reachable.
#[async_trait]
pub trait MetadataStore: Send + Sync + 'static {
    /// The backend's config name (`sqlite`, `etcd`, `mysql`).
    fn backend(&self) -> &'static str;

    /// A cheap round trip to the backend.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// Opens the configured backend. Remote backends connect lazily, so a dead etcd or MySQL
/// at start is a failing check rather than a failed start; a local SQLite file that
/// cannot be created is an error here.
pub async fn connect(config: &MetastoreConfig) -> Result<Arc<dyn MetadataStore>, StoreError> {
    Ok(match config {
        MetastoreConfig::Sqlite { path } => Arc::new(sqlite::SqliteStore::open(path).await?),
        MetastoreConfig::Mysql { url } => Arc::new(mysql::MysqlStore::new(url)?),
        MetastoreConfig::Etcd { etcd } => Arc::new(etcd::EtcdStore::new(etcd)?),
    })
}
