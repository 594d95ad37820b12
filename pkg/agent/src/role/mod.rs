//! `karpor agent`: the syncer's watches of this one cluster, with the hub as the sink.
//! The agent joins once (its key made here, a certificate for its cluster from the hub),
//! then asks the hub for its plan, syncs by it, follows newer plans, and renews its
//! certificate before it expires. Everything it does with the hub is retried with jittered
//! backoff; only a refusal that retrying cannot change (a used token, a revoked
//! certificate at join) ends it.

mod backoff;
mod control;
mod held;
mod hub;
pub mod link;
mod relists;
mod serve;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use karpor_kube::ExecSettings;
use karpor_syncer::{RemoteParts, RemoteSync, SyncMetrics, SyncSettings};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::key::AgentKey;
use crate::state::{AgentState, Checked};
use crate::AgentError;
pub use backoff::MAX_BACKOFF;
use backoff::{jittered, unit_random, FIRST_BACKOFF};
use hub::{Hub, HubError, HubSink};
use link::Link;
use relists::Relists;

/// What the agent role works with.
pub struct RoleParts {
    pub config: AgentConfig,
    /// Which exec plugins the member cluster's kubeconfig may name.
    pub exec: Arc<ExecSettings>,
    pub settings: SyncSettings,
    pub metrics: SyncMetrics,
    pub link: Link,
}

/// Why the agent stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Identity(#[from] AgentError),
    #[error("the hub refused the agent: {0}")]
    Refused(String),
    #[error("cannot reach the member cluster: {0}")]
    Cluster(String),
}

/// Runs until `stop`, or until the hub refuses what retrying cannot change.
pub async fn run(parts: RoleParts, stop: CancellationToken) -> Result<(), RoleError> {
    let config = &parts.config;
    let pin = config
        .hub_pin()
        .map_err(|e| RoleError::Config(e.to_string()))?;
    let Some((mut state, hub)) = enroll(&parts, pin, &stop).await? else {
        return Ok(());
    };
    let hub = Arc::new(hub);
    let cluster = state.identity.cluster.to_string();
    tracing::info!(%cluster, generation = state.identity.generation, "joined the hub");
    let Some(plan) = retried(&parts.link, &stop, "read the plan", || hub.plan()).await? else {
        return Ok(());
    };
    let client = member_client(config, &parts.exec).await?;
    let held_at = held::path_beside(&config.state_file);
    let held_before = held::load(held_at.clone()).await;
    // Live reads through the control stream, beside the sync: one never waits on the other.
    let resync = Arc::new(tokio::sync::Notify::new());
    let control = tokio::spawn(control::run(
        hub.clone(),
        client.clone(),
        resync.clone(),
        stop.child_token(),
    ));
    let sync = RemoteSync::start(
        RemoteParts {
            cluster: cluster.clone(),
            client,
            sink: Arc::new(HubSink::new(hub.clone())),
            settings: parts.settings,
            metrics: parts.metrics.clone(),
            held_before,
        },
        &plan,
    );
    let keeper = tokio::spawn(held::keep(held_at, sync.held()));
    let jitter = unit_random();
    // A deadline, not a wait: each plan poll goes round the loop, and a wait started
    // afresh each time would never end.
    let renew_at = |wait: Duration| tokio::time::Instant::now() + wait;
    let mut renewal = renew_at(state.renew_in(OffsetDateTime::now_utc(), jitter));
    let mut backoff = FIRST_BACKOFF;
    let mut relists = Relists::default();
    loop {
        parts.link.tried();
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(config.plan_interval) => follow(&hub, &sync).await,
            _ = resync.notified() => relists.asked(),
            _ = relists.due() => {
                relists.done();
                sync.relist();
            }
            _ = tokio::time::sleep_until(renewal) => {
                match renew(&hub, &state, &config.state_file).await {
                    Ok(renewed) => {
                        state = renewed;
                        renewal = renew_at(state.renew_in(OffsetDateTime::now_utc(), jitter));
                        backoff = FIRST_BACKOFF;
                        tracing::info!(not_after = %state.not_after, "renewed the certificate");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot renew the certificate; trying again");
                        renewal = renew_at(jittered(backoff));
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
    }
    sync.stop().await;
    let _ = control.await;
    let _ = keeper.await;
    Ok(())
}

async fn follow(hub: &Hub, sync: &RemoteSync) {
    match hub.plan().await {
        Ok(plan) => sync.follow(&plan),
        Err(e) => tracing::warn!(error = %e, "cannot read the plan; syncing by the last one"),
    }
}

/// The checked state, and a client of the hub presenting its certificate: from the state
/// file, or by joining with the token. `None` when stopped first.
async fn enroll(
    parts: &RoleParts,
    pin: crate::pin::HubPin,
    stop: &CancellationToken,
) -> Result<Option<(Checked, Hub)>, RoleError> {
    let config = &parts.config;
    let path = config.state_file.clone();
    let loaded = off_runtime(move || AgentState::load(&path)).await?;
    if let Some(state) = loaded {
        if state.pin != pin {
            return Err(RoleError::Config(format!(
                "{}: it holds a certificate from another hub than agent.pin names; remove it to join again",
                config.state_file.display()
            )));
        }
        let key = AgentKey::from_pem(&state.state.key_pem)?;
        let hub = Hub::new(
            &config.hub,
            pin,
            config.request_timeout,
            Some((&state.state.certificate_pem, &key)),
            parts.link.clone(),
        )
        .map_err(|e| RoleError::Config(e.to_string()))?;
        return Ok(Some((state, hub)));
    }
    let token = match &config.token {
        Some(source) => source
            .resolve()
            .map_err(|e| RoleError::Config(format!("agent.token: {e}")))?,
        None => {
            return Err(RoleError::Config(format!(
                "agent.token: needed to join, since {} holds no certificate yet",
                config.state_file.display()
            )))
        }
    };
    let key = AgentKey::generate()?;
    // What an admin compares when the hub holds joins for approval.
    tracing::info!(key = %key.fingerprint(), "joining the hub");
    let hub = Hub::new(
        &config.hub,
        pin,
        config.request_timeout,
        None,
        parts.link.clone(),
    )
    .map_err(|e| RoleError::Config(e.to_string()))?;
    let joined = retried(&parts.link, stop, "join the hub", || {
        hub.join(token.expose(), &key)
    })
    .await?;
    let Some(certified) = joined else {
        return Ok(None);
    };
    let state = keep(&key, pin, certified, &config.state_file).await?;
    hub.present(&state.state.certificate_pem, &key)
        .map_err(|e| RoleError::Config(e.to_string()))?;
    Ok(Some((state, hub)))
}

/// A new certificate over the same key, kept in the state file before it is used.
async fn renew(hub: &Hub, state: &Checked, path: &std::path::Path) -> Result<Checked, RoleError> {
    let key = AgentKey::from_pem(&state.state.key_pem)?;
    let certified = hub
        .renew(&key)
        .await
        .map_err(|e| RoleError::Refused(e.to_string()))?;
    let renewed = keep(&key, state.pin, certified, path).await?;
    if renewed.identity.cluster != state.identity.cluster {
        return Err(RoleError::Refused(
            "the hub renewed another cluster's certificate".into(),
        ));
    }
    hub.present(&renewed.state.certificate_pem, &key)
        .map_err(|e| RoleError::Refused(e.to_string()))?;
    Ok(renewed)
}

/// The hub's answer checked against the key and the pin, then written whole.
async fn keep(
    key: &AgentKey,
    pin: crate::pin::HubPin,
    certified: crate::wire::Certified,
    path: &std::path::Path,
) -> Result<Checked, RoleError> {
    let state = AgentState {
        pin: pin.to_string(),
        key_pem: key.to_pem(),
        certificate_pem: certified.certificate,
        authority_pem: certified.authority,
    };
    let path: PathBuf = path.to_owned();
    let checked = off_runtime(move || {
        let checked = state.clone().check()?;
        state.save(&path)?;
        Ok(checked)
    })
    .await?;
    Ok(checked)
}

/// `call` until it answers, with jittered backoff; `None` when stopped first. A refusal
/// retrying cannot change ends the agent.
async fn retried<T, F, Fut>(
    link: &Link,
    stop: &CancellationToken,
    what: &str,
    mut call: F,
) -> Result<Option<T>, RoleError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, HubError>>,
{
    let mut backoff = FIRST_BACKOFF;
    loop {
        link.tried();
        let error = tokio::select! {
            _ = stop.cancelled() => return Ok(None),
            answered = call() => match answered {
                Ok(value) => return Ok(Some(value)),
                Err(e) if e.is_refusal() => return Err(RoleError::Refused(format!("{what}: {e}"))),
                Err(e) => e,
            },
        };
        tracing::warn!(error = %error, retry_in = ?backoff, "cannot {what}; trying again");
        tokio::select! {
            _ = stop.cancelled() => return Ok(None),
            _ = tokio::time::sleep(jittered(backoff)) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// The member cluster's client: its kubeconfig file, or the pod's own ServiceAccount.
async fn member_client(
    config: &AgentConfig,
    exec: &Arc<ExecSettings>,
) -> Result<kube::Client, RoleError> {
    let cluster = |e: &dyn std::fmt::Display| RoleError::Cluster(e.to_string());
    let timeouts = karpor_syncer::CLIENT_TIMEOUTS;
    match &config.kubeconfig {
        Some(path) => {
            let path = path.clone();
            let shown = path.display().to_string();
            let text = off_runtime(move || {
                read_bounded(&path, karpor_kube::kubeconfig::MAX_BYTES)
                    .map_err(|e| AgentError::State(format!("agent.kubeconfig {shown}: {e}")))
            })
            .await?;
            let connected = karpor_kube::connect(&text, exec, timeouts)
                .await
                .map_err(|e| cluster(&e))?;
            Ok(connected.client)
        }
        None => {
            let mut incluster = kube::Config::incluster().map_err(|e| cluster(&e))?;
            incluster.connect_timeout = Some(timeouts.connect);
            incluster.read_timeout = timeouts.read;
            kube::Client::try_from(incluster).map_err(|e| cluster(&e))
        }
    }
}

/// A text file of at most `max` bytes.
fn read_bounded(path: &std::path::Path, max: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    std::fs::File::open(path)?
        .take(limit)
        .read_to_string(&mut text)?;
    if text.len() > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(text)
}

async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AgentError> + Send + 'static,
) -> Result<T, RoleError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RoleError::Config(format!("a file task failed: {e}")))?
        .map_err(RoleError::from)
}
