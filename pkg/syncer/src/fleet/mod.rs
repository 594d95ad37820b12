//! The fleet: every registered cluster and the syncers sharing them. The supervisor
//! follows the metadata store and runs one cluster sync per cluster this member holds;
//! this member's `lease`, the `placement` of clusters on members (rendezvous hashing made
//! binding by claims), and the `outage` probe after which every cluster relists.

pub(crate) mod lease;
pub(crate) mod outage;
pub(crate) mod placement;
pub(crate) mod supervisor;
