//! Clusters: list, get, create, update, delete; a kubeconfig's upload (parse only) and
//! validation (reach the API server). Responses carry the kubeconfig masked.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Multipart, Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use karpor_core::model::{
    validate_name, Cluster, Kubeconfig as StoredKubeconfig, MAX_KUBECONFIG_BYTES,
};
use karpor_metastore::Stored;
use karpor_syncer::SyncState;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use karpor_kube::kubeconfig;
use karpor_kube::{ContextInfo, Summary, Timeouts};

use crate::auth::Principal;
use crate::envelope::{ApiError, ApiResult, Envelope, Reply};
use crate::openapi::{Errors, NamePath};
use crate::{AppState, Role};

/// The document's example: a kubeconfig whose server is closed.
const EXAMPLE_KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: example}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

/// How long a cluster's document count may take before it is answered unknown.
const COUNT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long validation may take to reach a cluster's API server.
const VALIDATE_TIMEOUT: Duration = Duration::from_secs(5);

/// One path per `routes!`: a `routes!` of several paths registers every method at each.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(read, create, update, remove))
        .routes(routes!(upload))
        .routes(routes!(validate))
}

/// A cluster as the API shows it: the kubeconfig masked, with its sync status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub labels: BTreeMap<String, String>,
    /// The stored kubeconfig with every credential replaced by `******`: for admins
    /// only, and not in a summary list.
    pub kube_config: Option<String>,
    pub kubeconfig_summary: Option<Summary>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
    /// The record's version in the metadata store.
    pub version: i64,
    pub sync_status: SyncView,
}

/// A cluster's sync status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncView {
    /// `pending`, `syncing`, `synced`, `error`, or `unknown` (the syncer runs in another
    /// process, or has not picked the cluster up yet).
    pub state: String,
    /// The reason code of `error`.
    pub reason: Option<String>,
    /// Documents written since the syncer started the cluster.
    pub objects_synced: Option<u64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_event: Option<OffsetDateTime>,
    /// Documents in storage for the cluster now (null when storage cannot say).
    pub objects_stored: Option<u64>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Leave the kubeconfig out.
    #[serde(default)]
    pub summary: bool,
    /// `name` (default), `displayName`, `createdAt` or `updatedAt`.
    pub order_by: Option<String>,
    #[serde(default)]
    pub descending: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterList {
    pub items: Vec<ClusterView>,
    pub total: usize,
}

/// A cluster's body; `kubeConfig` is required to create.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterBody {
    pub display_name: Option<String>,
    pub description: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    /// A kubeconfig's text; only the chosen context is kept.
    #[schema(example = json!(EXAMPLE_KUBECONFIG))]
    pub kube_config: Option<String>,
    /// The context to keep (default: the kubeconfig's current context).
    pub context: Option<String>,
}

impl ClusterBody {
    /// Sets on `record` what the body gives; a kubeconfig is kept minified to the
    /// context chosen by the query (`context`), else the body, else its current one.
    async fn apply_to(
        self,
        state: &AppState,
        record: &mut Cluster,
        context: Option<String>,
    ) -> Result<(), ApiError> {
        let context = context.or(self.context);
        if let Some(v) = self.display_name {
            record.display_name = v;
        }
        if let Some(v) = self.description {
            record.description = v;
        }
        if let Some(v) = self.labels {
            record.labels = v;
        }
        match self.kube_config {
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
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ContextParam {
    /// The kubeconfig's context to keep (over the body's `context`).
    pub context: Option<String>,
}

#[utoipa::path(get, path = "/clusters", operation_id = "listClusters", tag = "clusters", params(ListParams),
    responses((status = 200, body = inline(Envelope<ClusterList>)),
        Errors))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Query(params): Query<ListParams>,
) -> ApiResult {
    let mut clusters = state.metastore.list_all::<Cluster>().await?;
    match params.order_by.as_deref().unwrap_or("name") {
        "name" => {}
        "displayName" => clusters.sort_by(|a, b| a.record.display_name.cmp(&b.record.display_name)),
        "createdAt" => clusters.sort_by_key(|c| c.created_at),
        "updatedAt" => clusters.sort_by_key(|c| c.updated_at),
        other => {
            return Err(ApiError::bad_request(format!(
                "orderBy {other:?}: use name, displayName, createdAt or updatedAt"
            )))
        }
    }
    if params.descending {
        clusters.reverse();
    }
    let summary = params.summary || by.role < Role::Admin;
    let items = futures::future::join_all(clusters.iter().map(|c| view(&state, c, summary))).await;
    Ok(Reply::ok(ClusterList {
        total: items.len(),
        items,
    }))
}

#[utoipa::path(get, path = "/cluster/{name}", operation_id = "getCluster", tag = "clusters",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<ClusterView>)),
        Errors))]
pub(crate) async fn read(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(name): Path<String>,
) -> ApiResult {
    let cluster = find(&state, &name).await?;
    Ok(Reply::ok(
        view(&state, &cluster, by.role < Role::Admin).await,
    ))
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
    Extension(by): Extension<Principal>,
    Path(name): Path<String>,
    Query(param): Query<ContextParam>,
    Json(body): Json<ClusterBody>,
) -> ApiResult {
    validate_name(&name).map_err(|e| ApiError::bad_request(e.to_string()))?;
    if body.kube_config.is_none() {
        return Err(ApiError::bad_request("kubeConfig is required"));
    }
    let mut record = Cluster {
        name,
        display_name: String::new(),
        description: String::new(),
        labels: BTreeMap::new(),
        kubeconfig: StoredKubeconfig(String::new()),
    };
    body.apply_to(&state, &mut record, param.context).await?;
    let stored = state.metastore.create(record).await?;
    tracing::info!(cluster = %stored.record.name, by = %by.name, "cluster registered");
    Ok(Reply::created(view(&state, &stored, false).await))
}

#[utoipa::path(put, path = "/cluster/{name}", operation_id = "updateCluster", tag = "clusters",
    params(NamePath, ContextParam),
    request_body = ClusterBody,
    responses((status = 200, body = inline(Envelope<ClusterView>)),
        Errors))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(name): Path<String>,
    Query(param): Query<ContextParam>,
    Json(body): Json<ClusterBody>,
) -> ApiResult {
    let current = find(&state, &name).await?;
    let mut record = current.record.clone();
    body.apply_to(&state, &mut record, param.context).await?;
    let stored = state.metastore.update(record, current.version).await?;
    tracing::info!(cluster = %name, by = %by.name, "cluster updated");
    Ok(Reply::ok(view(&state, &stored, false).await))
}

#[utoipa::path(delete, path = "/cluster/{name}", operation_id = "deleteCluster", tag = "clusters",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<String>)),
        Errors))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(name): Path<String>,
) -> ApiResult {
    let current = find(&state, &name).await?;
    state
        .metastore
        .delete::<Cluster>(&name, Some(current.version))
        .await?;
    tracing::info!(cluster = %name, by = %by.name, "cluster deregistered");
    Ok(Reply::ok(name))
}

/// What an uploaded kubeconfig holds (never its credentials).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadView {
    pub file_name: String,
    pub file_size: usize,
    pub current_context: Option<String>,
    pub contexts: Vec<ContextInfo>,
}

#[derive(ToSchema)]
#[allow(dead_code)] // the multipart form, for the document only
pub struct UploadForm {
    /// The kubeconfig file (at most 2 MiB).
    #[schema(format = Binary, content_media_type = "application/octet-stream")]
    file: String,
}

#[utoipa::path(post, path = "/cluster/config/file", operation_id = "uploadKubeconfig", tag = "clusters",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, body = inline(Envelope<UploadView>)),
        Errors))]
pub(crate) async fn upload(mut form: Multipart) -> ApiResult {
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError::new(
            e.status(),
            format!("the upload is not a readable form: {}", e.body_text()),
        )
    };
    while let Some(field) = form.next_field().await.map_err(bad)? {
        if field.name() != Some("file") {
            continue;
        }
        let file_name = field.file_name().unwrap_or_default().to_owned();
        let bytes = field.bytes().await.map_err(bad)?;
        if bytes.len() > MAX_KUBECONFIG_BYTES {
            return Err(too_large(bytes.len()));
        }
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| ApiError::bad_request("the kubeconfig is not UTF-8 text"))?;
        let config = karpor_kube::parse_off_runtime(text)
            .await
            .map_err(bad_kubeconfig)?;
        return Ok(Reply::ok(UploadView {
            file_name,
            file_size: bytes.len(),
            current_context: config.current_context.clone(),
            contexts: kubeconfig::contexts(&config),
        }));
    }
    Err(ApiError::bad_request("the form has no `file` field"))
}

/// A kubeconfig to check.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateBody {
    #[schema(example = json!(EXAMPLE_KUBECONFIG))]
    pub kube_config: String,
    pub context: Option<String>,
}

/// What the API server said.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidateView {
    pub summary: Summary,
    pub git_version: String,
    pub platform: String,
}

#[utoipa::path(post, path = "/cluster/config/validate", operation_id = "validateKubeconfig", tag = "clusters",
    request_body = ValidateBody,
    responses((status = 200, body = inline(Envelope<ValidateView>)),
        Errors))]
pub(crate) async fn validate(
    State(state): State<AppState>,
    Json(body): Json<ValidateBody>,
) -> ApiResult {
    let selected = minify(&state, body.kube_config, body.context.as_deref()).await?;
    let summary = kubeconfig::summary(&selected);
    let unreachable = |why: String| {
        ApiError::bad_request(format!(
            "cannot reach the API server at {}: {why}",
            summary.server
        ))
    };
    let timeouts = Timeouts {
        connect: VALIDATE_TIMEOUT,
        read: Some(VALIDATE_TIMEOUT),
    };
    let client = karpor_kube::build(selected.clone(), &state.exec, timeouts)
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))?
        .client;
    let version = tokio::time::timeout(VALIDATE_TIMEOUT, client.apiserver_version())
        .await
        .map_err(|_| unreachable(format!("no answer within {VALIDATE_TIMEOUT:?}")))?
        .map_err(|e| unreachable(karpor_kube::describe(&e)))?;
    Ok(Reply::ok(ValidateView {
        summary,
        git_version: version.git_version,
        platform: version.platform,
    }))
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
        .ok_or_else(|| ApiError::not_found(format!("cluster {name:?} not found")))
}

/// A cluster as answered; `summary` leaves the (masked) kubeconfig out, as for guests.
async fn view(state: &AppState, cluster: &Stored<Cluster>, summary: bool) -> ClusterView {
    let record = &cluster.record;
    let snapshot = state.sync.as_ref().and_then(|s| s.cluster(&record.name));
    // The record is the metadata store's: storage only adds a count, and a slow or
    // dead storage leaves it unknown rather than holding the answer.
    let count = tokio::time::timeout(COUNT_TIMEOUT, state.storage.count(Some(&record.name)));
    let objects_stored = match count.await {
        Ok(Ok(n)) => Some(n),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "cannot count a cluster's documents");
            None
        }
        Err(_) => None,
    };
    let parsed = karpor_kube::parse_off_runtime(record.kubeconfig.0.clone())
        .await
        .ok();
    ClusterView {
        name: record.name.clone(),
        display_name: record.display_name.clone(),
        description: record.description.clone(),
        labels: record.labels.clone(),
        kube_config: match (&parsed, summary) {
            (Some(config), false) => Some(kubeconfig::to_yaml(&kubeconfig::mask(config))),
            _ => None,
        },
        kubeconfig_summary: parsed.as_ref().map(kubeconfig::summary),
        created_at: cluster.created_at,
        updated_at: cluster.updated_at,
        version: cluster.version,
        sync_status: SyncView {
            state: snapshot
                .as_ref()
                .map_or("unknown", |s| s.state.as_str())
                .to_owned(),
            reason: snapshot.as_ref().and_then(|s| match &s.state {
                SyncState::Error(reason) => Some(reason.to_string()),
                _ => None,
            }),
            objects_synced: snapshot.as_ref().map(|s| s.objects_synced),
            last_event: snapshot.as_ref().and_then(|s| s.last_event),
            objects_stored,
        },
    }
}
