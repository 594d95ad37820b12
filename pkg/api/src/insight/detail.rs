//! `GET /insight/detail`: one object as Karpor answers it, the object itself (or its YAML
//! with `format=yaml`), from storage or (`live=true`) from the cluster now, trimmed and
//! redacted as the syncer does; `karpor` beside the object's own keys says which and
//! how old. A namespace's locator (cluster and namespace) names its Namespace object.

use axum::extract::{Extension, Query as QueryParams, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::IntoParams;

use super::one;

use crate::access::ACCESS_LOG;
use crate::auth::Principal;
use crate::envelope::{ApiError, Reply};
use crate::locator::Locator;
use crate::openapi::Errors;
use crate::params::{yaml, Format};
use crate::scope::{Object as ScopedObject, Visible};
use crate::types::{DetailedObject, Envelope, ObjectOrYaml, Provenance};
use crate::AppState;
use karpor_kube::redact;

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
    /// The object as it was at this time (RFC 3339, or how long ago: `2h`), from history;
    /// deleted objects too. Not with `live`.
    pub at: Option<String>,
}

#[utoipa::path(get, path = "/insight/detail", operation_id = "insightDetail", tag = "insight",
    params(Locator, DetailParams),
    responses((status = 200, body = inline(Envelope<ObjectOrYaml<DetailedObject>>),
        description = "the object (Secret values and managed fields `[redacted]`), with `karpor` beside its keys; with `format=yaml`, its YAML as a string"),
        Errors))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    visible: Visible,
    Extension(caller): Extension<Principal>,
    QueryParams(at): QueryParams<Locator>,
    QueryParams(params): QueryParams<DetailParams>,
) -> Result<Reply<ObjectOrYaml<DetailedObject>>, Response> {
    let format = Format::parse(params.format.as_deref()).map_err(IntoResponse::into_response)?;
    // A namespace's page asks for the namespace's detail: Karpor answers its object.
    let at = at.namespace_object().unwrap_or(at);
    let (object, provenance) = if let Some(when) = params.at.as_deref() {
        if params.live {
            return Err(ApiError::bad_request("give live or at, not both").into_response());
        }
        past(&visible, &at, when)
            .await
            .map_err(IntoResponse::into_response)?
    } else if params.live {
        // A read of the cluster now, not of what karpor keeps: a line of the access log.
        tracing::info!(target: ACCESS_LOG, who = %caller.name, cluster = at.cluster().unwrap_or(""),
            kind = at.kind().unwrap_or(""), namespace = at.namespace().unwrap_or(""),
            name = at.name().unwrap_or(""), "live object read");
        match live(&state, &visible, &at).await {
            Ok(answer) => answer,
            Err(refusal) => return Err(refusal),
        }
    } else {
        let document = one(&visible, &at)
            .await
            .map_err(IntoResponse::into_response)?;
        let provenance = Provenance {
            cluster: document.cluster,
            source: "stored".to_owned(),
            sync_at: document.sync_at,
            deleted: document.deleted,
        };
        (redact::object(document.object), provenance)
    };
    let answer = match (format, object) {
        (Format::Object, Value::Object(mut object)) => {
            // `karpor` is karpor's key: an object's own of that name gives way.
            object.remove("karpor");
            ObjectOrYaml::Object(DetailedObject {
                object,
                karpor: provenance,
            })
        }
        (_, object) => ObjectOrYaml::Yaml(yaml(&object).map_err(IntoResponse::into_response)?),
    };
    Ok(Reply::ok(answer))
}

/// The object as history says it was at `when`, redacted as stored ones are.
async fn past(
    visible: &Visible,
    at: &Locator,
    when: &str,
) -> Result<(Value, Provenance), ApiError> {
    let time = super::history::when(when, OffsetDateTime::now_utc())
        .map_err(|e| ApiError::bad_request(format!("at: {e}")))?;
    let name = super::history::object_name(at)?;
    let Some(found) = visible.object_at(&name, time).await? else {
        return Err(ApiError::not_found(
            "no such resource at that time, as far as karpor's history reaches",
        ));
    };
    let provenance = Provenance {
        cluster: name.cluster,
        source: "history".to_owned(),
        sync_at: found.revision.as_ref().map_or(time, |r| r.seen_at),
        deleted: false,
    };
    Ok((redact::object(found.object), provenance))
}

/// An object the cluster answered, as a scope judges it.
fn seen<'a>(cluster: &'a str, object: &'a Value) -> ScopedObject<'a> {
    let metadata = &object["metadata"];
    ScopedObject {
        cluster,
        namespace: metadata["namespace"].as_str().filter(|n| !n.is_empty()),
        kind: object["kind"].as_str().unwrap_or_default(),
        name: metadata["name"].as_str().unwrap_or_default(),
    }
}

/// The object from its cluster now, redacted as stored ones are.
async fn live(
    state: &AppState,
    visible: &Visible,
    at: &Locator,
) -> Result<(Value, Provenance), Response> {
    let bad = |e: ApiError| e.into_response();
    let Some(cluster) = at.cluster.clone() else {
        return Err(bad(ApiError::bad_request(
            "live detail needs cluster, apiVersion, kind and name",
        )));
    };
    let target = crate::live::object_ref(at).map_err(bad)?;
    let source = crate::live::source(state, visible, &cluster).await?;
    let object = match source.object(&target).await.map_err(bad)? {
        // Judged by what the cluster answered, not by what was asked.
        Some(object) if visible.object(seen(&cluster, &object)) => object,
        _ => {
            return Err(bad(ApiError::not_found(format!(
                "no {} {:?} in the cluster now",
                target.kind, target.name
            ))))
        }
    };
    Ok((
        redact::object(object),
        Provenance {
            cluster: cluster.to_string(),
            source: "live".to_owned(),
            sync_at: OffsetDateTime::now_utc(),
            deleted: false,
        },
    ))
}
