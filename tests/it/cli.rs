//! `karpor cluster` and `karpor search` against a real `karpor serve`: the issue's "done
//! when" (the embedded default, the test cluster added, its ConfigMaps found), tokens
//! through flags and environment, and the exit statuses.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use karpor_testkit::process::{wait_for, Spawn, EMBEDDED};
use karpor_testkit::service;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::{json, Value};

/// The CLI, run in `dir` (where a local install's token is found).
pub(crate) fn karpor(args: &[&str], server: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_karpor"));
    command
        .args(args)
        .current_dir(dir)
        .env("KARPOR_SERVER", server)
        .env_remove("KARPOR_TOKEN")
        .env_remove("KARPOR_TOKEN_FILE");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

pub(crate) fn text(output: &Output) -> (i32, String, String) {
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn kube_client(path: &Path) -> Client {
    let config = Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_default_adds_the_test_cluster_and_finds_its_configmaps() {
    let path = service("KARPOR_TEST_KUBECONFIG_A").expect("test services: scripts/services.sh");
    let path = Path::new(&path);
    let client = kube_client(path).await;
    let namespace = format!("cli-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "found-by-cli"}, "data": {"k": "v"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();

    // A directory removed at the end: the synced cluster's documents are not small.
    let dir = tempfile::tempdir().unwrap();
    let server = Spawn::serve(EMBEDDED).in_dir(dir.path()).start();
    let url = server.url("");
    let kubeconfig = path.to_str().unwrap();
    let (code, out, err) = text(&karpor(
        &["cluster", "add", "test-a", "--kubeconfig", kubeconfig],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("cluster test-a added (context a"), "{out}");
    let (code, _, err) = text(&karpor(
        &["cluster", "add", "test-a", "--kubeconfig", kubeconfig],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 1);
    assert!(err.contains("409"), "{err}");

    let query =
        format!("select * from resources where kind='ConfigMap' and namespace='{namespace}'");
    let found = wait_for(Duration::from_secs(60), "the ConfigMap is found", || {
        let out = text(&karpor(&["search", &query], &url, server.dir(), &[]));
        async move { out.0 == 0 && out.1.contains("found-by-cli") }
    })
    .await;
    eprintln!("found after {found:?}");
    let (code, out, _) = text(&karpor(
        &["search", "select * from resources where kind='ConfigMap'"],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 0);
    assert!(out.starts_with("CLUSTER"), "{out}");
    let row = out.lines().nth(1).unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..3], ["test-a", "v1", "ConfigMap"], "{out}");
    let (code, out, _) = text(&karpor(
        &["search", &query, "--json"],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 0);
    let page: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(page["total"], 1, "{out}");
    assert_eq!(page["items"][0]["object"]["data"]["k"], "v");
    // Columns and groups print as a table with the columns as written.
    let grouped = format!(
        "select namespace, count(*) from resources where kind='ConfigMap' and namespace='{namespace}' group by namespace"
    );
    let (code, out, err) = text(&karpor(&["search", &grouped], &url, server.dir(), &[]));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [vec!["namespace", "count(*)"], vec![namespace.as_str(), "1"]],
        "{out}"
    );
    let (code, out, _) = text(&karpor(
        &[
            "search",
            &format!("select name, labels['app'] from resources where namespace='{namespace}' and kind='ConfigMap'"),
            "-o",
            "json",
        ],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 0);
    let rows: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows["rows"][0][0], "found-by-cli", "{out}");
    // Into a pipe its reader closed at once (`| head -0`): the command ends quietly,
    // without a panic (exit 101).
    let mut child = Command::new(karpor_testkit::process::binary())
        .args([
            "search",
            "select * from resources",
            "--page-size",
            "1000",
            "-o",
            "json",
        ])
        .args(["--server", &url])
        .current_dir(server.dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let closed = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(closed.status.code(), Some(0), "{stderr}");

    let (code, out, _) = text(&karpor(&["cluster", "list"], &url, server.dir(), &[]));
    assert_eq!(code, 0);
    assert!(out.lines().nth(1).unwrap().starts_with("test-a"), "{out}");
    // A found ConfigMap says its type is listed, not every type: the state settles after.
    let listed = |server: &karpor_testkit::process::Karpor| {
        text(&karpor(
            &["cluster", "list", "--json"],
            &url,
            server.dir(),
            &[],
        ))
    };
    wait_for(Duration::from_secs(60), "the cluster is synced", || {
        let (code, out, _) = listed(&server);
        async move {
            code == 0
                && serde_json::from_str::<Value>(&out)
                    .is_ok_and(|c| c[0]["syncStatus"]["state"] == "synced")
        }
    })
    .await;
    let (code, out, _) = listed(&server);
    assert_eq!(code, 0);
    assert!(!out.contains(karpor_testkit::services::APISERVER_TOKEN));

    let (code, out, _) = text(&karpor(
        &["search", "select nonsense"],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 1, "{out}");
    let (code, out, _) = text(&karpor(
        &["cluster", "rm", "test-a"],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!((code, out.as_str()), (0, "cluster test-a removed\n"));
    let (code, _, err) = text(&karpor(
        &["cluster", "rm", "test-a"],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 1);
    assert!(err.contains("404"), "{err}");
    assert!(!server
        .logs()
        .contains(karpor_testkit::services::APISERVER_TOKEN));
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_come_from_the_flag_or_the_environment_and_exit_statuses_say_why() {
    let config =
        "auth: {anonymous: none, tokens: [{name: ops, role: admin, token: cli-admin-token}]}
shutdown: {drain_delay: 1s}
";
    let server = Spawn::serve(config).start();
    let url = server.url("");
    let (code, _, err) = text(&karpor(&["cluster", "list"], &url, server.dir(), &[]));
    assert_eq!(code, 1);
    assert!(err.contains("401"), "{err}");
    let (code, out, err) = text(&karpor(
        &["cluster", "list", "--token", "cli-admin-token"],
        &url,
        server.dir(),
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "NAME   DISPLAY NAME   SERVER   SYNC   OBJECTS\n");
    // Who the server takes the token for, and what it may do.
    let (code, out, err) = text(&karpor(
        &["whoami"],
        &url,
        server.dir(),
        &[("KARPOR_TOKEN", "cli-admin-token")],
    ));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "user:   ops\nrole:   admin\nmay:    read, edit, write, admin, pod-logs\nscope:  admin: clusters all; namespaces all; kinds all\n"
    );
    let (code, _, err) = text(&karpor(&["whoami"], &url, server.dir(), &[]));
    assert_eq!(code, 1, "no anonymous reads here");
    assert!(err.contains("401"), "{err}");
    let (code, _, err) = text(&karpor(
        &["search", "select * from resources"],
        &url,
        server.dir(),
        &[("KARPOR_TOKEN", "cli-admin-token")],
    ));
    assert_eq!(code, 0, "{err}");
    // A broken kubeconfig is refused before anything is sent.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("config");
    std::fs::write(&broken, "clusters: [\n").unwrap();
    let (code, _, err) = text(&karpor(
        &[
            "cluster",
            "add",
            "x",
            "--kubeconfig",
            broken.to_str().unwrap(),
        ],
        &url,
        server.dir(),
        &[("KARPOR_TOKEN", "cli-admin-token")],
    ));
    assert_eq!(code, 1);
    assert!(
        err.contains("not a kubeconfig") && err.contains("at line"),
        "{err}"
    );
    assert!(!server.logs().contains("cli-admin-token"));
    // Nothing listens there.
    let dead = format!("http://127.0.0.1:{}", karpor_testkit::services::free_port());
    let (code, _, err) = text(&karpor(&["cluster", "list"], &dead, dir.path(), &[]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot reach"), "{err}");
}
