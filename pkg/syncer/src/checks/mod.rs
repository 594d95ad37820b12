//! The syncer's health checks: `Syncer` where the syncer runs (`syncer`) or where only the
//! server does (`unowned`: does every cluster have a live syncer), and `Cluster/NAME` for
//! each member cluster (`cluster`).

pub(crate) mod cluster;
pub(crate) mod syncer;
pub(crate) mod unowned;
