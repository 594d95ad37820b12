//! `karpor metadata export|import`: a user switching backend keeps every record, on the
//! real SQLite, etcd and MariaDB.

use std::path::Path;
use std::process::{Command, Stdio};

use karpor_testkit::{mysql_database, service, unique};

const EXPORT: &str = r#"{
  "format": "karpor-metadata/v1",
  "clusters": [
    {"record": {"name": "prod", "displayName": "Production", "labels": {"env": "prod"},
                "kubeconfig": "apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: s3cr3t}}]\n"},
     "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-02T00:00:00Z"},
    {"record": {"name": "staging", "description": "préprod 🚧", "kubeconfig": "apiVersion: v1\n"},
     "createdAt": "2026-02-01T00:00:00Z", "updatedAt": "2026-02-01T00:00:00Z"}
  ],
  "syncRules": [
    {"record": {"name": "configmaps", "clusters": "*",
                "resources": [{"group": "", "version": "v1", "resource": "configmaps"}],
                "labelSelector": "app=web", "transform": {"mode": "metadataOnly"}},
     "createdAt": "2026-03-01T00:00:00Z", "updatedAt": "2026-03-01T00:00:00Z"}
  ],
  "resourceGroupRules": [
    {"record": {"name": "by-namespace", "fields": ["cluster", "namespace"]},
     "createdAt": "2026-04-01T00:00:00Z", "updatedAt": "2026-04-01T00:00:00Z"}
  ]
}"#;

/// Runs `karpor metadata ARGS` with `config` in `dir`: (exit code, stdout, stderr).
fn metadata(dir: &Path, config: &str, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    std::fs::write(dir.join("karpor.yaml"), config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpor"))
        .arg("metadata")
        .args(args)
        .args(["--config", "karpor.yaml"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// Imports the export, exports again; returns what came out.
fn round_trip(config: &str, input: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = metadata(dir.path(), config, &["import"], Some(input));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("imported 4 records,"), "{stderr}");
    let (code, stdout, stderr) = metadata(dir.path(), config, &["export"], None);
    assert_eq!(code, 0, "{stderr}");
    stdout
}

#[tokio::test]
async fn export_and_import_carry_every_record_across_all_three_backends() {
    let (Some(etcd), Some(mysql)) = (
        service("KARPOR_TEST_ETCD"),
        service("KARPOR_TEST_MYSQL_URL"),
    ) else {
        return;
    };
    let from_sqlite = round_trip("metadata: {backend: sqlite, path: m.db}\n", EXPORT);
    assert!(from_sqlite.contains("s3cr3t") && from_sqlite.contains("préprod 🚧"));
    assert!(
        from_sqlite.contains("2026-01-02T00:00:00Z"),
        "times are kept"
    );

    let etcd_config = format!(
        "metadata: {{backend: etcd, etcd: {{endpoints: ['{etcd}'], prefix: /{}}}}}\n",
        unique("cli")
    );
    let from_etcd = round_trip(&etcd_config, &from_sqlite);
    assert_eq!(from_etcd, from_sqlite);

    let database = mysql_database(&mysql, "cli").await;
    let mysql_config = format!("metadata: {{backend: mysql, url: '{database}'}}\n");
    let from_mysql = round_trip(&mysql_config, &from_etcd);
    assert_eq!(from_mysql, from_sqlite);
}

#[test]
fn an_export_file_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let config = "metadata: {backend: sqlite, path: m.db}\n";
    assert_eq!(metadata(dir.path(), config, &["import"], Some(EXPORT)).0, 0);
    let (code, _, stderr) = metadata(
        dir.path(),
        config,
        &["export", "--output", "out.json"],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let mode = std::fs::metadata(dir.path().join("out.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_bad_import_changes_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let config = "metadata: {backend: sqlite, path: m.db}\n";
    let invalid = EXPORT.replace("\"by-namespace\"", "\"By_Namespace\"");
    let (code, _, stderr) = metadata(dir.path(), config, &["import"], Some(&invalid));
    assert_eq!(code, 1);
    assert!(
        stderr.contains("By_Namespace") && stderr.contains("DNS-1123"),
        "{stderr}"
    );
    let (_, stdout, _) = metadata(dir.path(), config, &["export"], None);
    assert!(
        stdout.contains("\"clusters\": []"),
        "validated before any write: {stdout}"
    );

    let (code, _, stderr) = metadata(dir.path(), config, &["import"], Some("not json"));
    assert_eq!(code, 1);
    assert!(stderr.contains("not a karpor metadata export"), "{stderr}");
}

#[test]
fn an_import_meeting_existing_records_fails_skips_or_overwrites_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let config = "metadata: {backend: sqlite, path: m.db}\n";
    assert_eq!(metadata(dir.path(), config, &["import"], Some(EXPORT)).0, 0);
    let changed = EXPORT.replace("Production", "Production again");
    let (code, _, stderr) = metadata(dir.path(), config, &["import"], Some(&changed));
    assert_eq!(code, 1);
    assert!(
        stderr.contains("already exists") && stderr.contains("--on-conflict"),
        "{stderr}"
    );
    let (code, _, stderr) = metadata(
        dir.path(),
        config,
        &["import", "--on-conflict", "skip"],
        Some(&changed),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("imported 0 records, left 4 existing ones"),
        "{stderr}"
    );
    let (_, stdout, _) = metadata(dir.path(), config, &["export"], None);
    assert!(!stdout.contains("Production again"));
    let (code, _, stderr) = metadata(
        dir.path(),
        config,
        &["import", "--on-conflict", "overwrite"],
        Some(&changed),
    );
    assert_eq!(code, 0, "{stderr}");
    let (_, stdout, _) = metadata(dir.path(), config, &["export"], None);
    assert!(stdout.contains("Production again"), "{stdout}");
}
