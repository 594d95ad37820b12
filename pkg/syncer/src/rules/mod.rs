//! Sync rules as the syncer reads them: the built-in ones, which rules apply to a cluster,
//! and how they resolve against the cluster's discovery into targets (one watcher each);
//! and a rule tried against a cluster without storing it (`dry_run`).

pub(crate) mod discovery;
pub(crate) mod dry_run;
pub(crate) mod resolve;

// config.rs names it by its path before the rooms.
pub(crate) use resolve::default_rules;
