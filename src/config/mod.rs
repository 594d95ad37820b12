//! The config file: one YAML file layered with `KARPOR_SECTION__KEY` environment
//! variables and the common flags. Every section refuses unknown keys. Each crate owns its
//! section (its shape, defaults, `validate()` and secrets); this module composes them, owns
//! the process's own sections (`server`, `log`, `readiness`, `shutdown`), and checks what
//! spans sections.

mod files;
mod load;
mod validate;

use std::net::SocketAddr;
use std::time::Duration;

use karpor_api::{AuthConfig, LimitsConfig};
use karpor_audit::AuditConfig;
use karpor_core::SecretSource;
use karpor_kube::KubernetesConfig;
use karpor_metastore::MetastoreConfig;
use karpor_server::{ConnectionLimits, TlsConfig};
use karpor_storage::StorageConfig;
use karpor_syncer::SyncerConfig;
use serde::{Deserialize, Serialize};

pub(crate) use load::{load, ConfigError, Overrides};

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Config {
    pub server: ServerConfig,
    pub auth: AuthConfig,
    pub log: LogConfig,
    pub metadata: MetastoreConfig,
    pub storage: StorageConfig,
    pub syncer: SyncerConfig,
    pub kubernetes: KubernetesConfig,
    pub audit: AuditConfig,
    pub health: HealthConfig,
    pub readiness: ReadinessConfig,
    pub shutdown: ShutdownConfig,
}

/// Top-level sections; environment variables are read only for these.
pub(crate) const SECTIONS: &[&str] = &[
    "server",
    "auth",
    "log",
    "metadata",
    "storage",
    "syncer",
    "kubernetes",
    "audit",
    "health",
    "readiness",
    "shutdown",
];

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ServerConfig {
    pub listen: SocketAddr,
    pub tls: Option<TlsConfig>,
    /// Names a request's `Host` may carry (`*`: any). Empty: derived from `listen` (on
    /// loopback `localhost`, `127.0.0.1`, `[::1]`; on `0.0.0.0` any).
    pub allowed_hosts: Vec<String>,
    /// Header-read and idle timeouts, and how many connections at once.
    pub connections: ConnectionLimits,
    /// Run the syncer inside the server process (`false` when `karpor syncer` runs apart).
    pub syncer: bool,
    /// Refuse every REST API write with 405.
    pub read_only: bool,
    /// REST API request limits: body size, timeout, requests at once.
    pub limits: LimitsConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7443)),
            tls: None,
            allowed_hosts: Vec::new(),
            connections: ConnectionLimits::default(),
            syncer: true,
            read_only: false,
            limits: LimitsConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct LogConfig {
    pub format: LogFormat,
    /// The level of karpor's own lines (`error`, `warn`, `info`, `debug`, `trace`,
    /// `off`); libraries log warnings and errors. `RUST_LOG` replaces the whole filter.
    pub level: String,
}

/// What `log.level` may be.
pub(crate) const LOG_LEVELS: &[&str] = &["error", "warn", "info", "debug", "trace", "off"];

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// `health:` is the health crate's section; its admin token is a secret like the others.
pub(crate) type HealthConfig = karpor_health::HealthConfig<SecretSource>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ReadinessConfig {
    /// Other karpor processes whose `/readyz` this one's depends on. Off by default.
    pub upstreams: Vec<UpstreamConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpstreamConfig {
    pub name: String,
    pub url: String,
    #[serde(default = "yes")]
    pub must_ready: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ShutdownConfig {
    /// How long `/readyz` fails before the listener closes, so load balancers and
    /// Kubernetes stop sending traffic first.
    #[serde(with = "humantime_serde")]
    pub drain_delay: Duration,
    /// How long in-flight requests may still take once the listener closes.
    #[serde(with = "humantime_serde")]
    pub grace_period: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            drain_delay: Duration::from_secs(5),
            grace_period: Duration::from_millis(500),
        }
    }
}
