//! `syncer:` in the config file: this crate's section, its defaults (those of
//! [`SyncSettings`]) and its validation.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{SyncSettings, WriterSettings};

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
    /// How often each cluster's discovery runs again, to pick up new resource types.
    #[serde(with = "humantime_serde")]
    pub rediscover_interval: Duration,
}

impl Default for SyncerConfig {
    fn default() -> Self {
        let settings = SyncSettings::default();
        SyncerConfig {
            probe_listen: SocketAddr::from(([127, 0, 0, 1], 7444)),
            batch_size: settings.writer.max_documents,
            batch_window: settings.writer.window,
            queue: settings.writer.queue,
            rediscover_interval: settings.rediscover,
        }
    }
}

impl SyncerConfig {
    /// `(key, problem)` for what types cannot say.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let fail = |key: &str, what: &str| Err((format!("syncer.{key}"), what.to_owned()));
        if self.batch_size == 0 {
            return fail("batch_size", "must be at least 1");
        }
        if self.queue == 0 {
            return fail("queue", "must be at least 1");
        }
        if self.batch_window.is_zero() {
            return fail("batch_window", "must be above zero");
        }
        if self.rediscover_interval < Duration::from_secs(1) {
            return fail("rediscover_interval", "must be at least 1s");
        }
        Ok(())
    }

    /// The syncer's settings: this section over the built-in timings.
    pub fn settings(&self) -> SyncSettings {
        let defaults = SyncSettings::default();
        SyncSettings {
            writer: WriterSettings {
                max_documents: self.batch_size,
                window: self.batch_window,
                queue: self.queue,
                ..defaults.writer
            },
            rediscover: self.rediscover_interval,
            ..defaults
        }
    }
}
