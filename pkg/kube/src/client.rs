//! A kube-rs client for a stored kubeconfig, built without karpor touching its own host:
//! the kubeconfig must be self-contained, an exec user's command and variables must be
//! allowed, its server must not be a link-local or metadata address (by its text, and by
//! what its name resolves to, checked before anything runs or connects), and the plugin
//! runs through [`ExecRunner`] (async, bounded) instead of kube-rs's own exec
//! support (a blocking process with karpor's whole environment). A token from a plugin
//! is renewed before it expires by a layer in front of kube-rs's stack.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use futures::future::BoxFuture;
use http::header::AUTHORIZATION;
use http::{HeaderValue, Request};
use kube::client::{Body, ClientBuilder};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use tokio::sync::Mutex;
use tower::{BoxError, Layer, Service};

use crate::exec::{Credential, ExecError, ExecRunner, ExecSettings};
use crate::kubeconfig::{self, Problem};

/// How long a failed plugin run (or a failed build, in [`crate::ClientCache`]) is answered
/// from memory before it is tried again, so a broken plugin is not run for every request.
pub(crate) const RETRY_FAILED_AFTER: Duration = Duration::from_secs(5);

/// Network timeouts of a client.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    /// Longest silence between two reads; watches need more than the server's watch
    /// timeout (290 s).
    pub read: Option<Duration>,
}

/// A client and, when its credential is a certificate from an exec plugin, when to build
/// a new one.
pub struct ClusterClient {
    pub client: Client,
    pub renew_at: Option<Instant>,
}

/// Why no client could be made: words safe for logs and callers.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Kubeconfig(#[from] Problem),
    #[error("{0}")]
    Exec(#[from] ExecError),
    #[error("the kubeconfig is not usable: {0}")]
    Unusable(String),
}

/// Parses, checks and makes a client of a kubeconfig's text (its current context).
pub async fn connect(
    text: &str,
    exec: &Arc<ExecSettings>,
    timeouts: Timeouts,
) -> Result<ClusterClient, ClientError> {
    let config = crate::parse_off_runtime(text.to_owned()).await?;
    let config = kubeconfig::select(&config, None)?;
    build(config, exec, timeouts).await
}

/// A client for a selected (minified) kubeconfig.
pub async fn build(
    mut config: Kubeconfig,
    exec: &Arc<ExecSettings>,
    timeouts: Timeouts,
) -> Result<ClusterClient, ClientError> {
    kubeconfig::self_contained(&config)?;
    exec.check(&config)?;
    if !exec.allow_link_local_servers {
        crate::outbound::check_resolved(&config, timeouts.connect).await?;
    }
    let plugin = config
        .auth_infos
        .first_mut()
        .and_then(|named| named.auth_info.as_mut())
        .and_then(|info| info.exec.take());
    let mut source = None;
    let mut renew_at = None;
    if let Some(plugin) = plugin {
        let runner = ExecRunner::new(plugin, exec.clone());
        let credential = runner.run().await?;
        if let Some((cert, key)) = &credential.client_certificate {
            let info = config.auth_infos[0]
                .auth_info
                .get_or_insert_with(Default::default);
            info.client_certificate_data = Some(STANDARD.encode(cert));
            info.client_key_data = Some(STANDARD.encode(key).into());
            renew_at = credential.renew_at;
        }
        if credential.token.is_some() {
            source = Some(Arc::new(TokenSource::new(runner, credential)));
        }
    }
    let options = KubeConfigOptions::default();
    let mut client_config = kube::Config::from_custom_kubeconfig(config, &options)
        .await
        .map_err(|e| ClientError::Unusable(crate::describe::describe_unusable(&e)))?;
    client_config.connect_timeout = Some(timeouts.connect);
    client_config.read_timeout = timeouts.read;
    // An API server that answers 429/503 is failing now: health checks and the syncer's
    // own backoff must see it, not minutes of retries inside the client.
    client_config.default_retry = false;
    let builder = ClientBuilder::try_from(client_config)
        .map_err(|e| ClientError::Unusable(crate::describe::describe_unusable(&e)))?;
    let client = match source {
        Some(source) => builder.with_layer(&ExecAuthLayer { source }).build(),
        None => builder.build(),
    };
    Ok(ClusterClient { client, renew_at })
}

/// The current token of an exec plugin, run again when it is due.
struct TokenSource {
    runner: ExecRunner,
    state: Mutex<TokenState>,
}

struct TokenState {
    header: Option<(HeaderValue, Option<Instant>)>,
    failed: Option<(ExecError, Instant)>,
}

impl TokenSource {
    fn new(runner: ExecRunner, first: Credential) -> Self {
        TokenSource {
            runner,
            state: Mutex::new(TokenState {
                header: header_of(&first),
                failed: None,
            }),
        }
    }

    async fn header(&self) -> Result<HeaderValue, ExecError> {
        let mut state = self.state.lock().await;
        if let Some((header, renew_at)) = &state.header {
            if renew_at.is_none_or(|at| Instant::now() < at) {
                return Ok(header.clone());
            }
        }
        if let Some((error, at)) = &state.failed {
            if at.elapsed() < RETRY_FAILED_AFTER {
                return Err(error.clone());
            }
        }
        match self.runner.run().await {
            Ok(credential) => {
                state.header = header_of(&credential);
                state.failed = None;
                state
                    .header
                    .as_ref()
                    .map(|(h, _)| h.clone())
                    .ok_or(ExecError::Empty)
            }
            Err(e) => {
                state.failed = Some((e.clone(), Instant::now()));
                Err(e)
            }
        }
    }
}

fn header_of(credential: &Credential) -> Option<(HeaderValue, Option<Instant>)> {
    let token = credential.token.as_ref()?;
    let mut header = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    header.set_sensitive(true);
    Some((header, credential.renew_at))
}

struct ExecAuthLayer {
    source: Arc<TokenSource>,
}

impl<S> Layer<S> for ExecAuthLayer {
    type Service = ExecAuth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ExecAuth {
            inner,
            source: self.source.clone(),
            pending: None,
            ready: None,
        }
    }
}

/// Adds the plugin's token to every request. The token is fetched in `poll_ready`, so a
/// refresh holds requests back rather than sending them without credentials; a failed
/// refresh fails the request, never the service (kube-rs buffers it, and a buffered
/// service that errors in `poll_ready` is closed for good).
struct ExecAuth<S> {
    inner: S,
    source: Arc<TokenSource>,
    pending: Option<BoxFuture<'static, Result<HeaderValue, ExecError>>>,
    ready: Option<Result<HeaderValue, ExecError>>,
}

impl<S> Service<Request<Body>> for ExecAuth<S>
where
    S: Service<Request<Body>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        if self.ready.is_none() {
            let source = self.source.clone();
            let pending = self
                .pending
                .get_or_insert_with(|| Box::pin(async move { source.header().await }));
            let result = ready!(pending.as_mut().poll(cx));
            self.pending = None;
            self.ready = Some(result);
        }
        match &self.ready {
            Some(Ok(_)) => self.inner.poll_ready(cx).map_err(Into::into),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        match self.ready.take() {
            Some(Ok(header)) => {
                request.headers_mut().insert(AUTHORIZATION, header);
                let call = self.inner.call(request);
                Box::pin(async move { call.await.map_err(Into::into) })
            }
            Some(Err(e)) => Box::pin(async move { Err(BoxError::from(e)) }),
            None => Box::pin(async { Err(BoxError::from("called before poll_ready")) }),
        }
    }
}
