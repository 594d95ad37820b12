//! Small pieces shared by karpor's crates.

mod secret;
pub mod sqlite;

pub use secret::{Secret, SecretError, SecretSource};
