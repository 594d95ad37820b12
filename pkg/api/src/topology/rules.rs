//! The relation rules: `GET /relation-rules` (the rules in force, built-in ones marked, and
//! disabled stored ones), `GET|POST|PUT|DELETE /relation-rule/{name}`. A stored rule named
//! as a built-in one replaces it (`enabled: false` turns it off); deleting it brings the
//! built-in one back. Writes are versioned (`PUT ?version=` compare-and-swap) and make
//! every syncer re-index what it stores.

use crate::access::{Permission, Routes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use karpor_core::model::{Record, RelationRule, RuleLimits};
use karpor_metastore::Stored;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::body::NamedBody;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::{Errors, NamePath};
use crate::types::{Envelope, RelationRuleView};
use crate::AppState;

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(list))
        .route(Permission::Read, routes!(read))
        .route(Permission::Write, routes!(create))
        .route(Permission::Write, routes!(replace))
        .route(Permission::Write, routes!(remove))
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

fn view(rule: RelationRule, stored: Option<&Stored<RelationRule>>) -> RelationRuleView {
    RelationRuleView {
        built_in: is_built_in(&rule.name),
        stored: stored.is_some(),
        version: stored.map(|s| s.version),
        updated_at: stored.map(|s| s.updated_at),
        rule,
    }
}

/// The rule a body makes, named by its path (the body's name was checked against it).
fn checked(rule: RelationRule, limits: &RuleLimits) -> Result<RelationRule, ApiError> {
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
    responses((status = 200, body = inline(Envelope<Vec<RelationRuleView>>)), Errors))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult<Vec<RelationRuleView>> {
    let stored = state.metastore.list_all::<RelationRule>().await?;
    let mut views: Vec<RelationRuleView> = karpor_topology::builtin_rules()
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
    params(NamePath), responses((status = 200, body = inline(Envelope<RelationRuleView>)), Errors))]
pub(crate) async fn read(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<RelationRuleView> {
    if let Some(stored) = state.metastore.get::<RelationRule>(&name).await? {
        return Ok(Reply::ok(view(stored.record.clone(), Some(&stored))));
    }
    match karpor_topology::builtin_rules()
        .into_iter()
        .find(|r| r.name == *name)
    {
        Some(rule) => Ok(Reply::ok(view(rule, None))),
        None => Err(ApiError::not_found(format!(
            "relation rule {name:?} not found"
        ))),
    }
}

#[utoipa::path(post, path = "/relation-rule/{name}", operation_id = "createRelationRule", tag = "topology",
    params(NamePath), request_body(content = RelationRule,
        description = "the rule; `name` may be left out (the path's)"),
    responses((status = 201, body = inline(Envelope<RelationRuleView>)), Errors))]
pub(crate) async fn create(
    State(state): State<AppState>,
    NamedBody(rule): NamedBody<RelationRule>,
) -> ApiResult<RelationRuleView> {
    let rule = checked(rule, &state.rule_limits)?;
    within_count(&state, &rule).await?;
    let stored = state.metastore.create(rule).await?;
    tracing::info!(rule = stored.record.name, "relation rule created");
    Ok(Reply::created(view(stored.record.clone(), Some(&stored))))
}

#[utoipa::path(put, path = "/relation-rule/{name}", operation_id = "putRelationRule", tag = "topology",
    params(NamePath, VersionParam), request_body(content = RelationRule,
        description = "the rule; `name` may be left out (the path's)"),
    responses((status = 200, body = inline(Envelope<RelationRuleView>),
        description = "created or replaced (kubectl-apply style); `version` makes it a compare-and-swap"),
        Errors))]
pub(crate) async fn replace(
    State(state): State<AppState>,
    Query(params): Query<VersionParam>,
    NamedBody(rule): NamedBody<RelationRule>,
) -> ApiResult<RelationRuleView> {
    let rule = checked(rule, &state.rule_limits)?;
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
    params(NamePath, VersionParam), responses((status = 200, body = inline(Envelope<String>)), Errors))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
    Query(params): Query<VersionParam>,
) -> ApiResult<&'static str> {
    let Some(current) = state.metastore.get::<RelationRule>(&name).await? else {
        return Err(ApiError::not_found(format!(
            "no stored relation rule {name:?}"
        )));
    };
    state
        .metastore
        .delete::<RelationRule>(&name, Some(params.version.unwrap_or(current.version)))
        .await?;
    tracing::info!(rule = %name, "relation rule deleted");
    Ok(Reply::ok("RelationRule deleted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_over_the_limit_is_a_400_naming_it() {
        let rule: RelationRule = serde_json::from_value(serde_json::json!({
            "name": "deep",
            "parent": {"kind": "Pod"},
            "child": {"kind": "Secret"},
            "relation": {"type": "selector", "path": vec!["a"; 17].join(".")},
        }))
        .unwrap();
        let refused = checked(rule, &RuleLimits::default()).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            refused.message,
            "relation.path: 17 is over the limit of 16 (syncer.limits.relation_path_segments)"
        );
    }
}
