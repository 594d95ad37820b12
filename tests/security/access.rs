//! No write without a credential, even on loopback: the embedded default reads anonymously
//! and writes with the admin token it made at first start, which the CLI finds by itself
//! when run beside the data; anonymous admin cannot be configured.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::{cluster_body, kubeconfig_with_user};
use karpor_testkit::api::Client;
use karpor_testkit::process::{Spawn, EMBEDDED};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_without_credentials_are_refused_even_on_loopback() {
    let karpor = Spawn::serve(EMBEDDED).start();
    let anonymous = Client::new(&karpor);
    let (code, _) = anonymous.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200, "reads stay anonymous on loopback");
    let body = cluster_body(&kubeconfig_with_user("    token: secret-token-1"));
    for (method, path) in [
        ("POST", "/rest-api/v1/cluster/anon"),
        ("PUT", "/rest-api/v1/cluster/anon"),
        ("DELETE", "/rest-api/v1/cluster/anon"),
        ("POST", "/rest-api/v1/cluster/config/validate"),
        ("POST", "/rest-api/v1/resource-group-rule/anon"),
    ] {
        let (code, answer) = anonymous.call(method, path, Some(body.clone())).await;
        assert_eq!(code, 401, "{method} {path}: {answer}");
    }

    let token_file = karpor.dir().join("data/admin-token");
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        karpor.logs().contains("data/admin-token"),
        "the start says where the token is"
    );
    let token = karpor.local_token();
    assert!(
        !karpor.logs().contains(&token),
        "the token itself is never logged"
    );
    let admin = Client::with_token(&karpor, &token);
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/with-token",
            Some(body.clone()),
        )
        .await;
    assert_eq!(code, 201, "{answer}");

    // The CLI beside the data finds the token; elsewhere it is refused and says how.
    let kubeconfig = karpor.dir().join("k.yaml");
    std::fs::write(
        &kubeconfig,
        kubeconfig_with_user("    token: secret-token-1"),
    )
    .unwrap();
    let cli = |dir: &std::path::Path, name: &str| {
        Command::new(env!("CARGO_BIN_EXE_karpor"))
            .args(["cluster", "add", name, "--no-validate", "--kubeconfig"])
            .arg(&kubeconfig)
            .env("KARPOR_SERVER", karpor.url(""))
            .env_remove("KARPOR_TOKEN")
            .env_remove("KARPOR_TOKEN_FILE")
            .current_dir(dir)
            .output()
            .unwrap()
    };
    let beside = cli(karpor.dir(), "by-cli");
    assert!(
        beside.status.success(),
        "{}",
        String::from_utf8_lossy(&beside.stderr)
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let refused = cli(elsewhere.path(), "by-stranger");
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("KARPOR_TOKEN"),
        "{stderr}"
    );

    // A restart keeps the same token.
    let mut karpor = karpor;
    karpor.signal("TERM");
    karpor
        .wait_exit(std::time::Duration::from_secs(10))
        .unwrap();
    karpor.serve_again(EMBEDDED);
    assert_eq!(karpor.local_token(), token);
}

#[test]
fn anonymous_admin_cannot_be_configured() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.yaml"), "auth: {anonymous: admin}\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_karpor"))
        .args(["serve", "--config", "k.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("auth.anonymous") && stderr.contains("admin"),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists(), "nothing started");
}
