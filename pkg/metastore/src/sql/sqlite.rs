use std::path::Path;

use super::{Pool, SqlStore};
use crate::StoreError;

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// Opens the embedded default (WAL mode) and brings its schema up to date.
pub(crate) async fn open_sqlite(path: &Path) -> Result<SqlStore, StoreError> {
    let pool = karpor_core::sqlite::open_pool(path, 4)
        .await
        .map_err(StoreError::Misconfigured)?;
    MIGRATIONS
        .run(&pool)
        .await
        .map_err(|e| StoreError::Misconfigured(format!("migrating {}: {e}", path.display())))?;
    Ok(SqlStore::new(Pool::Sqlite(pool), "sqlite", None))
}
