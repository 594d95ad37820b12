//! What karpor finds on disk is trusted only when nobody else could have written it: a
//! data directory open to others, or an admin token someone else could write or owns,
//! stops the start (exit 2) with the path and the fix, before anything is served. A
//! world-writable `data/` with a planted `admin-token` once let its planter write as
//! admin.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use karpor_testkit::api::Client;
use karpor_testkit::process::{binary, Spawn, EMBEDDED};

/// A token as karpor makes them, but the planter's.
const PLANTED: &str = "karpor_planted-by-someone-else-0123456789abcdef\n";

/// `karpor serve` of the embedded default in `dir`, until it exits (30 s at most):
/// `(exit code, stderr)`. Nothing may have been served: no address was written.
fn refused_start(dir: &Path) -> (Option<i32>, String) {
    std::fs::write(dir.join("karpor.yaml"), EMBEDDED).unwrap();
    let address = dir.join("address");
    let mut child = Command::new(binary())
        .args([
            "serve",
            "--config",
            "karpor.yaml",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--address-file")
        .arg(&address)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline || address.exists() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("karpor started in {} instead of refusing", dir.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        !address.exists(),
        "an address was written: something was served"
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `dir/data` (mode `data_mode`) holding a planted token (mode `token_mode`).
fn planted(dir: &Path, data_mode: u32, token_mode: u32) {
    let data = dir.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("admin-token"), PLANTED).unwrap();
    chmod(&data.join("admin-token"), token_mode);
    chmod(&data, data_mode);
}

#[test]
fn a_world_writable_data_directory_with_a_planted_token_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    planted(dir.path(), 0o777, 0o600);
    let (code, stderr) = refused_start(dir.path());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("data directory ./data is world-writable")
            && stderr.contains("chmod 700 ./data"),
        "the path and the fix: {stderr}"
    );
    assert!(
        !dir.path().join("data/metadata.db").exists(),
        "nothing opened"
    );
}

#[test]
fn a_group_writable_token_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    planted(dir.path(), 0o700, 0o620);
    let (code, stderr) = refused_start(dir.path());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("admin token file data/admin-token is group-writable")
            && stderr.contains("chmod 600 data/admin-token"),
        "{stderr}"
    );
}

#[test]
fn a_token_owned_by_another_user_stops_the_start() {
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("skipped: only root can give a file to another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    planted(dir.path(), 0o700, 0o600);
    std::os::unix::fs::chown(dir.path().join("data/admin-token"), Some(65534), None).unwrap();
    let (code, stderr) = refused_start(dir.path());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("admin token file data/admin-token is owned by uid 65534")
            && stderr.contains("chown 0 data/admin-token"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_directory_still_starts_and_its_token_writes() {
    let karpor = Spawn::serve(EMBEDDED).start();
    let admin = Client::local_admin(&karpor);
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule/fresh",
            Some(serde_json::json!({"fields": ["kind"]})),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    // And again over what it made.
    let mut karpor = karpor;
    karpor.signal("TERM");
    assert!(karpor.wait_exit(Duration::from_secs(10)).is_some());
    karpor.serve_again(EMBEDDED);
    let (code, answer) = Client::local_admin(&karpor)
        .call("GET", "/rest-api/v1/resource-group-rule/fresh", None)
        .await;
    assert_eq!(code, 200, "{answer}");
}
