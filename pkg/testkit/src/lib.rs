//! The test harness shared by every karpor crate's tests and benchmarks: the test
//! services' addresses ([`service`]) and private instances a test may kill
//! ([`services`]), the real binary as a process ([`process`]), a REST API client
//! ([`api`]), member clusters driven through kube-rs ([`cluster`]), a kubelet stand-in
//! for what a kube-apiserver proxies to a node ([`kubelet`]), a self-signed certificate
//! ([`tls`]), the AI tests' OpenAI-compatible model server and its request log
//! ([`model`]), a TCP proxy that cuts the link it carries ([`proxy`]).

#![allow(clippy::unwrap_used)] // a test fails by panicking

pub mod api;
pub mod cluster;
pub mod kubelet;
pub mod model;
pub mod process;
pub mod proxy;
pub mod services;
pub mod tls;

/// The address of a service started by `scripts/test.sh` (`KARPOR_TEST_*`). Missing, it
/// fails the test under CI and skips it, with the reason printed, elsewhere.
pub fn service(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{var} is not set: run the tests through scripts/test.sh")
        }
        _ => {
            eprintln!("SKIP: {var} is not set (run scripts/test.sh to start the services)");
            None
        }
    }
}

/// A name no other test or run uses: `tag_pid_nanos`.
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_nanos();
    format!("{tag}_{}_{nanos}", std::process::id())
}

/// Creates a fresh database on the MySQL server of `url` and returns its URL, so tests
/// running at once never share tables.
pub async fn mysql_database(url: &str, tag: &str) -> String {
    let database = unique(tag);
    let admin = sqlx::MySqlPool::connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot reach the test MySQL: {e}"));
    // The callers' tags are literals like "conformance": `unique` then gives a plain
    // identifier (letters, digits, underscores).
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&admin)
        .await
        .unwrap_or_else(|e| panic!("cannot create database {database}: {e}"));
    admin.close().await;
    let (base, _) = url.rsplit_once('/').expect("a mysql://host/database URL");
    format!("{base}/{database}")
}
