//! Small pieces shared by karpor's crates: the records users write (access policies in
//! `access`, beside the names they hold), secrets in config,
//! opening an embedded SQLite file, files only karpor's user may read, and whether what
//! karpor finds on disk can be trusted.

pub mod access;
pub mod metrics;
pub mod model;
pub mod names;
pub mod private_file;
mod secret;
pub mod sqlite;
pub mod trusted;

pub use secret::{Secret, SecretError, SecretSource};
