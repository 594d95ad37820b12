use std::collections::HashSet;
use std::time::Duration;

use karpor_core::SecretSource;
use karpor_metastore::MetastoreConfig;
use karpor_storage::StorageConfig;

use super::{Config, ConfigError};

/// Checks that the built-in reporters register under these names.
pub const BUILTIN_CHECKS: &[&str] = &["Ping", "Heartbeat", "Server", "Syncer", "Storage"];

impl Config {
    /// What types alone cannot say. `origin` names the file in messages.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let fail =
            |key: &str, what: String| Err(ConfigError(format!("{origin}: key `{key}`: {what}")));
        let h = &self.health;
        if h.check_timeout.is_zero() {
            return fail("health.check_timeout", "must be above zero".into());
        }
        if h.deadline < h.check_timeout {
            return fail(
                "health.deadline",
                format!(
                    "{} is below health.check_timeout ({})",
                    show(h.deadline),
                    show(h.check_timeout)
                ),
            );
        }
        if h.failure_threshold == 0 {
            return fail("health.failure_threshold", "must be at least 1".into());
        }
        if h.success_threshold == 0 {
            return fail("health.success_threshold", "must be at least 1".into());
        }
        let syncer = &self.syncer;
        if syncer.batch_size == 0 {
            return fail("syncer.batch_size", "must be at least 1".into());
        }
        if syncer.queue == 0 {
            return fail("syncer.queue", "must be at least 1".into());
        }
        if syncer.batch_window.is_zero() {
            return fail("syncer.batch_window", "must be above zero".into());
        }
        if syncer.rediscover_interval < Duration::from_secs(1) {
            return fail("syncer.rediscover_interval", "must be at least 1s".into());
        }
        if let Err((key, what)) = self.kubernetes.validate() {
            return fail(&key, what);
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return fail("log.level", format!("not a log filter: {e}"));
        }
        let mut names: HashSet<String> = BUILTIN_CHECKS
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .collect();
        for (i, upstream) in self.readiness.upstreams.iter().enumerate() {
            let key = format!("readiness.upstreams[{i}]");
            if upstream.name.trim().is_empty() {
                return fail(&format!("{key}.name"), "must not be empty".into());
            }
            if !names.insert(upstream.name.to_ascii_lowercase()) {
                return fail(
                    &format!("{key}.name"),
                    format!("`{}` is already the name of another check", upstream.name),
                );
            }
            match url::Url::parse(&upstream.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                _ => return fail(&format!("{key}.url"), "must be an http(s) URL".into()),
            }
        }
        for name in h.checks.keys() {
            let known = names.contains(&name.to_ascii_lowercase())
                || name.to_ascii_lowercase().starts_with("cluster/");
            if !known {
                return fail(
                    &format!("health.checks.{name}"),
                    format!(
                        "unknown check (known: {}, upstream names, Cluster/NAME)",
                        BUILTIN_CHECKS.join(", ")
                    ),
                );
            }
        }
        let limits = &self.server.limits;
        if limits.body_bytes < karpor_core::model::MAX_KUBECONFIG_BYTES {
            return fail(
                "server.limits.body_bytes",
                format!(
                    "{} is below a kubeconfig's limit ({} bytes): clusters could not be added",
                    limits.body_bytes,
                    karpor_core::model::MAX_KUBECONFIG_BYTES
                ),
            );
        }
        if limits.request_timeout.is_zero() {
            return fail("server.limits.request_timeout", "must be above zero".into());
        }
        if limits.concurrency == 0 {
            return fail("server.limits.concurrency", "must be at least 1".into());
        }
        if let Err((key, what)) = self.server.connections.validate(limits.request_timeout) {
            return fail(&key, what);
        }
        let mut token_names = HashSet::new();
        let mut token_values = Vec::new();
        for (i, token) in self.auth.tokens.iter().enumerate() {
            if token.name.trim().is_empty() {
                return fail(
                    &format!("auth.tokens[{i}].name"),
                    "must not be empty".into(),
                );
            }
            if !token_names.insert(token.name.as_str()) {
                return fail(
                    &format!("auth.tokens[{i}].name"),
                    format!("`{}` is already the name of another token", token.name),
                );
            }
            match token.token.resolve() {
                Err(e) => return fail(&format!("auth.tokens[{i}].token"), e.to_string()),
                Ok(value) => {
                    // One token, one role: a shared value would make the role ambiguous.
                    if let Some(j) = token_values.iter().position(|v| *v == value) {
                        return fail(
                            &format!("auth.tokens[{i}].token"),
                            format!("the same token as auth.tokens[{j}]"),
                        );
                    }
                    token_values.push(value);
                }
            }
        }
        if let Some(tls) = &self.server.tls {
            for (key, path) in [("cert_file", &tls.cert_file), ("key_file", &tls.key_file)] {
                if let Err(e) = std::fs::metadata(path) {
                    return fail(
                        &format!("server.tls.{key}"),
                        format!("cannot read {}: {e}", path.display()),
                    );
                }
            }
        }
        if let Some(path) = self.metadata.encryption_key_file() {
            if let Err(e) = karpor_metastore::Sealer::from_key_file(path) {
                return fail("metadata.encryption_key_file", e.to_string());
            }
        }
        for (key, secret) in self.secrets() {
            if let Err(e) = secret.resolve() {
                return fail(key, e.to_string());
            }
        }
        Ok(())
    }

    /// Every secret in the config, by key, so a missing one stops the start.
    fn secrets(&self) -> Vec<(&'static str, &SecretSource)> {
        let mut all = Vec::new();
        if let Some(token) = &self.health.admin_token {
            all.push(("health.admin_token", token));
        }
        match &self.metadata {
            MetastoreConfig::Mysql { url, .. } => all.push(("metadata.url", url)),
            MetastoreConfig::Etcd { etcd, .. } => {
                if let Some(p) = &etcd.password {
                    all.push(("metadata.etcd.password", p));
                }
            }
            MetastoreConfig::Sqlite { .. } => {}
        }
        if let StorageConfig::Elasticsearch(es) = &self.storage {
            if let Some(p) = &es.password {
                all.push(("storage.password", p));
            }
        }
        all
    }
}

fn show(d: Duration) -> String {
    humantime_serde::re::humantime::format_duration(d).to_string()
}
