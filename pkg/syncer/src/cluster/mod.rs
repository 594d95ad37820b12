//! One cluster's run: connect, resolve the rules into targets, one watcher per target
//! feeding one writer, and what the run waits for (`owed_lists`) before it sweeps away what
//! its targets no longer cover and counts each type's documents. The writer writes only
//! while this member's `fence` holds.

pub(crate) mod behind;
pub(crate) mod document_counts;
pub(crate) mod fence;
pub(crate) mod owed_lists;
pub(crate) mod run;
pub(crate) mod sink;
pub(crate) mod sweep;
pub(crate) mod watcher;
pub(crate) mod writer;
