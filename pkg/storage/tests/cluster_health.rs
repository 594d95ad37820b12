//! The Elasticsearch `Storage` check reads `_cluster/health`'s `status` (Karpor's own check
//! compares the wrong field and always fails). The test servers are never red, so a
//! scripted `_cluster/health` stands in for that one answer; everything else about the
//! backend is proven against the real servers in the conformance suite.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use karpor_storage::{connect, ElasticConfig, RefreshPolicy, StorageConfig, StorageError};
use serde_json::json;

async fn serve(status: StatusCode, body: serde_json::Value) -> String {
    let app = Router::new().route(
        "/_cluster/health",
        get(move || {
            let body = body.clone();
            async move { (status, Json(body)) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn ping(status: StatusCode, body: serde_json::Value) -> Result<(), StorageError> {
    let storage = connect(&StorageConfig::Elasticsearch(ElasticConfig {
        url: serve(status, body).await,
        username: None,
        password: None,
        index: "unused".to_owned(),
        refresh: RefreshPolicy::WaitFor,
    }))
    .await
    .unwrap();
    storage.ping().await
}

#[tokio::test]
async fn green_and_yellow_serve_red_does_not() {
    assert!(ping(StatusCode::OK, json!({"status": "green"}))
        .await
        .is_ok());
    assert!(ping(StatusCode::OK, json!({"status": "yellow"}))
        .await
        .is_ok());
    assert!(matches!(
        ping(StatusCode::OK, json!({"status": "red"})).await,
        Err(StorageError::StatusRed)
    ));
    // Elasticsearch answers a red cluster's health with 503 when asked to wait.
    assert!(matches!(
        ping(StatusCode::SERVICE_UNAVAILABLE, json!({"status": "red"})).await,
        Err(StorageError::Unavailable(_) | StorageError::StatusRed)
    ));
}

#[tokio::test]
async fn refused_credentials_are_unauthorized() {
    assert!(matches!(
        ping(StatusCode::UNAUTHORIZED, json!({"error": "no"})).await,
        Err(StorageError::Unauthorized(_))
    ));
}

#[tokio::test]
async fn a_closed_port_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let storage = connect(&StorageConfig::Elasticsearch(ElasticConfig {
        url: format!("http://127.0.0.1:{port}"),
        username: None,
        password: None,
        index: "unused".to_owned(),
        refresh: RefreshPolicy::WaitFor,
    }))
    .await
    .unwrap();
    assert!(matches!(
        storage.ping().await,
        Err(StorageError::Unavailable(_))
    ));
}
