//! `GET /insight/audit` and `/insight/score`, in Karpor's shapes (`AuditData`,
//! `ScoreData`), answered from the findings the syncer stored with each document: totals
//! and the score are one aggregate, the groups one term count and a page per rule. Karpor
//! audits every object on each request instead.

use std::collections::BTreeMap;

use axum::extract::{Query as QueryParams, State};
use karpor_audit::{Severity, SeverityCounts};
use karpor_search::{Expr, Field, Op, Query, Value};
use karpor_storage::SearchStorage;
use serde::Deserialize;
use utoipa::IntoParams;

use super::registered;
use crate::envelope::{ApiResult, Reply};
use crate::locator::Locator;
use crate::openapi::Errors;
use crate::scope::Visible;
use crate::types::{AuditData, AuditedResource, Envelope, Issue, IssueGroup, ScoreData};
use crate::AppState;

/// The scanner Karpor's clients see in each issue.
const SCANNER: &str = "karpor";
/// Resources listed per issue group (the group's `resourceTotal` counts them all).
const GROUP_RESOURCES: u64 = 100;
/// More rules than the catalogue has: every rule found is a group.
const MAX_GROUPS: usize = 256;

/// Karpor's `forceNew`: accepted and needless (findings are kept current by the syncer).
#[derive(Debug, Deserialize, IntoParams)]
#[allow(dead_code)] // for the document only
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct AuditParams {
    #[serde(rename = "forceNew")]
    #[param(value_type = Option<String>)]
    pub force_new: Option<String>,
}

fn by_severity(counts: SeverityCounts) -> BTreeMap<String, u64> {
    [
        (Severity::High, counts.high),
        (Severity::Medium, counts.medium),
        (Severity::Low, counts.low),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(s, n)| (s.as_str().to_owned(), n))
    .collect()
}

async fn scope(
    state: &AppState,
    visible: &Visible,
    at: &Locator,
) -> Result<Query, crate::envelope::ApiError> {
    if let Some(cluster) = at.cluster() {
        registered(state, visible, cluster).await?;
    }
    Ok(at.query(false))
}

#[utoipa::path(get, path = "/insight/score", operation_id = "insightScore", tag = "insight",
    params(Locator, AuditParams),
    responses((status = 200, body = inline(Envelope<ScoreData>)), Errors))]
pub(crate) async fn score(
    State(state): State<AppState>,
    visible: Visible,
    QueryParams(at): QueryParams<Locator>,
) -> ApiResult<ScoreData> {
    let query = scope(&state, &visible, &at).await?;
    let totals = visible.audit_totals(&query).await?;
    Ok(Reply::ok(ScoreData {
        score: totals.score(),
        resource_total: totals.resources,
        issues_total: totals.findings.total(),
        severity_statistic: by_severity(totals.findings),
    }))
}

#[utoipa::path(get, path = "/insight/audit", operation_id = "insightAudit", tag = "insight",
    params(Locator, AuditParams),
    responses((status = 200, body = inline(Envelope<AuditData>)), Errors))]
pub(crate) async fn audit(
    State(state): State<AppState>,
    visible: Visible,
    QueryParams(at): QueryParams<Locator>,
) -> ApiResult<AuditData> {
    let query = scope(&state, &visible, &at).await?;
    let totals = visible.audit_totals(&query).await?;
    let mut groups = Vec::new();
    for bucket in visible.terms(&Field::Issue, &query, MAX_GROUPS).await? {
        let mut of_rule = query.clone();
        of_rule.filter = Expr::And(vec![
            query.filter.clone(),
            Expr::Compare {
                field: Field::Issue,
                op: Op::Eq,
                value: Value::Text(bucket.key.clone()),
            },
        ]);
        // The group's total is the bucket's: the page needs no count of its own.
        let page = visible
            .search_counted(&of_rule, 0, GROUP_RESOURCES, Some(GROUP_RESOURCES))
            .await?;
        let Some(finding) = page
            .items
            .first()
            .and_then(|d| d.issues.iter().find(|f| f.rule == bucket.key))
            .cloned()
        else {
            continue;
        };
        groups.push(IssueGroup {
            issue: Issue {
                scanner: SCANNER.to_owned(),
                severity: finding.severity.as_str().to_owned(),
                title: finding.title,
                message: finding.message,
                rule: finding.rule,
                remediation: finding.remediation,
            },
            resource_groups: page
                .items
                .into_iter()
                .map(|d| AuditedResource {
                    cluster: d.cluster,
                    api_version: d.api_version,
                    kind: d.kind,
                    namespace: d.namespace,
                    name: d.name,
                })
                .collect(),
            resource_total: bucket.count,
        });
    }
    let weight = |g: &IssueGroup| {
        Severity::ALL
            .iter()
            .find(|s| s.as_str() == g.issue.severity)
            .map_or(0, |s| s.weight())
    };
    groups.sort_by(|a, b| {
        weight(b)
            .cmp(&weight(a))
            .then(b.resource_total.cmp(&a.resource_total))
            .then_with(|| a.issue.rule.cmp(&b.issue.rule))
    });
    Ok(Reply::ok(AuditData {
        issue_total: totals.findings.total(),
        resource_total: totals.resources,
        by_severity: by_severity(totals.findings),
        issue_groups: groups,
    }))
}
