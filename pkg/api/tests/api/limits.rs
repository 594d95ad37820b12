//! `server.limits`: bodies and kubeconfigs above their limits (413), a request past the
//! timeout (503) while others wait for a slot, and a backend down (503, its address
//! kept out of the answer).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header;
use karpor_api::{ApiParts, Authenticator, LimitsConfig, LiveBounds, Role};
use karpor_metastore::MetastoreConfig;
use karpor_storage::{ElasticConfig, RefreshPolicy, StorageConfig};
use karpor_testkit::api::{ADMIN, THREE_CONTEXTS};
use prometheus_client::registry::Registry;
use serde_json::json;
use tower::ServiceExt;

use crate::app::{text, Setup};
use crate::cluster_body;

#[tokio::test]
async fn bodies_and_kubeconfigs_above_their_limits_are_413() {
    let api = Setup {
        limits: LimitsConfig {
            body_bytes: 3_000_000,
            ..LimitsConfig::default()
        },
        ..Setup::default()
    }
    .start()
    .await;
    let admin = api.admin();
    // Above the body limit.
    let huge = format!("{THREE_CONTEXTS}#{}\n", "x".repeat(3_100_000));
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/big",
            Some(cluster_body(&huge)),
        )
        .await;
    assert_eq!(code, 413, "{answer}");
    // Within it, but a kubeconfig above 2 MiB.
    let big = format!("{THREE_CONTEXTS}#{}\n", "x".repeat(2_200_000));
    let (code, answer) = admin
        .call("POST", "/rest-api/v1/cluster/big", Some(cluster_body(&big)))
        .await;
    assert_eq!(code, 413, "{answer}");
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("above the limit"));
    let boundary = "b";
    let mut form = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"config\"\r\n\r\n"
    )
    .into_bytes();
    form.extend_from_slice(big.as_bytes());
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let (code, answer) = admin
        .send(
            admin
                .request("POST", "/rest-api/v1/cluster/config/file")
                .header(
                    header::CONTENT_TYPE,
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(Body::from(form))
                .unwrap(),
        )
        .await;
    assert_eq!(code, 413, "{answer}");
    let (code, _) = admin.call("GET", "/rest-api/v1/cluster/big", None).await;
    assert_eq!(code, 404);
}

/// An API server that accepts connections and never answers; each accepted connection
/// is reported on the channel. Aborting the task closes them all.
async fn silent_server() -> (
    u16,
    tokio::sync::mpsc::UnboundedReceiver<()>,
    tokio::task::JoinHandle<()>,
) {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let (reached, connected) = tokio::sync::mpsc::unbounded_channel();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
            let _ = reached.send(());
        }
    });
    (port, connected, hold)
}

/// `THREE_CONTEXTS` with its server at `port`: validating it waits on that server.
fn validation_at(port: u16) -> serde_json::Value {
    let kubeconfig =
        THREE_CONTEXTS.replace("https://127.0.0.1:1", &format!("https://127.0.0.1:{port}"));
    json!({"kubeConfig": kubeconfig})
}

/// A request past `request_timeout` is a 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_timeout_is_a_503() {
    let (port, _connected, hold) = silent_server().await;
    let api = Setup {
        limits: LimitsConfig {
            request_timeout: Duration::from_secs(2),
            ..LimitsConfig::default()
        },
        ..Setup::default()
    }
    .start()
    .await;
    let started = Instant::now();
    let (code, answer) = api
        .admin()
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(validation_at(port)),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(code, 503, "{answer}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "{took:?}"
    );
    hold.abort();
}

/// Past `concurrency`, a request waits for a slot, and is served once one is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_concurrency_a_request_waits_for_a_slot() {
    let (port, mut connected, hold) = silent_server().await;
    let api = Arc::new(
        Setup {
            limits: LimitsConfig {
                concurrency: 1,
                ..LimitsConfig::default()
            },
            ..Setup::default()
        }
        .start()
        .await,
    );
    let slow = {
        let api = api.clone();
        tokio::spawn(async move {
            api.admin()
                .call(
                    "POST",
                    "/rest-api/v1/cluster/config/validate",
                    Some(validation_at(port)),
                )
                .await
        })
    };
    // Once the silent server has its connection, the validation holds the only slot.
    tokio::time::timeout(Duration::from_secs(10), connected.recv())
        .await
        .expect("the validation reaches the silent server");
    let mut waiting = {
        let api = api.clone();
        tokio::spawn(async move { api.admin().call("GET", "/rest-api/v1/clusters", None).await })
    };
    // The thing tested is a wait: within this window the list must not be served.
    let early = tokio::time::timeout(Duration::from_millis(500), &mut waiting).await;
    assert!(early.is_err(), "served beside a held slot: {early:?}");
    // The silent server goes away: the validation fails, the slot frees, the list is served.
    hold.abort();
    let (code, answer) = slow.await.unwrap();
    assert_eq!(code, 400, "{answer}");
    let (code, answer) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served once the slot is free")
        .unwrap();
    assert_eq!(code, 200, "{answer}");
}

/// A backend that is down is a 503 with the envelope, never a 500, and its address is
/// not in the message.
#[tokio::test]
async fn a_backend_down_is_503_without_its_address() {
    // A port nothing listens on.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port())
    };
    let metadata: MetastoreConfig = serde_json::from_value(json!({
        "backend": "etcd", "etcd": {"endpoints": [dead]}
    }))
    .unwrap();
    let metastore = karpor_metastore::connect(&metadata).await.unwrap();
    let storage = karpor_storage::connect(&StorageConfig::Elasticsearch(ElasticConfig {
        url: dead.clone(),
        username: None,
        password: None,
        index: "karpor-resources".to_owned(),
        refresh: RefreshPolicy::True,
    }))
    .await
    .unwrap();
    let limits = LimitsConfig {
        request_timeout: Duration::from_secs(4),
        ..LimitsConfig::default()
    };
    let exec = Arc::new(karpor_kube::ExecSettings::default());
    let router = karpor_api::routes(ApiParts {
        metastore,
        storage,
        sync: None,
        exec: exec.clone(),
        auth: Authenticator::new(vec![("ops".into(), Some(Role::Admin), ADMIN.into())], None),
        token_review: None,
        read_only: false,
        pod_logs: Role::Admin,
        live: LiveBounds::new(limits.live.clone(), &mut Registry::default()),
        limits,
        audit: Default::default(),
        clients: karpor_syncer::client_cache(exec),
        rule_limits: Default::default(),
        ai: None,
        agents: None,
    });
    for path in [
        "/rest-api/v1/search?keyword=x",
        "/rest-api/v1/clusters",
        "/rest-api/v1/insight/stats",
        "/rest-api/v1/resource-group-rules",
        "/rest-api/v1/sync-rules",
    ] {
        let request = axum::http::Request::get(path)
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
            .body(Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let answer: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
        assert_eq!(status, 503, "{path}: {answer}");
        assert_eq!(answer["success"], false, "{answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(!message.contains("127.0.0.1"), "{path}: {answer}");
    }
}
