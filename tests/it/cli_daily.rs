//! The CLI as a user meets it every day: one server address for every command (and no
//! collision with the server's config), names encoded, nothing silent, a cluster checked
//! before it is registered and waited for, kubectl's `-o` formats, `get` and `update`,
//! keyword search, completion, an unknown log level refused, imports that meet existing
//! records.

use std::path::Path;
use std::process::Command;

use karpor_testkit::process::{Spawn, EMBEDDED};
use karpor_testkit::service;
use serde_json::Value;

use crate::cli::{karpor, text};

const UNREACHABLE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: secret-token-1}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_are_checked_before_registration_and_listed_as_kubectl_would() {
    let kubeconfig_a = service("KARPOR_TEST_KUBECONFIG_A").expect("test services");
    let server = Spawn::serve(EMBEDDED).start();
    // Scheme-less, as users type it.
    let url = server.addr.to_string();
    let dir = server.dir();
    let dead = write(dir, "dead.yaml", UNREACHABLE);

    let (code, _, err) = text(&karpor(
        &["cluster", "add", "dead", "--kubeconfig", &dead],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot reach the API server") && err.contains("--no-validate"),
        "{err}"
    );
    let (code, _, err) = text(&karpor(
        &[
            "cluster",
            "add",
            "dead",
            "--kubeconfig",
            &dead,
            "--no-validate",
            "--label",
            "env=test",
            "--display-name",
            "Dead one",
        ],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0, "{err}");

    let (code, out, err) = text(&karpor(
        &[
            "cluster",
            "add",
            "alive",
            "--kubeconfig",
            &kubeconfig_a,
            "--wait",
        ],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cluster alive synced ("), "{out}");
    assert!(err.contains("objects synced"), "progress is shown: {err}");

    // The dead cluster's reason is in the list, not only `error`.
    let list = |format: &str| text(&karpor(&["cluster", "list", "-o", format], &url, dir, &[]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, out, _) = list("table");
        if out.contains("error (unreachable)") {
            let header = out.lines().next().unwrap();
            let words: Vec<&str> = header.split_whitespace().collect();
            assert_eq!(
                words,
                ["NAME", "DISPLAY", "NAME", "SERVER", "SYNC", "OBJECTS"],
                "{out}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let (_, wide, _) = list("wide");
    assert!(
        wide.contains("LABELS") && wide.contains("env=test"),
        "{wide}"
    );
    let (_, names, _) = list("name");
    assert_eq!(names, "cluster/alive\ncluster/dead\n");
    let (_, json, _) = list("json");
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
    let (_, yaml, _) = list("yaml");
    assert!(yaml.contains("name: alive"), "{yaml}");

    let (code, one, _) = text(&karpor(
        &["cluster", "get", "dead", "-o", "yaml"],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0);
    assert!(one.contains("displayName: Dead one"), "{one}");
    assert!(!one.contains("secret-token-1"), "{one}");
    let (code, _, err) = text(&karpor(
        &[
            "cluster",
            "update",
            "dead",
            "--description",
            "kept for the test",
        ],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    let (_, one, _) = text(&karpor(
        &["cluster", "get", "dead", "-o", "json"],
        &url,
        dir,
        &[],
    ));
    let one: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(one["description"], "kept for the test");

    // Keyword search, and `-o name` for scripts.
    // Every type is synced (RBAC objects in kube-system too): one page holds them all.
    let (code, out, err) = text(&karpor(
        &[
            "search",
            "--keyword",
            "kube-system",
            "--page-size",
            "1000",
            "-o",
            "name",
        ],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().any(|l| l == "alive/namespace/kube-system"),
        "{out}"
    );
    // A bare word is a keyword, not refused as SQL; `--keyword` narrows an SQL query.
    let (code, bare, err) = text(&karpor(
        &["search", "kube-system", "--page-size", "1000", "-o", "name"],
        &url,
        dir,
        &[],
    ));
    assert_eq!((code, &bare), (0, &out), "{err}");
    let (code, narrowed, err) = text(&karpor(
        &[
            "search",
            "select * from resources where kind = 'Namespace'",
            "--keyword",
            "kube-",
            "-o",
            "name",
        ],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = narrowed.lines().collect();
    assert!(names.contains(&"alive/namespace/kube-system"), "{narrowed}");
    assert!(!names.contains(&"alive/namespace/default"), "{narrowed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_speaks_the_same_address_encodes_names_and_is_never_silent() {
    let server = Spawn::serve(EMBEDDED).start();
    let dir = server.dir();
    let dead = write(dir, "dead.yaml", UNREACHABLE);
    let url = server.addr.to_string();
    let (code, _, err) = text(&karpor(
        &[
            "cluster",
            "add",
            "prod",
            "--kubeconfig",
            &dead,
            "--no-validate",
        ],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    let health = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_karpor"))
            .arg("health")
            .args(args)
            .env("KARPOR_SERVER", &url)
            .output()
            .unwrap();
        text(&output)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, out, err) = health(&["--check", "Cluster/prod"]);
        if out.contains("[-] Cluster/prod failed") {
            assert_eq!(code, 1);
            assert_eq!(
                out, "[-] Cluster/prod failed: unreachable (non-critical)\nhealth check failed\n",
                "{err}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{code} {out} {err}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let (code, out, _) = health(&["--check", "NoSuchCheck"]);
    assert_eq!(code, 1);
    assert!(out.contains("unknown check"), "{out}");
    // --url still works, scheme-less too.
    let (code, out, _) = health(&["--url", &url, "--livez"]);
    assert_eq!(code, 0);
    assert!(
        out.ends_with("[+] Heartbeat ok\nhealth check passed\n"),
        "{out}"
    );
    // The client's address never reaches the server's config.
    let export = Command::new(env!("CARGO_BIN_EXE_karpor"))
        .args(["metadata", "export"])
        .env("KARPOR_SERVER", "http://127.0.0.1:7443")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
}

#[test]
fn completion_and_an_unknown_log_level() {
    let bin = env!("CARGO_BIN_EXE_karpor");
    let output = Command::new(bin)
        .args(["completion", "bash"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let script = String::from_utf8_lossy(&output.stdout);
    assert!(
        script.contains("_karpor()") && script.contains("cluster"),
        "{script}"
    );
    let output = Command::new(bin)
        .args(["serve", "--log-level", "verbose"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.yaml"), "log: {level: chatty}\n").unwrap();
    let output = Command::new(bin)
        .args(["serve", "--config", "k.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("log.level") && stderr.contains("chatty"),
        "{stderr}"
    );
}
