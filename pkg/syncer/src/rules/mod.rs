//! Sync rules as the syncer reads them: the built-in ones (`built_in`), which rules apply
//! to a cluster and how they resolve against its `discovery` into targets, one watcher
//! each (`resolve`); and a rule tried against a cluster without storing it (`dry_run`).

pub(crate) mod built_in;
pub(crate) mod discovery;
pub(crate) mod dry_run;
pub(crate) mod resolve;
