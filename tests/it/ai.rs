//! AI through the binary, against the real test model server: the `AI` check beside the
//! contract's lines of `/readyz`, `karpor explain` streaming a synced object's
//! explanation, `karpor search --nl` printing the query that ran (or the server's 400
//! showing it), and the key never in the server's log.

use karpor_testkit::model::ModelServer;
use karpor_testkit::process::{get, Spawn, EMBEDDED};
use karpor_testkit::service;

use crate::cli::{karpor, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_explains_and_searches_with_the_real_model() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    let kubeconfig_a = service("KARPOR_TEST_KUBECONFIG_A").expect("test services");
    let config = format!(
        // Generous times: generations queue at the one test server behind other tests'.
        "{EMBEDDED}server: {{limits: {{request_timeout: 5m}}, connections: {{idle_timeout: 6m}}}}\nai:\n  base_url: {}\n  model: {}\n  api_key: {{env: KARPOR_TEST_AI_KEY}}\n  max_tokens: 40\n  first_token_timeout: 5m\n",
        model.url, model.name
    );
    let server = Spawn::serve(&config)
        .with_env("KARPOR_TEST_AI_KEY", &model.key)
        .start();
    let (code, body) = get(&server.url("/readyz?verbose")).await;
    assert_eq!(code, 200, "{body}");
    for line in [
        "[+] Ping ok",
        "[+] Server ok",
        "[+] Syncer ok",
        "[+] Storage ok",
        "[+] AI ok",
        "health check passed",
    ] {
        assert!(body.contains(line), "{line} in {body}");
    }
    let url = server.addr.to_string();
    let dir = server.dir();
    let (code, _, err) = text(&karpor(
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

    let (code, out, err) = text(&karpor(
        &["explain", "alive/namespace/default", "--language", "en"],
        &url,
        dir,
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(!out.trim().is_empty(), "the explanation is printed");

    let (code, _, err) = text(&karpor(
        &["search", "--nl", "all namespaces"],
        &url,
        dir,
        &[],
    ));
    match code {
        0 => assert!(err.to_ascii_lowercase().contains("sql: select"), "{err}"),
        1 => assert!(err.contains("400") && err.contains("sqlQuery:"), "{err}"),
        other => panic!("{other}: {err}"),
    }
    assert!(!server.logs().contains(&model.key), "the key was logged");
}
