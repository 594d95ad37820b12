//! Bulk writes survive an Elasticsearch-API server restart in the middle: the write is
//! retried until acknowledged, and nothing acknowledged is lost. The server is stopped
//! cleanly: the test server (noida-db) saves its data only on shutdown, where a real
//! Elasticsearch's translog keeps every acknowledged write through a crash too.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::time::Duration;

use karpor_storage::{ElasticConfig, RefreshPolicy, ResourceDocument, StorageConfig};
use karpor_testkit::services::Elastic;
use karpor_testkit::unique;

fn document(i: usize) -> ResourceDocument {
    ResourceDocument {
        cluster: "restart".to_owned(),
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        namespace: "default".to_owned(),
        name: format!("cm-{i}"),
        uid: format!("uid-{i:05}"),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        owner_references: Vec::new(),
        creation_timestamp: None,
        deletion_timestamp: None,
        resource_version: i.to_string(),
        sync_at: time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(i as i64),
        deleted: false,
        object: serde_json::json!({"data": {"key": format!("value {i}")}}),
        issues: Vec::new(),
        refs: Vec::new(),
        history: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_write_survives_a_restart_in_the_middle() {
    let Some(mut es) = Elastic::start() else {
        return;
    };
    let storage = karpor_storage::connect(&StorageConfig::Elasticsearch(ElasticConfig {
        url: es.url(),
        username: None,
        password: None,
        index: unique("restart"),
        refresh: RefreshPolicy::True,
    }))
    .await
    .unwrap();
    let before: Vec<_> = (0..200).map(document).collect();
    storage.upsert(&before).await.unwrap();

    es.process.stop();
    let during: Vec<_> = (200..400).map(document).collect();
    let writer = {
        let storage = storage.clone();
        let during = during.clone();
        tokio::spawn(async move { storage.upsert(&during).await })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !writer.is_finished(),
        "the write waits for the server, it does not give up"
    );
    // Held to the end: dropping it stops the server.
    let _es = tokio::task::spawn_blocking(move || {
        es.process.restart();
        es
    })
    .await
    .unwrap();
    writer
        .await
        .unwrap()
        .expect("acknowledged after the restart");

    assert_eq!(storage.count(Some("restart")).await.unwrap(), 400);
    for d in before.iter().chain(&during) {
        assert_eq!(
            storage.get(&d.cluster, &d.uid).await.unwrap().as_ref(),
            Some(d)
        );
    }
}
