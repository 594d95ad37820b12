//! Clusters: list (or Karpor's health summary), get (object or YAML), create, update,
//! delete; a kubeconfig's upload and validation (`kubeconfigs.rs`). Answers are Karpor's
//! Cluster resources with karpor's fields beside (`view.rs`).

mod agent;
mod kubeconfigs;
mod view;

use std::collections::BTreeMap;

use crate::access::{Permission, Routes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;
use karpor_core::model::{
    Cluster, ClusterMode, Kubeconfig as StoredKubeconfig, MAX_KUBECONFIG_BYTES,
};
use karpor_kube::kubeconfig;
use karpor_metastore::Stored;
use karpor_syncer::SyncState;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::auth::Principal;
use crate::body::Body;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::{Errors, NamePath};
use crate::params::{lenient_bool, Format};
use crate::scope::Visible;
use crate::{AppState, Role};

use crate::types::{
    ClusterBody, ClusterList, ClusterListAnswer, ClusterSummary, ClusterView, Envelope,
    ObjectOrYaml,
};

/// What `DELETE /cluster/{name}` answers, as Karpor.
const DELETED: &str = "Cluster deleted";

/// One handler per `route`, each with its permission.
pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(list))
        .route(Permission::Read, routes!(read))
        .route(Permission::Write, routes!(create))
        .route(Permission::Write, routes!(update))
        .route(Permission::Write, routes!(remove))
        .route(Permission::Admin, routes!(kubeconfigs::upload))
        .route(Permission::Admin, routes!(kubeconfigs::validate))
        .route(Permission::Write, routes!(agent::issue_token))
        .route(Permission::Write, routes!(agent::revoke))
        .route(Permission::Read, routes!(agent::status))
        .route(Permission::Write, routes!(agent::approve))
}

/// Karpor's query parameters, and karpor's (unknown ones are ignored, as Karpor does).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// `true`: answer the health summary (`totalCount`, `healthyCount`, ...) instead of
    /// the list. Read as Karpor reads booleans: anything but `1`/`t`/`true` is false.
    #[serde(default, deserialize_with = "lenient_bool")]
    #[param(value_type = Option<String>)]
    pub summary: bool,
    /// `name` (default), `timestamp` (creation), `displayName`, `createdAt` or
    /// `updatedAt`; anything else is `name`, as Karpor.
    pub order_by: Option<String>,
    /// `true`: newest or last first (read as `summary` is).
    #[serde(default, deserialize_with = "lenient_bool")]
    #[param(value_type = Option<String>)]
    pub descending: bool,
    /// What Karpor's page sends when it sorts upwards: over `descending`.
    #[serde(default, deserialize_with = "lenient_bool")]
    #[param(value_type = Option<String>)]
    pub ascending: bool,
}

/// Sets on `record` what `body` gives; a kubeconfig is kept minified to the
/// context chosen by the query (`context`), else the body, else its current one.
async fn apply_to(
    body: ClusterBody,
    state: &AppState,
    record: &mut Cluster,
    context: Option<String>,
) -> Result<(), ApiError> {
    if let Some(name) = &body.name {
        if *name != record.name {
            return Err(ApiError::bad_request(format!(
                "name {name:?} in the body is not the path's {:?}",
                record.name
            )));
        }
    }
    if body.mode.is_some_and(|mode| mode != record.mode) {
        return Err(ApiError::bad_request(format!(
            "cluster {:?} is in {} mode, fixed once registered: delete it and register it again",
            record.name,
            record.mode.as_str()
        )));
    }
    if record.mode == ClusterMode::Agent && body.kube_config.is_some() {
        return Err(ApiError::bad_request(
            "a cluster in agent mode takes no kubeConfig: its agent holds the credential",
        ));
    }
    let context = context.or(body.context);
    if let Some(v) = body.display_name {
        record.display_name = v;
    }
    if let Some(v) = body.description {
        record.description = v;
    }
    if let Some(v) = body.labels {
        record.labels = v;
    }
    match body.kube_config {
        Some(text) => {
            let selected = minify(state, text, context.as_deref()).await?;
            record.kubeconfig = StoredKubeconfig(kubeconfig::to_yaml(&selected));
        }
        None if context.is_some() => {
            return Err(ApiError::bad_request(
                "context needs a kubeConfig to choose from",
            ))
        }
        None => {}
    }
    Ok(())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ContextParam {
    /// The kubeconfig's context to keep (over the body's `context`).
    pub context: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct FormatParam {
    /// `yaml`: `data` is the cluster as a YAML string.
    pub format: Option<String>,
}

#[utoipa::path(get, path = "/clusters", operation_id = "listClusters", tag = "clusters", params(ListParams),
    responses((status = 200, body = inline(Envelope<ClusterListAnswer>)),
        Errors))]
pub(crate) async fn list(
    State(state): State<AppState>,
    visible: Visible,
    Extension(by): Extension<Principal>,
    Query(params): Query<ListParams>,
) -> ApiResult<ClusterListAnswer> {
    let mut clusters = state.metastore.list_all::<Cluster>().await?;
    clusters.retain(|c| visible.cluster(&c.record.name));
    match params.order_by.as_deref().unwrap_or("name") {
        "displayName" => clusters.sort_by(|a, b| a.record.display_name.cmp(&b.record.display_name)),
        "createdAt" | "timestamp" => clusters.sort_by_key(|c| c.created_at),
        "updatedAt" => clusters.sort_by_key(|c| c.updated_at),
        // The store lists by name.
        _ => {}
    }
    if params.descending && !params.ascending {
        clusters.reverse();
    }
    if params.summary {
        return Ok(Reply::ok(summary(&state, &clusters).await));
    }
    let with_kubeconfig = by.role == Role::Admin;
    let items = futures::future::join_all(
        clusters
            .iter()
            .map(|c| view::view(&state, &visible, c, with_kubeconfig)),
    )
    .await;
    Ok(Reply::ok(ClusterListAnswer::List(ClusterList {
        total: items.len(),
        items,
    })))
}

/// Healthy: the syncer reaches the cluster (synced or syncing). Without a syncer in this
/// process, its sync state is unknown and the cluster counts as unhealthy.
async fn summary(state: &AppState, clusters: &[Stored<Cluster>]) -> ClusterListAnswer {
    let (mut healthy, mut unhealthy) = (Vec::new(), Vec::new());
    for cluster in clusters {
        let name = cluster.record.name.clone();
        let state = state.sync.as_ref().and_then(|s| s.cluster(&name));
        match state.map(|s| s.state) {
            Some(SyncState::Synced | SyncState::Syncing) => healthy.push(name),
            _ => unhealthy.push(name),
        }
    }
    ClusterListAnswer::Summary(ClusterSummary {
        total_count: clusters.len(),
        healthy_count: healthy.len(),
        healthy_clusters: healthy,
        unhealthy_count: unhealthy.len(),
        unhealthy_clusters: unhealthy,
    })
}

#[utoipa::path(get, path = "/cluster/{name}", operation_id = "getCluster", tag = "clusters",
    params(NamePath, FormatParam),
    responses((status = 200, body = inline(Envelope<ClusterView>),
        description = "the cluster; with `format=yaml`, `data` is its YAML as a string"),
        Errors))]
pub(crate) async fn read(
    State(state): State<AppState>,
    visible: Visible,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
    Query(format): Query<FormatParam>,
) -> ApiResult<ObjectOrYaml<ClusterView>> {
    if !visible.cluster(&name) {
        return Err(not_found(&name));
    }
    let cluster = find(&state, &name).await?;
    let view = view::view(&state, &visible, &cluster, by.role == Role::Admin).await;
    Format::parse(format.format.as_deref())?.reply(view)
}

#[utoipa::path(post, path = "/cluster/{name}", operation_id = "createCluster", tag = "clusters",
    params(NamePath, ContextParam),
    request_body = ClusterBody,
    responses((status = 201,
        links(
            ("getCluster" = (operation_id = "getCluster", parameters(("name" = "$response.body#/data/name")))),
            ("updateCluster" = (operation_id = "updateCluster", parameters(("name" = "$response.body#/data/name")))),
            ("deleteCluster" = (operation_id = "deleteCluster", parameters(("name" = "$response.body#/data/name")))),
        ),
        body = inline(Envelope<ClusterView>)),
        Errors))]
pub(crate) async fn create(
    State(state): State<AppState>,
    visible: Visible,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
    Query(param): Query<ContextParam>,
    Body(body): Body<ClusterBody>,
) -> ApiResult<ClusterView> {
    let mode = body.mode.unwrap_or_default();
    if mode == ClusterMode::Kubeconfig && body.kube_config.is_none() {
        return Err(ApiError::bad_request(
            "kubeConfig is required (or mode: agent, for a cluster its agent syncs)",
        ));
    }
    let mut record = Cluster {
        name: name.into(),
        display_name: String::new(),
        description: String::new(),
        labels: BTreeMap::new(),
        kubeconfig: StoredKubeconfig(String::new()),
        mode,
    };
    apply_to(body, &state, &mut record, param.context).await?;
    let stored = state.metastore.create(record).await?;
    tracing::info!(cluster = %stored.record.name, by = %by.name, "cluster registered");
    Ok(Reply::created(
        view::view(&state, &visible, &stored, true).await,
    ))
}

#[utoipa::path(put, path = "/cluster/{name}", operation_id = "updateCluster", tag = "clusters",
    params(NamePath, ContextParam),
    request_body = ClusterBody,
    responses((status = 200, body = inline(Envelope<ClusterView>)),
        Errors))]
pub(crate) async fn update(
    State(state): State<AppState>,
    visible: Visible,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
    Query(param): Query<ContextParam>,
    Body(body): Body<ClusterBody>,
) -> ApiResult<ClusterView> {
    let current = find(&state, &name).await?;
    let mut record = current.record.clone();
    apply_to(body, &state, &mut record, param.context).await?;
    let stored = state.metastore.update(record, current.version).await?;
    tracing::info!(cluster = %name, by = %by.name, "cluster updated");
    Ok(Reply::ok(view::view(&state, &visible, &stored, true).await))
}

#[utoipa::path(delete, path = "/cluster/{name}", operation_id = "deleteCluster", tag = "clusters",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<String>), description = "`Cluster deleted`"),
        Errors))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<&'static str> {
    let current = find(&state, &name).await?;
    state
        .metastore
        .delete::<Cluster>(&name, Some(current.version))
        .await?;
    if current.record.mode == ClusterMode::Agent {
        agent::revoke_deleted(&state, &name).await?;
    }
    state.clients.forget(&name);
    tracing::info!(cluster = %name, by = %by.name, "cluster deregistered");
    Ok(Reply::ok(DELETED))
}

fn too_large(size: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the kubeconfig is {size} bytes, above the limit of {MAX_KUBECONFIG_BYTES}"),
    )
}

fn bad_kubeconfig(p: karpor_kube::Problem) -> ApiError {
    ApiError::bad_request(p.0)
}

/// What to store for a kubeconfig and context: that context alone, self-contained (a
/// reference to a file on this host is refused, not read), its exec user allowed.
async fn minify(
    state: &AppState,
    text: String,
    context: Option<&str>,
) -> Result<kube::config::Kubeconfig, ApiError> {
    if text.len() > MAX_KUBECONFIG_BYTES {
        return Err(too_large(text.len()));
    }
    let config = karpor_kube::parse_off_runtime(text)
        .await
        .map_err(bad_kubeconfig)?;
    let selected = kubeconfig::select(&config, context).map_err(bad_kubeconfig)?;
    kubeconfig::self_contained(&selected).map_err(bad_kubeconfig)?;
    state.exec.check(&selected).map_err(bad_kubeconfig)?;
    Ok(selected)
}

async fn find(state: &AppState, name: &str) -> Result<Stored<Cluster>, ApiError> {
    state
        .metastore
        .get::<Cluster>(name)
        .await?
        .ok_or_else(|| not_found(name))
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("cluster {name:?} not found"))
}
