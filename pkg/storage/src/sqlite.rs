//! The embedded default: resource documents in their own SQLite file beside the metadata
//! database, so resyncing storage never touches the records of clusters and rules.

use std::path::Path;

use async_trait::async_trait;
use sqlx::sqlite::SqlitePool;

use crate::{ResourceStorage, StorageError};

pub struct SqliteStorage {
    pool: SqlitePool,
}

impl SqliteStorage {
    pub async fn open(path: &Path) -> Result<Self, StorageError> {
        let pool = karpor_core::sqlite::open_pool(path, 4)
            .await
            .map_err(StorageError::Misconfigured)?;
        Ok(SqliteStorage { pool })
    }
}

#[async_trait]
impl ResourceStorage for SqliteStorage {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<(), StorageError> {
        match sqlx::query("SELECT 1").execute(&self.pool).await {
            Ok(_) => Ok(()),
            Err(sqlx::Error::PoolTimedOut) => Err(StorageError::Timeout),
            Err(e) => Err(StorageError::Unavailable(e.to_string())),
        }
    }
}
