//! Elasticsearch (or OpenSearch) through the official client.

use std::time::Duration;

use async_trait::async_trait;
use elasticsearch::auth::Credentials;
use elasticsearch::cluster::ClusterHealthParts;
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::Elasticsearch;
use serde_json::Value;

use crate::config::ElasticConfig;
use crate::{ResourceStorage, StorageError};

pub struct ElasticStorage {
    client: Elasticsearch,
}

impl ElasticStorage {
    pub fn new(config: &ElasticConfig) -> Result<Self, StorageError> {
        let url = url::Url::parse(&config.url)
            .map_err(|e| StorageError::Misconfigured(format!("storage.url is not a URL: {e}")))?;
        let mut transport = TransportBuilder::new(SingleNodeConnectionPool::new(url))
            .timeout(Duration::from_secs(5));
        if let Some(user) = &config.username {
            let password = match &config.password {
                Some(p) => p
                    .resolve()
                    .map_err(|e| StorageError::Misconfigured(e.to_string()))?
                    .expose()
                    .to_owned(),
                None => String::new(),
            };
            transport = transport.auth(Credentials::Basic(user.clone(), password));
        }
        let transport = transport
            .build()
            .map_err(|e| StorageError::Misconfigured(e.to_string()))?;
        Ok(ElasticStorage {
            client: Elasticsearch::new(transport),
        })
    }
}

#[async_trait]
impl ResourceStorage for ElasticStorage {
    fn backend(&self) -> &'static str {
        "elasticsearch"
    }

    /// `_cluster/health`: green and yellow serve (yellow is a single node's normal
    /// state), red does not. The `status` field is the one to read.
    async fn ping(&self) -> Result<(), StorageError> {
        let response = self
            .client
            .cluster()
            .health(ClusterHealthParts::None)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    StorageError::Timeout
                } else {
                    StorageError::Unavailable(e.to_string())
                }
            })?;
        let code = response.status_code().as_u16();
        if code == 401 || code == 403 {
            return Err(StorageError::Unauthorized(format!(
                "_cluster/health answered {code}"
            )));
        }
        let body: Value = response
            .json()
            .await
            .map_err(|e| StorageError::Unavailable(e.to_string()))?;
        match body["status"].as_str() {
            Some("green" | "yellow") => Ok(()),
            Some("red") => Err(StorageError::StatusRed),
            _ => Err(StorageError::Unavailable(format!(
                "_cluster/health answered {code} without a status"
            ))),
        }
    }
}
