//! Sync rules: which resources of which clusters the syncer keeps in storage. List, get,
//! create, update and delete (compare-and-swap on `version`), with the built-in rules
//! shown while no rule is stored; and a dry run: what a stored or proposed rule would
//! select in each cluster, and how many objects each type has there now.

use std::time::Duration;

use crate::access::{Permission, Routes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;
use karpor_core::model::{Cluster, OverLimit, Record, RuleLimits, SyncRule};
use karpor_core::names::{self, ClusterName};
use karpor_metastore::Stored;
use karpor_syncer::{DryRun, DryRunError, Selection};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::auth::Principal;
use crate::body::NamedBody;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::{Errors, NamePath};
use crate::types::{
    ClusterDryRun, DryRunView, Envelope, SelectionView, SyncRuleList, SyncRuleView,
};
use crate::AppState;

/// What `DELETE /sync-rule/{name}` answers.
const DELETED: &str = "SyncRule deleted";
/// How long a dry run may take per cluster (discovery and counts).
const DRY_RUN_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(list))
        .route(Permission::Read, routes!(read))
        .route(Permission::Write, routes!(create))
        .route(Permission::Write, routes!(update))
        .route(Permission::Write, routes!(remove))
        .route(Permission::Admin, routes!(dry_run))
}

/// The rule a body makes, named by its path (the body's name was checked against it):
/// every problem names its field, and a count over `limits` its config key.
fn checked(rule: SyncRule, limits: &RuleLimits) -> Result<SyncRule, ApiError> {
    rule.validate().map_err(ApiError::bad_request)?;
    within_limits(&rule, limits)?;
    Ok(rule)
}

/// A rule over `syncer.limits` would be refused by every cluster's syncer: refused
/// where it is written instead, with the count and the limit's key.
fn within_limits(rule: &SyncRule, limits: &RuleLimits) -> Result<(), ApiError> {
    limits
        .check_sync_rule(rule)
        .map_err(|over| ApiError::bad_request(over.to_string()))
}

/// Refuses `rule` when a registered cluster it selects would follow more rules than
/// `syncer.limits.rules_per_cluster` with it (its stored version replaced).
async fn within_rules_per_cluster(state: &AppState, rule: &SyncRule) -> Result<(), ApiError> {
    let stored = state.metastore.list_all::<SyncRule>().await?;
    let clusters = state.metastore.list_all::<Cluster>().await?;
    let limit = state.rule_limits.rules_per_cluster;
    for cluster in clusters.iter().map(|c| &c.record) {
        if !karpor_syncer::selects(&rule.clusters, cluster) {
            continue;
        }
        let others = stored
            .iter()
            .filter(|s| s.record.name != rule.name)
            .filter(|s| karpor_syncer::selects(&s.record.clusters, cluster))
            .count();
        if others + 1 > limit {
            let over = OverLimit {
                field: format!("clusters (sync rules selecting cluster {:?})", cluster.name),
                count: others + 1,
                limit,
                key: "rules_per_cluster",
            };
            return Err(ApiError::bad_request(over.to_string()));
        }
    }
    Ok(())
}

/// A rule as answered; `stored` gives its version and times, else it is built in.
fn view(
    rule: SyncRule,
    stored: Option<&Stored<SyncRule>>,
    built_in_in_force: bool,
) -> SyncRuleView {
    SyncRuleView {
        rule,
        built_in: stored.is_none(),
        in_force: stored.is_some() || built_in_in_force,
        version: stored.map(|s| s.version),
        created_at: stored.map(|s| s.created_at),
        updated_at: stored.map(|s| s.updated_at),
    }
}

fn stored_view(rule: Stored<SyncRule>) -> SyncRuleView {
    view(rule.record.clone(), Some(&rule), false)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct VersionParam {
    /// Write only if the stored rule is at this version (409 otherwise); without it, the
    /// version read just before.
    pub version: Option<i64>,
}

#[utoipa::path(get, path = "/sync-rules", operation_id = "listSyncRules", tag = "sync rules",
    responses((status = 200, body = inline(Envelope<SyncRuleList>),
        description = "the rules in force, by name: the stored ones, or the built-in ones while none is stored"),
        Errors))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult<SyncRuleList> {
    let stored = state.metastore.list_all::<SyncRule>().await?;
    let items: Vec<SyncRuleView> = if stored.is_empty() {
        karpor_syncer::default_rules()
            .into_iter()
            .map(|rule| view(rule, None, true))
            .collect()
    } else {
        stored.into_iter().map(stored_view).collect()
    };
    Ok(Reply::ok(SyncRuleList {
        total: items.len(),
        items,
    }))
}

#[utoipa::path(get, path = "/sync-rule/{name}", operation_id = "getSyncRule", tag = "sync rules",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<SyncRuleView>),
        description = "the stored rule, or a built-in one (`builtIn: true`) not stored under its name"),
        Errors))]
pub(crate) async fn read(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<SyncRuleView> {
    if let Some(stored) = state.metastore.get::<SyncRule>(&name).await? {
        return Ok(Reply::ok(stored_view(stored)));
    }
    let Some(rule) = built_in(&name) else {
        return Err(not_found(&name));
    };
    let none_stored = state.metastore.list_all::<SyncRule>().await?.is_empty();
    Ok(Reply::ok(view(rule, None, none_stored)))
}

#[utoipa::path(post, path = "/sync-rule/{name}", operation_id = "createSyncRule", tag = "sync rules",
    params(NamePath),
    request_body(content = SyncRule,
        description = "the rule; `name` may be left out (the path's)"),
    responses((status = 201,
        links(
            ("getSyncRule" = (operation_id = "getSyncRule", parameters(("name" = "$response.body#/data/name")))),
            ("updateSyncRule" = (operation_id = "updateSyncRule", parameters(("name" = "$response.body#/data/name")))),
            ("deleteSyncRule" = (operation_id = "deleteSyncRule", parameters(("name" = "$response.body#/data/name")))),
        ),
        body = inline(Envelope<SyncRuleView>),
        description = "stored; the first stored rule replaces the built-in ones"),
        Errors))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    NamedBody(rule): NamedBody<SyncRule>,
) -> ApiResult<SyncRuleView> {
    let rule = checked(rule, &state.rule_limits)?;
    within_rules_per_cluster(&state, &rule).await?;
    let stored = state.metastore.create(rule).await?;
    tracing::info!(rule = %stored.record.name, by = %by.name, "sync rule created");
    Ok(Reply::created(stored_view(stored)))
}

#[utoipa::path(put, path = "/sync-rule/{name}", operation_id = "updateSyncRule", tag = "sync rules",
    params(NamePath, VersionParam),
    request_body(content = SyncRule,
        description = "the rule; `name` may be left out (the path's)"),
    responses((status = 200, body = inline(Envelope<SyncRuleView>),
        description = "replaced; every cluster it selects, or selected, follows it within one settle"),
        Errors))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
    Query(params): Query<VersionParam>,
    NamedBody(rule): NamedBody<SyncRule>,
) -> ApiResult<SyncRuleView> {
    let rule = checked(rule, &state.rule_limits)?;
    within_rules_per_cluster(&state, &rule).await?;
    let current = find(&state, &name).await?;
    let stored = state
        .metastore
        .update(rule, params.version.unwrap_or(current.version))
        .await?;
    tracing::info!(rule = %name, by = %by.name, version = stored.version, "sync rule updated");
    Ok(Reply::ok(stored_view(stored)))
}

#[utoipa::path(delete, path = "/sync-rule/{name}", operation_id = "deleteSyncRule", tag = "sync rules",
    params(NamePath, VersionParam),
    responses((status = 200, body = inline(Envelope<String>),
        description = "`SyncRule deleted`; with no rule left, the built-in ones apply again"),
        Errors))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(by): Extension<Principal>,
    Path(NamePath { name }): Path<NamePath>,
    Query(params): Query<VersionParam>,
) -> ApiResult<&'static str> {
    let current = find(&state, &name).await?;
    state
        .metastore
        .delete::<SyncRule>(&name, Some(params.version.unwrap_or(current.version)))
        .await?;
    tracing::info!(rule = %name, by = %by.name, "sync rule deleted");
    Ok(Reply::ok(DELETED))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DryRunParams {
    /// One cluster (whether the rule selects it or not); without it (or empty), every
    /// registered cluster the rule selects.
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>, pattern = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    pub cluster: Option<ClusterName>,
}

fn selection_view(s: Selection) -> SelectionView {
    SelectionView {
        group: s.group,
        version: s.version,
        kind: s.kind,
        resource: s.resource,
        namespaced: s.namespaced,
        namespaces: s.namespaces,
        watched_by: s.watched_by,
        objects: s.objects,
        error: s.error.map(|e| e.as_str().to_owned()),
    }
}

#[utoipa::path(post, path = "/sync-rule/{name}/dry-run", operation_id = "dryRunSyncRule", tag = "sync rules",
    params(NamePath, DryRunParams),
    request_body(content = SyncRule,
        description = "the proposed rule; without a body (no content type), the stored or built-in rule of that name"),
    responses((status = 200, body = inline(Envelope<DryRunView>),
        description = "per cluster: the types the rule selects (from discovery, as the syncer resolves them) and their objects now; nothing is stored"),
        Errors))]
pub(crate) async fn dry_run(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
    Query(params): Query<DryRunParams>,
    body: Option<NamedBody<SyncRule>>,
) -> ApiResult<DryRunView> {
    let stored: Vec<SyncRule> = state
        .metastore
        .list_all::<SyncRule>()
        .await?
        .into_iter()
        .map(|s| s.record)
        .collect();
    let rule = match body {
        Some(NamedBody(rule)) => checked(rule, &state.rule_limits)?,
        None => match stored.iter().find(|r| r.name == *name) {
            Some(rule) => rule.clone(),
            None => built_in(&name).ok_or_else(|| not_found(&name))?,
        },
    };
    // A stored rule too (imported, or stored under higher limits): a dry run of it would
    // ask each cluster as much as watching it.
    within_limits(&rule, &state.rule_limits)?;
    within_rules_per_cluster(&state, &rule).await?;
    // The rules beside it once it is stored: the stored ones (the built-in ones while
    // none is, when it is one of them).
    let others = if stored.is_empty() && built_in(&name).is_some() {
        karpor_syncer::default_rules()
    } else {
        stored
    };
    let clusters: Vec<Cluster> = match &params.cluster {
        Some(cluster) => vec![
            state
                .metastore
                .get::<Cluster>(cluster.as_str())
                .await?
                .ok_or_else(|| ApiError::not_found(format!("cluster {cluster:?} not found")))?
                .record,
        ],
        None => state
            .metastore
            .list_all::<Cluster>()
            .await?
            .into_iter()
            .map(|c| c.record)
            .filter(|c| karpor_syncer::selects(&rule.clusters, c))
            .collect(),
    };
    let runs = clusters.iter().map(|cluster| {
        let (rule, others, exec) = (&rule, &others, &state.exec);
        async move {
            let ran = tokio::time::timeout(
                DRY_RUN_TIMEOUT,
                karpor_syncer::dry_run(cluster, rule, others, exec),
            )
            .await;
            answer(cluster, rule, ran)
        }
    });
    let clusters = futures::future::join_all(runs).await;
    Ok(Reply::ok(DryRunView {
        rule: rule.name,
        clusters,
    }))
}

fn answer(
    cluster: &Cluster,
    rule: &SyncRule,
    ran: Result<Result<DryRun, DryRunError>, tokio::time::error::Elapsed>,
) -> ClusterDryRun {
    let failed = |error: String| ClusterDryRun {
        cluster: cluster.name.clone(),
        selected: karpor_syncer::selects(&rule.clusters, cluster),
        resources: Vec::new(),
        error: Some(error),
    };
    match ran {
        Ok(Ok(run)) => ClusterDryRun {
            cluster: cluster.name.clone(),
            selected: run.selects_cluster,
            resources: run.resources.into_iter().map(selection_view).collect(),
            error: None,
        },
        Ok(Err(e)) => failed(e.to_string()),
        Err(_) => failed(format!("no answer within {}s", DRY_RUN_TIMEOUT.as_secs())),
    }
}

fn built_in(name: &str) -> Option<SyncRule> {
    karpor_syncer::default_rules()
        .into_iter()
        .find(|r| r.name == name)
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("sync rule {name:?} not found"))
}

/// The stored rule; a built-in one is not stored, so it cannot be updated or deleted
/// (create one of its name instead).
async fn find(state: &AppState, name: &str) -> Result<Stored<SyncRule>, ApiError> {
    match state.metastore.get::<SyncRule>(name).await? {
        Some(rule) => Ok(rule),
        None if built_in(name).is_some() => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "sync rule {name:?} is built in and not stored: create a rule of that name to replace it"
            ),
        )),
        None => Err(not_found(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_over_a_limit_is_a_400_naming_the_limit_and_the_count() {
        let rule = |namespaces: usize| -> SyncRule {
            serde_json::from_value(serde_json::json!({
                "name": "wide",
                "clusters": "*",
                "resources": [{"group": "*", "version": "*", "resource": "*"}],
                "namespaces": (0..namespaces).map(|i| format!("ns-{i}")).collect::<Vec<_>>(),
            }))
            .unwrap()
        };
        let limits = RuleLimits::default();
        assert!(checked(rule(100), &limits).is_ok());
        let refused = checked(rule(1000), &limits).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            refused.message,
            "namespaces: 1000 is over the limit of 100 (syncer.limits.namespaces_per_rule)"
        );
    }
}
