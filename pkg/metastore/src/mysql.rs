//! MySQL or MariaDB through sqlx. The pool connects lazily: a server that is down at
//! start is a failing check, and the pool reconnects when it returns.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use karpor_core::SecretSource;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection};

use crate::error::from_sqlx;
use crate::{MetadataStore, StoreError};

// Below the default check timeout, so a refused connection is told from a slow one in
// time for the check to say which.
const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(500);
const DIAGNOSE_TIMEOUT: Duration = Duration::from_millis(400);

pub struct MysqlStore {
    pool: MySqlPool,
    options: MySqlConnectOptions,
}

impl MysqlStore {
    pub fn new(url: &SecretSource) -> Result<Self, StoreError> {
        let url = url.resolve()?;
        // The URL holds the password: say what is wrong without echoing it.
        let options = MySqlConnectOptions::from_str(url.expose()).map_err(|_| {
            StoreError::Misconfigured("metadata.url is not a valid mysql:// URL".to_owned())
        })?;
        let pool = MySqlPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(options.clone());
        Ok(MysqlStore { pool, options })
    }

    /// The pool retries refused connections until its acquire timeout, so a dead server
    /// surfaces as a pool timeout. One direct connection tells refused (unreachable) from
    /// slow (timeout).
    async fn diagnose_pool_timeout(&self) -> StoreError {
        match tokio::time::timeout(DIAGNOSE_TIMEOUT, self.options.connect()).await {
            Ok(Ok(connection)) => {
                let _ = MySqlConnection::close(connection).await;
                StoreError::Timeout
            }
            Ok(Err(e)) => from_sqlx(e),
            Err(_) => StoreError::Timeout,
        }
    }
}

#[async_trait]
impl MetadataStore for MysqlStore {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        match sqlx::query("SELECT 1").execute(&self.pool).await {
            Ok(_) => Ok(()),
            Err(sqlx::Error::PoolTimedOut) => Err(self.diagnose_pool_timeout().await),
            Err(e) => Err(from_sqlx(e)),
        }
    }
}
