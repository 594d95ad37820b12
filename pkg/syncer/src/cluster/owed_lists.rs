//! A cluster's running watchers and what they owe: a list since they started (the
//! cluster is syncing while a first one is owed, and audited with a policy once none is
//! owed under it), and the sweep that follows a change of targets. A watcher that cannot
//! list its type (forbidden, gone) owes nothing while it fails: its type shows the error
//! and the rest of the cluster settles.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use karpor_health::Reason;
use tokio::sync::watch;

use crate::rules::resolve::{Target, TargetKey};
use crate::status::clusters::{ClusterProgress, SyncState};
use crate::status::watched_types::{TypeError, TypeId, TypeInfo, TypeProgress, TypeState};

#[derive(Debug)]
struct Watch {
    /// Its list since it started is not in storage yet.
    owed: bool,
    /// The cluster is syncing while it is owed (a new type's list, not a relist).
    holds: bool,
    failing: Option<TypeError>,
    progress: Arc<TypeProgress>,
}

impl Watch {
    fn waited_for(&self) -> bool {
        self.owed && self.failing.is_none()
    }
}

#[derive(Debug, Default)]
struct Owed {
    running: HashMap<TargetKey, Watch>,
    /// The audit policy generation the running watchers list with.
    generation: u64,
    /// Documents the targets no longer cover are still to be removed.
    sweep: bool,
}

/// The fingerprints ([`TargetKey::fingerprint`]) of the targets whose lists the sink
/// holds: an agent keeps them across a restart, to compare those lists instead of sending
/// them again.
pub(crate) type Held = Arc<watch::Sender<BTreeSet<String>>>;

#[derive(Debug)]
pub(crate) struct Lists {
    owed: Mutex<Owed>,
    progress: Arc<ClusterProgress>,
    /// Bumped on every change, for [`Lists::settled`].
    changes: watch::Sender<u64>,
    held: Held,
}

impl Lists {
    pub(crate) fn new(progress: Arc<ClusterProgress>, held: Held) -> Self {
        Lists {
            owed: Mutex::default(),
            progress,
            changes: watch::Sender::new(0),
            held,
        }
    }

    /// The watchers about to start list with audit policy `generation`.
    pub(crate) fn generation(&self, generation: u64) {
        self.lock().generation = generation;
    }

    /// A watcher starts: its list is owed; the cluster waits for it when `holds`.
    pub(crate) fn start(&self, key: TargetKey, target: &Target, holds: bool) -> Arc<TypeProgress> {
        let r = &target.resource;
        let progress = self.progress.watch_type(TypeInfo {
            id: TypeId {
                group: r.group.clone(),
                version: r.version.clone(),
                resource: r.plural.clone(),
                namespace: target.namespace.clone(),
            },
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespaced: target.namespaced,
            rule: target.options.rule.clone(),
        });
        self.lock().running.insert(
            key,
            Watch {
                owed: true,
                holds,
                failing: None,
                progress: progress.clone(),
            },
        );
        self.changed();
        progress
    }

    /// A watcher's list is in storage.
    pub(crate) fn listed(&self, key: &TargetKey) {
        if let Some(watch) = self.lock().running.get_mut(key) {
            watch.owed = false;
            watch.failing = None;
            watch.progress.set_state(TypeState::Synced);
        }
        let fingerprint = key.fingerprint();
        self.held
            .send_if_modified(|held| held.insert(fingerprint.clone()));
        self.changed();
    }

    /// A watcher stopped for good (its type, namespace or options changed): the sink's
    /// documents of it are no longer those of a list under its options.
    pub(crate) fn forget(&self, key: &TargetKey) {
        let fingerprint = key.fingerprint();
        self.held.send_if_modified(|held| held.remove(&fingerprint));
    }

    /// A watcher cannot list or watch its type now.
    pub(crate) fn failing(&self, key: &TargetKey, error: TypeError) {
        if let Some(watch) = self.lock().running.get_mut(key) {
            watch.failing = Some(error);
            watch.progress.set_state(TypeState::Error(error));
        }
        self.changed();
    }

    /// A failing watcher is back: it lists again, or follows changes if it had listed.
    pub(crate) fn resumed(&self, key: &TargetKey) {
        if let Some(watch) = self.lock().running.get_mut(key) {
            watch.failing = None;
            watch.progress.set_state(if watch.owed {
                TypeState::Syncing
            } else {
                TypeState::Synced
            });
        }
        self.changed();
    }

    /// A watcher stopped; whatever it owed is no longer owed.
    pub(crate) fn stopped(&self, key: &TargetKey) {
        let removed = self.lock().running.remove(key);
        if let Some(watch) = removed {
            self.progress.unwatch_type(&watch.progress);
        }
        self.changed();
    }

    /// The targets changed: documents they no longer cover are to be removed once the
    /// new watchers have listed.
    pub(crate) fn owe_sweep(&self) {
        self.lock().sweep = true;
        self.changed();
    }

    pub(crate) fn swept(&self) {
        self.lock().sweep = false;
        self.changed();
    }

    /// Every running watcher has listed (or cannot list): what they cover is in storage.
    pub(crate) async fn settled(&self) {
        let mut changes = self.changes.subscribe();
        loop {
            if !self.lock().running.values().any(Watch::waited_for) {
                return;
            }
            if changes.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// After an error, or a change of what is owed: the state the cluster is in. Set
    /// under the lock, so two tasks never leave an older answer last.
    pub(crate) fn refresh(&self) {
        let owed = self.lock();
        let failing: Vec<TypeError> = owed.running.values().filter_map(|w| w.failing).collect();
        let state = if !owed.running.is_empty() && failing.len() == owed.running.len() {
            // Nothing can be listed: the cluster's credentials, or the cluster.
            if failing.contains(&TypeError::Unreachable) {
                SyncState::Error(Reason::Unreachable)
            } else {
                SyncState::Error(Reason::Unauthorized)
            }
        } else if owed.sweep || owed.running.values().any(|w| w.holds && w.waited_for()) {
            SyncState::Syncing
        } else {
            SyncState::Synced
        };
        self.progress.set_state(state);
    }

    fn changed(&self) {
        let audited = {
            let owed = self.lock();
            (!owed.running.values().any(Watch::waited_for)).then_some(owed.generation)
        };
        if let Some(generation) = audited {
            self.progress.audited(generation);
        }
        self.refresh();
        self.changes.send_modify(|n| *n += 1);
    }

    fn lock(&self) -> MutexGuard<'_, Owed> {
        self.owed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
