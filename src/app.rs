//! The application: components assembled from config, served until the shutdown signal,
//! then taken down in order (readiness fails, drain, listener closes, workers stop).

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use karpor_api::{local_token, LiveBounds, Role};
use karpor_core::model::ResourceGroupRule;
use karpor_health::{
    HealthChecker, HealthClient, HealthMetrics, HealthReporter, Heartbeat, Membership, Ping,
    UpstreamCheck,
};
use karpor_kube::{ClientCache, ExecSettings};
use karpor_metastore::{Metastore, MetastoreCheck};
use karpor_server::{AllowedHosts, ConnectionLimits, HttpMetrics, RouterParts, TlsConfig};
use karpor_storage::{Storage, StorageCheck};
use karpor_syncer::{OwnersCheck, Syncer, SyncerParts};
use prometheus_client::registry::Registry;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ShutdownConfig};

/// Which process this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `karpor serve`: the server, with the syncer in-process unless configured apart.
    Serve,
    /// `karpor syncer`: the syncer alone, health and metrics on its probe port.
    Syncer,
}

/// What a mode runs: the one place where the two processes differ.
struct Plan {
    name: &'static str,
    listen: SocketAddr,
    /// The REST API and the page.
    api: bool,
    /// The syncer in this process.
    syncer: bool,
    /// TLS is for the server's clients; probe ports stay plain HTTP for kubelets.
    tls: Option<TlsConfig>,
}

impl Mode {
    fn plan(self, config: &Config) -> Plan {
        match self {
            Mode::Serve => Plan {
                name: "serve",
                listen: config.server.listen,
                api: true,
                syncer: config.server.syncer,
                tls: config.server.tls.clone(),
            },
            Mode::Syncer => Plan {
                name: "syncer",
                listen: config.syncer.probe_listen,
                api: false,
                syncer: true,
                tls: None,
            },
        }
    }
}

// The runtime heartbeat ticks often and is stale only after many missed ticks, so a busy
// but live process is never restarted for it.
pub(crate) const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(200);
pub(crate) const HEARTBEAT_STALE_AFTER: Duration = Duration::from_secs(3);

pub(crate) struct Application {
    listener: TcpListener,
    router: axum::Router,
    tls: Option<TlsConfig>,
    connections: ConnectionLimits,
    health: HealthChecker,
    syncer: Option<Syncer>,
    shutdown: ShutdownConfig,
    /// Stops the background work (heartbeat, syncer) after the listener has closed.
    workers: CancellationToken,
    /// The listener agents connect to, when agent mode is configured.
    agents: Option<AgentListener>,
}

/// The agent listener: its socket, routes and TLS (from the hub's authority).
struct AgentListener {
    listener: TcpListener,
    router: axum::Router,
    tls: Arc<rustls::ServerConfig>,
}

/// What both modes open: the stores, the metrics registry, the member clusters' clients.
struct Parts {
    registry: Registry,
    health: HealthChecker,
    metastore: Metastore,
    storage: Arc<dyn Storage>,
    exec: Arc<ExecSettings>,
    clients: Arc<ClientCache>,
    workers: CancellationToken,
}

impl Application {
    /// `address_file`: where to write the bound address once listening.
    pub(crate) async fn build(
        config: Config,
        mode: Mode,
        address_file: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        let plan = mode.plan(&config);
        let mut parts = Parts::open(&config).await?;
        let mut syncer = plan.syncer.then(|| start_syncer(&config, &mut parts));
        register_checks(&config, &parts, syncer.as_ref());
        if let Some(syncer) = &mut syncer {
            syncer.start(parts.workers.clone());
        }
        let agents = match (&config.agents, plan.api) {
            (Some(listener), true) => Some(agent_listener(&config, listener, &parts).await?),
            _ => None,
        };
        let hub = agents.as_ref().map(|(_, hub)| hub.clone());
        if let Some(hub) = &hub {
            tokio::spawn(karpor_api::follow_agent_clusters(
                parts.metastore.clone(),
                hub.clone(),
                parts.health.clone(),
                parts.workers.clone(),
            ));
            let recoveries = karpor_syncer::follow_storage_recoveries(
                parts.storage.clone(),
                config.syncer.settings().storage_probe,
                parts.workers.clone(),
            );
            tokio::spawn(karpor_api::resync_after_storage_outages(
                hub.sessions.clone(),
                recoveries,
                parts.workers.clone(),
            ));
        }
        let (routes, endpoints, check_lines) = if plan.api {
            let (routes, endpoints, lines) =
                api_routes(&config, &mut parts, syncer.as_ref(), hub).await?;
            (routes, endpoints, Some(lines))
        } else {
            (axum::Router::new(), Vec::new(), None)
        };
        let admin_token = match &config.health.admin_token {
            Some(source) => Some(source.resolve()?.expose().to_owned()),
            None => None,
        };
        let http = HttpMetrics::new(&mut parts.registry);
        let router = karpor_server::router(RouterParts {
            health: parts.health.clone(),
            admin_token,
            check_lines,
            metrics: Arc::new(parts.registry),
            with_ui: plan.api,
            dashboard: config.server.dashboard_dir.clone(),
            routes,
            endpoints,
            hosts: AllowedHosts::new(plan.listen, &config.server.allowed_hosts),
            http,
            request_timeout: config.server.limits.request_timeout,
        });
        let listener = bind(&plan, address_file).await?;
        Ok(Application {
            listener,
            router,
            tls: plan.tls,
            connections: config.server.connections,
            health: parts.health,
            syncer,
            shutdown: config.shutdown,
            workers: parts.workers,
            agents: agents.map(|(listener, _)| listener),
        })
    }

    /// Serves on `serving` until `signal` resolves, then: readiness fails at once, the
    /// listener stays open for the drain delay, closes with a grace period for in-flight
    /// requests, and only then do the workers stop.
    ///
    /// Requests are served on a runtime of their own, so a flood of them cannot starve
    /// the syncer, the stores' clients or the health checks (which run where the checker
    /// was made), and `/readyz` stays truthful under load.
    pub(crate) async fn run_until_stopped(
        self,
        serving_runtime: &Handle,
        signal: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let serving = CancellationToken::new();
        let agents = self.agents.map(|agents| {
            serving_runtime.spawn(karpor_server::serve(
                agents.listener,
                agents.router,
                Some(karpor_server::Tls::Config(agents.tls)),
                self.connections,
                serving.clone(),
                self.shutdown.grace_period,
            ))
        });
        let mut server = serving_runtime.spawn(karpor_server::serve(
            self.listener,
            self.router,
            self.tls.map(karpor_server::Tls::Files),
            self.connections,
            serving.clone(),
            self.shutdown.grace_period,
        ));
        tokio::select! {
            _ = signal => {}
            ended = &mut server => {
                self.workers.cancel();
                return match ended {
                    Ok(Ok(())) => Err(anyhow::anyhow!("the server stopped by itself")),
                    Ok(Err(e)) => Err(e).context("the server failed"),
                    Err(e) => Err(e).context("the server task failed"),
                };
            }
        }
        self.health.begin_shutdown();
        tracing::info!(drain_delay = ?self.shutdown.drain_delay, "draining");
        tokio::time::sleep(self.shutdown.drain_delay).await;
        serving.cancel();
        server
            .await
            .context("the server task failed")?
            .context("the server failed while stopping")?;
        if let Some(agents) = agents {
            if let Ok(Err(e)) = agents.await {
                tracing::warn!(error = %e, "the agent listener failed while stopping");
            }
        }
        self.workers.cancel();
        if let Some(syncer) = self.syncer {
            syncer.join().await;
        }
        tracing::info!("stopped");
        Ok(())
    }
}

impl Parts {
    async fn open(config: &Config) -> anyhow::Result<Self> {
        let mut registry = Registry::default();
        // `must_ready` overrides from config are the checker's to apply, to every check.
        let health = HealthChecker::with_overrides(
            config.health.settings(),
            HealthMetrics::new(&mut registry),
            config.health.overrides(),
        );
        let metastore = karpor_metastore::connect(&config.metadata)
            .await
            .context("cannot open the metadata store")?
            .metered(&mut registry);
        let storage = karpor_storage::connect(&config.storage)
            .await
            .context("cannot open the resource storage")?;
        let storage = karpor_storage::metered(storage, &mut registry);
        karpor_server::register_process(&mut registry, env!("CARGO_PKG_VERSION"));
        // One client per member cluster, shared by the syncer and the API's live reads.
        let exec = config.kubernetes.exec_settings();
        let clients = karpor_syncer::client_cache(exec.clone());
        Ok(Parts {
            registry,
            health,
            metastore,
            storage,
            exec,
            clients,
            workers: CancellationToken::new(),
        })
    }
}

fn start_syncer(config: &Config, parts: &mut Parts) -> Syncer {
    Syncer::new(SyncerParts {
        audit: config.audit.clone(),
        member: config.syncer.member(),
        metastore: parts.metastore.clone(),
        storage: parts.storage.clone(),
        health: parts.health.clone(),
        metrics: karpor_syncer::metrics(&mut parts.registry),
        clients: parts.clients.clone(),
        settings: config.syncer.settings(),
    })
}

/// Registration order is print order: Ping, Server, Syncer, Storage, the upstreams (and
/// the syncer's Cluster/NAME checks as clusters start).
fn register_checks(config: &Config, parts: &Parts, syncer: Option<&Syncer>) {
    let heartbeat = Heartbeat::start(
        HEARTBEAT_INTERVAL,
        HEARTBEAT_STALE_AFTER,
        parts.workers.clone(),
    );
    let mut checks: Vec<(Arc<dyn HealthReporter>, Membership)> = vec![
        (Arc::new(Ping), Membership::BOTH),
        (Arc::new(heartbeat), Membership::LIVEZ),
        (
            Arc::new(MetastoreCheck::new(parts.metastore.backend().clone())),
            Membership::READYZ,
        ),
    ];
    match syncer {
        Some(syncer) => checks.push((Arc::new(syncer.check()), Membership::READYZ)),
        // A server without its own syncer still tells whether a live syncer holds
        // every cluster (not critical: it serves from storage meanwhile).
        None => checks.push((
            Arc::new(OwnersCheck::new(
                parts.metastore.clone(),
                config.syncer.settings().lease_ttl,
            )),
            Membership::READYZ,
        )),
    }
    checks.push((
        Arc::new(StorageCheck::new(parts.storage.clone())),
        Membership::READYZ,
    ));
    let client = HealthClient::new(config.health.check_timeout);
    for upstream in &config.readiness.upstreams {
        let check = UpstreamCheck::new(
            upstream.name.clone(),
            upstream.url.clone(),
            upstream.must_ready,
            client.clone(),
        );
        checks.push((Arc::new(check), Membership::UPSTREAM));
    }
    for (check, membership) in checks {
        parts.health.register(check, membership, None);
    }
}

/// The agent listener (`agents:`): the hub's authority made or read from the metadata
/// store, a certificate for the listener's names, the agent routes; and what the API
/// needs to issue join tokens.
async fn agent_listener(
    config: &Config,
    listener: &karpor_agent::config::AgentListenerConfig,
    parts: &Parts,
) -> anyhow::Result<(AgentListener, karpor_api::AgentHub)> {
    let enrollment = karpor_agent::enrollment::Enrollment::new(parts.metastore.clone())
        .with_certificate_lifetime(listener.certificate_lifetime)
        .with_approval(listener.approve_joins);
    let authority = enrollment
        .authority()
        .await
        .context("cannot read or make the agents' certificate authority")?;
    let tls = karpor_agent::tls::hub_server(&authority, &listener.names)
        .context("cannot make the agent listener's certificate")?;
    let sessions = Arc::new(match listener.peer() {
        Some(me) => karpor_api::AgentSessions::with_peers(
            karpor_api::Peers::new(me, parts.metastore.clone(), &authority)
                .context("cannot make the client of the other hub replicas")?,
        ),
        None => karpor_api::AgentSessions::default(),
    });
    let router = karpor_api::agent_routes(karpor_api::AgentParts {
        metastore: parts.metastore.clone(),
        storage: parts.storage.clone(),
        enrollment: enrollment.clone(),
        audit: config.audit.clone(),
        history: config.syncer.settings().history,
        sessions: sessions.clone(),
    });
    let socket = listen(listener.listen)
        .with_context(|| format!("cannot listen on {} (agents.listen)", listener.listen))?;
    tracing::info!(address = %socket.local_addr()?, pin = %authority.pin()?,
        advertised = %listener.advertised(), "listening for agents");
    Ok((
        AgentListener {
            listener: socket,
            router,
            tls,
        },
        karpor_api::AgentHub {
            enrollment,
            advertised: listener.advertised(),
            sessions,
        },
    ))
}

/// The REST API's routes and the lines the page lists them by.
async fn api_routes(
    config: &Config,
    parts: &mut Parts,
    syncer: Option<&Syncer>,
    agents: Option<karpor_api::AgentHub>,
) -> anyhow::Result<(
    axum::Router,
    Vec<String>,
    Arc<dyn karpor_health::LineFilter>,
)> {
    if !config.server.read_only {
        seed_built_ins(&parts.metastore).await;
    }
    let ai = match &config.ai {
        Some(ai) => {
            let ai = karpor_ai::Ai::new(ai, &mut parts.registry).map_err(anyhow::Error::msg)?;
            parts
                .health
                .register(Arc::new(ai.check()), Membership::READYZ, None);
            Some(ai)
        }
        None => None,
    };
    let (routes, lines) = karpor_api::routes_and_check_lines(karpor_api::ApiParts {
        metastore: parts.metastore.clone(),
        storage: parts.storage.clone(),
        sync: syncer.map(Syncer::status),
        exec: parts.exec.clone(),
        auth: authenticator(config).await?,
        token_review: config.auth.token_review.clone(),
        read_only: config.server.read_only,
        pod_logs: config.auth.pod_logs,
        limits: config.server.limits.clone(),
        audit: config.audit.clone(),
        clients: parts.clients.clone(),
        live: LiveBounds::new(config.server.limits.live.clone(), &mut parts.registry),
        rule_limits: config.syncer.limits,
        ai,
        agents,
    });
    let endpoints = karpor_api::endpoints()
        .iter()
        .map(karpor_api::Endpoint::line)
        .collect();
    Ok((routes, endpoints, lines))
}

/// How long the built-in records may hold the start.
const SEED_WAIT: Duration = Duration::from_secs(5);

/// Makes the records Karpor's dashboard expects at start (its `namespace` resource group
/// rule), once: one a user deleted stays deleted. Not in read-only mode, which writes
/// nothing; a store that does not answer delays the start by at most `SEED_WAIT`, and
/// the next start tries again.
async fn seed_built_ins(metastore: &Metastore) {
    for rule in ResourceGroupRule::built_ins() {
        let name = rule.name.clone();
        match tokio::time::timeout(SEED_WAIT, metastore.seed(rule)).await {
            Ok(Ok(true)) => tracing::info!(rule = %name, "made the built-in resource group rule"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::warn!(rule = %name, error = %e,
                "cannot make the built-in resource group rule; the next start tries again"),
            Err(_) => tracing::warn!(rule = %name,
                "the metadata store did not answer; the next start tries again"),
        }
    }
}

/// Listens on the mode's address, writes the bound one to `address_file`, and says
/// where to find what this process serves.
async fn bind(plan: &Plan, address_file: Option<PathBuf>) -> anyhow::Result<TcpListener> {
    let listener = bind_at(plan.listen, address_file).await?;
    let bound = listener.local_addr()?;
    let scheme = if plan.tls.is_some() { "https" } else { "http" };
    if plan.api {
        tracing::info!(
            address = %bound,
            mode = plan.name,
            page = format!("{scheme}://{bound}/"),
            api = format!("{scheme}://{bound}{}", karpor_api::PREFIX),
            "listening"
        );
    } else {
        tracing::info!(
            address = %bound,
            mode = plan.name,
            probes = format!("{scheme}://{bound}/readyz"),
            "listening"
        );
    }
    Ok(listener)
}

/// Listens on `address` and writes the bound one to `address_file`.
pub(crate) async fn bind_at(
    address: SocketAddr,
    address_file: Option<PathBuf>,
) -> anyhow::Result<TcpListener> {
    let listener = listen(address).with_context(|| format!("cannot listen on {address}"))?;
    let bound = listener.local_addr()?;
    if let Some(path) = address_file {
        let text = format!("{bound}\n");
        tokio::task::spawn_blocking(move || {
            karpor_core::private_file::replace(&path, text.as_bytes())
                .with_context(|| format!("cannot write {} (--address-file)", path.display()))
        })
        .await??;
    }
    Ok(listener)
}

/// Connections the kernel holds for the server before it accepts them. std's 128 drops
/// part of a probe storm's connections, which then wait out SYN-ACK retransmissions
/// (seconds); the kernel caps this at `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 4096;

fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As std does: a restarted server binds again while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)?.into_std()
}

/// The API's tokens, resolved, and the role of a request without one.
/// On a loopback listener with `auth.anonymous: auto` (the embedded default), reads are
/// anonymous and writes need the local admin token, made at first start.
async fn authenticator(config: &Config) -> anyhow::Result<karpor_api::Authenticator> {
    let mut tokens = Vec::new();
    for token in &config.auth.tokens {
        let value = token.token.resolve()?.expose().to_owned();
        tokens.push((token.name.clone(), token.role, value));
    }
    let auth = &config.auth;
    let loopback = config.server.listen.ip().is_loopback();
    if auth.anonymous.makes_local_token(loopback, &auth.tokens) {
        let path = auth.local_token_file.clone();
        let local = tokio::task::spawn_blocking(move || local_token::load_or_create(&path))
            .await?
            .with_context(|| {
                format!(
                    "cannot read or make the local admin token {} (auth.local_token_file)",
                    auth.local_token_file.display()
                )
            })?;
        tracing::info!(
            file = %auth.local_token_file.display(),
            made = local.created,
            "writes need the local admin token in this file (karpor commands run from this directory read it; elsewhere set KARPOR_TOKEN_FILE)"
        );
        tokens.push((
            local_token::LOCAL_TOKEN_NAME.to_owned(),
            Some(Role::Admin),
            local.token,
        ));
    }
    let anonymous = auth.anonymous.role(loopback);
    tracing::info!(
        tokens = tokens.len(),
        anonymous_reads = anonymous.is_some(),
        read_only = config.server.read_only,
        policies = auth.policies.len(),
        kubernetes_tokens = auth.token_review.is_some(),
        "REST API access"
    );
    let policies = karpor_api::Policies::new(auth.policies.clone());
    let mut authenticator =
        karpor_api::Authenticator::new(tokens, anonymous).with_policies(policies);
    if let Some(oidc) = auth.oidc.clone() {
        let issuer = oidc.issuer.clone();
        // Reads its CA file: off the runtime. Fetches nothing: a dead issuer is a refused
        // token, not a failed start.
        let verifier = tokio::task::spawn_blocking(move || karpor_api::OidcVerifier::new(&oidc))
            .await?
            .map_err(|e| anyhow::anyhow!("auth.oidc: {e}"))?;
        tracing::info!(%issuer, "OIDC ID tokens accepted");
        authenticator = authenticator.with_oidc(verifier);
    }
    Ok(authenticator)
}
