//! Karpor's AI streams: explain an object's YAML or audit findings, diagnose events or a
//! pod's log lines, as server-sent frames (`start`, `chunk`s as the model writes,
//! `complete` or `error`). A pod's log is diagnosed from the lines the caller sends
//! (Karpor's route) or from the newest lines karpor reads itself, which needs the role
//! that reads logs (`auth.pod_logs`) as the log route does. What reaches a prompt is
//! scrubbed of secrets and cut to `ai.max_input_bytes` ([`karpor_ai::scrub`]); a caller
//! over its share is refused with 429 before anything is asked; a client that goes away
//! closes the model's connection. Without a model service they answer as Karpor does
//! with AI off: the diagnosis streams 503 in plain text, the interpret streams one
//! `error` frame.

use std::convert::Infallible;

use axum::extract::{Extension, Path, Query as QueryParams, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use karpor_ai::prompt::{self, Language};
use karpor_ai::{scrub, Ai, Busy, Generation, Message, Permit, Task};
use karpor_core::names::{ClusterName, Namespace, ObjectName};
use utoipa_axum::routes;

use crate::access::{Permission, Routes};
use crate::auth::{Grants, Principal};
use crate::body::Body;
use crate::envelope::{ApiError, Unenveloped};
use crate::live::logs::{self, PodRef, TailQuery};
use crate::openapi::{ErrorEnvelope, Errors};
use crate::scope::Visible;
use crate::types::{
    AiFrame, AuditSummaryBody, DiagnoseEventsBody, DiagnoseLogsBody, DiagnosePodLogBody,
    InterpretIssuesBody, InterpretYamlBody,
};
use crate::AppState;

const NOT_AVAILABLE: &str = "AI service is not available";
const NOT_CONFIGURED: &str = "AI service not configured";
/// Resources listed per finding in an explanation's prompt.
const AFFECTED_SHOWN: usize = 20;

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(diagnose_logs))
        .route(Permission::PodLogs, routes!(diagnose_pod_log))
        .route(Permission::Read, routes!(diagnose_events))
        .route(Permission::Read, routes!(interpret_yaml))
        .route(Permission::Read, routes!(interpret_issues))
}

fn unavailable() -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        NOT_AVAILABLE,
    )
        .into_response();
    response.extensions_mut().insert(Unenveloped);
    response
}

fn frame(kind: &str, content: Option<String>) -> SseEvent {
    let frame = AiFrame {
        kind: kind.to_owned(),
        content,
    };
    SseEvent::default().data(serde_json::to_string(&frame).unwrap_or_default())
}

fn sse(frames: impl Stream<Item = SseEvent> + Send + 'static) -> Response {
    let mut response = Sse::new(frames.map(Ok::<_, Infallible>))
        .keep_alive(KeepAlive::default())
        .into_response();
    // Proxies (nginx) would hold the frames back otherwise.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response.extensions_mut().insert(Unenveloped);
    response
}

fn not_configured() -> Response {
    sse(futures::stream::iter([frame(
        "error",
        Some(NOT_CONFIGURED.to_owned()),
    )]))
}

/// 429 with `Retry-After`, in the envelope.
pub(crate) fn busy(busy: Busy) -> Response {
    let seconds = busy.retry_after.as_secs_f64().ceil().max(1.0) as u64;
    let mut response = ApiError::new(StatusCode::TOO_MANY_REQUESTS, busy.message).into_response();
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The generation's frames: `start` at once, then the model's text as it comes.
fn generate(ai: &Ai, task: Task, permit: Permit, messages: Vec<Message>) -> Response {
    enum Step {
        Ask(Box<(Ai, Permit, Vec<Message>)>),
        Stream(Generation, String),
        Done,
    }
    let start = futures::stream::iter([frame("start", None)]);
    let rest = futures::stream::unfold(
        Step::Ask(Box::new((ai.clone(), permit, messages))),
        move |step| async move {
            let (mut generation, mut text) = match step {
                Step::Done => return None,
                Step::Stream(generation, text) => (generation, text),
                Step::Ask(asked) => {
                    let (ai, permit, messages) = *asked;
                    match ai.stream(task, permit, &messages).await {
                        Ok(generation) => (generation, String::new()),
                        Err(e) => return Some((frame("error", Some(e.to_string())), Step::Done)),
                    }
                }
            };
            match generation.next().await {
                Some(Ok(piece)) => {
                    text.push_str(&piece);
                    Some((frame("chunk", Some(piece)), Step::Stream(generation, text)))
                }
                Some(Err(e)) => Some((frame("error", Some(e.to_string())), Step::Done)),
                None => Some((frame("complete", Some(text)), Step::Done)),
            }
        },
    );
    sse(start.chain(rest))
}

/// A stream's body, as Karpor's routes take it.
trait Asking {
    fn language(&self) -> Option<&str>;
}

macro_rules! asking {
    ($($body:ty),*) => {$(
        impl Asking for $body {
            fn language(&self) -> Option<&str> {
                self.language.as_deref()
            }
        }
    )*};
}
asking!(
    InterpretYamlBody,
    InterpretIssuesBody,
    DiagnoseEventsBody,
    DiagnoseLogsBody,
    DiagnosePodLogBody
);

/// A stream let in: the model service, the body, what the route made of it, the
/// answer's language and the caller's place.
struct Admitted<'a, T, C> {
    ai: &'a Ai,
    body: T,
    checked: C,
    language: Language,
    permit: Permit,
}

/// What each stream does first, in this order: Karpor's answer without a model service
/// (whatever the body), the body and its language, the route's own `check` of it, then a
/// place for the caller (429 beyond its share).
fn admit<'a, T: Asking, C>(
    state: &'a AppState,
    caller: &Principal,
    body: Result<Body<T>, Response>,
    without: fn() -> Response,
    check: impl FnOnce(&T) -> Result<C, ApiError>,
) -> Result<Admitted<'a, T, C>, Box<Response>> {
    let Some(ai) = &state.ai else {
        return Err(Box::new(without()));
    };
    let Body(body) = body.map_err(Box::new)?;
    let refused = |e: ApiError| Box::new(e.into_response());
    let language = Language::parse(body.language())
        .map_err(ApiError::bad_request)
        .map_err(refused)?;
    let checked = check(&body).map_err(refused)?;
    let permit = ai.enter(&caller.name).map_err(|b| Box::new(busy(b)))?;
    Ok(Admitted {
        ai,
        body,
        checked,
        language,
        permit,
    })
}

/// Explains one object from its YAML.
#[utoipa::path(post, path = "/insight/yaml/interpret/stream",
    operation_id = "interpretYaml", tag = "ai", request_body = InterpretYamlBody,
    responses((status = 200, description = "server-sent `AiFrame`s; without a model service one `error` frame",
        body = AiFrame, content_type = "text/event-stream"),
        (status = 429, description = "over the caller's or the server's share of generations", body = ErrorEnvelope),
        Errors))]
pub(crate) async fn interpret_yaml(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    body: Result<Body<InterpretYamlBody>, Response>,
) -> Response {
    let Admitted {
        ai,
        body,
        checked: object,
        language,
        permit,
    } = match admit(&state, &caller, body, not_configured, |body| {
        if body.yaml.trim().is_empty() {
            return Err(ApiError::bad_request("yaml is required"));
        }
        karpor_kube::yaml::from_str::<serde_json::Value>(&body.yaml).map_err(|problem| {
            ApiError::bad_request(format!("yaml: {}{}", problem.what, problem.position()))
        })
    }) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let mut yaml = serde_saphyr::to_string(&scrub::object(object)).unwrap_or_default();
    if !body.findings.is_empty() {
        yaml.push_str("\n# Audit findings karpor made:\n");
        for finding in body.findings.iter().take(AFFECTED_SHOWN) {
            yaml.push_str(&format!(
                "# - {}\n",
                scrub::text(finding).replace('\n', " ")
            ));
        }
    }
    let yaml = scrub::cut(&yaml, ai.max_input_bytes());
    generate(
        ai,
        Task::InterpretYaml,
        permit,
        prompt::interpret_yaml(&yaml, language),
    )
}

/// The audit answer as text for a prompt: totals, then each finding with the first
/// resources it was found in.
fn audit_summary(audit: &AuditSummaryBody) -> String {
    let mut text = format!(
        "Findings: {}\nResources audited: {}\nBy severity:",
        audit.issue_total, audit.resource_total
    );
    for (severity, count) in &audit.by_severity {
        text.push_str(&format!(" {severity} {count};"));
    }
    for group in &audit.issue_groups {
        let issue = &group.issue;
        text.push_str(&format!(
            "\n\n## {} ({}, {})\n{}\nFound in:",
            issue.title, issue.severity, issue.scanner, issue.message
        ));
        for r in group.resource_groups.iter().take(AFFECTED_SHOWN) {
            text.push_str(&format!(
                "\n- {} {}/{} in cluster {}",
                r.kind, r.namespace, r.name, r.cluster
            ));
        }
        let more = group.resource_groups.len().saturating_sub(AFFECTED_SHOWN);
        if more > 0 {
            text.push_str(&format!("\n- and {more} more"));
        }
    }
    scrub::text(&text)
}

/// Explains audit findings.
#[utoipa::path(post, path = "/insight/issue/interpret/stream",
    operation_id = "interpretIssues", tag = "ai", request_body = InterpretIssuesBody,
    responses((status = 200, description = "server-sent `AiFrame`s; without a model service one `error` frame",
        body = AiFrame, content_type = "text/event-stream"),
        (status = 429, description = "over the caller's or the server's share of generations", body = ErrorEnvelope),
        Errors))]
pub(crate) async fn interpret_issues(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    body: Result<Body<InterpretIssuesBody>, Response>,
) -> Response {
    let Admitted {
        ai,
        body,
        language,
        permit,
        ..
    } = match admit(&state, &caller, body, not_configured, |body| {
        if body.audit_data.issue_groups.is_empty() {
            return Err(ApiError::bad_request(
                "auditData has no issueGroups to interpret",
            ));
        }
        Ok(())
    }) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let summary = scrub::cut(&audit_summary(&body.audit_data), ai.max_input_bytes());
    generate(
        ai,
        Task::InterpretIssues,
        permit,
        prompt::interpret_issues(&summary, language),
    )
}

/// Diagnoses a resource's events.
#[utoipa::path(post, path = "/insight/aggregator/event/diagnosis/stream",
    operation_id = "diagnoseEvents", tag = "ai", request_body = DiagnoseEventsBody,
    responses((status = 200, description = "server-sent `AiFrame`s",
        body = AiFrame, content_type = "text/event-stream"),
        (status = 503, description = "no model service is configured",
        body = String, content_type = "text/plain"),
        (status = 429, description = "over the caller's or the server's share of generations", body = ErrorEnvelope),
        Errors))]
pub(crate) async fn diagnose_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    body: Result<Body<DiagnoseEventsBody>, Response>,
) -> Response {
    let Admitted {
        ai,
        body,
        language,
        permit,
        ..
    } = match admit(&state, &caller, body, unavailable, |body| {
        if body.events.is_empty() {
            return Err(ApiError::bad_request("events is empty"));
        }
        Ok(())
    }) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let lines: Vec<String> = body
        .events
        .iter()
        .map(|e| {
            format!(
                "{} {} {} (x{}, first {}): {}",
                e.last_timestamp, e.kind, e.reason, e.count, e.first_timestamp, e.message
            )
        })
        .collect();
    let events = newest(&lines, 0, ai.max_input_bytes());
    generate(
        ai,
        Task::DiagnoseEvents,
        permit,
        prompt::diagnose_events(&events, language),
    )
}

/// Diagnoses a pod's log lines.
#[utoipa::path(post, path = "/insight/aggregator/log/diagnosis/stream",
    operation_id = "diagnosePodLogs", tag = "ai", request_body = DiagnoseLogsBody,
    responses((status = 200, description = "server-sent `AiFrame`s",
        body = AiFrame, content_type = "text/event-stream"),
        (status = 503, description = "no model service is configured",
        body = String, content_type = "text/plain"),
        (status = 429, description = "over the caller's or the server's share of generations", body = ErrorEnvelope),
        Errors))]
pub(crate) async fn diagnose_logs(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    body: Result<Body<DiagnoseLogsBody>, Response>,
) -> Response {
    let Admitted {
        ai,
        body,
        language,
        permit,
        ..
    } = match admit(&state, &caller, body, unavailable, |body| {
        if body.logs.is_empty() {
            return Err(ApiError::bad_request("logs is empty"));
        }
        Ok(())
    }) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let lines = newest(&body.logs, 0, ai.max_input_bytes());
    generate(
        ai,
        Task::DiagnoseLogs,
        permit,
        prompt::diagnose_logs(&lines, language),
    )
}

/// Diagnoses a pod's log as karpor reads it: its newest lines, scrubbed and cut as
/// Karpor's route cuts what a client sends.
#[utoipa::path(post, path = "/insight/aggregator/log/pod/{cluster}/{namespace}/{name}/diagnosis/stream",
    operation_id = "diagnosePodLog", tag = "ai", request_body = DiagnosePodLogBody,
    params(("cluster" = String, Path), ("namespace" = String, Path), ("name" = String, Path), TailQuery),
    responses((status = 200, description = "server-sent `AiFrame`s",
        body = AiFrame, content_type = "text/event-stream"),
        (status = 503, description = "no model service is configured (plain text), or the cluster did not give the log",
        body = String, content_type = "text/plain"),
        (status = 429, description = "over the caller's share of generations or of streams", body = ErrorEnvelope),
        Errors))]
#[allow(clippy::too_many_arguments)] // An axum handler takes what it reads as arguments.
pub(crate) async fn diagnose_pod_log(
    State(state): State<AppState>,
    visible: Visible,
    Extension(caller): Extension<Principal>,
    Extension(grants): Extension<Grants>,
    Path((cluster, namespace, name)): Path<(ClusterName, Namespace, ObjectName)>,
    QueryParams(query): QueryParams<TailQuery>,
    body: Result<Body<DiagnosePodLogBody>, Response>,
) -> Response {
    let pod = PodRef {
        cluster,
        namespace,
        name,
    };
    let limits = state.live.limits();
    // Who may read the log and what to read are settled before a generation's place is
    // taken, so a refusal costs the caller none of its share.
    let Admitted {
        ai,
        checked: params,
        language,
        permit,
        ..
    } = match admit(&state, &caller, body, unavailable, |_| {
        logs::may_read(&visible, &grants, &pod)?;
        query.params(limits)
    }) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let max = ai.max_input_bytes();
    let tail = match logs::tail(&state, &visible, &caller, &pod, &params, max).await {
        Ok(tail) => tail,
        Err(refusal) => return refusal,
    };
    if tail.lines.is_empty() {
        let why = match tail.left_out {
            0 => "has no lines in the window asked",
            _ => "has no line short enough for ai.max_input_bytes",
        };
        let container = params.container.as_deref().unwrap_or("its only container");
        return ApiError::bad_request(format!("pod {:?}'s log ({container}) {why}", pod.name))
            .into_response();
    }
    let lines = newest(&tail.lines, tail.left_out, max);
    generate(
        ai,
        Task::DiagnoseLogs,
        permit,
        prompt::diagnose_logs(&lines, language),
    )
}

/// The last lines that fit in `max` bytes, scrubbed, oldest first, with a note when
/// earlier ones (and the `left_out` before them) were left out: the newest lines say
/// most about what is wrong now.
fn newest(lines: &[String], left_out: usize, max: usize) -> String {
    let mut kept = Vec::new();
    let mut size = 0;
    for line in lines.iter().rev() {
        let line = scrub::text(line);
        if size + line.len() + 1 > max {
            break;
        }
        size += line.len() + 1;
        kept.push(line);
    }
    let left_out = left_out + lines.len() - kept.len();
    kept.reverse();
    let mut text = kept.join("\n");
    if left_out > 0 {
        text = format!("[cut by karpor: the first {left_out} lines are left out]\n{text}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::newest;

    #[test]
    fn the_newest_lines_are_kept_scrubbed() {
        let lines: Vec<String> = (0..100)
            .map(|i| format!("line {i} token=abcdef{i}"))
            .collect();
        let text = newest(&lines, 0, 200);
        assert!(text.starts_with("[cut by karpor: the first"), "{text}");
        assert!(text.ends_with("line 99 (redacted)"), "{text}");
        assert!(!text.contains("abcdef"));
    }
}
