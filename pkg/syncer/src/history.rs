//! What the syncer asks of history: how long each rule's changes are kept, the note each
//! write carries (kept until, seen late, who changed it), and the background expiry.

use std::sync::Arc;
use std::time::Duration;

use karpor_config::ConfigIssue;
use karpor_core::model::{RuleHistory, MAX_HISTORY_KEEP};
use karpor_storage::{HistoryCaps, HistoryNote, Storage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::status::metrics::SyncMetrics;

/// The least `max_bytes_per_cluster`: below it a cluster keeps next to nothing.
const MIN_BYTES_PER_CLUSTER: u64 = 1 << 20;

/// `syncer.history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistorySettings {
    /// Whether changes are kept for rules that do not say.
    pub enabled: bool,
    /// How long a change is kept, for rules that do not say.
    #[serde(with = "humantime_serde")]
    pub keep: Duration,
    /// Revisions one cluster keeps at most; its oldest go first.
    pub max_per_cluster: u64,
    /// Bytes of patches and states (as JSON text) one cluster keeps at most; its oldest
    /// revisions go first.
    pub max_bytes_per_cluster: u64,
    /// How often expired revisions are removed (and the sizes counted for metrics).
    #[serde(with = "humantime_serde")]
    pub expire_every: Duration,
}

impl Default for HistorySettings {
    fn default() -> Self {
        HistorySettings {
            enabled: true,
            keep: Duration::from_secs(7 * 24 * 3600),
            max_per_cluster: 1_000_000,
            max_bytes_per_cluster: 1 << 30,
            expire_every: Duration::from_secs(300),
        }
    }
}

impl HistorySettings {
    pub(crate) fn validate(&self) -> Result<(), ConfigIssue> {
        let fail = |key: &str, what: &str| {
            Err(ConfigIssue::new(
                format!("syncer.history.{key}"),
                what.to_owned(),
            ))
        };
        if self.keep.is_zero() || self.keep > MAX_HISTORY_KEEP {
            return fail("keep", "must be between 1s and 366d");
        }
        if self.max_per_cluster == 0 {
            return fail("max_per_cluster", "must be at least 1");
        }
        if self.max_bytes_per_cluster < MIN_BYTES_PER_CLUSTER {
            return fail("max_bytes_per_cluster", "must be at least 1048576 (1 MiB)");
        }
        if self.expire_every < Duration::from_secs(1) {
            return fail("expire_every", "must be at least 1s");
        }
        Ok(())
    }

    /// A cluster's caps.
    pub(crate) fn caps(&self) -> HistoryCaps {
        HistoryCaps {
            revisions: self.max_per_cluster,
            bytes: self.max_bytes_per_cluster,
        }
    }

    /// How long a rule's changes are kept; `None`: not at all.
    pub(crate) fn keep_for(&self, rule: Option<RuleHistory>) -> Option<Duration> {
        match rule {
            Some(RuleHistory { enabled: false, .. }) => None,
            Some(RuleHistory {
                keep: Some(keep), ..
            }) => Some(keep),
            Some(RuleHistory { keep: None, .. }) => Some(self.keep),
            None => self.enabled.then_some(self.keep),
        }
    }
}

/// The note of a write seen at `now`: `None` when the rule keeps no history.
pub(crate) fn note(
    keep: Option<Duration>,
    now: OffsetDateTime,
    late: bool,
    object: Option<&Value>,
) -> Option<HistoryNote> {
    let keep = keep?;
    Some(HistoryNote {
        keep_until: now + keep,
        late,
        managers: object.map(managers).unwrap_or_default(),
        preexisting: false,
    })
}

/// Whether an object seen at a list (`late`) was there before karpor began watching its
/// cluster (`watching_since`), as its `creationTimestamp` says: its first write imports
/// it, it was not created.
pub(crate) fn preexisting(
    late: bool,
    created: Option<OffsetDateTime>,
    watching_since: OffsetDateTime,
) -> bool {
    late && created.is_some_and(|created| created < watching_since)
}

/// The managers of an object's newest `managedFields` entries: who changed it last, as
/// far as the object says.
pub(crate) fn managers(object: &Value) -> Vec<String> {
    let entries = object["metadata"]["managedFields"].as_array();
    let newest = entries
        .into_iter()
        .flatten()
        .filter_map(|e| e["time"].as_str())
        .max();
    let mut managers: Vec<String> = entries
        .into_iter()
        .flatten()
        .filter(|e| newest.is_some() && e["time"].as_str() == newest)
        .filter_map(|e| e["manager"].as_str().map(str::to_owned))
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

/// Removes expired revisions every `expire_every` until `stop`, and reports the sizes.
pub(crate) fn spawn_expiry(
    storage: Arc<dyn Storage>,
    settings: HistorySettings,
    metrics: SyncMetrics,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(settings.expire_every);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let pass = async {
                let expired = storage
                    .expire(OffsetDateTime::now_utc(), settings.caps())
                    .await?;
                let sizes = storage.history_sizes().await?;
                Ok::<_, karpor_storage::StorageError>((expired, sizes))
            };
            match pass.await {
                Ok((expired, sizes)) => {
                    if expired > 0 {
                        tracing::info!(expired, "removed expired revisions from history");
                    }
                    metrics.history(&sizes, expired);
                }
                // Storage's own check reports an outage; the next pass tries again.
                Err(e) => tracing::debug!(error = %e, "cannot expire history"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::macros::datetime;

    use super::*;

    #[test]
    fn what_a_list_finds_from_before_the_cluster_was_watched_is_preexisting() {
        let watching_since = datetime!(2026-12-01 10:00 UTC);
        let before = Some(datetime!(2026-12-01 09:59:59 UTC));
        let after = Some(datetime!(2026-12-01 10:00:01 UTC));
        assert!(
            preexisting(true, before, watching_since),
            "listed, older than the registration"
        );
        assert!(
            !preexisting(true, after, watching_since),
            "created while karpor was away"
        );
        assert!(
            !preexisting(false, before, watching_since),
            "a watch's event is news"
        );
        assert!(!preexisting(true, None, watching_since), "no time: kept");
    }

    #[test]
    fn a_rule_says_before_the_section() {
        let settings = HistorySettings::default();
        let week = Some(settings.keep);
        assert_eq!(settings.keep_for(None), week);
        let off = RuleHistory {
            enabled: false,
            keep: None,
        };
        assert_eq!(settings.keep_for(Some(off)), None);
        let month = Duration::from_secs(30 * 24 * 3600);
        let long = RuleHistory {
            enabled: true,
            keep: Some(month),
        };
        let quiet = HistorySettings {
            enabled: false,
            ..settings
        };
        assert_eq!(quiet.keep_for(Some(long)), Some(month));
        assert_eq!(quiet.keep_for(None), None);
    }

    #[test]
    fn the_newest_managers_changed_it() {
        let object = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-create", "time": "2026-12-01T10:00:00Z"},
            {"manager": "kube-controller-manager", "time": "2026-12-01T10:05:00Z"},
            {"manager": "kubectl-edit", "time": "2026-12-01T10:05:00Z"},
        ]}});
        assert_eq!(
            managers(&object),
            ["kube-controller-manager", "kubectl-edit"]
        );
        assert!(managers(&json!({"metadata": {}})).is_empty());
    }

    #[test]
    fn bad_settings_name_their_key() {
        let zero = HistorySettings {
            keep: Duration::ZERO,
            ..HistorySettings::default()
        };
        assert_eq!(zero.validate().unwrap_err().key(), "syncer.history.keep");
        let tiny = HistorySettings {
            max_bytes_per_cluster: 1000,
            ..HistorySettings::default()
        };
        assert_eq!(
            tiny.validate().unwrap_err().key(),
            "syncer.history.max_bytes_per_cluster"
        );
    }
}
