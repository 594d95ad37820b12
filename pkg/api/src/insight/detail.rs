//! `GET /insight/detail`: one object as Karpor answers it, the object itself (or its YAML
//! with `format=yaml`), from storage or (`live=true`) from the cluster now, trimmed and
//! redacted as the syncer does; `karpor` beside the object's own keys says which and
//! how old.

use axum::extract::{Query as QueryParams, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};

use super::one;
use axum::http::StatusCode;

use crate::envelope::{ApiError, ApiResult};
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
    /// `true`: read from the cluster now (its answer, or 404 when it has no such object;
    /// 503 when it does not answer) instead of storage.
    #[serde(default, deserialize_with = "crate::params::lenient_bool")]
    #[param(value_type = Option<String>)]
    pub live: bool,
}

/// Where an answered object came from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub cluster: String,
    /// `stored` (the syncer's copy) or `live` (read from the cluster for this answer).
    pub source: &'static str,
    /// When the copy was written, or the object read.
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
    let (mut object, provenance) = if params.live {
        live(&state, &at).await?
    } else {
        let document = one(&state, &at).await?;
        let provenance = Provenance {
            cluster: document.cluster,
            source: "stored",
            sync_at: document.sync_at,
            deleted: document.deleted,
        };
        (redacted(document.object), provenance)
    };
    if format == Format::Object {
        if let Some(map) = object.as_object_mut() {
            map.insert(
                "karpor".to_owned(),
                serde_json::to_value(provenance).unwrap_or_default(),
            );
        }
    }
    format.reply(&object)
}

/// The object from its cluster now, as the syncer would keep it (no last-applied
/// annotation) and redacted as stored ones are.
async fn live(state: &AppState, at: &Locator) -> Result<(Value, Provenance), ApiError> {
    let (Some(cluster), Some(api_version), Some(kind), Some(name)) =
        (at.cluster(), at.api_version(), at.kind(), at.name())
    else {
        return Err(ApiError::bad_request(
            "live detail needs cluster, apiVersion, kind and name",
        ));
    };
    let client = crate::live::client(state, cluster).await?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let unanswered = |e: kube::Error| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "cluster {cluster:?} did not answer: {}",
                karpor_kube::describe(&e)
            ),
        )
    };
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk)
        .await
        .map_err(|e| match e {
            kube::Error::Discovery(_) => ApiError::not_found(format!(
                "cluster {cluster:?} serves no {api_version} {kind}"
            )),
            other => unanswered(other),
        })?;
    let api: kube::Api<kube::api::DynamicObject> = match at.namespace() {
        Some(ns) => kube::Api::namespaced_with(client, ns, &resource),
        None => kube::Api::all_with(client, &resource),
    };
    let object = match api.get_opt(name).await.map_err(unanswered)? {
        Some(object) => object,
        None => {
            return Err(ApiError::not_found(format!(
                "no {kind} {name:?} in the cluster now"
            )))
        }
    };
    let mut object = serde_json::to_value(object).unwrap_or_default();
    object["apiVersion"] = Value::String(api_version.to_owned());
    object["kind"] = Value::String(kind.to_owned());
    if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
        annotations.remove(LAST_APPLIED);
    }
    Ok((
        redacted(object),
        Provenance {
            cluster: cluster.to_owned(),
            source: "live",
            sync_at: OffsetDateTime::now_utc(),
            deleted: false,
        },
    ))
}

/// kubectl keeps the whole applied object here, Secret values included.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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
