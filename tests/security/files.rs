//! A kubeconfig sent to the API names files on karpor's host: every such field is refused
//! with a 400 naming the field, without opening the path (a FIFO would block the open),
//! and with the same answer whether the path exists or not. The CLI, on the user's own
//! machine, inlines such files, so a file-based kubeconfig can still be added.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::kubeconfig_with_user;
use karpor_testkit::api::Client;
use karpor_testkit::process::{wait_for, Spawn, EMBEDDED};
use karpor_testkit::service;

/// Every field of a kubeconfig that can name a file.
const FIELDS: &[&str] = &[
    "tokenFile",
    "client-certificate",
    "client-key",
    "certificate-authority",
];

/// A kubeconfig whose `field` names `path`.
fn naming(field: &str, path: &str) -> String {
    match field {
        "tokenFile" => kubeconfig_with_user(&format!("    tokenFile: {path}")),
        "client-certificate" => kubeconfig_with_user(&format!(
            "    client-certificate: {path}\n    client-key-data: S0VZ"
        )),
        "client-key" => kubeconfig_with_user(&format!(
            "    client-certificate-data: Q0VSVA==\n    client-key: {path}"
        )),
        _ => kubeconfig_with_user("    token: x").replace(
            "insecure-skip-tls-verify: true",
            &format!("certificate-authority: {path}"),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_file_references_are_refused_for_every_field_without_touching_them() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let karpor = Spawn::serve("server: {syncer: false}\nshutdown: {drain_delay: 1s}\n").start();
    let api = Client::with_token(&karpor, &karpor.local_token());
    let paths = [
        fifo.display().to_string(),
        "/etc/hostname".to_owned(),
        "/nonexistent/karpor".to_owned(),
    ];
    for field in FIELDS {
        let mut messages = Vec::new();
        for path in &paths {
            for route in [
                "/rest-api/v1/cluster/refs",
                "/rest-api/v1/cluster/config/validate",
            ] {
                let started = Instant::now();
                let (code, answer) = api
                    .call(
                        "POST",
                        route,
                        Some(json!({"kubeConfig": naming(field, path)})),
                    )
                    .await;
                assert_eq!(code, 400, "{field} {path} {route}: {answer}");
                assert!(started.elapsed() < Duration::from_secs(5));
                let message = answer["message"].as_str().unwrap().to_owned();
                assert!(
                    message.contains(&format!("{field} names a file")),
                    "{field}: {message}"
                );
                assert!(!message.contains(path.as_str()), "{message}");
                messages.push(message);
            }
        }
        // The same words whether the path exists, is a FIFO or is missing.
        messages.dedup();
        assert_eq!(messages.len(), 1, "{field}: {messages:?}");
    }
    let (code, _) = api.call("GET", "/rest-api/v1/cluster/refs", None).await;
    assert_eq!(code, 404, "nothing was registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_kubeconfig_naming_a_file_is_refused_by_the_syncer_too() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let karpor_dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_with_user(&format!("    tokenFile: {}", fifo.display()));
    // An import writes the record as it is: the syncer must still never read the path.
    karpor_testkit::process::import_clusters(
        karpor_dir.path(),
        EMBEDDED,
        &[("stale", &kubeconfig)],
    );
    let karpor = Spawn::serve(EMBEDDED).in_dir(karpor_dir.path()).start();
    wait_for(
        Duration::from_secs(15),
        "the cluster's check fails",
        || async {
            let (_, body) = karpor_testkit::process::get(&karpor.url("/readyz?verbose")).await;
            body.contains("[-] Cluster/stale failed: misconfigured")
        },
    )
    .await;
    let (code, body) = karpor_testkit::process::get(&karpor.url("/livez")).await;
    assert_eq!((code, body.trim()), (200, "OK"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_inlines_a_file_based_kubeconfig_so_nothing_that_worked_is_lost() {
    let path = service("KARPOR_TEST_KUBECONFIG_A").expect("test services: scripts/services.sh");
    let files = tempfile::tempdir().unwrap();
    // The test cluster's kubeconfig with its CA and token in files beside it.
    let flat = karpor_testkit::process::flat_kubeconfig(&path);
    let config = karpor_kube::kubeconfig::parse(&flat).unwrap();
    let cluster = config.clusters[0].cluster.clone().unwrap();
    let ca = base64_decode(cluster.certificate_authority_data.as_deref().unwrap());
    std::fs::write(files.path().join("ca.crt"), ca).unwrap();
    std::fs::write(files.path().join("token"), "test-admin-token\n").unwrap();
    let file_based = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {{server: '{}', certificate-authority: ca.crt}}\n\
         users:\n- name: u\n  user: {{tokenFile: token}}\ncontexts:\n- name: a\n  context: {{cluster: a, user: u}}\ncurrent-context: a\n",
        cluster.server.unwrap()
    );
    std::fs::write(files.path().join("config"), file_based).unwrap();
    let karpor = Spawn::serve(EMBEDDED).start();
    let output = Command::new(env!("CARGO_BIN_EXE_karpor"))
        .args(["cluster", "add", "filed", "--kubeconfig"])
        .arg(files.path().join("config"))
        .env("KARPOR_SERVER", karpor.url(""))
        .env_remove("KARPOR_TOKEN")
        .current_dir(karpor.dir())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    wait_for(Duration::from_secs(30), "the cluster syncs", || async {
        let (_, body) = karpor_testkit::process::get(&karpor.url("/readyz?verbose")).await;
        body.contains("[+] Cluster/filed ok") && body.contains("[+] Syncer ok")
    })
    .await;
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap()
}
