use std::collections::HashSet;

use karpor_config::ConfigIssue;
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
        self.issue()
            .map_err(|issue| ConfigError::in_file(origin, issue))
    }

    fn issue(&self) -> Result<(), ConfigIssue> {
        // Before any file the config names is read.
        self.check_files()?;
        self.syncer.validate()?;
        self.kubernetes.validate()?;
        self.audit.validate()?;
        self.server.limits.validate()?;
        self.server
            .connections
            .validate(self.server.limits.request_timeout)?;
        if let Some(tls) = &self.server.tls {
            tls.validate()?;
        }
        if let Some(dir) = &self.server.dashboard_dir {
            let index = dir.join("index.html");
            if let Err(e) = std::fs::File::open(&index) {
                return Err(ConfigIssue::new(
                    "server.dashboard_dir",
                    format_args!(
                        "cannot read {}: {e} (a dashboard build holds index.html)",
                        index.display()
                    ),
                ));
            }
        }
        self.auth.validate()?;
        if let Some(ai) = &self.ai {
            ai.validate()?;
        }
        if let Some(agents) = &self.agents {
            agents.validate()?;
        }
        self.metadata.validate()?;
        self.storage.validate()?;
        let names = self.check_names()?;
        let cluster_prefix = karpor_syncer::CLUSTER_CHECK_PREFIX.to_ascii_lowercase();
        let known = |name: &str| {
            let name = name.to_ascii_lowercase();
            names.contains(&name) || name.starts_with(&cluster_prefix)
        };
        self.health.validate(known).map_err(|issue| {
            issue.with_hint(format_args!(
                "known: {}, upstream names, {}NAME",
                BUILTIN_CHECKS.join(", "),
                karpor_syncer::CLUSTER_CHECK_PREFIX
            ))
        })?;
        for (key, secret) in self.secrets() {
            secret.resolve().map_err(|e| ConfigIssue::new(key, e))?;
        }
        Ok(())
    }

    /// The names of every check this process registers, lowercased: the built-in ones
    /// and the upstreams, each upstream named once, with an http(s) URL.
    fn check_names(&self) -> Result<HashSet<String>, ConfigIssue> {
        let mut names: HashSet<String> = BUILTIN_CHECKS
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .collect();
        for (i, upstream) in self.readiness.upstreams.iter().enumerate() {
            let key = |field: &str| format!("readiness.upstreams[{i}].{field}");
            if upstream.name.trim().is_empty() {
                return Err(ConfigIssue::new(key("name"), "must not be empty"));
            }
            if !names.insert(upstream.name.to_ascii_lowercase()) {
                return Err(ConfigIssue::new(
                    key("name"),
                    format_args!("`{}` is already the name of another check", upstream.name),
                ));
            }
            match url::Url::parse(&upstream.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                _ => return Err(ConfigIssue::new(key("url"), "must be an http(s) URL")),
            }
        }
        Ok(names)
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
        all.extend(self.ai.iter().flat_map(karpor_ai::AiConfig::secrets));
        all.extend(self.agent.secrets());
        all
    }
}
