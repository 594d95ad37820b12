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

/// A request past `request_timeout` is a 503; past `concurrency`, requests wait their turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_time_out_with_503_and_others_wait_for_a_slot() {
    // An API server that accepts connections and never answers: once it has accepted
    // one, the validation holds the only slot.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let (reached, mut connected) = tokio::sync::mpsc::unbounded_channel();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
            let _ = reached.send(());
        }
    });
    let api = Arc::new(
        Setup {
            limits: LimitsConfig {
                request_timeout: Duration::from_secs(2),
                concurrency: 1,
                ..LimitsConfig::default()
            },
            ..Setup::default()
        }
        .start()
        .await,
    );
    let kubeconfig =
        THREE_CONTEXTS.replace("https://127.0.0.1:1", &format!("https://127.0.0.1:{port}"));
    let slow_started = Instant::now();
    let slow = {
        let api = api.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let answer = api
                .admin()
                .call(
                    "POST",
                    "/rest-api/v1/cluster/config/validate",
                    Some(json!({"kubeConfig": kubeconfig})),
                )
                .await;
            (answer, started.elapsed())
        })
    };
    tokio::time::timeout(Duration::from_secs(10), connected.recv())
        .await
        .expect("the validation reaches the silent server");
    let started = Instant::now();
    let (code, _) = api.admin().call("GET", "/rest-api/v1/clusters", None).await;
    let waited = started.elapsed();
    let ((slow_code, slow_answer), slow_took) = slow.await.unwrap();
    assert_eq!(slow_code, 503, "{slow_answer}");
    assert!(
        slow_took >= Duration::from_secs(2) && slow_took < Duration::from_secs(4),
        "{slow_took:?}"
    );
    assert_eq!(code, 200);
    // It had the slot only once the slow one timed out.
    assert!(
        started + waited >= slow_started + Duration::from_secs(2),
        "it did not wait: {waited:?}"
    );
    hold.abort();
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
        auth: Authenticator::new(vec![("ops".into(), Role::Admin, ADMIN.into())], None),
        read_only: false,
        live: LiveBounds::new(limits.live.clone(), &mut Registry::default()),
        limits,
        audit: Default::default(),
        clients: karpor_syncer::client_cache(exec),
        rule_limits: Default::default(),
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
