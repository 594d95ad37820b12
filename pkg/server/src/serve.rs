use std::io;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use axum_server::Handle;
use tokio_util::sync::CancellationToken;

/// PEM files for TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// Serves `router` on `listener` until `stop` is cancelled, then stops accepting and
/// gives in-flight requests up to `grace` to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsFiles>,
    stop: CancellationToken,
    grace: Duration,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let handle = Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        stopper.graceful_shutdown(Some(grace));
    });
    let service = router.into_make_service();
    match tls {
        None => {
            axum_server::from_tcp(listener)
                .handle(handle)
                .serve(service)
                .await
        }
        Some(files) => {
            // One process-wide crypto provider; ring needs no C toolchain beyond cc.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let config = RustlsConfig::from_pem_file(&files.cert_file, &files.key_file).await?;
            axum_server::from_tcp_rustls(listener, config)
                .handle(handle)
                .serve(service)
                .await
        }
    }
}
