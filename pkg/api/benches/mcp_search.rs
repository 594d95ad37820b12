//! A `search` tool call over MCP against the same search over REST (`cargo bench -p
//! karpor-api --bench mcp_search`): the real API router (auth, scope, envelope, the `/mcp`
//! transport of rmcp, the tool's in-process REST call and its shaping) on loopback HTTP,
//! over SQLite storage holding 5,000 Pods; the two runs interleaved, one keep-alive
//! connection each. The ratio of medians is the figure (target ≤ 1.2).

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

mod serving;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use karpor_api::LimitsConfig;
use karpor_storage::ResourceDocument;
use serde_json::{json, Value};
use serving::TOKEN;

const DOCUMENTS: usize = 5_000;
const RUNS: usize = 300;
const QUERY: &str = "select * from resources where kind = 'Pod' and namespace = 'ns-7'";
const PAGE: usize = 20;

fn pod(i: usize) -> ResourceDocument {
    let namespace = format!("ns-{}", i % 50);
    let name = format!("web-{i:06}");
    let labels = BTreeMap::from([("app".to_owned(), format!("app-{}", i % 200))]);
    let object = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": format!("node-{}", i % 40), "containers": [{"name": "app",
            "image": "nginx:1.25", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", i / 250 % 250, i % 250)}
    });
    let issues = karpor_audit::audit(&object, &karpor_audit::AuditConfig::default());
    let created = time::macros::datetime!(2026-01-01 00:00:00 UTC);
    ResourceDocument {
        cluster: "bench".to_owned(),
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        namespace,
        name,
        uid: format!("{i:08}-0000-4000-8000-000000000000"),
        labels,
        annotations: BTreeMap::new(),
        owner_references: Vec::new(),
        creation_timestamp: Some(created),
        deletion_timestamp: None,
        resource_version: (1_000 + i).to_string(),
        sync_at: created,
        deleted: false,
        object,
        issues,
        refs: Vec::new(),
        history: None,
    }
}

async fn karpor() -> std::net::SocketAddr {
    let (metastore, storage) = serving::stores().await;
    let documents: Vec<ResourceDocument> = (0..DOCUMENTS).map(pod).collect();
    for batch in documents.chunks(500) {
        storage.upsert(batch).await.unwrap();
    }
    let mut limits = LimitsConfig::default();
    limits.mcp.calls_per_minute = 1_000_000;
    limits.mcp.burst = 1_000_000;
    serving::serve((metastore, storage), limits, |_| None).await
}

/// The time of one call, and how many objects it answered.
async fn timed(request: reqwest::RequestBuilder, items: fn(&Value) -> usize) -> Duration {
    let started = Instant::now();
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let answer: Value = response.json().await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(items(&answer), PAGE, "{answer}");
    elapsed
}

fn quantile(runs: &mut [Duration], q: f64) -> f64 {
    runs.sort_unstable();
    let at = ((runs.len() as f64 - 1.0) * q).round() as usize;
    runs[at].as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let address = karpor().await;
    let (rest_http, mcp_http) = (reqwest::Client::new(), reqwest::Client::new());
    let rest = || {
        rest_http
            .get(format!("http://{address}/rest-api/v1/search"))
            .query(&[("query", QUERY), ("pageSize", &PAGE.to_string())])
            .bearer_auth(TOKEN)
    };
    let mcp = || {
        mcp_http
            .post(format!("http://{address}/mcp"))
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "search", "arguments": {"query": QUERY, "pageSize": PAGE}}}),
            )
    };
    let rest_items = |a: &Value| a["data"]["items"].as_array().map_or(0, Vec::len);
    let mcp_items = |a: &Value| {
        a["result"]["structuredContent"]["items"]
            .as_array()
            .map_or(0, Vec::len)
    };
    // Warm both paths (connections, SQLite's cache).
    for _ in 0..20 {
        timed(rest(), rest_items).await;
        timed(mcp(), mcp_items).await;
    }
    let (mut over_rest, mut over_mcp) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        // Alternate which goes first, so neither always follows the other.
        if i % 2 == 0 {
            over_rest.push(timed(rest(), rest_items).await);
            over_mcp.push(timed(mcp(), mcp_items).await);
        } else {
            over_mcp.push(timed(mcp(), mcp_items).await);
            over_rest.push(timed(rest(), rest_items).await);
        }
    }
    let (rest_p50, mcp_p50) = (quantile(&mut over_rest, 0.5), quantile(&mut over_mcp, 0.5));
    let (rest_p90, mcp_p90) = (quantile(&mut over_rest, 0.9), quantile(&mut over_mcp, 0.9));
    println!("{DOCUMENTS} Pods, {RUNS} runs each, page of {PAGE}: `{QUERY}`");
    println!("| path | p50 | p90 |");
    println!("|---|---|---|");
    println!("| REST `GET /search` | {rest_p50:.2} ms | {rest_p90:.2} ms |");
    println!("| MCP `tools/call search` | {mcp_p50:.2} ms | {mcp_p90:.2} ms |");
    println!(
        "| MCP ÷ REST | {:.2} | {:.2} |",
        mcp_p50 / rest_p50,
        mcp_p90 / rest_p90
    );
}
