//! `GET /insight/detail`: one object as Karpor answers it, the object itself (or its YAML
//! with `format=yaml`), here from storage; `karpor` beside the object's own keys says where
//! it came from and when.

use axum::extract::{Query as QueryParams, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};

use super::one;
use crate::envelope::ApiResult;
use crate::locator::Locator;
use crate::openapi::Errors;
use crate::params::Format;
use crate::AppState;

/// What Karpor writes where it keeps a field's place but not its value.
pub const REDACTED: &str = "[redacted]";

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DetailParams {
    /// `yaml`: `data` is the object's YAML as a string.
    pub format: Option<String>,
}

/// Where an answered object came from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub cluster: String,
    /// `stored`: the syncer's copy.
    pub source: &'static str,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub sync_at: OffsetDateTime,
    pub deleted: bool,
}

#[utoipa::path(get, path = "/insight/detail", operation_id = "insightDetail", tag = "insight",
    params(Locator, DetailParams),
    responses((status = 200, body = inline(Envelope<Object>),
        description = "the object (Secret values and managed fields `[redacted]`), with `karpor` beside its keys; with `format=yaml`, its YAML as a string"),
        Errors))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    QueryParams(at): QueryParams<Locator>,
    QueryParams(params): QueryParams<DetailParams>,
) -> ApiResult {
    let format = Format::parse(params.format.as_deref())?;
    let document = one(&state, &at).await?;
    let mut object = redacted(document.object);
    if format == Format::Object {
        let provenance = Provenance {
            cluster: document.cluster,
            source: "stored",
            sync_at: document.sync_at,
            deleted: document.deleted,
        };
        if let Some(map) = object.as_object_mut() {
            map.insert(
                "karpor".to_owned(),
                serde_json::to_value(provenance).unwrap_or_default(),
            );
        }
    }
    format.reply(&object)
}

/// As Karpor answers an object: a Secret's `data` and `stringData`, and the managed
/// fields, kept as `[redacted]` (karpor stores neither value; this says so).
pub fn redacted(mut object: Value) -> Value {
    let is_secret = object["kind"]
        .as_str()
        .is_some_and(|k| k.eq_ignore_ascii_case("Secret"));
    if let Some(map) = object.as_object_mut() {
        if is_secret {
            for key in ["data", "stringData"] {
                if map.contains_key(key) {
                    map.insert(key.to_owned(), Value::String(REDACTED.to_owned()));
                }
            }
        }
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            if metadata.contains_key("managedFields") {
                metadata.insert(
                    "managedFields".to_owned(),
                    Value::String(REDACTED.to_owned()),
                );
            }
        }
    }
    object
}
