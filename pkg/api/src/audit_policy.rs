//! The audit rules and the policy over them: `GET /audit/rules` (the catalogue, with what
//! the policy in force makes of each rule), `GET|PUT|DELETE /audit/policy` (a stored
//! policy replaces the config file's `audit:` section; the syncer re-audits every cluster
//! on a change, and the answer says how far that has got).

use std::collections::BTreeMap;

use crate::access::{Permission, Routes};
use axum::extract::{Query, State};
use karpor_audit::{AuditConfig, Category};
use karpor_core::model::AuditPolicy;
use karpor_metastore::Stored;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::body::Body;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::Errors;
use crate::types::{AuditRuleView, Envelope, PolicyView, Reaudit};
use crate::AppState;

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(rules))
        .route(Permission::Read, routes!(read))
        .route(Permission::Write, routes!(replace))
        .route(Permission::Write, routes!(reset))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct VersionParam {
    /// Write only if the stored policy is at this version (409 otherwise).
    pub version: Option<i64>,
}

async fn stored(state: &AppState) -> Result<Option<Stored<AuditPolicy>>, ApiError> {
    Ok(state
        .metastore
        .get::<AuditPolicy>(AuditPolicy::NAME)
        .await?)
}

async fn in_force(state: &AppState) -> Result<PolicyView, ApiError> {
    let reaudit = state.sync.as_ref().map(|sync| {
        let progress = sync.audit_progress();
        Reaudit {
            generation: progress.generation,
            clusters: progress.clusters,
            audited: progress.audited,
        }
    });
    Ok(match stored(state).await? {
        Some(policy) => PolicyView {
            config: policy.record.config,
            source: "stored".to_owned(),
            version: Some(policy.version),
            updated_at: Some(policy.updated_at),
            reaudit,
        },
        None => PolicyView {
            config: (*state.audit).clone(),
            source: "config".to_owned(),
            version: None,
            updated_at: None,
            reaudit,
        },
    })
}

#[utoipa::path(get, path = "/audit/rules", operation_id = "listAuditRules", tag = "audit",
    responses((status = 200, body = inline(Envelope<Vec<AuditRuleView>>)), Errors))]
pub(crate) async fn rules(State(state): State<AppState>) -> ApiResult<Vec<AuditRuleView>> {
    let policy = in_force(&state).await?.config;
    let views: Vec<AuditRuleView> = karpor_audit::rules()
        .iter()
        .map(|rule| {
            let effective = (policy.enabled && !policy.disabled.contains(rule.id)).then(|| {
                policy
                    .severities
                    .get(rule.id)
                    .copied()
                    .unwrap_or(rule.severity)
                    .as_str()
                    .to_owned()
            });
            AuditRuleView {
                id: rule.id.to_owned(),
                category: match rule.category {
                    Category::Security => "security",
                    Category::Reliability => "reliability",
                }
                .to_owned(),
                severity: rule.severity.as_str().to_owned(),
                effective_severity: effective,
                title: rule.title.to_owned(),
                rationale: rule.rationale.to_owned(),
                remediation: rule.remediation.to_owned(),
            }
        })
        .collect();
    Ok(Reply::ok(views))
}

#[utoipa::path(get, path = "/audit/policy", operation_id = "getAuditPolicy", tag = "audit",
    responses((status = 200, body = inline(Envelope<PolicyView>)), Errors))]
pub(crate) async fn read(State(state): State<AppState>) -> ApiResult<PolicyView> {
    Ok(Reply::ok(in_force(&state).await?))
}

/// The policy's body: the `audit:` section's keys.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // for the document only: the handler reads an `AuditConfig`
pub(crate) struct PolicyBody {
    enabled: Option<bool>,
    disabled: Option<Vec<String>>,
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    severities: Option<BTreeMap<String, String>>,
}

#[utoipa::path(put, path = "/audit/policy", operation_id = "putAuditPolicy", tag = "audit",
    params(VersionParam), request_body = PolicyBody,
    responses((status = 200, body = inline(Envelope<PolicyView>)), Errors))]
pub(crate) async fn replace(
    State(state): State<AppState>,
    Query(params): Query<VersionParam>,
    Body(config): Body<AuditConfig>,
) -> ApiResult<PolicyView> {
    config
        .validate()
        .map_err(|issue| ApiError::bad_request(format!("{}: {}", issue.key(), issue.problem())))?;
    let policy = AuditPolicy {
        name: AuditPolicy::NAME.to_owned(),
        config,
    };
    let current = stored(&state).await?;
    match (current, params.version) {
        (None, Some(version)) => {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                format!("no stored policy at version {version}"),
            ))
        }
        (None, None) => {
            state.metastore.create(policy).await?;
        }
        (Some(current), version) => {
            state
                .metastore
                .update(policy, version.unwrap_or(current.version))
                .await?;
        }
    }
    tracing::info!("audit policy replaced");
    Ok(Reply::ok(in_force(&state).await?))
}

#[utoipa::path(delete, path = "/audit/policy", operation_id = "resetAuditPolicy", tag = "audit",
    responses((status = 200, body = inline(Envelope<PolicyView>),
        description = "the config file's policy, in force again"), Errors))]
pub(crate) async fn reset(State(state): State<AppState>) -> ApiResult<PolicyView> {
    if let Some(current) = stored(&state).await? {
        state
            .metastore
            .delete::<AuditPolicy>(AuditPolicy::NAME, Some(current.version))
            .await?;
        tracing::info!("audit policy reset to the config file's");
    }
    Ok(Reply::ok(in_force(&state).await?))
}
