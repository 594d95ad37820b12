//! The API as the benchmarks serve it: the real router over SQLite stores in a temporary
//! directory, one viewer token, on loopback with `TCP_NODELAY` as karpor's own server
//! sets it (karpor-server's serve.rs: a frame is sent when written).

use std::sync::Arc;

use axum::serve::ListenerExt;
use karpor_api::{ApiParts, Authenticator, LimitsConfig, LiveBounds, Role};
use karpor_metastore::MetastoreConfig;
use karpor_storage::{Storage, StorageConfig};
use prometheus_client::registry::Registry;

pub(crate) const TOKEN: &str = "bench-token";

/// The stores, empty, for the benchmark to fill before serving.
pub(crate) async fn stores() -> (karpor_metastore::Metastore, Arc<dyn Storage>) {
    let dir = tempfile::tempdir().unwrap().keep();
    let metastore = karpor_metastore::connect(&MetastoreConfig::Sqlite {
        path: dir.join("metadata.db"),
        encryption_key_file: None,
    })
    .await
    .unwrap();
    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: dir.join("resources.db"),
    })
    .await
    .unwrap();
    (metastore, storage)
}

/// The API over `stores`, with `limits` and the model service `ai` makes (from the same
/// metrics registry), served on a loopback port.
pub(crate) async fn serve(
    (metastore, storage): (karpor_metastore::Metastore, Arc<dyn Storage>),
    limits: LimitsConfig,
    ai: impl FnOnce(&mut Registry) -> Option<karpor_ai::Ai>,
) -> std::net::SocketAddr {
    let mut registry = Registry::default();
    let exec = Arc::new(karpor_kube::ExecSettings::default());
    let router = karpor_api::routes(ApiParts {
        metastore,
        storage,
        sync: None,
        exec: exec.clone(),
        auth: Authenticator::new(
            vec![("bench".into(), Some(Role::Viewer), TOKEN.into())],
            None,
        ),
        token_review: None,
        read_only: false,
        pod_logs: Role::Admin,
        live: LiveBounds::new(limits.live.clone(), &mut registry),
        limits,
        audit: Default::default(),
        clients: karpor_syncer::client_cache(exec),
        rule_limits: Default::default(),
        ai: ai(&mut registry),
        agents: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    address
}
