//! etcd through etcd-client. The client is made on first use and kept; its channel
//! reconnects by itself, so a restarted etcd is picked up without a new client.

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tokio::sync::OnceCell;

use crate::config::{EtcdConfig, EtcdTls};
use crate::{MetadataStore, StoreError};

pub struct EtcdStore {
    endpoints: Vec<String>,
    options: ConnectOptions,
    client: OnceCell<Client>,
}

impl EtcdStore {
    pub fn new(config: &EtcdConfig) -> Result<Self, StoreError> {
        if config.endpoints.is_empty() {
            return Err(StoreError::Misconfigured(
                "metadata.etcd.endpoints is empty".to_owned(),
            ));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(2));
        if let Some(user) = &config.username {
            let password = match &config.password {
                Some(p) => p.resolve()?.expose().to_owned(),
                None => String::new(),
            };
            options = options.with_user(user.clone(), password);
        }
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls_options(tls)?);
        }
        Ok(EtcdStore {
            endpoints: config.endpoints.clone(),
            options,
            client: OnceCell::new(),
        })
    }

    async fn client(&self) -> Result<Client, StoreError> {
        self.client
            .get_or_try_init(|| async {
                Client::connect(&self.endpoints, Some(self.options.clone()))
                    .await
                    .map_err(from_etcd)
            })
            .await
            .cloned()
    }
}

fn tls_options(tls: &EtcdTls) -> Result<TlsOptions, StoreError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| StoreError::Misconfigured(format!("cannot read {}: {e}", path.display())))
    };
    let mut options = TlsOptions::new().ca_certificate(Certificate::from_pem(read(&tls.ca_file)?));
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            options = options.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        (None, None) => {}
        _ => {
            return Err(StoreError::Misconfigured(
                "metadata.etcd.tls needs both cert_file and key_file".to_owned(),
            ))
        }
    }
    Ok(options)
}

fn from_etcd(e: etcd_client::Error) -> StoreError {
    match &e {
        etcd_client::Error::GRpcStatus(status)
            if matches!(
                status.code(),
                tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
            ) =>
        {
            StoreError::Unauthorized(e.to_string())
        }
        etcd_client::Error::GRpcStatus(status)
            if status.code() == tonic::Code::DeadlineExceeded =>
        {
            StoreError::Timeout
        }
        _ => StoreError::Unavailable(e.to_string()),
    }
}

#[async_trait]
impl MetadataStore for EtcdStore {
    fn backend(&self) -> &'static str {
        "etcd"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        client.status().await.map(drop).map_err(from_etcd)
    }
}
