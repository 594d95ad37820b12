//! The relation rules: `GET /relation-rules` (the rules in force, built-in ones marked, and
//! disabled stored ones), `GET|POST|PUT|DELETE /relation-rule/{name}`. A stored rule named
//! as a built-in one replaces it (`enabled: false` turns it off); deleting it brings the
//! built-in one back. Writes are versioned (`PUT ?version=` compare-and-swap) and make
//! every syncer re-index what it stores.

use crate::access::{Permission, Routes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use karpor_core::model::{KindRef, Record, Relation, RelationRule, RuleLimits};
use karpor_metastore::Stored;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::body::Body;
use crate::envelope::{ApiError, ApiResult, Envelope, Reply};
use crate::openapi::{Errors, NamePath};
use crate::AppState;

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(list))
        .route(Permission::Read, routes!(read))
        .route(Permission::Write, routes!(create))
        .route(Permission::Write, routes!(replace))
        .route(Permission::Write, routes!(remove))
}

/// A rule as the API answers it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RuleView {
    /// `{name, description, enabled, parent: {group, kind}, child: {group, kind},
    /// childClusterScoped, relation: {type: ownerReference|selector|reference, ...}}`.
    #[schema(value_type = Object)]
    #[serde(flatten)]
    pub rule: RelationRule,
    /// Karpor knows it without being told (a stored rule of its name replaces it).
    pub built_in: bool,
    /// Stored through this API (then with its version and times).
    pub stored: bool,
    pub version: Option<i64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub updated_at: Option<OffsetDateTime>,
}

/// A rule's body: as the rule, with the name optional (the path's).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RuleBody {
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default = "enabled")]
    pub enabled: bool,
    #[schema(value_type = Object)]
    pub parent: KindRef,
    #[schema(value_type = Object)]
    pub child: KindRef,
    #[serde(default)]
    pub child_cluster_scoped: bool,
    #[schema(value_type = Object)]
    pub relation: Relation,
}

fn enabled() -> bool {
    true
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct VersionParam {
    /// Write only if the stored rule is at this version (409 otherwise).
    pub version: Option<i64>,
}

fn is_built_in(name: &str) -> bool {
    karpor_topology::builtin_rules()
        .iter()
        .any(|r| r.name == name)
}

fn view(rule: RelationRule, stored: Option<&Stored<RelationRule>>) -> RuleView {
    RuleView {
        built_in: is_built_in(&rule.name),
        stored: stored.is_some(),
        version: stored.map(|s| s.version),
        updated_at: stored.map(|s| s.updated_at),
        rule,
    }
}

fn record(name: String, body: RuleBody, limits: &RuleLimits) -> Result<RelationRule, ApiError> {
    if let Some(named) = &body.name {
        if *named != name {
            return Err(ApiError::bad_request(format!(
                "name {named:?} in the body is not the path's {name:?}"
            )));
        }
    }
    let rule = RelationRule {
        name,
        description: body.description,
        enabled: body.enabled,
        parent: body.parent,
        child: body.child,
        child_cluster_scoped: body.child_cluster_scoped,
        relation: body.relation,
    };
    rule.validate().map_err(ApiError::bad_request)?;
    limits
        .check_relation_rule(&rule)
        .map_err(|over| ApiError::bad_request(over.to_string()))?;
    Ok(rule)
}

/// Refuses a new stored rule beyond `syncer.limits.relation_rules`; one of a built-in
/// rule's name replaces it, and a stored one is replaced, so neither adds one.
async fn within_count(state: &AppState, rule: &RelationRule) -> Result<(), ApiError> {
    if is_built_in(&rule.name) {
        return Ok(());
    }
    let stored = state.metastore.list_all::<RelationRule>().await?;
    if stored.iter().any(|s| s.record.name == rule.name) {
        return Ok(());
    }
    let added = stored
        .iter()
        .filter(|s| !is_built_in(&s.record.name))
        .count()
        + 1;
    state
        .rule_limits
        .check_relation_count(added)
        .map_err(|over| ApiError::bad_request(over.to_string()))
}

#[utoipa::path(get, path = "/relation-rules", operation_id = "listRelationRules", tag = "topology",
    responses((status = 200, body = inline(Envelope<Vec<RuleView>>)), Errors))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult {
    let stored = state.metastore.list_all::<RelationRule>().await?;
    let mut views: Vec<RuleView> = karpor_topology::builtin_rules()
        .into_iter()
        .map(|b| match stored.iter().find(|s| s.record.name == b.name) {
            Some(s) => view(s.record.clone(), Some(s)),
            None => view(b, None),
        })
        .collect();
    for s in &stored {
        if !is_built_in(&s.record.name) {
            views.push(view(s.record.clone(), Some(s)));
        }
    }
    Ok(Reply::ok(views))
}

#[utoipa::path(get, path = "/relation-rule/{name}", operation_id = "getRelationRule", tag = "topology",
    params(NamePath), responses((status = 200, body = inline(Envelope<RuleView>)), Errors))]
pub(crate) async fn read(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    if let Some(stored) = state.metastore.get::<RelationRule>(&name).await? {
        return Ok(Reply::ok(view(stored.record.clone(), Some(&stored))));
    }
    match karpor_topology::builtin_rules()
        .into_iter()
        .find(|r| r.name == name)
    {
        Some(rule) => Ok(Reply::ok(view(rule, None))),
        None => Err(ApiError::not_found(format!(
            "relation rule {name:?} not found"
        ))),
    }
}

#[utoipa::path(post, path = "/relation-rule/{name}", operation_id = "createRelationRule", tag = "topology",
    params(NamePath), request_body = RuleBody,
    responses((status = 201, body = inline(Envelope<RuleView>)), Errors))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Body(body): Body<RuleBody>,
) -> ApiResult {
    let rule = record(name, body, &state.rule_limits)?;
    within_count(&state, &rule).await?;
    let stored = state.metastore.create(rule).await?;
    tracing::info!(rule = stored.record.name, "relation rule created");
    Ok(Reply::created(view(stored.record.clone(), Some(&stored))))
}

#[utoipa::path(put, path = "/relation-rule/{name}", operation_id = "putRelationRule", tag = "topology",
    params(NamePath, VersionParam), request_body = RuleBody,
    responses((status = 200, body = inline(Envelope<RuleView>),
        description = "created or replaced (kubectl-apply style); `version` makes it a compare-and-swap"),
        Errors))]
pub(crate) async fn replace(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(params): Query<VersionParam>,
    Body(body): Body<RuleBody>,
) -> ApiResult {
    let rule = record(name, body, &state.rule_limits)?;
    within_count(&state, &rule).await?;
    let current = state.metastore.get::<RelationRule>(&rule.name).await?;
    let stored = match (current, params.version) {
        (None, Some(version)) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "no stored relation rule {:?} at version {version}",
                    rule.name
                ),
            ))
        }
        (None, None) => state.metastore.create(rule).await?,
        (Some(current), version) => {
            state
                .metastore
                .update(rule, version.unwrap_or(current.version))
                .await?
        }
    };
    tracing::info!(rule = stored.record.name, "relation rule written");
    Ok(Reply::ok(view(stored.record.clone(), Some(&stored))))
}

#[utoipa::path(delete, path = "/relation-rule/{name}", operation_id = "deleteRelationRule", tag = "topology",
    params(NamePath), responses((status = 200, body = inline(Envelope<String>)), Errors))]
pub(crate) async fn remove(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    let Some(current) = state.metastore.get::<RelationRule>(&name).await? else {
        return Err(ApiError::not_found(format!(
            "no stored relation rule {name:?}"
        )));
    };
    state
        .metastore
        .delete::<RelationRule>(&name, Some(current.version))
        .await?;
    tracing::info!(rule = name, "relation rule deleted");
    Ok(Reply::ok("RelationRule deleted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_over_the_limit_is_a_400_naming_it() {
        let body: RuleBody = serde_json::from_value(serde_json::json!({
            "parent": {"kind": "Pod"},
            "child": {"kind": "Secret"},
            "relation": {"type": "selector", "path": vec!["a"; 17].join(".")},
        }))
        .unwrap();
        let refused = record("deep".into(), body, &RuleLimits::default()).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            refused.message,
            "relation.path: 17 is over the limit of 16 (syncer.limits.relation_path_segments)"
        );
    }
}
