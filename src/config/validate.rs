use std::collections::HashSet;

use karpor_core::SecretSource;

use super::{Config, ConfigError};

/// The checks this process registers by itself, by name.
pub(super) const BUILTIN_CHECKS: &[&str] = &[
    karpor_health::PING_CHECK,
    karpor_health::HEARTBEAT_CHECK,
    karpor_metastore::SERVER_CHECK,
    karpor_syncer::SYNCER_CHECK,
    karpor_storage::STORAGE_CHECK,
];

impl Config {
    /// What types alone cannot say: each section's own rules, then what spans sections.
    /// `origin` names the file in messages.
    pub(crate) fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let fail =
            |key: &str, what: String| Err(ConfigError(format!("{origin}: key `{key}`: {what}")));
        // Before any file the config names is read.
        self.check_files(origin)?;
        let sections = [
            self.syncer.validate(),
            self.kubernetes.validate(),
            self.audit.validate(),
            self.server.limits.validate(),
            self.server
                .connections
                .validate(self.server.limits.request_timeout),
            self.server.tls.as_ref().map_or(Ok(()), |t| t.validate()),
            self.auth.validate(),
            self.metadata.validate(),
        ];
        for section in sections {
            if let Err((key, what)) = section {
                return fail(&key, what);
            }
        }
        if !super::LOG_LEVELS.contains(&self.log.level.as_str()) {
            return fail(
                "log.level",
                format!(
                    "`{}` is not a level (one of {}; RUST_LOG takes a full filter)",
                    self.log.level,
                    super::LOG_LEVELS.join(", ")
                ),
            );
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
        let cluster_prefix = karpor_syncer::CLUSTER_CHECK_PREFIX.to_ascii_lowercase();
        let known = |name: &str| {
            let name = name.to_ascii_lowercase();
            names.contains(&name) || name.starts_with(&cluster_prefix)
        };
        if let Err((key, what)) = self.health.validate(known) {
            return fail(
                &key,
                format!(
                    "{what} (known: {}, upstream names, {}NAME)",
                    BUILTIN_CHECKS.join(", "),
                    karpor_syncer::CLUSTER_CHECK_PREFIX
                ),
            );
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
        let mut all: Vec<(&'static str, &SecretSource)> = self
            .health
            .admin_token
            .iter()
            .map(|token| ("health.admin_token", token))
            .collect();
        all.extend(self.metadata.secrets());
        all.extend(self.storage.secrets());
        all
    }
}
