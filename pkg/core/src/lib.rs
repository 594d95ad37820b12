//! Small pieces shared by karpor's crates: the records users write, secrets in config,
//! and opening an embedded SQLite file.

pub mod model;
mod secret;
pub mod sqlite;

pub use secret::{Secret, SecretError, SecretSource};
