//! Which of a cluster's watchers still owe their first full list; the cluster is synced
//! when none does.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use crate::rules::TargetKey;
use crate::status::{ClusterProgress, SyncState};

#[derive(Debug)]
pub struct InitialLists {
    pending: Mutex<HashSet<TargetKey>>,
    progress: Arc<ClusterProgress>,
}

impl InitialLists {
    pub fn new(progress: Arc<ClusterProgress>) -> Self {
        InitialLists {
            pending: Mutex::default(),
            progress,
        }
    }

    /// A watcher starts; its first list is owed.
    pub fn expect(&self, key: TargetKey) {
        self.lock().insert(key);
    }

    /// A watcher's first list is in storage.
    pub fn listed(&self, key: &TargetKey) {
        self.lock().remove(key);
        self.refresh();
    }

    /// A watcher stopped; whatever it owed is no longer owed.
    pub fn dropped(&self, key: &TargetKey) {
        self.listed(key);
    }

    /// After an error: the state the cluster is in again once its watchers are back.
    pub fn refresh(&self) {
        let state = if self.lock().is_empty() {
            SyncState::Synced
        } else {
            SyncState::Syncing
        };
        self.progress.set_state(state);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<TargetKey>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
