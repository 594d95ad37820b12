//! The listener: HTTP/1.1 and HTTP/2 (plain or TLS) through hyper, with every connection
//! bounded. A client gets `header_read_timeout` to send a request's head (and to finish
//! a TLS handshake), a connection with no request in flight for `idle_timeout` is closed
//! (with a GOAWAY on HTTP/2, whatever pings say) as is one with no bytes either way for
//! that long, and at most `max` connections are served at once. When all are taken, the
//! connection idle longest is closed to make room for the next client (a kubelet's probe
//! must not wait behind hoarded connections); with none idle, clients wait in the
//! kernel's backlog. On stop, accepting ends, open connections finish their requests
//! within the grace period, and whatever is left is dropped.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::TcpListener;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use karpor_config::ConfigIssue;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::guard::Scheme;

/// How often a client that finds every slot taken looks again for an idle connection
/// to close, while none is (or the one closed for it has not let go yet).
const ROOM_RETRY: Duration = Duration::from_millis(50);
/// At most this many idle connections are closed at once to make room (as nginx does
/// when short of connections): one look through them all serves the next clients too.
const ROOM_BATCH: usize = 32;
/// An HTTP/1.1 connection whose last answer went out less than this ago is not closed to
/// make room: its client is likely sending the next request on it right now, and HTTP/1.1
/// has no way to say "closing" that such a request would see (HTTP/2 has GOAWAY).
const HTTP1_REUSE_GRACE: Duration = Duration::from_secs(1);
/// The shortest wait between two looks at a connection's timeouts, so that a deadline
/// just passed is not looked at in a loop.
const MIN_LOOK: Duration = Duration::from_millis(10);

/// PEM files for TLS (`server.tls`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl TlsConfig {
    /// both files must be readable.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        for (key, path) in [("cert_file", &self.cert_file), ("key_file", &self.key_file)] {
            if let Err(e) = std::fs::metadata(path) {
                return Err(ConfigIssue::new(
                    format!("server.tls.{key}"),
                    format!("cannot read {}: {e}", path.display()),
                ));
            }
        }
        Ok(())
    }
}

/// How a listener speaks TLS: from PEM files (`server.tls`), or a config made in the
/// process (the agent listener's, whose certificate and client roots come from the
/// metadata store).
#[derive(Clone)]
pub enum Tls {
    Files(TlsConfig),
    Config(Arc<rustls::ServerConfig>),
}

/// The certificate a client presented and the TLS config verified, in each request's
/// extensions (absent when it presented none).
#[derive(Debug, Clone)]
pub struct ClientCertificate(pub rustls::pki_types::CertificateDer<'static>);

/// `server.connections`: what one client may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// How long a client has to send a request's head (and to finish a TLS handshake).
    /// On HTTP/1.1 this also bounds a keep-alive connection waiting for its next request.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight, or no bytes read or written, for this
    /// long is closed.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Connections served at once; past it, the one idle longest is closed for a new
    /// client, and with none idle, new clients wait in the listen backlog.
    pub max: usize,
    /// Requests at once on one HTTP/2 connection.
    pub max_streams: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max: 10_000,
            max_streams: 256,
        }
    }
}

impl ConnectionLimits {
    /// For what types cannot say; `request_timeout` must fit in the
    /// idle timeout, or a slow answer would lose its connection.
    pub fn validate(&self, request_timeout: Duration) -> Result<(), ConfigIssue> {
        if self.header_read_timeout.is_zero() {
            return Err(ConfigIssue::new(
                "server.connections.header_read_timeout",
                "must be above zero",
            ));
        }
        if self.idle_timeout <= request_timeout {
            return Err(ConfigIssue::new(
                "server.connections.idle_timeout",
                "must be above server.limits.request_timeout",
            ));
        }
        if self.max == 0 {
            return Err(ConfigIssue::new(
                "server.connections.max",
                "must be at least 1",
            ));
        }
        if self.max_streams == 0 {
            return Err(ConfigIssue::new(
                "server.connections.max_streams",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// Serves `router` on `listener` until `stop` is cancelled, then stops accepting and
/// gives in-flight requests up to `grace` to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Tls>,
    limits: ConnectionLimits,
    stop: CancellationToken,
    grace: Duration,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let acceptor = match tls {
        Some(Tls::Files(files)) => Some(tls_acceptor(files).await?),
        Some(Tls::Config(config)) => Some(TlsAcceptor::from(config)),
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
        .max_concurrent_streams(limits.max_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    let slots = Arc::new(Semaphore::new(limits.max));
    let registry = Arc::new(Registry::default());
    let connections = TaskTracker::new();
    // Past the grace period, what is left is dropped.
    let dropped = CancellationToken::new();
    loop {
        // Accepted before a slot is found, so that room is made only for a client that
        // is there; at most this one is held beyond `max`.
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
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => match make_room(&slots, &registry, limits.max, &stop).await {
                Some(slot) => slot,
                None => break,
            },
        };
        let _ = stream.set_nodelay(true);
        let tracked = Registry::register(&registry);
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
            connection.run(stream, tracked).await;
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

/// A slot for a client that found every one taken: the connections idle longest are
/// closed for it (a few for every 256 slots); with none idle, it waits for one to end or
/// go idle. `None` on stop.
async fn make_room(
    slots: &Arc<Semaphore>,
    registry: &Registry,
    max: usize,
    stop: &CancellationToken,
) -> Option<OwnedSemaphorePermit> {
    let batch = (max / 256).clamp(1, ROOM_BATCH);
    loop {
        let closing = registry.close_idlest(batch);
        if closing > 0 {
            tracing::debug!(closing, "closing the connections idle longest to make room");
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            slot = slots.clone().acquire_owned() => return slot.ok(),
            _ = tokio::time::sleep(ROOM_RETRY) => {}
        }
    }
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
    async fn run(self, stream: tokio::net::TcpStream, tracked: Tracked) {
        let activity = Activity {
            heard: tracked.state.heard.clone(),
            ..Activity::default()
        };
        match self.acceptor.clone() {
            None => {
                let io = Watched::new(stream, activity.clone());
                self.serve(io, (Scheme::Http, None), activity, tracked)
                    .await
            }
            Some(acceptor) => {
                let handshake =
                    tokio::time::timeout(self.limits.header_read_timeout, acceptor.accept(stream));
                let stream = tokio::select! {
                    done = handshake => match done {
                        Ok(Ok(stream)) => stream,
                        // A failed or slow handshake is the client's problem, not ours.
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    },
                    // `notify_one` keeps its wake-up for a waiter that comes later.
                    _ = tracked.state.asked.notified() => return,
                };
                let peer = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|leaf| ClientCertificate(leaf.clone().into_owned()));
                let io = Watched::new(stream, activity.clone());
                self.serve(io, (Scheme::Https, peer), activity, tracked)
                    .await
            }
        }
    }

    async fn serve<I>(
        self,
        io: Watched<I>,
        came: (Scheme, Option<ClientCertificate>),
        activity: Activity,
        tracked: Tracked,
    ) where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let state = &tracked.state;
        let service = counted(self.router, state.clone(), came);
        let connection = self.builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(connection);
        let limits = self.limits;
        // Since when the connection is being closed gracefully, if it is.
        let mut closing: Option<Instant> = None;
        let mut room_wanted = false;
        loop {
            let look = tokio::time::sleep(look_after(limits, &activity, state, closing));
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = self.stop.cancelled(), if closing.is_none() => {
                    closing = Some(Instant::now());
                    connection.as_mut().graceful_shutdown();
                }
                _ = state.asked.notified(), if !room_wanted => {
                    room_wanted = true;
                    connection.as_mut().graceful_shutdown();
                    if state.idle_for().is_some() {
                        // The GOAWAY goes out on this poll. The ping a graceful close then
                        // waits on is the client's to answer, and a client waits for this
                        // slot now.
                        poll_once(connection.as_mut()).await;
                        return;
                    }
                    // A request came in meanwhile: it finishes first.
                    closing.get_or_insert_with(Instant::now);
                }
                _ = self.dropped.cancelled() => return,
                _ = look => match verdict(limits, &activity, state, closing) {
                    Verdict::Keep => {}
                    Verdict::Close => {
                        tracing::debug!("closing a connection with no request in flight");
                        closing = Some(Instant::now());
                        connection.as_mut().graceful_shutdown();
                    }
                    Verdict::Drop(why) => {
                        tracing::debug!(why, "dropping a connection");
                        return;
                    }
                },
            }
        }
    }
}

/// `router` as a hyper service that counts its connection's requests in flight and tells
/// each request how it came (for the Origin check) and which client certificate it
/// came with.
fn counted(
    router: Router,
    state: Arc<ConnectionState>,
    (scheme, peer): (Scheme, Option<ClientCertificate>),
) -> impl hyper::service::Service<
    http::Request<Incoming>,
    Response = http::Response<Body>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
       + Send
       + 'static {
    hyper::service::service_fn(move |request: http::Request<Incoming>| {
        // Counted from the moment hyper hands the request over (inside the connection's
        // poll) until its answer's body is sent or dropped.
        let in_flight = InFlight::start(&state);
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(scheme);
        if let Some(peer) = &peer {
            request.extensions_mut().insert(peer.clone());
        }
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await?;
            Ok(response.map(|body| in_flight.until_sent(body)))
        }
    })
}

/// Polls `future` once.
async fn poll_once<F: Future>(mut future: Pin<&mut F>) {
    std::future::poll_fn(|cx| {
        let _ = future.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await
}

/// What a connection's timeouts say when looked at.
enum Verdict {
    Keep,
    /// No request in flight for `idle_timeout`: closed gracefully (a GOAWAY on HTTP/2).
    Close,
    /// No byte moved for `idle_timeout`, or a graceful close not finished within
    /// `header_read_timeout`: the client is not waited for.
    Drop(&'static str),
}

fn verdict(
    limits: ConnectionLimits,
    activity: &Activity,
    state: &ConnectionState,
    closing: Option<Instant>,
) -> Verdict {
    if activity.quiet_for() >= limits.idle_timeout {
        return Verdict::Drop("no byte moved");
    }
    match closing {
        None if state
            .idle_for()
            .is_some_and(|idle| idle >= limits.idle_timeout) =>
        {
            Verdict::Close
        }
        Some(since) if closed_for(state, since) >= limits.header_read_timeout => {
            Verdict::Drop("a graceful close not finished")
        }
        _ => Verdict::Keep,
    }
}

/// How long until a connection's timeouts are next due a look: when it would have moved
/// no byte for `idle_timeout`, had no request in flight for as long, or, closing, not
/// finished within `header_read_timeout` with no request in flight.
fn look_after(
    limits: ConnectionLimits,
    activity: &Activity,
    state: &ConnectionState,
    closing: Option<Instant>,
) -> Duration {
    let mut due = limits.idle_timeout.saturating_sub(activity.quiet_for());
    match closing {
        None => {
            if let Some(idle) = state.idle_for() {
                due = due.min(limits.idle_timeout.saturating_sub(idle));
            }
        }
        Some(since) if state.idle_for().is_some() => {
            due = due.min(
                limits
                    .header_read_timeout
                    .saturating_sub(closed_for(state, since)),
            );
        }
        // A request in flight while closing: its end restarts the count.
        Some(_) => {}
    }
    due.max(MIN_LOOK)
}

/// How long a closing connection has been closing with no request in flight.
fn closed_for(state: &ConnectionState, since: Instant) -> Duration {
    state
        .idle_for()
        .map_or(Duration::ZERO, |idle| idle.min(since.elapsed()))
}

/// The connections served, so that a new client can be given the room of the one idle
/// longest. The lock is held to add, remove, or look through them; never across an await.
struct Registry {
    /// Every connection's times count from here, so that they compare.
    epoch: Instant,
    open: Mutex<Slots>,
}

/// Connections by place; a place given up is taken by the next connection.
#[derive(Default)]
struct Slots {
    places: Vec<Option<Arc<ConnectionState>>>,
    free: Vec<usize>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            epoch: Instant::now(),
            open: Mutex::new(Slots::default()),
        }
    }
}

impl Registry {
    fn register(registry: &Arc<Registry>) -> Tracked {
        let state = Arc::new(ConnectionState::new(registry.epoch));
        let mut open = registry.lock();
        let place = match open.free.pop() {
            Some(place) => place,
            None => {
                open.places.push(None);
                open.places.len() - 1
            }
        };
        open.places[place] = Some(state.clone());
        drop(open);
        Tracked {
            registry: registry.clone(),
            place,
            state,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the `n` connections idle longest (none asked already) to close; how many
    /// there were. A plain loop over atomics: it runs with the lock held.
    fn close_idlest(&self, n: usize) -> usize {
        let open = self.lock();
        let now = millis_since(self.epoch);
        let grace = HTTP1_REUSE_GRACE.as_millis() as u64;
        // Each time read once: they move while we look, and selection needs fixed keys.
        let mut idle = Vec::with_capacity(open.places.len());
        for state in open.places.iter().flatten() {
            if state.in_flight.load(Ordering::SeqCst) > 0
                || state.room_wanted.load(Ordering::SeqCst)
            {
                continue;
            }
            let since = state.idle_since.load(Ordering::SeqCst);
            let closable = match state.heard.protocol() {
                Protocol::Silent => false,
                Protocol::Http1 => now.saturating_sub(since) >= grace,
                Protocol::Http2 => true,
            };
            if closable {
                idle.push((since, state));
            }
        }
        let n = n.min(idle.len());
        if n > 0 && n < idle.len() {
            idle.select_nth_unstable_by_key(n - 1, |(since, _)| *since);
        }
        for (_, state) in &idle[..n] {
            state.room_wanted.store(true, Ordering::SeqCst);
            state.asked.notify_one();
        }
        n
    }
}

/// A connection's place in the registry, given up when it ends.
struct Tracked {
    registry: Arc<Registry>,
    place: usize,
    state: Arc<ConnectionState>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut open = self.registry.lock();
        open.places[self.place] = None;
        open.free.push(self.place);
    }
}

/// A connection's requests in flight, and since when it has had none.
struct ConnectionState {
    /// The registry's.
    epoch: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `epoch` to when `in_flight` last fell to zero (or the connection
    /// opened).
    idle_since: AtomicU64,
    /// A new client needs this connection's slot (`asked` wakes the connection).
    room_wanted: AtomicBool,
    asked: Notify,
    /// What the client's first bytes said. One that has sent nothing yet is about to ask
    /// (a burst of probes connects first): it is never closed to make room, and its wait
    /// is bounded by `header_read_timeout` anyway.
    heard: Arc<Heard>,
}

impl ConnectionState {
    fn new(epoch: Instant) -> Self {
        ConnectionState {
            epoch,
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(millis_since(epoch)),
            room_wanted: AtomicBool::new(false),
            asked: Notify::new(),
            heard: Arc::new(Heard::default()),
        }
    }

    /// How long since the last request ended (or the connection opened); `None` while one
    /// is in flight.
    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.idle_since.load(Ordering::SeqCst));
        Some(self.epoch.elapsed().saturating_sub(since))
    }
}

/// One request in flight on a connection, until dropped.
struct InFlight(Arc<ConnectionState>);

impl InFlight {
    fn start(state: &Arc<ConnectionState>) -> Self {
        state.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(state.clone())
    }

    /// `body`, holding this request in flight until it is sent (or dropped): a streamed
    /// answer (the event stream) keeps its connection busy.
    fn until_sent(self, body: Body) -> Body {
        Body::new(body.map_frame(move |frame| {
            let _in_flight = &self;
            frame
        }))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The time first: a connection seen idle is never seen with an older one.
        self.0
            .idle_since
            .store(millis_since(self.0.epoch), Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// When a connection last moved a byte.
#[derive(Clone)]
struct Activity {
    epoch: Instant,
    last_millis: Arc<AtomicU64>,
    /// Set from the first bytes read from the client.
    heard: Arc<Heard>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            epoch: Instant::now(),
            last_millis: Arc::new(AtomicU64::new(0)),
            heard: Arc::new(Heard::default()),
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

/// The protocol a connection's client speaks, as its first bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Silent,
    Http1,
    Http2,
}

/// `Protocol`, set once from the first bytes read.
#[derive(Default)]
struct Heard(AtomicU8);

impl Heard {
    /// Every HTTP/2 connection opens with this preface; no HTTP/1.1 request does.
    const HTTP2_PREFACE: &'static [u8] = b"PRI * HTTP/2.0";

    fn first_bytes(&self, bytes: &[u8]) {
        if self.protocol() != Protocol::Silent || bytes.is_empty() {
            return;
        }
        let n = bytes.len().min(Self::HTTP2_PREFACE.len());
        let protocol = if bytes[..n] == Self::HTTP2_PREFACE[..n] {
            Protocol::Http2
        } else {
            Protocol::Http1
        };
        self.set(protocol);
    }

    fn set(&self, protocol: Protocol) {
        self.0.store(protocol as u8, Ordering::SeqCst);
    }

    fn protocol(&self) -> Protocol {
        match self.0.load(Ordering::SeqCst) {
            0 => Protocol::Silent,
            1 => Protocol::Http1,
            _ => Protocol::Http2,
        }
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
            self.activity.heard.first_bytes(&buf.filled()[before..]);
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

fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry whose connections' times began ten seconds ago.
    fn registry_of_ten_seconds() -> Arc<Registry> {
        Arc::new(Registry {
            epoch: Instant::now() - Duration::from_secs(10),
            open: Mutex::new(Slots::default()),
        })
    }

    #[test]
    fn the_first_bytes_say_the_protocol_once() {
        let heard = Heard::default();
        assert_eq!(heard.protocol(), Protocol::Silent);
        heard.first_bytes(b"");
        assert_eq!(heard.protocol(), Protocol::Silent);
        // A preface cut short by the read is still the preface.
        heard.first_bytes(b"PRI * HT");
        assert_eq!(heard.protocol(), Protocol::Http2);
        heard.first_bytes(b"GET / HTTP/1.1\r\n");
        assert_eq!(heard.protocol(), Protocol::Http2);
        let heard = Heard::default();
        heard.first_bytes(b"GET /readyz HTTP/1.1\r\n");
        assert_eq!(heard.protocol(), Protocol::Http1);
        let heard = Heard::default();
        heard.first_bytes(b"PRIVATE");
        assert_eq!(heard.protocol(), Protocol::Http1);
    }

    #[test]
    fn an_http1_connection_just_answered_keeps_its_place() {
        let registry = registry_of_ten_seconds();
        let now = millis_since(registry.epoch);
        let open: Vec<Tracked> = (0..3).map(|_| Registry::register(&registry)).collect();
        let grace = HTTP1_REUSE_GRACE.as_millis() as u64;
        // Answered just now, answered past the grace, never asked anything.
        for (tracked, (since, protocol)) in open.iter().zip([
            (now - grace / 2, Protocol::Http1),
            (now - grace - 500, Protocol::Http1),
            (0, Protocol::Silent),
        ]) {
            tracked.state.idle_since.store(since, Ordering::SeqCst);
            tracked.state.heard.set(protocol);
        }
        assert_eq!(registry.close_idlest(3), 1);
        let asked: Vec<bool> = open
            .iter()
            .map(|t| t.state.room_wanted.load(Ordering::SeqCst))
            .collect();
        assert_eq!(asked, [false, true, false]);
    }

    #[test]
    fn room_is_made_from_the_connections_idle_longest() {
        let registry = registry_of_ten_seconds();
        let open: Vec<Tracked> = (0..4).map(|_| Registry::register(&registry)).collect();
        for (tracked, since) in open.iter().zip([30, 10, 20, 40]) {
            tracked.state.idle_since.store(since, Ordering::SeqCst);
            tracked.state.heard.set(Protocol::Http2);
        }
        // One that has sent nothing yet is never asked, however long it has waited.
        let silent = Registry::register(&registry);
        silent.state.idle_since.store(0, Ordering::SeqCst);
        // The one idle longest has a request in flight: it is not idle.
        let busy = InFlight::start(&open[1].state);
        assert_eq!(registry.close_idlest(2), 2);
        let asked = |open: &[Tracked]| -> Vec<bool> {
            open.iter()
                .map(|t| t.state.room_wanted.load(Ordering::SeqCst))
                .collect()
        };
        assert_eq!(asked(&open), [true, false, true, false]);
        // Those asked already are not asked again.
        assert_eq!(registry.close_idlest(5), 1);
        assert_eq!(registry.close_idlest(1), 0);
        drop(busy);
        assert_eq!(registry.close_idlest(1), 1);
        assert_eq!(asked(&open), [true; 4]);
        assert!(!silent.state.room_wanted.load(Ordering::SeqCst));
        drop((open, silent));
        assert!(registry.lock().places.iter().all(Option::is_none));
    }

    #[test]
    fn a_connection_with_no_request_in_flight_is_closed_then_dropped() {
        let limits = ConnectionLimits {
            idle_timeout: Duration::from_secs(1),
            header_read_timeout: Duration::from_millis(500),
            ..ConnectionLimits::default()
        };
        // Bytes moved just now; no request for 2 s.
        let activity = Activity::default();
        activity.touch();
        let state = ConnectionState::new(Instant::now() - Duration::from_secs(2));
        state.idle_since.store(0, Ordering::SeqCst);
        let now = Some(Instant::now());
        let a_second_ago = Some(Instant::now() - Duration::from_secs(1));
        let idle = |closing| verdict(limits, &activity, &state, closing);
        assert!(matches!(idle(None), Verdict::Close));
        assert!(matches!(idle(now), Verdict::Keep));
        assert!(matches!(idle(a_second_ago), Verdict::Drop(_)));
        assert_eq!(look_after(limits, &activity, &state, None), MIN_LOOK);
        // A request in flight keeps it, closing or not, until bytes stop moving.
        let request = InFlight::start(&Arc::new(ConnectionState::new(Instant::now())));
        let busy = request.0.clone();
        let in_flight = |closing| verdict(limits, &activity, &busy, closing);
        assert!(matches!(in_flight(None), Verdict::Keep));
        assert!(matches!(in_flight(a_second_ago), Verdict::Keep));
        assert!(look_after(limits, &activity, &busy, a_second_ago) > limits.header_read_timeout);
    }
}
