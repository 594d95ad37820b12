//! The REST API in-process: the router `karpor serve` mounts, built by the crate's own
//! constructor over SQLite files in a temporary directory and driven request by request
//! (no socket, no process). Routes, statuses, roles, read-only mode, limits, the error
//! envelope and the shapes of the answers. What needs a process (config files, exit
//! codes, signals, TLS, the CLI) or a real member cluster stays in the binary's
//! `tests/it`.

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod access;
mod ai;
mod app;
mod clusters;
mod document;
mod limits;
mod logs;
mod oidc;
mod policies;
mod scope;
mod search;
mod sync_rules;

use serde_json::{json, Value};

/// A cluster's body with `kubeconfig`.
fn cluster_body(kubeconfig: &str) -> Value {
    json!({"displayName": "One", "description": "test", "kubeConfig": kubeconfig})
}

/// `text` as a query value.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
