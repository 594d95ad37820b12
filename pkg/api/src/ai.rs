//! Karpor's AI routes, answered as Karpor answers them with no model service configured:
//! the diagnosis streams refuse with 503 in plain text, the interpret streams send one
//! `error` event. They read nothing and write nothing.

use crate::access::{Permission, Routes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use utoipa_axum::routes;

use crate::envelope::Unenveloped;
use crate::openapi::ErrorEnvelope;

const NOT_AVAILABLE: &str = "AI service is not available";
const NOT_CONFIGURED: &str = r#"data: {"type":"error","content":"AI service not configured"}"#;

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(diagnose_logs))
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

fn not_configured() -> Response {
    let mut response = (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        format!("{NOT_CONFIGURED}\n\n"),
    )
        .into_response();
    response.extensions_mut().insert(Unenveloped);
    response
}

/// Diagnoses a pod's log lines (needs a model service: 503 without one).
#[utoipa::path(post, path = "/insight/aggregator/log/diagnosis/stream",
    operation_id = "diagnosePodLogs", tag = "ai",
    responses((status = 503, description = "no model service is configured",
        body = String, content_type = "text/plain"),
        (status = 401, description = "no token, or a token not accepted", body = ErrorEnvelope)))]
pub(crate) async fn diagnose_logs() -> Response {
    unavailable()
}

/// Diagnoses a resource's events (needs a model service: 503 without one).
#[utoipa::path(post, path = "/insight/aggregator/event/diagnosis/stream",
    operation_id = "diagnoseEvents", tag = "ai",
    responses((status = 503, description = "no model service is configured",
        body = String, content_type = "text/plain"),
        (status = 401, description = "no token, or a token not accepted", body = ErrorEnvelope)))]
pub(crate) async fn diagnose_events() -> Response {
    unavailable()
}

/// Explains a YAML document (needs a model service: one `error` event without one).
#[utoipa::path(post, path = "/insight/yaml/interpret/stream",
    operation_id = "interpretYaml", tag = "ai",
    responses((status = 200, description = "server-sent events; without a model service one `error` event",
        body = String, content_type = "text/event-stream"),
        (status = 401, description = "no token, or a token not accepted", body = ErrorEnvelope)))]
pub(crate) async fn interpret_yaml() -> Response {
    not_configured()
}

/// Explains audit issues (needs a model service: one `error` event without one).
#[utoipa::path(post, path = "/insight/issue/interpret/stream",
    operation_id = "interpretIssues", tag = "ai",
    responses((status = 200, description = "server-sent events; without a model service one `error` event",
        body = String, content_type = "text/event-stream"),
        (status = 401, description = "no token, or a token not accepted", body = ErrorEnvelope)))]
pub(crate) async fn interpret_issues() -> Response {
    not_configured()
}
