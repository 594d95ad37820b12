//! Karpor's envelope `{success, message, data, traceID, startTime, endTime, costTime}`
//! around every API answer, and the errors with their truthful statuses. Handlers return
//! a [`Reply`] of their typed answer or an [`ApiError`]; the [`envelope`] middleware writes the body, so the
//! refusals of layers and extractors (413, 405, a bad query string) get it too.

use std::time::{Duration, Instant};

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use karpor_metastore::StoreError;
use karpor_storage::StorageError;
use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;

use crate::types::Envelope;

/// A successful answer: its status and data, serialised into the envelope's `data`.
pub(crate) struct Reply<T> {
    status: StatusCode,
    data: T,
}

impl<T: Serialize> Reply<T> {
    pub(crate) fn ok(data: T) -> Self {
        Reply {
            status: StatusCode::OK,
            data,
        }
    }

    pub(crate) fn created(data: T) -> Self {
        Reply {
            status: StatusCode::CREATED,
            data,
        }
    }
}

/// What the middleware puts in the envelope.
#[derive(Clone)]
struct Payload {
    message: String,
    data: Value,
}

/// A handler's answer as the envelope would hold it, read in process (the MCP tools):
/// `Ok(data)` for a success, else `Err(message)`; `None` when no handler wrote it (a
/// layer's or an extractor's refusal, whose body is its text).
pub(crate) fn answered(response: &mut Response) -> Option<Result<Value, String>> {
    let payload = response.extensions_mut().remove::<Payload>()?;
    Some(if response.status().is_success() {
        Ok(payload.data)
    } else {
        Err(payload.message)
    })
}

impl<T: Serialize> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(Payload {
            message: "OK".to_owned(),
            data: serde_json::to_value(self.data).unwrap_or(Value::Null),
        });
        response
    }
}

/// A failure with its status. The message is for the caller: it never holds a credential
/// or a backend's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(Payload {
            message: self.message,
            data: Value::Null,
        });
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { .. } => ApiError::not_found(e.to_string()),
            StoreError::AlreadyExists { .. }
            | StoreError::Conflict { .. }
            | StoreError::MemberAlive(_)
            | StoreError::LeaseLost(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            StoreError::Invalid(_) => ApiError::bad_request(e.to_string()),
            StoreError::Corrupt(_) => {
                tracing::error!(error = %e, "metadata store");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "stored data is unreadable",
                )
            }
            // A backend that cannot serve now: the detail (addresses) goes to the log only.
            StoreError::Unavailable(_)
            | StoreError::Unauthorized(_)
            | StoreError::Timeout
            | StoreError::Misconfigured(_)
            | StoreError::Compacted(_) => {
                tracing::warn!(error = %e, "metadata store unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the metadata store is unavailable",
                )
            }
        }
    }
}

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Invalid(message) => ApiError::bad_request(message),
            StorageError::Corrupt(_) => {
                tracing::error!(error = %e, "resource storage");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "stored data is unreadable",
                )
            }
            StorageError::Unavailable(_)
            | StorageError::Unauthorized(_)
            | StorageError::Timeout
            | StorageError::StatusRed
            | StorageError::Misconfigured(_) => {
                tracing::warn!(error = %e, "resource storage unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the resource storage is unavailable",
                )
            }
        }
    }
}

/// A handler's answer: `T` in the envelope, or a failure.
pub(crate) type ApiResult<T> = Result<Reply<T>, ApiError>;

/// A refusal for being over a limit on work asked at once or per second: 429 with
/// `Retry-After`.
#[derive(Debug)]
pub(crate) struct Limited {
    pub message: String,
    pub retry_after: Duration,
}

impl IntoResponse for Limited {
    fn into_response(self) -> Response {
        let seconds = self.retry_after.as_secs_f64().ceil().max(1.0) as u64;
        let mut response =
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, self.message).into_response();
        if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

/// Marks an answer Karpor gives outside the envelope (a stream, a plain-text refusal).
#[derive(Clone, Copy)]
pub(crate) struct Unenveloped;

/// Unknown routes under the prefix.
pub(crate) async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

/// Longest text of a layer's or extractor's refusal taken into a message.
const MAX_REFUSAL: usize = 512;

/// Wraps every answer in the envelope, with the request id and times.
pub(crate) async fn envelope(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let start_time = OffsetDateTime::now_utc();
    let trace_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let response = next.run(request).await;
    if response.extensions().get::<Unenveloped>().is_some() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let payload = match parts.extensions.remove::<Payload>() {
        Some(payload) => payload,
        None => {
            // A refusal by a layer or an extractor: its text becomes the message.
            if parts.status == StatusCode::UNPROCESSABLE_ENTITY {
                parts.status = StatusCode::BAD_REQUEST;
            }
            Payload {
                message: refusal(parts.status, body).await,
                data: Value::Null,
            }
        }
    };
    let success = parts.status.is_success();
    let end_time = OffsetDateTime::now_utc();
    let body = Envelope {
        success,
        message: payload.message,
        data: success.then_some(payload.data),
        trace_id,
        start_time,
        end_time,
        cost_time: format!("{:?}", started.elapsed()),
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

/// A layer's or an extractor's refusal as a message: its text, quoted values redacted,
/// cut short; the status's reason when it has none.
pub(crate) async fn refusal(status: StatusCode, body: Body) -> String {
    let text = to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message: String = redact_quoted(text.trim())
        .chars()
        .take(MAX_REFUSAL)
        .collect();
    if message.is_empty() {
        return status.canonical_reason().unwrap_or("error").to_owned();
    }
    message
}

/// A refusal's text with every double-quoted part (serde quotes the value it could not
/// take, which may be a credential in the wrong field) replaced by `"…"`. Field names
/// stay: serde writes them in backticks.
fn redact_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    for c in text.chars() {
        match (c, quoted) {
            ('"', false) => {
                out.push_str("\"…\"");
                quoted = true;
            }
            ('"', true) => quoted = false,
            (c, false) => out.push(c),
            (_, true) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_quoted;

    #[test]
    fn quoted_values_leave_refusals_and_field_names_stay() {
        assert_eq!(
            redact_quoted("labels: invalid type: string \"hunter2\", expected a map at line 1"),
            "labels: invalid type: string \"…\", expected a map at line 1"
        );
        assert_eq!(
            redact_quoted("unknown field `colour`"),
            "unknown field `colour`"
        );
        assert_eq!(redact_quoted("open \"quote never closed"), "open \"…\"");
    }
}
