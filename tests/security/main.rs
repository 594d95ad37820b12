//! The security suite: the real `karpor serve`, tried as an attacker would (docs/security.md),
//! one test per class of attack. It runs alone after the rest of the workspace (as the
//! reliability suite does): it times `/livez` while hostile requests and a slowloris swarm
//! load the machine.

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod access;
mod bounded;
mod connections;
mod datadir;
mod exec;
mod files;
mod hosts;
mod live;
mod logs;
mod masking;
mod outbound;
mod permissions;
mod private;
mod rules;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

/// A kubeconfig whose server is closed (nothing listens on port 1), its user `USER`.
pub fn kubeconfig_with_user(user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}\n\
         users:\n- name: u\n  user:\n{user}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    )
}

pub fn cluster_body(kubeconfig: &str) -> Value {
    json!({"displayName": "x", "kubeConfig": kubeconfig})
}

/// An executable shell script at `dir/name`.
pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// One HTTP/1.1 request written by hand (so the `Host` header is ours); `(status, body)`.
pub fn raw(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    (status, body.unwrap_or_default())
}

/// GETs `/livez` on a new connection and returns how long it took.
pub fn probe_livez(addr: SocketAddr) -> Duration {
    let started = std::time::Instant::now();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    started.elapsed()
}
