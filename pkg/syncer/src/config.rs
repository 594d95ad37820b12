//! `syncer:` in the config file: this crate's section, its defaults (those of
//! [`SyncSettings`]) and its validation.

use std::net::SocketAddr;
use std::time::Duration;

use karpor_config::ConfigIssue;
use karpor_core::model::RuleLimits;
use serde::{Deserialize, Serialize};

use crate::{HistorySettings, SyncSettings, WriterSettings};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyncerConfig {
    /// Where `karpor syncer` serves its own `/livez`, `/readyz` and `/metrics`.
    pub probe_listen: SocketAddr,
    /// Documents per storage write, at most.
    pub batch_size: usize,
    /// How long a write waits to fill its batch.
    #[serde(with = "humantime_serde")]
    pub batch_window: Duration,
    /// Watch events queued per cluster before the watchers wait for storage.
    pub queue: usize,
    /// Changes each watched type remembers by uid while the queue is full; past them the
    /// type relists once writes resume.
    pub changes_behind: usize,
    /// How often each cluster's discovery runs again, to pick up new resource types.
    #[serde(with = "humantime_serde")]
    pub rediscover_interval: Duration,
    /// This syncer's name among the syncers sharing the clusters (a DNS label, unique
    /// among live syncers). Default: `$KARPOR_SYNCER_MEMBER` (the chart sets the pod's
    /// name), else `HOSTNAME-PID`.
    pub member: Option<String>,
    /// How long a syncer's membership lease lives unless renewed (every third of it): a
    /// syncer that dies or hangs loses its clusters to the others after this.
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// How large a sync or relation rule may be, and how many rules and watches one
    /// cluster may have: the API refuses a rule over them, and a cluster whose rules go
    /// over them opens no watch.
    pub limits: RuleLimits,
    /// What history keeps of every change (a rule's own `history` replaces `enabled`
    /// and `keep` for its objects).
    pub history: HistorySettings,
}

/// The environment variable naming this syncer's member, under `syncer.member`.
pub const MEMBER_ENV: &str = "KARPOR_SYNCER_MEMBER";

impl Default for SyncerConfig {
    fn default() -> Self {
        let settings = SyncSettings::default();
        SyncerConfig {
            probe_listen: SocketAddr::from(([127, 0, 0, 1], 7444)),
            batch_size: settings.writer.max_documents,
            batch_window: settings.writer.window,
            queue: settings.writer.queue,
            changes_behind: settings.writer.behind,
            rediscover_interval: settings.rediscover,
            member: None,
            lease_ttl: settings.lease_ttl,
            limits: settings.limits,
            history: settings.history,
        }
    }
}

impl SyncerConfig {
    /// For what types cannot say.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        let fail =
            |key: &str, what: &str| Err(ConfigIssue::new(format!("syncer.{key}"), what.to_owned()));
        if self.batch_size == 0 {
            return fail("batch_size", "must be at least 1");
        }
        if self.queue == 0 {
            return fail("queue", "must be at least 1");
        }
        if self.changes_behind == 0 {
            return fail("changes_behind", "must be at least 1");
        }
        if self.batch_window.is_zero() {
            return fail("batch_window", "must be above zero");
        }
        if self.rediscover_interval < Duration::from_secs(1) {
            return fail("rediscover_interval", "must be at least 1s");
        }
        if !(Duration::from_secs(3)..=Duration::from_secs(300)).contains(&self.lease_ttl) {
            return fail("lease_ttl", "must be between 3s and 5m");
        }
        if let Some(member) = &self.member {
            if let Err(e) = karpor_core::model::validate_name(member) {
                return fail("member", &e.to_string());
            }
        }
        self.limits.validate()?;
        self.history.validate()?;
        let built_in = crate::rules::built_in::default_rules().len();
        if self.limits.rules_per_cluster < built_in {
            return fail(
                "limits.rules_per_cluster",
                &format!("must be at least {built_in}: every cluster follows the {built_in} built-in rules while none is stored"),
            );
        }
        Ok(())
    }

    /// This syncer's member name: configured, from the environment, or made up.
    pub fn member(&self) -> String {
        self.member
            .clone()
            .or_else(|| std::env::var(MEMBER_ENV).ok().filter(|m| !m.is_empty()))
            .unwrap_or_else(crate::fleet::lease::default_member)
    }

    /// The syncer's settings: this section over the built-in timings.
    pub fn settings(&self) -> SyncSettings {
        let defaults = SyncSettings::default();
        SyncSettings {
            writer: WriterSettings {
                max_documents: self.batch_size,
                window: self.batch_window,
                queue: self.queue,
                behind: self.changes_behind,
                ..defaults.writer
            },
            rediscover: self.rediscover_interval,
            lease_ttl: self.lease_ttl,
            limits: self.limits,
            history: self.history,
            ..defaults
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_validated_and_reach_the_settings() {
        let config: SyncerConfig = serde_json::from_str(
            r#"{"limits": {"watches_per_cluster": 5, "namespaces_per_rule": 3}}"#,
        )
        .unwrap();
        assert_eq!(config.validate(), Ok(()));
        let limits = config.settings().limits;
        assert_eq!(
            (limits.watches_per_cluster, limits.namespaces_per_rule),
            (5, 3)
        );
        assert_eq!(
            limits.rules_per_cluster,
            RuleLimits::default().rules_per_cluster
        );
        let zero: SyncerConfig =
            serde_json::from_str(r#"{"limits": {"resources_per_rule": 0}}"#).unwrap();
        assert_eq!(
            zero.validate().unwrap_err().key(),
            "syncer.limits.resources_per_rule"
        );
        let one: SyncerConfig =
            serde_json::from_str(r#"{"limits": {"rules_per_cluster": 1}}"#).unwrap();
        assert_eq!(
            one.validate().unwrap_err().key(),
            "syncer.limits.rules_per_cluster"
        );
        assert!(serde_json::from_str::<SyncerConfig>(r#"{"limits": {"watches": 5}}"#).is_err());
    }
}
