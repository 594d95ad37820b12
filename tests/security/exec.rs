//! Exec users: refused unless the operator allows their command; an allowed plugin runs
//! with a timeout (its process group killed when late), never for a guest, and a cluster
//! whose credentials come from an allowed plugin syncs.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{cluster_body, kubeconfig_with_user, script};
use karpor_testkit::api::{Client, ADMIN, GUEST};
use karpor_testkit::process::{wait_for, Spawn};
use karpor_testkit::service;

fn exec_user(command: &str) -> String {
    format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {command}\n      args: [--secret, exec-secret-arg]"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_users_are_refused_unless_their_command_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let plugin = script(dir.path(), "plugin", &format!("touch {}", marker.display()));
    let plugin = plugin.display().to_string();
    let karpor = Spawn::serve("server: {syncer: false}\nshutdown: {drain_delay: 1s}\n").start();
    let api = Client::with_token(&karpor, &karpor.local_token());
    for route in [
        "/rest-api/v1/cluster/x",
        "/rest-api/v1/cluster/config/validate",
    ] {
        let (code, answer) = api
            .call(
                "POST",
                route,
                Some(json!({"kubeConfig": kubeconfig_with_user(&exec_user(&plugin))})),
            )
            .await;
        assert_eq!(code, 400, "{answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .contains("exec users are off on this server"),
            "{answer}"
        );
    }
    // Another command than the allowed one, even with the same name elsewhere.
    let allowing = format!(
        "server: {{syncer: false}}\nshutdown: {{drain_delay: 1s}}\nkubernetes: {{exec: {{allowed_commands: [{plugin}]}}}}\n"
    );
    let karpor = Spawn::serve(&allowing).start();
    let api = Client::with_token(&karpor, &karpor.local_token());
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/x",
            Some(cluster_body(&kubeconfig_with_user(&exec_user("plugin")))),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("is not in kubernetes.exec.allowed_commands"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "a refused plugin ran");
    api.assert_no_secret_answered();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_plugin_runs_bounded_never_for_a_guest_and_its_cluster_syncs() {
    let path = service("KARPOR_TEST_KUBECONFIG_A").expect("test services: scripts/services.sh");
    let dir = tempfile::tempdir().unwrap();
    let good = script(
        dir.path(),
        "good",
        r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"test-admin-token"}}'"#,
    );
    let orphan = dir.path().join("orphan-ran");
    let slow = script(
        dir.path(),
        "slow",
        &format!("(sleep 3; touch {}) &\nsleep 60", orphan.display()),
    );
    let config = format!(
        "shutdown: {{drain_delay: 1s}}\n\
         kubernetes: {{exec: {{allowed_commands: [{}, {}], timeout: 1s}}}}\n\
         auth:\n  anonymous: none\n  tokens:\n  - {{name: ops, role: admin, token: {ADMIN}}}\n  - {{name: viewer, role: guest, token: {GUEST}}}\n",
        good.display(),
        slow.display()
    );
    let karpor = Spawn::serve(&config).start();
    let admin = Client::with_token(&karpor, ADMIN);
    let guest = Client::with_token(&karpor, GUEST);
    // The test cluster's kubeconfig, its user an exec plugin.
    let flat = karpor_testkit::process::flat_kubeconfig(&path);
    let with_plugin = |command: &str| {
        let mut config = karpor_kube::kubeconfig::parse(&flat).unwrap();
        let user = config.auth_infos[0].auth_info.as_mut().unwrap();
        user.token = None;
        user.exec = serde_json::from_value(json!({
            "apiVersion": "client.authentication.k8s.io/v1", "command": command,
        }))
        .unwrap();
        karpor_kube::kubeconfig::to_yaml(&config)
    };

    let (code, answer) = guest
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": with_plugin(&good.display().to_string())})),
        )
        .await;
    assert_eq!(code, 403, "a guest never runs a plugin: {answer}");

    let started = Instant::now();
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": with_plugin(&slow.display().to_string())})),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("did not finish within 1s"),
        "{answer}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!orphan.exists(), "the plugin's child outlived its timeout");

    let good_config = with_plugin(&good.display().to_string());
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": good_config})),
        )
        .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["data"]["summary"]["authKind"], "exec");
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/by-plugin",
            Some(cluster_body(&good_config)),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    wait_for(Duration::from_secs(30), "the plugin's cluster syncs", || async {
        let (_, found) = admin
            .call(
                "GET",
                "/rest-api/v1/search?query=select%20*%20from%20resources%20where%20cluster%3D%27by-plugin%27%20and%20kind%3D%27Namespace%27",
                None,
            )
            .await;
        found["data"]["total"].as_u64().unwrap_or(0) > 0
    })
    .await;
    karpor_testkit::api::assert_no_secret_logged(&karpor);
}
