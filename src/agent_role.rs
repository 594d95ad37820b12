//! `karpor agent`: the agent role ([`karpor_agent::role`]) with its probe port: `/livez`
//! (the runtime's heartbeat, and the agent still trying the hub), `/readyz` (the hub
//! answered) and `/metrics`. No metadata store, no storage: the hub holds both.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use karpor_agent::role::link::Link;
use karpor_agent::role::{RoleParts, MAX_BACKOFF};
use karpor_health::{HealthChecker, HealthMetrics, HealthReporter, Heartbeat, Membership, Ping};
use karpor_server::{AllowedHosts, HttpMetrics, RouterParts};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::app::{bind_at, HEARTBEAT_INTERVAL, HEARTBEAT_STALE_AFTER};
use crate::config::Config;

/// Runs the agent until `signal`, or until the hub refuses it for good.
pub(crate) async fn run(
    config: Config,
    address_file: Option<PathBuf>,
    signal: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let health = HealthChecker::with_overrides(
        config.health.settings(),
        HealthMetrics::new(&mut registry),
        config.health.overrides(),
    );
    let workers = CancellationToken::new();
    let agent = config.agent.clone();
    // Stuck: its loop went round neither for a plan poll nor for a retry of the hub.
    let link = Link::new(3 * agent.plan_interval.max(MAX_BACKOFF) + agent.request_timeout);
    let heartbeat = Heartbeat::start(HEARTBEAT_INTERVAL, HEARTBEAT_STALE_AFTER, workers.clone());
    let checks: Vec<(Arc<dyn HealthReporter>, Membership)> = vec![
        (Arc::new(Ping), Membership::BOTH),
        (Arc::new(heartbeat), Membership::LIVEZ),
        (Arc::new(link.link_check()), Membership::LIVEZ),
        (Arc::new(link.hub_check()), Membership::READYZ),
    ];
    for (check, membership) in checks {
        health.register(check, membership, None);
    }
    karpor_server::register_process(&mut registry, env!("CARGO_PKG_VERSION"));
    let parts = RoleParts {
        config: agent.clone(),
        exec: config.kubernetes.exec_settings(),
        settings: config.syncer.settings(),
        metrics: karpor_syncer::metrics(&mut registry),
        link,
    };
    let http = HttpMetrics::new(&mut registry);
    let router = karpor_server::router(RouterParts {
        health: health.clone(),
        admin_token: None,
        check_lines: None,
        metrics: Arc::new(registry),
        with_ui: false,
        dashboard: None,
        routes: axum::Router::new(),
        endpoints: Vec::new(),
        hosts: AllowedHosts::new(agent.probe_listen, &[]),
        http,
        request_timeout: config.server.limits.request_timeout,
    });
    let listener = bind_at(agent.probe_listen, address_file).await?;
    tracing::info!(address = %listener.local_addr()?, hub = %agent.hub, "agent listening for probes");
    let serving = CancellationToken::new();
    let mut server = tokio::spawn(karpor_server::serve(
        listener,
        router,
        None,
        config.server.connections,
        serving.clone(),
        config.shutdown.grace_period,
    ));
    let mut role = tokio::spawn(karpor_agent::role::run(parts, workers.clone()));
    let outcome = tokio::select! {
        _ = signal => Ok(()),
        ended = &mut role => match ended {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(anyhow::Error::new(e)),
            Err(e) => Err(anyhow::Error::new(e).context("the agent task failed")),
        },
        ended = &mut server => Err(match ended {
            Ok(Ok(())) => anyhow::anyhow!("the probe server stopped by itself"),
            Ok(Err(e)) => anyhow::Error::new(e).context("the probe server failed"),
            Err(e) => anyhow::Error::new(e).context("the probe server task failed"),
        }),
    };
    health.begin_shutdown();
    workers.cancel();
    if !role.is_finished() {
        role.await.context("the agent task failed")?.ok();
    }
    serving.cancel();
    if !server.is_finished() {
        server.await.ok();
    }
    tracing::info!("agent stopped");
    outcome
}
