//! karpor's added latency to the first token (`cargo bench -p karpor-api --bench
//! ai_first_token`, with the test model server's `KARPOR_TEST_MODEL_*` from
//! `source target/test-services/env.sh`): the same prompt asked through karpor's
//! interpret stream (over HTTP on loopback, scrubbing, the gate and the frames included)
//! and straight from the model server (the very body karpor sent, read back from the
//! server's request log), runs interleaved; the time to the first text of each.
//!
//! The real model's own time to its first token varies by tens of milliseconds from run
//! to run, more than karpor adds, so the same comparison is made first against a
//! stand-in that streams a fixed answer at once: there the difference is karpor's alone.

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

mod serving;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use karpor_ai::{Ai, AiConfig};
use karpor_api::LimitsConfig;
use karpor_core::SecretSource;
use karpor_testkit::model::ModelServer;
use serde_json::{json, Value};
use serving::TOKEN;

const RUNS: usize = 15;
const STAND_IN_RUNS: usize = 300;

/// Time to the first SSE `data:` line whose text `has_text` accepts, then the stream is
/// dropped (the generation cancelled).
async fn first_text(request: reqwest::RequestBuilder, has_text: fn(&str) -> bool) -> Duration {
    let started = Instant::now();
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let mut body = response.bytes_stream();
    let mut pending = String::new();
    while let Some(chunk) = body.next().await {
        pending.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                if has_text(data) {
                    return started.elapsed();
                }
            }
        }
    }
    panic!("the stream ended without text");
}

fn karpor_chunk(data: &str) -> bool {
    serde_json::from_str::<Value>(data).is_ok_and(|f| f["type"] == "chunk")
}

fn model_chunk(data: &str) -> bool {
    serde_json::from_str::<Value>(data).is_ok_and(|c| {
        c["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    })
}

fn median(mut runs: Vec<Duration>) -> f64 {
    runs.sort_unstable();
    runs[runs.len() / 2].as_secs_f64() * 1e3
}

/// A model service that answers every chat request at once with three chunks, keeping
/// the last body it was sent.
async fn stand_in() -> (String, Arc<Mutex<Value>>) {
    let last = Arc::new(Mutex::new(Value::Null));
    let kept = last.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let kept = kept.clone();
            async move {
                *kept.lock().unwrap() = body;
                let chunk = |text: &str| {
                    format!(
                        "data: {}\n\n",
                        json!({"choices": [{"delta": {"content": text}}]})
                    )
                };
                let text = format!(
                    "{}{}{}data: [DONE]\n\n",
                    chunk("It "),
                    chunk("is "),
                    chunk("fine.")
                );
                (
                    [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
                    text,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/v1"), last)
}

/// karpor's API, on loopback, with a model service at `url`.
async fn karpor(url: &str, key: &str, model: &str) -> std::net::SocketAddr {
    let mut config = AiConfig::new(url.parse().unwrap(), model);
    config.api_key = Some(SecretSource::Inline(key.to_owned()));
    config.max_tokens = 8;
    config.per_caller_per_minute = 100_000;
    serving::serve(
        serving::stores().await,
        LimitsConfig::default(),
        |registry| Some(Ai::new(&config, registry).unwrap()),
    )
    .await
}

/// Medians of the direct and the through-karpor times to the first text, runs
/// interleaved.
async fn compare(
    runs: usize,
    through_karpor: impl Fn() -> reqwest::RequestBuilder,
    direct: impl Fn() -> reqwest::RequestBuilder,
) -> (f64, f64) {
    let (mut karpor, mut straight) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        straight.push(first_text(direct(), model_chunk).await);
        karpor.push(first_text(through_karpor(), karpor_chunk).await);
    }
    (median(straight), median(karpor))
}

fn row(label: &str, runs: usize, (straight, karpor): (f64, f64)) {
    println!(
        "| {label} | {runs} | {straight:.2} ms | {karpor:.2} ms | {:.2} ms |",
        karpor - straight
    );
}

#[tokio::main]
async fn main() {
    let http = reqwest::Client::new();
    let marker = karpor_testkit::unique("bench");
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {marker}\ndata:\n  mode: production\n"
    );
    let ask = |address: std::net::SocketAddr| {
        let (http, yaml) = (http.clone(), yaml.clone());
        move || {
            http.post(format!(
                "http://{address}/rest-api/v1/insight/yaml/interpret/stream"
            ))
            .bearer_auth(TOKEN)
            .json(&json!({ "yaml": yaml }))
        }
    };
    println!("| model service | runs each | first text, direct (median) | through karpor (median) | karpor's added latency |");
    println!("|---|---|---|---|---|");

    let (url, last) = stand_in().await;
    let address = karpor(&url, "stand-in-key", "stand-in").await;
    let through_karpor = ask(address);
    first_text(through_karpor(), karpor_chunk).await;
    let body = last.lock().unwrap().clone();
    let direct = || http.post(format!("{url}/chat/completions")).json(&body);
    row(
        "stand-in, answers at once",
        STAND_IN_RUNS,
        compare(STAND_IN_RUNS, &through_karpor, direct).await,
    );

    let Some(model) = ModelServer::shared() else {
        println!("\nthe real model: skipped (KARPOR_TEST_MODEL_URL is not set; source target/test-services/env.sh)");
        return;
    };
    let address = karpor(&model.url, &model.key, &model.name).await;
    let through_karpor = ask(address);
    // karpor's own request, to send the model the very same body.
    let mark = model.mark();
    first_text(through_karpor(), karpor_chunk).await;
    let sent = model
        .requests_since(mark)
        .into_iter()
        .find(|r| r["body"].to_string().contains(&marker))
        .unwrap();
    let body = sent["body"].clone();
    let direct = || {
        http.post(format!("{}/chat/completions", model.url))
            .bearer_auth(&model.key)
            .json(&body)
    };
    row(
        &format!("{} (test model server)", model.name),
        RUNS,
        compare(RUNS, &through_karpor, direct).await,
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nload average after the runs: {}", load.trim());
}
