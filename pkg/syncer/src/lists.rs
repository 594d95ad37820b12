//! Which of a cluster's watchers still owe their first full list (the cluster is synced
//! when none does), and which owe any list under the current audit policy (the cluster
//! is audited with it when none does).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use crate::rules::TargetKey;
use crate::status::{ClusterProgress, SyncState};

#[derive(Debug, Default)]
struct Owed {
    first: HashSet<TargetKey>,
    /// Lists under audit policy `generation` still running.
    any: HashSet<TargetKey>,
    generation: u64,
}

#[derive(Debug)]
pub struct InitialLists {
    pending: Mutex<Owed>,
    progress: Arc<ClusterProgress>,
}

impl InitialLists {
    pub fn new(progress: Arc<ClusterProgress>) -> Self {
        InitialLists {
            pending: Mutex::default(),
            progress,
        }
    }

    /// The watchers about to start list with audit policy `generation`.
    pub fn generation(&self, generation: u64) {
        self.lock().generation = generation;
    }

    /// A watcher starts: its list is owed, and its first list when `first`.
    pub fn expect(&self, key: TargetKey, first: bool) {
        let mut owed = self.lock();
        if first {
            owed.first.insert(key.clone());
        }
        owed.any.insert(key);
    }

    /// A watcher's list is in storage.
    pub fn listed(&self, key: &TargetKey) {
        let done = {
            let mut owed = self.lock();
            owed.first.remove(key);
            owed.any.remove(key);
            owed.any.is_empty().then_some(owed.generation)
        };
        if let Some(generation) = done {
            self.progress.audited(generation);
        }
        self.refresh();
    }

    /// A watcher stopped; whatever it owed is no longer owed.
    pub fn dropped(&self, key: &TargetKey) {
        self.listed(key);
    }

    /// After an error: the state the cluster is in again once its watchers are back.
    pub fn refresh(&self) {
        let state = if self.lock().first.is_empty() {
            SyncState::Synced
        } else {
            SyncState::Syncing
        };
        self.progress.set_state(state);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owed> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
