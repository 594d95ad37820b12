//! The REST API on a real `karpor serve`, for what needs the process: the config file's
//! tokens and modes reaching the API, a bad API section stopping the start, validation
//! against a real API server, and no credential in any log line. Routes, statuses, roles,
//! limits and shapes are tested in-process beside the API crate (`pkg/api/tests`).

use std::time::{Duration, Instant};

use karpor_testkit::api::{
    assert_no_secret_logged, Client, ADMIN, GUEST, THREE_CONTEXTS, WITH_TOKENS,
};
use karpor_testkit::process;
use karpor_testkit::process::{Spawn, EMBEDDED};
use karpor_testkit::service;
use serde_json::json;

/// The config's tokens (one from the environment), `anonymous: none` and `read_only`
/// reach the API; health and the document stay open; tokens are never logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_files_tokens_and_modes_reach_the_api() {
    let config = format!("{WITH_TOKENS}server: {{syncer: false, read_only: true}}\n");
    let karpor = Spawn::serve(&config).with_env("GUEST_TOKEN", GUEST).start();
    let nobody = Client::new(&karpor);
    let wrong = Client::with_token(&karpor, "admin-token-xy");
    let guest = Client::with_token(&karpor, GUEST);
    let admin = Client::with_token(&karpor, ADMIN);

    let response = reqwest::get(karpor.url("/rest-api/v1/clusters"))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    for client in [&nobody, &wrong] {
        let (code, answer) = client.call("GET", "/rest-api/v1/clusters", None).await;
        assert_eq!(code, 401, "{answer}");
    }
    let (code, _) = guest.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200);
    // Validation stores nothing: allowed read-only, for an admin only.
    let validate = Some(json!({"kubeConfig": THREE_CONTEXTS}));
    let (code, answer) = guest
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            validate.clone(),
        )
        .await;
    assert_eq!(code, 403, "{answer}");
    let (code, answer) = admin
        .call("POST", "/rest-api/v1/cluster/config/validate", validate)
        .await;
    assert_eq!(code, 400, "unreachable, not refused: {answer}");
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(json!({"kubeConfig": THREE_CONTEXTS})),
        )
        .await;
    assert_eq!(code, 405, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("read-only"));
    // Health stays open; the document too.
    let (code, _) = process::get(&karpor.url("/livez")).await;
    assert_eq!(code, 200);
    let (code, _) = process::get(&karpor.url("/openapi.json")).await;
    assert_eq!(code, 200);
    for client in [&nobody, &wrong, &guest, &admin] {
        client.assert_no_secret_answered();
    }
    assert_no_secret_logged(&karpor);
    let logs = karpor.logs();
    assert!(
        logs.contains("tokens=2 anonymous_reads=false read_only=true"),
        "{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_reaches_the_api_server_or_says_why_not_within_seconds() {
    let path = service("KARPOR_TEST_KUBECONFIG_A").expect("test services: scripts/services.sh");
    let kubeconfig = process::flat_kubeconfig(&path);
    let karpor = Spawn::serve(EMBEDDED).start();
    let api = Client::local_admin(&karpor);
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": kubeconfig})),
        )
        .await;
    assert_eq!(code, 200, "{answer}");
    assert!(answer["data"]["gitVersion"]
        .as_str()
        .unwrap()
        .starts_with("v1."));
    assert_eq!(answer["data"]["summary"]["authKind"], "token");

    let started = Instant::now();
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": THREE_CONTEXTS})),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(started.elapsed() < Duration::from_secs(7));
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("cannot reach the API server"));
    // An exec user whose command fails: the message must not quote its arguments.
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": THREE_CONTEXTS, "context": "third"})),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    let (code, _) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": "not: [yaml"})),
        )
        .await;
    assert_eq!(code, 400);
    api.assert_no_secret_answered();
    assert_no_secret_logged(&karpor);
}

/// The API's config sections (and the model service's) are validated like the rest: exit
/// 2, naming file and key.
#[test]
fn a_bad_auth_limits_or_ai_section_exits_2_naming_the_key() {
    let cases = [
        (
            "auth: {tokens: [{name: ops, role: admin, token: {env: KARPOR_TEST_NO_SUCH_VAR}}]}\n",
            "auth.tokens[0].token",
        ),
        (
            "auth: {tokens: [{name: ops, role: root, token: x}]}\n",
            "root",
        ),
        (
            "auth: {tokens: [{name: a, role: admin, token: x}, {name: a, role: guest, token: y}]}\n",
            "auth.tokens[1].name",
        ),
        (
            "auth: {tokens: [{name: a, role: admin, token: x}, {name: b, role: guest, token: x}]}\n",
            "`auth.tokens[1].token`: the same token as auth.tokens[0]",
        ),
        ("auth: {anonymous: everyone}\n", "everyone"),
        ("server: {limits: {body_bytes: 1000}}\n", "server.limits.body_bytes"),
        ("server: {limits: {concurrency: 0}}\n", "server.limits.concurrency"),
        (
            "server: {limits: {mcp: {answer_bytes: 100}}}\n",
            "server.limits.mcp.answer_bytes",
        ),
        ("server: {limits: {mcp: {burst: 0}}}\n", "server.limits.mcp.burst"),
        ("server: {read_only: maybe}\n", "server.read_only"),
        (
            "auth: {policies: [{name: a, subjects: {}, role: viewer}]}\n",
            "auth.policies[0].subjects",
        ),
        (
            "auth: {policies: [{name: a, subjects: {groups: [g]}, role: admin, scope: {}}]}\n",
            "auth.policies[0].scope",
        ),
        (
            "auth: {policies: [{name: a, subjects: {anonymous: true}, role: editor}]}\n",
            "auth.policies[0].subjects.anonymous",
        ),
        (
            "auth: {policies: [{name: a, subjects: {tokens: [nobody]}, role: viewer}]}\n",
            "auth.policies[0].subjects.tokens",
        ),
        (
            "auth: {policies_file: policies.yaml}\n",
            "`auth.policies_file`: policies.yaml: [1].scope.kinds",
        ),
        ("auth: {policies_file: none.yaml}\n", "auth.policies_file"),
        (
            "ai: {base_url: 'http://user:pw@127.0.0.1:1/v1', model: m}\n",
            "ai.base_url",
        ),
        (
            "ai: {base_url: 'http://127.0.0.1:1/v1', model: m, api_key: {env: KARPOR_TEST_NO_SUCH_VAR}}\n",
            "ai.api_key",
        ),
        (
            "ai: {base_url: 'http://127.0.0.1:1/v1', model: m, per_caller: 0}\n",
            "ai.per_caller",
        ),
        ("ai: {base_url: 'http://127.0.0.1:1/v1'}\n", "model"),
    ];
    for (yaml, key) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.yaml"), yaml).unwrap();
        std::fs::write(
            dir.path().join("policies.yaml"),
            "- {name: fine, subjects: {groups: [g]}, role: viewer}\n- {name: x, subjects: {groups: [g]}, role: viewer, scope: {kinds: []}}\n",
        )
        .unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_karpor"))
            .args(["serve", "--config", "bad.yaml"])
            .current_dir(dir.path())
            .env_remove("KARPOR_CONFIG")
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(2), "{yaml}: {stderr}");
        assert!(
            stderr.contains("bad.yaml") && stderr.contains(key),
            "{yaml}: {stderr}"
        );
        assert!(!dir.path().join("data").exists(), "nothing may start");
    }
}

/// Once access policies exist, `/readyz` shows each caller only the member clusters its
/// scope holds (none without a credential, as a kubelet's probe); what the hidden checks
/// report still counts, and the four checks of the contract are always there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_shows_each_caller_the_clusters_of_its_scope() {
    let config = format!(
        "{EMBEDDED}auth:\n  anonymous: none\n  tokens:\n  - {{name: ops, role: admin, token: {ADMIN}}}\n  - {{name: team, token: {GUEST}}}\n  policies:\n  - {{name: team-a, subjects: {{tokens: [team]}}, role: viewer, scope: {{clusters: [a]}}}}\n"
    );
    let karpor = Spawn::serve(&config).start();
    let admin = Client::with_token(&karpor, ADMIN);
    for name in ["a", "b"] {
        let (code, answer) = admin
            .call(
                "POST",
                &format!("/rest-api/v1/cluster/{name}"),
                Some(json!({"kubeConfig": THREE_CONTEXTS})),
            )
            .await;
        assert_eq!(code, 201, "{answer}");
    }
    let url = karpor.url("/readyz");
    let (admin_header, team_header) = (format!("Bearer {ADMIN}"), format!("Bearer {GUEST}"));
    process::wait_for(Duration::from_secs(60), "both clusters' checks", || {
        let (url, header) = (url.clone(), admin_header.clone());
        async move {
            let body = process::get_with(&url, &[("authorization", &header)])
                .await
                .1;
            body.contains("Cluster/a ") && body.contains("Cluster/b ")
        }
    })
    .await;
    let (_, team) = process::get_with(&url, &[("authorization", &team_header)]).await;
    assert!(
        team.contains("Cluster/a ") && !team.contains("Cluster/b"),
        "{team}"
    );
    let (code, nobody) = process::get(&url).await;
    assert!(!nobody.contains("Cluster/"), "{nobody}");
    for line in [
        "[+] Ping ok",
        "[+] Server ok",
        "[+] Storage ok",
        "health check passed",
    ] {
        assert!(nobody.contains(line), "{line}: {nobody}");
    }
    assert_eq!(
        code, 200,
        "the clusters' failures are non-critical: {nobody}"
    );
}
