//! Ingest: what a Kubernetes object becomes in storage. The trimming every object gets
//! and the one its rule asks for (`transform`), the audit policy and relation rules every
//! document is written with (`policy`), and the one finding that needs other documents
//! (`pdb`). Pure of any cluster or task: the cluster runs apply it.

pub(crate) mod pdb;
pub(crate) mod policy;
pub(crate) mod transform;
