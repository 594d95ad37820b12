//! Resource storage: where the syncer writes trimmed resource documents and search reads
//! them. Embedded SQLite by default, Elasticsearch for scale; chosen by config in
//! [`connect`].

mod config;
mod elasticsearch;
mod error;
mod health;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;

pub use config::StorageConfig;
pub use error::StorageError;
pub use health::{reason_of, StorageCheck};

/// The storage behind the `Storage` check. Documents, search and aggregations come with
/// the storage work; today a backend can say whether it is reachable and healthy.
#[async_trait]
pub trait ResourceStorage: Send + Sync + 'static {
    /// The backend's config name (`sqlite`, `elasticsearch`).
    fn backend(&self) -> &'static str;

    /// A cheap query that fails when the backend cannot serve.
    async fn ping(&self) -> Result<(), StorageError>;
}

/// Opens the configured backend. Elasticsearch is reached lazily, so a dead cluster at
/// start is a failing check; a local SQLite file that cannot be created is an error.
pub async fn connect(config: &StorageConfig) -> Result<Arc<dyn ResourceStorage>, StorageError> {
    Ok(match config {
        StorageConfig::Sqlite { path } => Arc::new(sqlite::SqliteStorage::open(path).await?),
        StorageConfig::Elasticsearch(es) => Arc::new(elasticsearch::ElasticStorage::new(es)?),
    })
}
