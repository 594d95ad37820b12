//! Karpor's envelope around every answer, and the one answer that changes form on request.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// The body of every API answer (`data` is null on failure).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Envelope<T> {
    pub success: bool,
    pub message: String,
    pub data: Option<T>,
    /// The request id (also the `x-request-id` header).
    #[serde(rename = "traceID")]
    pub trace_id: String,
    #[serde(rename = "startTime", with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub start_time: OffsetDateTime,
    #[serde(rename = "endTime", with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub end_time: OffsetDateTime,
    /// How long the request took, e.g. `1.25ms`.
    #[serde(rename = "costTime")]
    pub cost_time: String,
}

/// An object, or with `format=yaml` its YAML text.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ObjectOrYaml<T> {
    Object(T),
    Yaml(String),
}
