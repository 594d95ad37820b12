//! `health:` in the config file: this crate's section, its defaults and its validation.
//! The admin token is a secret of the binary's kind (`Secret`), so this crate stays a leaf.

use std::collections::BTreeMap;
use std::time::Duration;

use karpor_config::ConfigIssue;
use serde::{Deserialize, Serialize};

use crate::{Settings, Thresholds};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig<Secret> {
    /// Bound on one run of one check.
    #[serde(with = "humantime_serde")]
    pub check_timeout: Duration,
    /// Bound on a whole answer; at least `check_timeout`.
    #[serde(with = "humantime_serde")]
    pub deadline: Duration,
    /// How long a passing result is reused; zero turns the cache off.
    #[serde(with = "humantime_serde")]
    pub cache_ttl: Duration,
    pub failure_threshold: u32,
    pub success_threshold: u32,
    /// Bearer token that unlocks raw failure details on `/readyz/{check}`.
    pub admin_token: Option<Secret>,
    /// Per-check settings by name (`Storage`, `Cluster/prod`).
    pub checks: BTreeMap<String, CheckConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CheckConfig {
    /// Whether a failure fails the endpoint (Kraken's name for critical).
    pub must_ready: bool,
}

impl<Secret> Default for HealthConfig<Secret> {
    fn default() -> Self {
        let settings = Settings::default();
        HealthConfig {
            check_timeout: settings.check_timeout,
            deadline: settings.deadline,
            cache_ttl: settings.cache_ttl,
            failure_threshold: settings.thresholds.failure,
            success_threshold: settings.thresholds.success,
            admin_token: None,
            checks: BTreeMap::new(),
        }
    }
}

impl<Secret> HealthConfig<Secret> {
    pub fn settings(&self) -> Settings {
        Settings {
            check_timeout: self.check_timeout,
            deadline: self.deadline,
            cache_ttl: self.cache_ttl,
            thresholds: Thresholds {
                failure: self.failure_threshold,
                success: self.success_threshold,
            },
        }
    }

    /// `must_ready` by check name, for [`crate::HealthChecker::with_overrides`].
    pub fn overrides(&self) -> BTreeMap<String, bool> {
        self.checks
            .iter()
            .map(|(name, check)| (name.clone(), check.must_ready))
            .collect()
    }

    /// For what types cannot say; `known` tells whether a check name in
    /// `checks` is one this process can register.
    pub fn validate(&self, known: impl Fn(&str) -> bool) -> Result<(), ConfigIssue> {
        let fail = |key: &str, what: String| Err(ConfigIssue::new(format!("health.{key}"), what));
        if self.check_timeout.is_zero() {
            return fail("check_timeout", "must be above zero".into());
        }
        if self.deadline < self.check_timeout {
            return fail(
                "deadline",
                format!(
                    "{} is below health.check_timeout ({})",
                    show(self.deadline),
                    show(self.check_timeout)
                ),
            );
        }
        if self.failure_threshold == 0 {
            return fail("failure_threshold", "must be at least 1".into());
        }
        if self.success_threshold == 0 {
            return fail("success_threshold", "must be at least 1".into());
        }
        for name in self.checks.keys() {
            if !known(name) {
                return fail(&format!("checks.{name}"), "unknown check".into());
            }
        }
        Ok(())
    }
}

fn show(d: Duration) -> String {
    humantime_serde::re::humantime::format_duration(d).to_string()
}
