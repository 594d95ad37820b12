//! Small pieces shared by karpor's crates: the records users write, secrets in config,
//! opening an embedded SQLite file, and files only karpor's user may read.

pub mod metrics;
pub mod model;
pub mod private_file;
mod secret;
pub mod sqlite;

pub use secret::{Secret, SecretError, SecretSource};
