//! Files: a fresh data directory is its user's alone, credentials are encrypted at rest
//! by default, and `metadata export` never writes through a symlink or over a file
//! without `--force`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::{cluster_body, kubeconfig_with_user};
use karpor_testkit::api::Client;
use karpor_testkit::process::{Spawn, EMBEDDED};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_data_directory_is_private_and_credentials_are_sealed() {
    let karpor = Spawn::serve(EMBEDDED).start();
    let admin = Client::with_token(&karpor, &karpor.local_token());
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/sealed",
            Some(cluster_body(&kubeconfig_with_user(
                "    token: secret-token-1",
            ))),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    karpor_testkit::process::wait_for(Duration::from_secs(10), "ready", || async {
        karpor_testkit::process::get(&karpor.url("/readyz")).await.0 == 200
    })
    .await;
    let data = karpor.dir().join("data");
    assert_eq!(mode(&data), 0o700);
    for file in [
        "metadata.db",
        "metadata.db-wal",
        "metadata.db-shm",
        "resources.db",
        "resources.db-wal",
        "metadata.key",
        "admin-token",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    // The token is in the database only sealed, with the key made beside it.
    for file in ["metadata.db", "metadata.db-wal"] {
        let bytes = std::fs::read(data.join(file)).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("secret-token-1"),
            "{file} holds the token in clear"
        );
    }
    assert!(karpor
        .logs()
        .contains("made a key to encrypt cluster credentials"));
}

#[test]
fn export_refuses_an_existing_file_and_never_writes_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let export = |target: &str, force: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_karpor"));
        command
            .args(["metadata", "export", "--output", target])
            .current_dir(dir.path());
        if force {
            command.arg("--force");
        }
        command.output().unwrap()
    };
    let fresh = export("fresh.json", false);
    assert!(
        fresh.status.success(),
        "{}",
        String::from_utf8_lossy(&fresh.stderr)
    );
    assert_eq!(mode(&dir.path().join("fresh.json")), 0o600);

    std::fs::write(dir.path().join("existing.json"), "keep").unwrap();
    let refused = export("existing.json", false);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("existing.json")).unwrap(),
        "keep"
    );
    let forced = export("existing.json", true);
    assert!(forced.status.success());
    assert_eq!(mode(&dir.path().join("existing.json")), 0o600);
    assert!(std::fs::read_to_string(dir.path().join("existing.json"))
        .unwrap()
        .contains("karpor-metadata/v1"));

    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("link.json")).unwrap();
    assert_eq!(export("link.json", false).status.code(), Some(1));
    assert!(export("link.json", true).status.success());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(mode(&victim), 0o644, "the symlink's target is untouched");
    assert_eq!(
        mode(&dir.path().join("link.json")),
        0o600,
        "the link was replaced by a file"
    );
}
