//! Status and metrics: what the syncer can say about itself, each cluster and each
//! watched type, written by the cluster runs and read at any time by the checks, the API
//! and `/metrics`; and the reason codes those say what went wrong with.

pub(crate) mod clusters;
pub(crate) mod metrics;
pub(crate) mod reason;
pub(crate) mod watched_types;
