//! MySQL or MariaDB. The pool connects lazily: a server that is down at start is a failing
//! check (migrations run on the first successful connection), and the pool reconnects
//! when it returns.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use karpor_config::ConfigIssue;
use karpor_core::SecretSource;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::OnceCell;

use super::{Pool, SqlStore};
use crate::error::from_sqlx;
use crate::StoreError;

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/mysql");

// Below the default check timeout, so a refused connection is told from a slow one in
// time for the check to say which.
const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(500);
const DIAGNOSE_TIMEOUT: Duration = Duration::from_millis(400);

/// The connection options a `metadata.url` says. The URL holds the password: the issue
/// says what is wrong without echoing it.
pub(crate) fn mysql_options(url: &str) -> Result<MySqlConnectOptions, ConfigIssue> {
    let refused = || ConfigIssue::new("metadata.url", "is not a valid mysql:// URL");
    // sqlx reads any scheme as MySQL's; another database's URL is a mistake to name.
    if !(url.starts_with("mysql://") || url.starts_with("mariadb://")) {
        return Err(refused());
    }
    MySqlConnectOptions::from_str(url).map_err(|_| refused())
}

pub(crate) async fn connect_mysql(url: &SecretSource) -> Result<SqlStore, StoreError> {
    let options = mysql_options(url.resolve()?.expose())
        .map_err(|issue| StoreError::Misconfigured(issue.to_string()))?;
    let migrated = Arc::new(OnceCell::new());
    let pool = MySqlPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .after_connect(move |connection, _| {
            let migrated = migrated.clone();
            Box::pin(async move {
                // Once per process, on the first connection that succeeds. `run` is not
                // usable on this borrowed connection ("Acquire is not general enough");
                // `run_direct` is sqlx's way around that: all migrations, none skipped.
                migrated
                    .get_or_try_init(|| async {
                        MIGRATIONS.run_direct(None, connection, false).await
                    })
                    .await
                    .map_err(|e| sqlx::Error::Migrate(Box::new(e)))?;
                Ok(())
            })
        })
        .connect_lazy_with(options.clone());
    Ok(SqlStore::new(Pool::Mysql(pool), "mysql", Some(options)))
}

/// The pool retries refused connections until its acquire timeout, so a dead server
/// surfaces as a pool timeout. One direct connection tells refused (unreachable) from
/// slow (timeout).
pub(super) async fn diagnose_pool_timeout(options: &MySqlConnectOptions) -> StoreError {
    match tokio::time::timeout(DIAGNOSE_TIMEOUT, options.connect()).await {
        Ok(Ok(connection)) => {
            let _ = MySqlConnection::close(connection).await;
            StoreError::Timeout
        }
        Ok(Err(e)) => from_sqlx(e),
        Err(_) => StoreError::Timeout,
    }
}
