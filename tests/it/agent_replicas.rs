//! Two hub replicas sharing one metadata store (a private etcd), each with its agent
//! listener and its `agents.peer_url`. The agent holds its session with the first; a live
//! read through the second is forwarded to the first and answered, and a revocation at
//! the second ends the session at the first before its answer returns.

use karpor_testkit::api::Client;
use karpor_testkit::cluster::{configmaps, kube_name as unique, namespaces, Kube, LIMIT};
use karpor_testkit::process::{wait_for, Karpor, Spawn};
use karpor_testkit::services::{free_port, Etcd};
use serde_json::{json, Value};

use crate::agent::{call, enrol};

/// A replica on the shared store, its agent listener on `port`.
fn replica(etcd: &str, prefix: &str, port: u16, dir: &std::path::Path) -> Karpor {
    let config = format!(
        "shutdown: {{drain_delay: 1s}}\n\
         metadata: {{backend: etcd, etcd: {{endpoints: ['{etcd}'], prefix: '/{prefix}'}}}}\n\
         agents: {{listen: '127.0.0.1:{port}', names: ['127.0.0.1'], \
         peer_url: 'https://127.0.0.1:{port}'}}\n"
    );
    Spawn::serve(&config).in_dir(dir).start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_forwards_live_reads_to_the_one_holding_the_agent_and_revokes_it_there() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("replicas");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "seen-from-b"}, "data": {"colour": "green"}}),
    )
    .await;
    let prefix = unique("replicas");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = replica(&etcd.url(), &prefix, free_port(), dir_a.path());
    let port_b = free_port();
    let b = replica(&etcd.url(), &prefix, port_b, dir_b.path());

    let rule = json!({"clusters": "*", "namespaces": [ns],
        "resources": [{"version": "v1", "resource": "configmaps"}]});
    let (status, body) = call(&a, reqwest::Method::POST, "/sync-rule/only-the-test", rule).await;
    assert_eq!(status, 201, "{body}");
    // The install line names `a`, whose listener the agent reaches; `b` shares its
    // authority and enrollments through the store.
    let enrolled = enrol(&a, "replicated", &kube.kubeconfig).await;
    let (cluster, agent) = (enrolled.cluster.clone(), &enrolled.agent);

    // `b` holds no session, and says the agent is connected (to `a`).
    let status_path = format!("/cluster/{cluster}/agent");
    wait_for(LIMIT, "b sees the agent connected through a", || {
        let (b, path) = (&b, status_path.clone());
        async move {
            let (_, body) = call(b, reqwest::Method::GET, &path, Value::Null).await;
            body["data"]["connected"] == true
        }
    })
    .await;
    let detail = format!(
        "/rest-api/v1/insight/detail?live=true&cluster={cluster}&apiVersion=v1&kind=ConfigMap&namespace={ns}&name=seen-from-b"
    );
    let through_b = Client::with_token(&b, &b.local_token());
    let (code, answer) = through_b.call("GET", &detail, None).await;
    assert_eq!(code, 200, "{answer}");
    let text = answer.to_string();
    assert!(text.contains("green"), "{text}");
    let missing = detail.replace("seen-from-b", "not-there");
    let (code, answer) = through_b.call("GET", &missing, None).await;
    assert_eq!(code, 404, "{answer}");
    assert!(a.logs().contains("agent connected"), "{}", a.logs());
    assert!(!b.logs().contains("agent connected"), "{}", b.logs());

    // The peer routes want the replicas' secret: a caller without it (an agent, anyone
    // reaching the listener) is refused before anything is asked.
    let insecure = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    for (path, secret) in [
        (format!("/agent/v1/peer/reads/{cluster}"), None),
        (
            format!("/agent/v1/peer/close/{cluster}"),
            Some("0".repeat(64)),
        ),
    ] {
        let mut request = insecure
            .post(format!("https://127.0.0.1:{port_b}{path}"))
            .json(
                &json!({"read": {"read": "object", "of": {"apiVersion": "v1", "kind": "ConfigMap",
                "namespace": ns, "name": "seen-from-b"}}, "withinMs": 1000}),
            );
        if let Some(secret) = secret {
            request = request.header("x-karpor-peer", secret);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 401, "{path}");
    }

    // Revoked at `b`: the session at `a` is gone before the answer returns.
    let (status, body) = call(
        &b,
        reqwest::Method::DELETE,
        &format!("/cluster/{cluster}/agent"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let through_a = Client::with_token(&a, &a.local_token());
    let (code, answer) = through_a.call("GET", &detail, None).await;
    assert_eq!(code, 503, "a still serves a revoked agent: {answer}");
    let (code, answer) = through_b.call("GET", &detail, None).await;
    assert_eq!(code, 503, "b still forwards to a revoked agent: {answer}");
    assert!(
        a.logs()
            .contains("agent session closed for another replica (revoked)"),
        "{}",
        a.logs()
    );
    wait_for(LIMIT, "the agent lost its session", || {
        let logs = agent.logs();
        async move { logs.contains("control stream lost") }
    })
    .await;
}
