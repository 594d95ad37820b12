//! Link-local and cloud metadata servers: a kubeconfig whose server is one is refused at
//! registration and validation, at once and before any connection, unless the operator
//! allows such servers (`kubernetes.allow_link_local_servers`). No test here sends a
//! packet off the host: with the key set, only registration (which connects to nothing
//! without a syncer) and a validation against `fe80::1`, which the kernel refuses to
//! connect to without an interface (EINVAL), are tried.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::cluster_body;
use karpor_testkit::api::Client;
use karpor_testkit::process::Spawn;

const REGISTER: &str = "/rest-api/v1/cluster/meta";
const VALIDATE: &str = "/rest-api/v1/cluster/config/validate";
const SERVERS: &[&str] = &[
    "https://169.254.169.254",
    "https://[fe80::1]",
    "http://metadata.google.internal",
];
const BASE: &str = "server: {syncer: false}\nshutdown: {drain_delay: 1s}\n";

/// A kubeconfig with a token user and `server`.
fn with_server(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}', insecure-skip-tls-verify: true}}\n\
         users:\n- name: u\n  user: {{token: x}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    )
}

/// `(status, message, how long it took)`.
async fn post(api: &Client, route: &str, kubeconfig: &str) -> (u16, String, Duration) {
    let body = match route {
        VALIDATE => json!({"kubeConfig": kubeconfig}),
        _ => cluster_body(kubeconfig),
    };
    let started = Instant::now();
    let (code, answer) = api.call("POST", route, Some(body)).await;
    let message = answer["message"].as_str().unwrap_or_default().to_owned();
    (code, message, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_local_and_metadata_servers_are_refused_at_once() {
    let karpor = Spawn::serve(BASE).start();
    let api = Client::local_admin(&karpor);
    for server in SERVERS {
        for route in [REGISTER, VALIDATE] {
            let (code, message, took) = post(&api, route, &with_server(server)).await;
            assert_eq!(code, 400, "{server} {route}: {message}");
            assert!(
                message.contains(&format!(
                    "server {server} is a link-local or cloud metadata address"
                )),
                "{server} {route}: {message}"
            );
            assert!(
                message.contains("kubernetes.allow_link_local_servers"),
                "{message}"
            );
            // A refusal, not a connection attempt that timed out.
            assert!(took < Duration::from_secs(2), "{server} {route}: {took:?}");
        }
    }
    let (code, answer) = api.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["data"]["total"].as_u64(),
        Some(0),
        "a refused cluster was stored: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_can_allow_them() {
    let karpor = Spawn::serve(&format!(
        "{BASE}kubernetes: {{allow_link_local_servers: true}}\n"
    ))
    .start();
    let api = Client::local_admin(&karpor);
    for (i, server) in SERVERS.iter().enumerate() {
        let (code, answer) = api
            .call(
                "POST",
                &format!("{REGISTER}-{i}"),
                Some(cluster_body(&with_server(server))),
            )
            .await;
        assert_eq!(code, 201, "{server}: {answer}");
    }
    // The kernel refuses fe80::1 without an interface: nothing leaves the host.
    let (code, message, took) = post(&api, VALIDATE, &with_server("https://[fe80::1]")).await;
    assert_eq!(code, 400, "{message}");
    assert!(
        message.contains("cannot reach the API server at https://[fe80::1]"),
        "{message}"
    );
    assert!(!message.contains("link-local"), "{message}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}
