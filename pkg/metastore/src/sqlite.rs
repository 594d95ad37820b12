//! The embedded default: a SQLite file in WAL mode, no server needed.

use std::path::Path;

use async_trait::async_trait;
use sqlx::sqlite::SqlitePool;

use crate::error::from_sqlx;
use crate::{MetadataStore, StoreError};

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let pool = karpor_core::sqlite::open_pool(path, 4)
            .await
            .map_err(StoreError::Misconfigured)?;
        Ok(SqliteStore { pool })
    }
}

#[async_trait]
impl MetadataStore for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(from_sqlx)
    }
}
