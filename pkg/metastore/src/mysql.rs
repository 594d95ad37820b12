//! MySQL or MariaDB through sqlx. The pool connects lazily: a server that is down at
//! start is a failing check, and the pool reconnects when it returns.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use karpor_core::SecretSource;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use crate::error::from_sqlx;
use crate::{MetadataStore, StoreError};

pub struct MysqlStore {
    pool: MySqlPool,
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
            .acquire_timeout(Duration::from_secs(1))
            .connect_lazy_with(options);
        Ok(MysqlStore { pool })
    }
}

#[async_trait]
impl MetadataStore for MysqlStore {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(from_sqlx)
    }
}
