//! Exec users: refused unless the operator allows their command; an allowed plugin runs
//! with a timeout (its process group killed when late), never for a guest, and a cluster
//! whose credentials come from an allowed plugin syncs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
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
    let runs = dir.path().join("runs");
    let good = script(
        dir.path(),
        "good",
        &format!(
            r#"echo run >> {}
echo '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"test-admin-token"}}}}'"#,
            runs.display()
        ),
    );
    let runs_so_far = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
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
    let before_registration = runs_so_far();
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
    // One client for the cluster: the syncer's watches and every live read share it, so
    // the plugin ran once for it (its token has no expiry), not once per read.
    for _ in 0..10 {
        let (code, answer) = guest
            .call(
                "GET",
                "/rest-api/v1/insight/events?cluster=by-plugin&namespace=default",
                None,
            )
            .await;
        assert_eq!(code, 200, "{answer}");
    }
    assert_eq!(runs_so_far() - before_registration, 1, "plugin runs");
    karpor_testkit::api::assert_no_secret_logged(&karpor);
}

/// Variables that make an interpreter run something of the kubeconfig's choosing, each
/// with a value that would: `@` is the marker file's path.
const HOSTILE: &[(&str, &str)] = &[
    ("BASH_ENV", "@hook"),
    ("SHELLOPTS", "xtrace"),
    ("PS4", "$(touch @)"),
    ("NODE_OPTIONS", "--require @hook.js"),
    ("PERL5OPT", "-Mhook"),
    ("PYTHONWARNINGS", "ignore::hook.Warning"),
    ("GCONV_PATH", "@"),
];

fn exec_user_with_env(command: &str, name: &str, value: &str) -> String {
    format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {command}\n      env: [{{name: {name}, value: '{value}'}}]"
    )
}

/// Each of [`HOSTILE`] is refused by registration and validation, naming it, and
/// nothing ran.
async fn refuses_hostile_variables(api: &Client, plugin: &str, hook: &Path, marker: &Path) {
    for (name, value) in HOSTILE {
        let value = match *name {
            "BASH_ENV" => hook.display().to_string(),
            _ => value.replace('@', &marker.display().to_string()),
        };
        let kubeconfig = kubeconfig_with_user(&exec_user_with_env(plugin, name, &value));
        for route in [
            "/rest-api/v1/cluster/config/validate",
            "/rest-api/v1/cluster/hostile",
        ] {
            let (code, answer) = api
                .call("POST", route, Some(cluster_body(&kubeconfig)))
                .await;
            // The refusal comes before the plugin could run: nothing is left to wait for.
            assert!(
                !marker.exists(),
                "{name} ran the kubeconfig's code: {answer}"
            );
            assert_eq!(code, 400, "{name} {route}: {answer}");
            let message = answer["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("exec env {name:?} is not allowed")),
                "{name} {route}: {message}"
            );
            assert!(message.contains("kubernetes.exec.allowed_env"), "{message}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_sets_only_the_variables_allowed_for_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("hook-ran");
    // What BASH_ENV names: bash runs it before the plugin.
    let hook = script(dir.path(), "hook", &format!("touch {}", marker.display()));
    let plugin = dir.path().join("plugin");
    std::fs::write(
        &plugin,
        "#!/bin/bash\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plugin = plugin.display().to_string();
    let allowing = |env: &str| {
        format!(
            "server: {{syncer: false}}\nshutdown: {{drain_delay: 1s}}\n\
             kubernetes: {{exec: {{allowed_commands: [{plugin}]{env}}}}}\n"
        )
    };
    // The plugin allowed without variables, then with another variable allowed for it.
    let bare = Spawn::serve(&allowing("")).start();
    refuses_hostile_variables(&Client::local_admin(&bare), &plugin, &hook, &marker).await;
    let karpor = Spawn::serve(&allowing(&format!(
        ", allowed_env: {{{plugin}: [KARPOR_TEST_REGION]}}"
    )))
    .start();
    refuses_hostile_variables(&Client::local_admin(&karpor), &plugin, &hook, &marker).await;
    let api = Client::local_admin(&karpor);
    // The allowed variable passes the check: registered, and validated up to the
    // connection to the closed server.
    let allowed = kubeconfig_with_user(&exec_user_with_env(&plugin, "KARPOR_TEST_REGION", "x"));
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/allowed",
            Some(cluster_body(&allowed)),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": allowed})),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach the API server"),
        "{answer}"
    );
    assert!(!marker.exists());
}
