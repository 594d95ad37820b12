//! Opening an embedded SQLite file the way every karpor backend wants it: the directory
//! created 0700 and the files kept 0600 (they hold cluster credentials and objects), WAL
//! mode (readers never block the writer), a busy timeout, a bounded pool.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

/// Opens (creating if needed) the database at `path`. The error names the path.
pub async fn open_pool(path: &Path, max_connections: u32) -> Result<SqlitePool, String> {
    open_pool_tuned(path, max_connections, |options| options).await
}

/// As [`open_pool`], with the caller's settings (pragmas) on top of the common ones.
pub async fn open_pool_tuned(
    path: &Path,
    max_connections: u32,
    tune: impl FnOnce(SqliteConnectOptions) -> SqliteConnectOptions,
) -> Result<SqlitePool, String> {
    let files = [
        path.to_path_buf(),
        suffixed(path, "-wal"),
        suffixed(path, "-shm"),
    ];
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    tokio::task::spawn_blocking(move || {
        crate::private_file::create_dir(&dir)
            .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
        // New files are private by the process's umask; older ones are made so here.
        crate::private_file::tighten(&files);
        Ok::<_, String>(())
    })
    .await
    .map_err(|e| e.to_string())??;
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(5));
    SqlitePoolOptions::new()
        .max_connections(max_connections)
        // A local file: a busy machine can take a second to open it, which must not fail a
        // start. Probes stay bounded by the health checker's own timeouts.
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(tune(options))
        .await
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

fn suffixed(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn creates_the_directory_and_uses_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/db.sqlite");
        let pool = open_pool(&path, 1).await.unwrap();
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        assert!(path.exists());
    }

    #[tokio::test]
    async fn an_unwritable_place_names_the_path() {
        let err = open_pool(Path::new("/proc/karpor/db.sqlite"), 1)
            .await
            .unwrap_err();
        assert!(err.contains("/proc/karpor"), "{err}");
    }
}
