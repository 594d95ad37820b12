//! Everything karpor does with Kubernetes client configuration, for the API, the syncer
//! and the CLI alike: kubeconfigs parsed within limits, minified, kept self-contained and
//! masked ([`kubeconfig`]); exec plugins under an operator's allowlist ([`exec`]);
//! link-local and cloud metadata servers refused ([`outbound`]); clients built without
//! reading the server's files or blocking its runtime ([`client`]), one per cluster
//! ([`cache`]); errors described without credentials.

mod cache;
mod client;
mod describe;
mod exec;
pub mod kubeconfig;
mod outbound;
pub mod quantity;
pub mod reads;
pub mod redact;
pub mod yaml;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use karpor_config::ConfigIssue;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

pub use cache::ClientCache;
pub use client::{build, connect, ClientError, ClusterClient, Timeouts};
pub use describe::describe;
pub use exec::{ExecError, ExecSettings};
pub use kubeconfig::{ContextInfo, Problem, Summary};

/// `kubernetes:` in the config file: how karpor may reach member clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct KubernetesConfig {
    pub exec: ExecSettings,
    /// Whether a kubeconfig's server (or proxy) may be a link-local or cloud metadata
    /// address: off, such a kubeconfig is refused ([`outbound`]).
    pub allow_link_local_servers: bool,
}

impl KubernetesConfig {
    /// For what types cannot say.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        self.exec.validate()
    }

    /// The policy every kubeconfig is checked against before use, this section's
    /// top-level keys included.
    pub fn exec_settings(&self) -> Arc<ExecSettings> {
        Arc::new(ExecSettings {
            allow_link_local_servers: self.allow_link_local_servers,
            ..self.exec.clone()
        })
    }
}

/// How long one kubeconfig may take to parse off the runtime; within the YAML limits it
/// takes milliseconds, so this only bounds a machine that is far behind.
const PARSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Kubeconfigs parsed at once: at most one per core, so hostile uploads cannot take the
/// whole machine from the runtime's workers and probes.
fn parsers() -> &'static Semaphore {
    static PARSERS: OnceLock<Semaphore> = OnceLock::new();
    PARSERS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Semaphore::new(cores.max(1))
    })
}

/// [`kubeconfig::parse`] on a blocking thread, within [`PARSE_TIMEOUT`] (the wait for a
/// parsing slot included).
pub async fn parse_off_runtime(text: String) -> Result<kube::config::Kubeconfig, Problem> {
    let work = async {
        let _slot = parsers().acquire().await.map_err(|_| busy())?;
        tokio::task::spawn_blocking(move || kubeconfig::parse(&text))
            .await
            .map_err(|_| busy())?
    };
    tokio::time::timeout(PARSE_TIMEOUT, work)
        .await
        .map_err(|_| busy())?
}

fn busy() -> Problem {
    Problem("the kubeconfig could not be parsed in time; try again".to_owned())
}
