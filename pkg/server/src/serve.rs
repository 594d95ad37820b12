//! The listener: HTTP/1.1 and HTTP/2 (plain or TLS) through hyper, with every connection
//! bounded. A client gets `header_read_timeout` to send a request's head (and to finish
//! a TLS handshake), a connection with no bytes either way for `idle_timeout` is closed,
//! and at most `max` connections are served at once (the rest wait in the kernel's
//! backlog). On stop, accepting ends, open connections finish their requests within the
//! grace period, and whatever is left is dropped.

use std::io;
use std::net::TcpListener;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// PEM files for TLS (`server.tls`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl TlsConfig {
    /// `(key, problem)`: both files must be readable.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (key, path) in [("cert_file", &self.cert_file), ("key_file", &self.key_file)] {
            if let Err(e) = std::fs::metadata(path) {
                return Err((
                    format!("server.tls.{key}"),
                    format!("cannot read {}: {e}", path.display()),
                ));
            }
        }
        Ok(())
    }
}

/// `server.connections`: what one client may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// How long a client has to send a request's head (and to finish a TLS handshake).
    /// On HTTP/1.1 this also bounds a keep-alive connection waiting for its next request.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// A connection with no bytes read or written for this long is closed.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog.
    pub max: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max: 10_000,
        }
    }
}

impl ConnectionLimits {
    /// `(key, problem)` for what types cannot say; `request_timeout` must fit in the
    /// idle timeout, or a slow answer would lose its connection.
    pub fn validate(&self, request_timeout: Duration) -> Result<(), (String, String)> {
        if self.header_read_timeout.is_zero() {
            return Err((
                "server.connections.header_read_timeout".into(),
                "must be above zero".into(),
            ));
        }
        if self.idle_timeout <= request_timeout {
            return Err((
                "server.connections.idle_timeout".into(),
                "must be above server.limits.request_timeout".into(),
            ));
        }
        if self.max == 0 {
            return Err(("server.connections.max".into(), "must be at least 1".into()));
        }
        Ok(())
    }
}

/// Serves `router` on `listener` until `stop` is cancelled, then stops accepting and
/// gives in-flight requests up to `grace` to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsConfig>,
    limits: ConnectionLimits,
    stop: CancellationToken,
    grace: Duration,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let acceptor = match tls {
        Some(files) => Some(tls_acceptor(files).await?),
        None => None,
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(256)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    let slots = Arc::new(Semaphore::new(limits.max));
    let connections = TaskTracker::new();
    // Past the grace period, what is left is dropped.
    let dropped = CancellationToken::new();
    loop {
        let slot = tokio::select! {
            _ = stop.cancelled() => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            router: router.clone(),
            builder: builder.clone(),
            acceptor: acceptor.clone(),
            limits,
            stop: stop.clone(),
            dropped: dropped.clone(),
        };
        connections.spawn(async move {
            let _slot = slot;
            connection.run(stream).await;
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(grace, connections.wait())
        .await
        .is_err()
    {
        tracing::info!(
            open = connections.len(),
            "grace period over; dropping the connections left"
        );
        dropped.cancel();
        connections.wait().await;
    }
    Ok(())
}

async fn tls_acceptor(files: TlsConfig) -> io::Result<TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    // One process-wide crypto provider; ring needs no C toolchain beyond cc.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (certs, key) = tokio::task::spawn_blocking(move || {
        let certs = CertificateDer::pem_file_iter(&files.cert_file)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| io::Error::other(format!("{}: {e}", files.cert_file.display())))?;
        let key = PrivateKeyDer::from_pem_file(&files.key_file)
            .map_err(|e| io::Error::other(format!("{}: {e}", files.key_file.display())))?;
        Ok::<_, io::Error>((certs, key))
    })
    .await
    .map_err(io::Error::other)??;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(io::Error::other)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

struct Connection {
    router: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    acceptor: Option<TlsAcceptor>,
    limits: ConnectionLimits,
    stop: CancellationToken,
    dropped: CancellationToken,
}

impl Connection {
    async fn run(self, stream: tokio::net::TcpStream) {
        let activity = Activity::default();
        match self.acceptor.clone() {
            None => {
                self.serve(Watched::new(stream, activity.clone()), activity)
                    .await
            }
            Some(acceptor) => {
                let handshake =
                    tokio::time::timeout(self.limits.header_read_timeout, acceptor.accept(stream));
                let stream = match handshake.await {
                    Ok(Ok(stream)) => stream,
                    // A failed or slow handshake is the client's problem, not ours.
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
                self.serve(Watched::new(stream, activity.clone()), activity)
                    .await
            }
        }
    }

    async fn serve<I>(self, io: Watched<I>, activity: Activity)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let service = TowerToHyperService::new(
            self.router
                .map_request(|request: http::Request<Incoming>| request.map(axum::body::Body::new)),
        );
        let connection = self.builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(connection);
        let mut closing = false;
        let check_every = (self.limits.idle_timeout / 4).max(Duration::from_millis(100));
        loop {
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = self.stop.cancelled(), if !closing => {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
                _ = self.dropped.cancelled() => return,
                _ = tokio::time::sleep(check_every) => {
                    if activity.quiet_for() >= self.limits.idle_timeout {
                        tracing::debug!("closing an idle connection");
                        return;
                    }
                }
            }
        }
    }
}

/// When a connection last moved a byte.
#[derive(Clone)]
struct Activity {
    epoch: Instant,
    last_millis: Arc<AtomicU64>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            epoch: Instant::now(),
            last_millis: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Activity {
    fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last_millis.store(now, Ordering::Relaxed);
    }

    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_millis.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}

/// A stream that records its activity.
struct Watched<I> {
    inner: I,
    activity: Activity,
}

impl<I> Watched<I> {
    fn new(inner: I, activity: Activity) -> Self {
        Watched { inner, activity }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
