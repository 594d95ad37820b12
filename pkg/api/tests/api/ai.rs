//! The AI routes against the real test model server (`scripts/test.sh` starts it): the
//! streams' frames as the model writes, nothing secret in what reaches the model, a
//! client that leaves cancels the generation, a caller over its share gets 429, and
//! natural-language search either runs a query karpor's parser accepted (and shows it)
//! or answers 400 with the query and why, after one repair round.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request};
use futures::StreamExt;
use karpor_ai::AiConfig;
use karpor_api::LimitsConfig;
use karpor_core::SecretSource;
use karpor_testkit::api::GUEST;
use karpor_testkit::model::ModelServer;
use karpor_testkit::unique;
use serde_json::{json, Value};

use crate::app::{text, Api, Setup};
use crate::search::document;
use crate::urlencode;

const YAML: &str = "/rest-api/v1/insight/yaml/interpret/stream";
const LOGS: &str = "/rest-api/v1/insight/aggregator/log/diagnosis/stream";
const EVENTS: &str = "/rest-api/v1/insight/aggregator/event/diagnosis/stream";
const ISSUES: &str = "/rest-api/v1/insight/issue/interpret/stream";

async fn api(model: &ModelServer, change: impl FnOnce(&mut AiConfig)) -> Api {
    let mut config = AiConfig::new(model.url.parse().unwrap(), model.name.clone());
    config.api_key = Some(SecretSource::Inline(model.key.clone()));
    config.max_tokens = 24;
    // Generations queue at the one test server behind other tests' on a busy machine:
    // the tests check what happens, not how fast.
    config.first_token_timeout = Duration::from_secs(300);
    config.timeout = Duration::from_secs(300);
    change(&mut config);
    Setup {
        ai: Some(config),
        limits: LimitsConfig {
            request_timeout: Duration::from_secs(600),
            ..LimitsConfig::default()
        },
        ..Setup::default()
    }
    .start()
    .await
}

fn post(path: &str, body: Value) -> Request<Body> {
    Request::post(path)
        .header(header::AUTHORIZATION, format!("Bearer {GUEST}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The frames of a whole stream.
fn frames(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// `start`, then chunks, then `complete` holding their text.
fn assert_streamed(frames: &[Value]) {
    assert_eq!(
        frames.first(),
        Some(&json!({"type": "start"})),
        "{frames:?}"
    );
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "complete", "{frames:?}");
    let chunks: Vec<&str> = frames[1..frames.len() - 1]
        .iter()
        .map(|f| {
            assert_eq!(f["type"], "chunk", "{frames:?}");
            f["content"].as_str().unwrap()
        })
        .collect();
    assert!(!chunks.is_empty(), "{frames:?}");
    assert_eq!(last["content"], chunks.concat());
}

#[tokio::test]
async fn the_four_streams_frame_the_model_and_send_it_nothing_secret() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    let api = api(&model, |_| {}).await;
    let marker = unique("planted");
    let jwt = format!("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ{marker}.c2lnbmF0dXJlc2ln");
    let planted = [
        format!("cGFzc3dvcmQ{marker}"),
        format!("applied-{marker}"),
        format!("hunter2-{marker}"),
        format!("bearer-{marker}"),
        jwt.clone(),
    ];
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-{marker}\n  annotations:\n    \
         kubectl.kubernetes.io/last-applied-configuration: '{{\"x\":\"{}\"}}'\n\
         data:\n  password: {}\n",
        planted[1], planted[0]
    );
    let requests = [
        (YAML, json!({"yaml": secret, "language": "en"})),
        (
            LOGS,
            json!({"logs": [
                format!("{marker} starting with DB_PASSWORD={}", planted[2]),
                format!("calling with Authorization: Bearer {}", planted[3]),
                format!("token {jwt} expired"),
            ], "language": "de"}),
        ),
        (
            EVENTS,
            json!({"events": [{"type": "Warning", "reason": "BackOff",
                "message": format!("{marker} pulling with password={}", planted[2]),
                "count": 3, "lastTimestamp": "2026-12-01T00:00:00Z",
                "firstTimestamp": "2026-12-01T00:00:00Z"}]}),
        ),
        (
            ISSUES,
            json!({"auditData": {"issueTotal": 1, "resourceTotal": 1, "bySeverity": {"High": 1},
                "issueGroups": [{"issue": {"title": "Privileged container", "severity": "High",
                    "scanner": "karpor", "message": format!("{marker} token: {}", planted[3])},
                "resourceGroups": [{"cluster": "c1", "kind": "Pod", "namespace": "a", "name": "web"}]}]}}),
        ),
    ];
    let mark = model.mark();
    for (path, body) in requests {
        let response = api.raw(post(path, body)).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        assert_streamed(&frames(&text(response).await));
    }
    let sent: Vec<Value> = model
        .requests_since(mark)
        .into_iter()
        .filter(|r| r["body"].to_string().contains(&marker))
        .collect();
    assert_eq!(sent.len(), 4, "each stream asked the model once");
    for value in &planted {
        assert!(!model.log_contains(value), "{value} reached the model");
    }
    assert!(sent[1]["body"].to_string().contains("German"));
}

#[tokio::test]
async fn a_client_that_leaves_cancels_the_generation() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    let api = api(&model, |c| {
        c.max_tokens = 400;
        c.per_caller = 1;
    })
    .await;
    let marker = unique("leaving");
    let mark = model.mark();
    let response = api
        .raw(post(
            LOGS,
            json!({"logs": [format!("{marker}: write a long story about a ship")]}),
        ))
        .await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body().into_data_stream();
    let mut seen = String::new();
    while !seen.contains("\"chunk\"") {
        seen.push_str(&String::from_utf8_lossy(
            &body.next().await.unwrap().unwrap(),
        ));
    }
    // The caller's one place is taken while its stream is open.
    let refused = api
        .raw(post(
            YAML,
            json!({"yaml": "kind: Pod\nmetadata: {name: a}"}),
        ))
        .await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key(header::RETRY_AFTER));
    drop(body);
    model
        .wait_for_event(mark, "cancelled", Duration::from_secs(30))
        .await;
    let again = api
        .raw(post(
            YAML,
            json!({"yaml": "kind: Pod\nmetadata: {name: a}"}),
        ))
        .await;
    assert_eq!(again.status(), 200, "the place came back with the stream");
}

#[tokio::test]
async fn natural_language_search_runs_only_what_parses_and_shows_it() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    let api = api(&model, |c| c.max_tokens = 60).await;
    let cluster = unique("nl");
    api.storage
        .upsert(&[
            document(&cluster, "ConfigMap", "shop", "settings", json!({})),
            document(&cluster, "Deployment", "shop", "web", json!({})),
        ])
        .await
        .unwrap();
    let mark = model.mark();
    let question = urlencode("all deployments in namespace shop");
    let (code, answer) = api
        .guest()
        .call(
            "GET",
            &format!("/rest-api/v1/search?pattern=nl&query={question}&pageSize=5"),
            None,
        )
        .await;
    let sent: Vec<Value> = model
        .requests_since(mark)
        .into_iter()
        .filter(|r| r["body"].to_string().contains(&cluster))
        .collect();
    assert!(
        (1..=2).contains(&sent.len()),
        "a question and at most one repair: {sent:?}"
    );
    match code {
        200 => {
            let sql = answer["data"]["sqlQuery"].as_str().unwrap();
            karpor_search::parse(sql).unwrap_or_else(|e| panic!("{sql} ran unparsed: {e}"));
        }
        400 => {
            let message = answer["message"].as_str().unwrap();
            assert!(message.contains("sqlQuery:"), "{message}");
            assert_eq!(sent.len(), 2, "refused only after the repair round");
        }
        other => panic!("{other}: {answer}"),
    }
    // Without a question, and in an unknown language, a clear 400.
    let (code, _) = api
        .guest()
        .call("GET", "/rest-api/v1/search?pattern=nl", None)
        .await;
    assert_eq!(code, 400);
    let refused = api
        .raw(post(
            YAML,
            json!({"yaml": "kind: Pod", "language": "klingon"}),
        ))
        .await;
    assert_eq!(refused.status(), 400);
}
