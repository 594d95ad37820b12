//! `GET /insight/detail`: one object as Karpor answers it, the object itself (or its YAML
//! with `format=yaml`), from storage or (`live=true`) from the cluster now, trimmed and
//! redacted as the syncer does; `karpor` beside the object's own keys says which and
//! how old.

use axum::extract::{Query as QueryParams, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};

use super::one;

use crate::envelope::ApiError;
use crate::live::object::ReadError;
use crate::locator::Locator;
use crate::openapi::Errors;
use crate::params::Format;
use crate::redact;
use crate::AppState;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DetailParams {
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
pub(super) struct Provenance {
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
) -> Result<Response, ApiError> {
    let format = Format::parse(params.format.as_deref())?;
    let (mut object, provenance) = if params.live {
        match live(&state, &at).await {
            Ok(answer) => answer,
            Err(refusal) => return Ok(refusal),
        }
    } else {
        let document = one(&state, &at).await?;
        let provenance = Provenance {
            cluster: document.cluster,
            source: "stored",
            sync_at: document.sync_at,
            deleted: document.deleted,
        };
        (redact::object(document.object), provenance)
    };
    if format == Format::Object {
        if let Some(map) = object.as_object_mut() {
            map.insert(
                "karpor".to_owned(),
                serde_json::to_value(provenance).unwrap_or_default(),
            );
        }
    }
    Ok(format.reply(&object)?.into_response())
}

/// The object from its cluster now, redacted as stored ones are.
async fn live(state: &AppState, at: &Locator) -> Result<(Value, Provenance), Response> {
    let bad = |e: ApiError| e.into_response();
    let Some(cluster) = at.cluster.clone() else {
        return Err(bad(ApiError::bad_request(
            "live detail needs cluster, apiVersion, kind and name",
        )));
    };
    let target = crate::live::object_ref(at).map_err(bad)?;
    let client = crate::live::client(state, &cluster).await?;
    let read = crate::live::bounded(&cluster, async {
        Ok(crate::live::object::read(client, &target).await)
    })
    .await
    .map_err(bad)?;
    let object = match read {
        Ok(Some(object)) => object,
        Ok(None) => {
            return Err(bad(ApiError::not_found(format!(
                "no {} {:?} in the cluster now",
                target.kind, target.name
            ))))
        }
        Err(ReadError::NoKind) => {
            return Err(bad(ApiError::not_found(format!(
                "cluster {cluster:?} serves no {} {}",
                target.api_version, target.kind
            ))))
        }
        Err(ReadError::Scope(why)) => return Err(bad(ApiError::bad_request(why))),
        Err(ReadError::Cluster(e)) => {
            return Err(bad(crate::live::unreachable(cluster.as_str(), &e)))
        }
    };
    Ok((
        redact::object(object),
        Provenance {
            cluster: cluster.to_string(),
            source: "live",
            sync_at: OffsetDateTime::now_utc(),
            deleted: false,
        },
    ))
}
