//! Resource group rules (CRUD) and the groups of a rule: the combinations of its fields'
//! values among the stored documents, with counts, from term aggregations.

use axum::extract::{Path, State};
use axum::Json;
use karpor_core::model::{validate_name, ResourceGroupRule};
use karpor_metastore::Stored;
use karpor_search::{Expr, Field, Op, Query, Value as SearchValue};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::OffsetDateTime;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{ApiError, ApiResult, Envelope, Reply};
use crate::openapi::{Errors, NamePath};
use crate::AppState;

/// The fields a rule may group by (those storage can aggregate).
const FIELDS: [(&str, Field); 4] = [
    ("cluster", Field::Cluster),
    ("apiVersion", Field::ApiVersion),
    ("kind", Field::Kind),
    ("namespace", Field::Namespace),
];
/// Most values per field, and most groups in an answer.
const BUCKETS: usize = 100;
const MAX_GROUPS: usize = 1000;

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(read, create, update, remove))
        .routes(routes!(groups))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleView {
    pub name: String,
    pub description: String,
    pub fields: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
    pub version: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RuleList {
    pub items: Vec<RuleView>,
    pub total: usize,
}

/// A rule's body: the fields to group by, of cluster, apiVersion, kind and namespace.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleBody {
    #[serde(default)]
    pub description: String,
    #[schema(example = json!(["namespace", "kind"]))]
    pub fields: Vec<String>,
}

fn view(rule: Stored<ResourceGroupRule>) -> RuleView {
    RuleView {
        name: rule.record.name,
        description: rule.record.description,
        fields: rule.record.fields,
        created_at: rule.created_at,
        updated_at: rule.updated_at,
        version: rule.version,
    }
}

#[utoipa::path(get, path = "/resource-group-rules", operation_id = "listResourceGroupRules", tag = "resource groups",
    responses((status = 200, body = inline(Envelope<RuleList>)),
        Errors))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult {
    let items: Vec<RuleView> = state
        .metastore
        .list_all::<ResourceGroupRule>()
        .await?
        .into_iter()
        .map(view)
        .collect();
    Ok(Reply::ok(RuleList {
        total: items.len(),
        items,
    }))
}

#[utoipa::path(get, path = "/resource-group-rule/{name}", operation_id = "getResourceGroupRule", tag = "resource groups",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<RuleView>)),
        Errors))]
pub(crate) async fn read(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    Ok(Reply::ok(view(find(&state, &name).await?)))
}

fn record(name: String, body: RuleBody) -> Result<ResourceGroupRule, ApiError> {
    validate_name(&name).map_err(|e| ApiError::bad_request(e.to_string()))?;
    if body.fields.is_empty() {
        return Err(ApiError::bad_request("fields is empty"));
    }
    for field in &body.fields {
        if !FIELDS.iter().any(|(n, _)| n == field) {
            return Err(ApiError::bad_request(format!(
                "field {field:?}: group by cluster, apiVersion, kind or namespace"
            )));
        }
    }
    Ok(ResourceGroupRule {
        name,
        description: body.description,
        fields: body.fields,
    })
}

#[utoipa::path(post, path = "/resource-group-rule/{name}", operation_id = "createResourceGroupRule", tag = "resource groups",
    params(NamePath),
    request_body = RuleBody,
    responses((status = 201,
        links(
            ("getResourceGroupRule" = (operation_id = "getResourceGroupRule", parameters(("name" = "$response.body#/data/name")))),
            ("updateResourceGroupRule" = (operation_id = "updateResourceGroupRule", parameters(("name" = "$response.body#/data/name")))),
            ("deleteResourceGroupRule" = (operation_id = "deleteResourceGroupRule", parameters(("name" = "$response.body#/data/name")))),
            ("listResourceGroups" = (operation_id = "listResourceGroups", parameters(("name" = "$response.body#/data/name")))),
        ),
        body = inline(Envelope<RuleView>)),
        Errors))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Json(body): Json<RuleBody>,
) -> ApiResult {
    let stored = state.metastore.create(record(name, body)?).await?;
    Ok(Reply::created(view(stored)))
}

#[utoipa::path(put, path = "/resource-group-rule/{name}", operation_id = "updateResourceGroupRule", tag = "resource groups",
    params(NamePath),
    request_body = RuleBody,
    responses((status = 200, body = inline(Envelope<RuleView>)),
        Errors))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Json(body): Json<RuleBody>,
) -> ApiResult {
    let current = find(&state, &name).await?;
    let stored = state
        .metastore
        .update(record(name, body)?, current.version)
        .await?;
    Ok(Reply::ok(view(stored)))
}

#[utoipa::path(delete, path = "/resource-group-rule/{name}", operation_id = "deleteResourceGroupRule", tag = "resource groups",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<String>)),
        Errors))]
pub(crate) async fn remove(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    let current = find(&state, &name).await?;
    state
        .metastore
        .delete::<ResourceGroupRule>(&name, Some(current.version))
        .await?;
    Ok(Reply::ok(name))
}

/// One group: a value for each of the rule's fields, and how many documents have them.
#[derive(Debug, Serialize, ToSchema)]
pub struct Group {
    pub values: BTreeMap<String, String>,
    pub count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupList {
    pub rule: String,
    pub fields: Vec<String>,
    pub items: Vec<Group>,
    pub total: usize,
}

#[utoipa::path(get, path = "/resource-groups/{name}", operation_id = "listResourceGroups", tag = "resource groups",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<GroupList>)),
        Errors))]
pub(crate) async fn groups(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    let rule = find(&state, &name).await?.record;
    let mut fields = Vec::new();
    for name in &rule.fields {
        match FIELDS.iter().find(|(n, _)| n == name) {
            Some((n, f)) => fields.push((*n, f.clone())),
            None => {
                return Err(ApiError::bad_request(format!(
                    "the rule groups by {name:?}, which cannot be aggregated"
                )))
            }
        }
    }
    // Breadth first: each level splits every group of the level above by one more field.
    let mut level: Vec<(Vec<Expr>, BTreeMap<String, String>, u64)> =
        vec![(vec![not_deleted()], BTreeMap::new(), 0)];
    for (name, field) in &fields {
        let mut next = Vec::new();
        for (filter, values, _) in &level {
            let query = Query {
                filter: Expr::And(filter.clone()),
                order_by: Vec::new(),
                limit: None,
                offset: None,
            };
            for bucket in state.storage.terms(field, &query, BUCKETS).await? {
                if next.len() >= MAX_GROUPS {
                    break;
                }
                let mut filter = filter.clone();
                filter.push(Expr::Compare {
                    field: field.clone(),
                    op: Op::Eq,
                    value: SearchValue::Text(bucket.key.clone()),
                });
                let mut values = values.clone();
                values.insert((*name).to_owned(), bucket.key);
                next.push((filter, values, bucket.count));
            }
        }
        level = next;
    }
    let items: Vec<Group> = level
        .into_iter()
        .map(|(_, values, count)| Group { values, count })
        .collect();
    Ok(Reply::ok(GroupList {
        rule: rule.name,
        fields: rule.fields,
        total: items.len(),
        items,
    }))
}

fn not_deleted() -> Expr {
    Expr::Compare {
        field: Field::Deleted,
        op: Op::Eq,
        value: SearchValue::Bool(false),
    }
}

async fn find(state: &AppState, name: &str) -> Result<Stored<ResourceGroupRule>, ApiError> {
    state
        .metastore
        .get::<ResourceGroupRule>(name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("resource group rule {name:?} not found")))
}
