//! Reads from a member cluster now, for what storage does not keep: events (`GET
//! /insight/events`, and Karpor's event stream for one object), a pod's log ([`logs`])
//! and an object as it is (`/insight/detail?live=true`, [`object`]). Names reach the cluster only as validated
//! types; each call is taken from the cluster's budget and each stream from the caller's
//! ([`bounds`]); every answered object is redacted from what it is; a cluster that does
//! not answer is a 503.

pub(crate) mod bounds;
pub(crate) mod logs;
#[cfg(test)]
mod object_tests;
pub(crate) mod source;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use crate::access::{Permission, Routes};
use axum::extract::{Extension, Path, Query as QueryParams, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use k8s_openapi::api::core::v1::Event;
use karpor_core::model::Cluster;
use karpor_core::names::{self, ApiVersion, ClusterName, KindName, Namespace, ObjectName};
use karpor_kube::reads::{EventsRef, ObjectRef};
use karpor_kube::Timeouts;
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::auth::Principal;
use crate::envelope::{ApiError, Reply, Unenveloped};
use crate::locator::{Locator, Scope};
use crate::openapi::Errors;
use crate::scope::{Object as ScopedObject, Visible};
use crate::types::StreamedEvent;
use crate::AppState;
use bounds::StreamSlot;
use karpor_kube::redact;
use source::{AgentLink, Source};

const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(5),
    read: Some(Duration::from_secs(10)),
};
/// Most events answered (newest first).
const MAX_EVENTS: usize = 500;
/// How often the event stream looks again, as Karpor's does.
const STREAM_EVERY: Duration = Duration::from_secs(5);
/// How long one event stream lasts before the client must open another.
const STREAM_FOR: Duration = Duration::from_secs(600);

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(events))
        .route(Permission::Read, routes!(event_stream))
        .route(Permission::PodLogs, routes!(logs::pod_log))
}

/// Where a registered cluster is read, for one call taken from the cluster's budget: the
/// hub's client of it, or its agent. A cluster the caller does not see is not found, as
/// an unregistered one.
pub(crate) async fn source(
    state: &AppState,
    visible: &Visible,
    cluster: &ClusterName,
) -> Result<Source, Response> {
    let record = match visible.cluster(cluster) {
        true => state.metastore.get::<Cluster>(cluster.as_str()).await,
        false => Ok(None),
    };
    let Some(record) = record.map_err(|e| ApiError::from(e).into_response())? else {
        return Err(ApiError::not_found(format!("cluster {cluster:?} not found")).into_response());
    };
    state
        .live
        .call(cluster)
        .map_err(IntoResponse::into_response)?;
    if !record.record.synced_by_hub() {
        let Some(hub) = &state.agents else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cluster {cluster:?} is synced by its agent, and this hub has no agent listener (agents:)"),
            )
            .into_response());
        };
        return Ok(Source::Agent(AgentLink {
            cluster: cluster.clone(),
            sessions: hub.sessions.clone(),
        }));
    }
    let client = state
        .clients
        .get(cluster.as_str(), &record.record.kubeconfig.0)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot reach cluster {cluster:?}: {e}"),
            )
            .into_response()
        })?;
    Ok(Source::Kube(cluster.clone(), client))
}

/// A live call bounded by [`TIMEOUTS`]: the shared client's own read timeout is the
/// syncer's (long, for watches).
pub(crate) async fn bounded<T>(
    cluster: &ClusterName,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, ApiError> {
    let limit = TIMEOUTS.read.unwrap_or(TIMEOUTS.connect);
    match tokio::time::timeout(limit, call).await {
        Ok(answer) => answer.map_err(|e| unreachable(cluster.as_str(), &e)),
        Err(_) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cluster {cluster:?} did not answer within {limit:?}"),
        )),
    }
}

/// What a live object read names, from a locator: all of apiVersion, kind and name.
pub(crate) fn object_ref(at: &Locator) -> Result<ObjectRef, ApiError> {
    let (Some(api_version), Some(kind), Some(name)) = (&at.api_version, &at.kind, &at.name) else {
        return Err(ApiError::bad_request(
            "live detail needs cluster, apiVersion, kind and name",
        ));
    };
    Ok(ObjectRef {
        api_version: api_version.clone(),
        kind: kind.clone(),
        namespace: at.namespace.clone(),
        name: name.clone(),
    })
}

pub(crate) fn unreachable(cluster: &str, e: &kube::Error) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "cluster {cluster:?} did not answer: {}",
            karpor_kube::describe(e)
        ),
    )
}

/// When an event last happened: `lastTimestamp`, else `eventTime`, else its creation.
fn last_seen(e: &Event) -> String {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
        .or_else(|| {
            e.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
        })
        .unwrap_or_default()
}

/// Whether the caller sees what an event is about (an event is its object's).
fn about_visible(visible: &Visible, cluster: &str, event: &Event) -> bool {
    let about = &event.involved_object;
    visible.object(ScopedObject {
        cluster,
        namespace: about.namespace.as_deref().filter(|n| !n.is_empty()),
        kind: about.kind.as_deref().unwrap_or_default(),
        name: about.name.as_deref().unwrap_or_default(),
    })
}

/// Which events `at` locates: those about one object, a kind, or all in a namespace or
/// the cluster.
fn events_ref(at: &Locator) -> Result<EventsRef, ApiError> {
    let name = || at.name.clone();
    let kind = || at.kind.clone();
    match at.scope() {
        Scope::Resource | Scope::NonNamespacedResource => Ok(EventsRef {
            namespace: at.namespace.clone(),
            kind: kind(),
            name: name(),
        }),
        Scope::Gvk | Scope::ClusterGvkNamespace => Ok(EventsRef {
            namespace: at.namespace.clone(),
            kind: kind(),
            name: None,
        }),
        Scope::Namespace => Ok(EventsRef {
            namespace: at.namespace.clone(),
            ..EventsRef::default()
        }),
        Scope::Cluster => Ok(EventsRef::default()),
        Scope::Custom => Err(ApiError::bad_request(
            "events are of a resource, a kind, a namespace or a cluster",
        )),
    }
}

/// The events of what `at` locates that the caller sees, newest first.
async fn list_events(
    source: &Source,
    visible: &Visible,
    at: &Locator,
) -> Result<Vec<Event>, ApiError> {
    let cluster = source.cluster();
    let mut events = source.events(&events_ref(at)?).await?;
    // The selector cannot say the API group: the kind's version is checked here.
    if let Some(api_version) = at.api_version() {
        events.retain(|e| {
            e.involved_object
                .api_version
                .as_deref()
                .is_none_or(|v| v == api_version)
        });
    }
    events.retain(|e| about_visible(visible, cluster, e));
    events.sort_by_key(|e| std::cmp::Reverse(last_seen(e)));
    events.truncate(MAX_EVENTS);
    Ok(events)
}

#[utoipa::path(get, path = "/insight/events", operation_id = "insightEvents", tag = "insight",
    params(Locator),
    responses((status = 200, body = inline(Envelope<Vec<Object>>),
        description = "the cluster's Event objects (core/v1) about what the locator names, newest first, 500 at most"),
        Errors))]
pub(crate) async fn events(
    State(state): State<AppState>,
    visible: Visible,
    QueryParams(at): QueryParams<Locator>,
) -> Result<Reply<Vec<Value>>, Response> {
    let Some(cluster) = at.cluster.clone() else {
        return Err(
            ApiError::bad_request("events are of one cluster: give cluster").into_response(),
        );
    };
    let source = source(&state, &visible, &cluster).await?;
    let events = list_events(&source, &visible, &at)
        .await
        .map_err(IntoResponse::into_response)?;
    let events: Vec<Value> = events
        .into_iter()
        .map(|e| redact::object(serde_json::to_value(e).unwrap_or_default()))
        .collect();
    Ok(Reply::ok(events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StreamParams {
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub kind: Option<KindName>,
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub api_version: Option<ApiVersion>,
    /// `Normal` or `Warning`: only those.
    #[serde(rename = "type")]
    pub event_type: Option<String>,
}

fn streamed(e: &Event) -> StreamedEvent {
    StreamedEvent {
        kind: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        count: e.count.unwrap_or(1),
        last_timestamp: last_seen(e),
        first_timestamp: e
            .first_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    }
}

/// Every 5 s, the object's events (newest first) as one `data:` frame, as Karpor's
/// stream; an error is an in-band `Warning` event, as Karpor's. Ends after 10 minutes.
#[utoipa::path(get, path = "/insight/aggregator/event/{cluster}/{namespace}/{name}",
    operation_id = "streamEvents", tag = "stream",
    params(("cluster" = String, Path), ("namespace" = String, Path), ("name" = String, Path), StreamParams),
    responses((status = 200, description = "server-sent events: `data: [Event]` every 5 s",
        body = String, content_type = "text/event-stream"), Errors))]
pub(crate) async fn event_stream(
    State(state): State<AppState>,
    visible: Visible,
    Extension(caller): Extension<Principal>,
    Path((cluster, namespace, name)): Path<(ClusterName, Namespace, ObjectName)>,
    QueryParams(params): QueryParams<StreamParams>,
) -> Response {
    let at = Locator {
        cluster: Some(cluster.clone()),
        api_version: params.api_version.clone(),
        kind: params.kind.clone(),
        namespace: Some(namespace),
        name: Some(name),
        ..Locator::default()
    };
    // An unknown cluster is the request's error, not a stream of in-band warnings.
    match state.metastore.get::<Cluster>(cluster.as_str()).await {
        Ok(Some(_)) if visible.cluster(&cluster) => {}
        Ok(_) => {
            return ApiError::not_found(format!("cluster {cluster:?} not found")).into_response()
        }
        Err(e) => return ApiError::from(e).into_response(),
    }
    let slot = match state.live.open_stream(&caller.name) {
        Ok(slot) => slot,
        Err(limited) => return limited.into_response(),
    };
    let wanted = params.event_type;
    let frames = frames(state, visible, at, cluster, wanted, slot);
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response();
    response.extensions_mut().insert(Unenveloped);
    response
}

/// The stream's frames; `slot` is its place among the caller's streams, given back when
/// the stream ends or its client goes away (the stream is dropped).
fn frames(
    state: AppState,
    visible: Visible,
    at: Locator,
    cluster: ClusterName,
    wanted: Option<String>,
    slot: StreamSlot,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let state = Arc::new(state);
    let visible = Arc::new(visible);
    let slot = Arc::new(slot);
    let started = tokio::time::Instant::now();
    futures::stream::unfold(true, move |first| {
        let (state, visible, at, cluster, wanted, slot) = (
            state.clone(),
            visible.clone(),
            at.clone(),
            cluster.clone(),
            wanted.clone(),
            slot.clone(),
        );
        async move {
            let _slot = slot;
            if !first {
                tokio::time::sleep(STREAM_EVERY).await;
            }
            if started.elapsed() > STREAM_FOR {
                return None;
            }
            let frame = match source(&state, &visible, &cluster).await {
                Ok(source) => match list_events(&source, &visible, &at).await {
                    Ok(events) => frame_of(&events, wanted.as_deref()),
                    Err(e) => warning(&e.message),
                },
                Err(refusal) => warning(&format!(
                    "no events this time ({})",
                    refusal.status().canonical_reason().unwrap_or("refused")
                )),
            };
            Some((Ok(SseEvent::default().data(frame.to_string())), false))
        }
    })
}

fn frame_of(events: &[Event], wanted: Option<&str>) -> Value {
    let events: Vec<StreamedEvent> = events
        .iter()
        .filter(|e| wanted.is_none_or(|w| e.type_.as_deref() == Some(w)))
        .map(streamed)
        .collect();
    serde_json::to_value(events).unwrap_or_default()
}

/// An in-band `Warning` event, as Karpor's stream reports an error.
fn warning(message: &str) -> Value {
    let warning = StreamedEvent {
        kind: "Warning".to_owned(),
        reason: "Error".to_owned(),
        message: message.to_owned(),
        count: 1,
        last_timestamp: String::new(),
        first_timestamp: String::new(),
    };
    serde_json::to_value([warning]).unwrap_or_default()
}
