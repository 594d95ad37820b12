//! The config file: one YAML file layered with `KARPOR_SECTION__KEY` environment
//! variables and the common flags. Every section refuses unknown keys. Each crate owns its
//! section (its shape, defaults, `validate()` and secrets); this module composes them, owns
//! the process's own sections (`server`, `log`, `readiness`, `shutdown`), and checks what
//! spans sections.

mod files;
mod load;
mod validate;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use karpor_agent::config::{AgentConfig, AgentListenerConfig};
use karpor_ai::AiConfig;
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
    /// The model service; AI is off without it.
    pub ai: Option<AiConfig>,
    /// The listener agents connect to; agent mode is off without it.
    pub agents: Option<AgentListenerConfig>,
    /// The agent role's own section (`karpor agent`).
    pub agent: AgentConfig,
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
    "ai",
    "agents",
    "agent",
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
    /// A dashboard build (Karpor's, from its source) served instead of karpor's page: its
    /// files at `/public/...`, its `index.html` at `/` and at every path no route serves.
    pub dashboard_dir: Option<PathBuf>,
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
            dashboard_dir: None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct LogConfig {
    pub format: LogFormat,
    /// The level of karpor's own lines; libraries log warnings and errors. `RUST_LOG`
    /// replaces the whole filter.
    pub level: LogLevel,
}

/// `log.format` and `--log-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `log.level` and `--log-level`: one type, so the file and the flag accept the same
/// words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
    Off,
}

impl LogLevel {
    /// The word `tracing`'s filter takes.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
            LogLevel::Off => "off",
        }
    }
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

#[cfg(test)]
mod tests {
    use super::{load, Config, LogLevel, Overrides, SECTIONS};

    /// Environment variables are read only for `SECTIONS`: a section missing from the
    /// list could not be set from the environment.
    #[test]
    fn the_sections_are_the_fields_of_the_config() {
        let config = serde_json::to_value(Config::default()).unwrap();
        let mut fields: Vec<&str> = config
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sections = SECTIONS.to_vec();
        fields.sort_unstable();
        sections.sort_unstable();
        assert_eq!(fields, sections);
    }

    fn load_yaml(yaml: &str) -> Result<Config, super::ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let file = dir.path().join("karpor.yaml");
        // The embedded stores in the test's own directory, and no local token to make.
        let mut text = String::from("auth: {anonymous: none}\n");
        if !yaml.contains("metadata:") {
            text += &format!(
                "metadata: {{backend: sqlite, path: {}/m.db}}\n",
                data.display()
            );
        }
        if !yaml.contains("storage:") {
            text += &format!(
                "storage: {{backend: sqlite, path: {}/r.db}}\n",
                data.display()
            );
        }
        std::fs::write(&file, text + yaml).unwrap();
        load(Some(&file), &Overrides::default()).map(|(config, _)| config)
    }

    /// Every backend's settings are checked at load: exit 2 naming the file and key,
    /// before the metadata store opens.
    #[test]
    fn backend_settings_are_refused_at_load_by_file_and_key() {
        for (yaml, key, says) in [
            (
                "storage: {backend: elasticsearch, url: 'localhost:9200'}",
                "storage.url",
                "http(s) URL",
            ),
            (
                "storage: {backend: elasticsearch, url: 'http://u:p@es:9200'}",
                "storage.url",
                "credentials",
            ),
            (
                "storage: {backend: elasticsearch, url: 'http://es:9200', index: Karpor}",
                "storage.index",
                "lowercase",
            ),
            (
                "metadata: {backend: etcd, etcd: {endpoints: []}}",
                "metadata.etcd.endpoints",
                "at least one",
            ),
            (
                "metadata: {backend: etcd, etcd: {endpoints: ['http://e:2379/x']}}",
                "metadata.etcd.endpoints[0]",
                "host:port",
            ),
            (
                "metadata: {backend: mysql, url: 'postgres://db'}",
                "metadata.url",
                "mysql://",
            ),
        ] {
            let error = load_yaml(yaml).unwrap_err();
            assert_eq!(error.key(), Some(key), "{yaml}: {error}");
            assert!(error.problem().contains(says), "{yaml}: {error}");
            assert!(error.to_string().contains("karpor.yaml: key `"), "{error}");
        }
        let fine = load_yaml("storage: {backend: elasticsearch, url: 'https://es:9200'}");
        assert!(fine.is_ok(), "{fine:?}");
    }

    #[test]
    fn the_log_level_is_one_of_the_words_of_the_flag() {
        let config = load_yaml("log: {level: debug}").unwrap();
        assert_eq!(config.log.level, LogLevel::Debug);
        let error = load_yaml("log: {level: chatty}").unwrap_err();
        assert_eq!(error.key(), Some("log.level"));
        assert!(error.problem().contains("chatty"), "{error}");
    }
}
