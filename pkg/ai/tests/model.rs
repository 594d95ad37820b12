//! The model service against the real test model server (SmolLM2-135M on llama.cpp,
//! `scripts/test.sh` starts it): the key is sent, answers stream as the tokens come, a
//! dropped stream cancels the generation upstream, a wrong key and a dead service are
//! failing checks, and natural-language search repairs once, then shows its query.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::time::Duration;

use futures::StreamExt;
use karpor_ai::prompt::Catalog;
use karpor_ai::{Ai, AiConfig, Message, ModelError, NlError, RunError, Task};
use karpor_core::SecretSource;
use karpor_health::{CheckOutcome, HealthReporter, Reason};
use karpor_testkit::model::ModelServer;
use prometheus_client::registry::Registry;

fn config(model: &ModelServer, key: &str) -> AiConfig {
    let mut config = AiConfig::new(model.url.parse().unwrap(), model.name.clone());
    config.api_key = Some(SecretSource::Inline(key.to_owned()));
    config.max_tokens = 24;
    // Generations queue at the one test server behind other tests' on a busy machine:
    // the tests check what happens, not how fast.
    config.first_token_timeout = Duration::from_secs(300);
    config.timeout = Duration::from_secs(300);
    config
}

fn ai(model: &ModelServer) -> Ai {
    Ai::new(&config(model, &model.key), &mut Registry::default()).unwrap()
}

/// The request of this test: the one whose body holds `marker`.
fn request_with(model: &ModelServer, mark: usize, marker: &str) -> Vec<serde_json::Value> {
    model
        .requests_since(mark)
        .into_iter()
        .filter(|r| r["body"].to_string().contains(marker))
        .collect()
}

#[tokio::test]
async fn answers_stream_as_the_tokens_come_with_the_key_sent() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    let ai = ai(&model);
    let marker = karpor_testkit::unique("stream");
    let mark = model.mark();
    let permit = ai.enter("ann").unwrap();
    let mut generation = ai
        .stream(
            Task::InterpretYaml,
            permit,
            &[Message::user(format!("Count from one to ten. ({marker})"))],
        )
        .await
        .unwrap();
    let mut pieces = Vec::new();
    while let Some(piece) = generation.next().await {
        pieces.push(piece.unwrap());
    }
    assert!(
        pieces.len() > 1,
        "one piece a token or so, not one answer: {pieces:?}"
    );
    assert!(!pieces.concat().trim().is_empty());
    let sent = request_with(&model, mark, &marker);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0]["headers"]["authorization"],
        format!("Bearer {}", model.key)
    );
    assert_eq!(sent[0]["body"]["stream"], true);
    assert_eq!(sent[0]["body"]["model"], model.name.as_str());
}

#[tokio::test]
async fn a_dropped_stream_cancels_the_generation_upstream() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    let mut config = config(&model, &model.key);
    config.max_tokens = 400;
    let ai = Ai::new(&config, &mut Registry::default()).unwrap();
    let marker = karpor_testkit::unique("cancel");
    let mark = model.mark();
    let mut generation = ai
        .stream(
            Task::DiagnoseLogs,
            ai.enter("ann").unwrap(),
            &[Message::user(format!(
                "Write a long story about a ship, at least 300 words. ({marker})"
            ))],
        )
        .await
        .unwrap();
    generation.next().await.unwrap().unwrap();
    drop(generation);
    let cancelled = model
        .wait_for_event(mark, "cancelled", Duration::from_secs(30))
        .await;
    let request = &request_with(&model, mark, &marker)[0];
    assert_eq!(cancelled["request"], request["request"]);
    // The permit went back with the stream.
    let mut one = config.clone();
    one.per_caller = 1;
    let ai = Ai::new(&one, &mut Registry::default()).unwrap();
    drop(ai.enter("ann").unwrap());
    ai.enter("ann").unwrap();
}

#[tokio::test]
async fn a_wrong_key_or_a_dead_service_fails_the_check_and_the_call() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    assert_eq!(ai(&model).check().check().await, CheckOutcome::Pass);
    let wrong = Ai::new(&config(&model, "not-the-key"), &mut Registry::default()).unwrap();
    match wrong.check().check().await {
        CheckOutcome::Fail(failure) => assert_eq!(failure.reason, Reason::Unauthorized),
        CheckOutcome::Pass => panic!("a wrong key passed"),
    }
    let refused = wrong
        .stream(
            Task::InterpretYaml,
            wrong.enter("ann").unwrap(),
            &[Message::user("hi")],
        )
        .await;
    assert!(
        matches!(refused, Err(ModelError::Unauthorized(401))),
        "{refused:?}"
    );
    // Nothing listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut dead = config(&model, &model.key);
    dead.base_url = format!("http://127.0.0.1:{port}/v1").parse().unwrap();
    let dead = Ai::new(&dead, &mut Registry::default()).unwrap();
    match dead.check().check().await {
        CheckOutcome::Fail(failure) => assert_eq!(failure.reason, Reason::Unreachable),
        CheckOutcome::Pass => panic!("a dead service passed"),
    }
}

#[tokio::test]
async fn a_failing_query_is_repaired_once_then_shown() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    let ai = ai(&model);
    let marker = karpor_testkit::unique("repair");
    let mark = model.mark();
    let catalog = Catalog {
        clusters: vec![marker.clone()],
        kinds: vec!["Pod".into()],
        namespaces: vec!["default".into()],
    };
    let mut ran = Vec::new();
    let outcome = ai
        .search("pods in namespace default", &catalog, |query| {
            ran.push(query);
            async { Err::<(), _>(RunError::<()>::Query("storage refused it".into())) }
        })
        .await;
    let Err(NlError::Invalid { sql, reason }) = outcome else {
        panic!("a query that never runs must end invalid: {outcome:?}");
    };
    assert!(!reason.is_empty());
    // Each answer that parsed was run; none ran more than twice.
    assert!(ran.len() <= 2, "{ran:?}");
    if !ran.is_empty() {
        assert!(sql.to_ascii_lowercase().starts_with("select"), "{sql}");
    }
    let sent = request_with(&model, mark, &marker);
    assert_eq!(sent.len(), 2, "one question and one repair: {sent:?}");
    let repair = sent[1]["body"]["messages"].to_string();
    assert!(repair.contains("That query failed"), "{repair}");
}
