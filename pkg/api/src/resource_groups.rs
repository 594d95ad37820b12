//! Resource group rules (CRUD, by path as karpor does and with the name in the body as
//! Karpor does) and the groups of a rule: the combinations of its fields' values among
//! the stored documents, from term aggregations, as Karpor's `{fields, groups}` with
//! karpor's counts beside.

use std::collections::BTreeMap;

use crate::access::{Permission, Routes};
use axum::extract::{Path, State};
use karpor_core::model::ResourceGroupRule;
use karpor_core::names::{InvalidName, RecordName};
use karpor_metastore::Stored;
use karpor_search::{Expr, Field, Op, Query, Value as SearchValue};
use karpor_storage::SearchStorage;
use utoipa_axum::routes;

use crate::body::Body;
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::{Errors, NamePath};
use crate::scope::Visible;
use crate::types::{
    Envelope, Group, GroupList, ResourceGroup, ResourceGroupRuleBody, ResourceGroupRuleView,
};
use crate::AppState;

/// Most values per field, and most groups in an answer.
const BUCKETS: usize = 100;
const MAX_GROUPS: usize = 1000;
/// What `DELETE` answers, as Karpor.
const DELETED: &str = "ResourceGroupRule deleted successfully";

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(list))
        .route(Permission::Read, routes!(read))
        .route(Permission::Edit, routes!(create))
        .route(Permission::Edit, routes!(update))
        .route(Permission::Edit, routes!(remove))
        .route(Permission::Edit, routes!(create_named_in_body))
        .route(Permission::Edit, routes!(update_named_in_body))
        .route(Permission::Read, routes!(groups))
}

/// A field a rule may group by: `cluster`, `apiVersion`, `kind`, `namespace`, `name`,
/// `labels.KEY` or `annotations.KEY`.
fn field(name: &str) -> Option<Field> {
    if let Some(key) = name.strip_prefix("labels.").filter(|k| !k.is_empty()) {
        return Some(Field::Label(key.to_owned()));
    }
    if let Some(key) = name.strip_prefix("annotations.").filter(|k| !k.is_empty()) {
        return Some(Field::Annotation(key.to_owned()));
    }
    Some(match name {
        "cluster" => Field::Cluster,
        "apiVersion" => Field::ApiVersion,
        "kind" => Field::Kind,
        "namespace" => Field::Namespace,
        "name" => Field::Name,
        _ => return None,
    })
}

fn view(rule: Stored<ResourceGroupRule>) -> ResourceGroupRuleView {
    ResourceGroupRuleView {
        id: rule.record.name.clone(),
        name: rule.record.name,
        description: rule.record.description,
        fields: rule.record.fields,
        created_at: rule.created_at,
        updated_at: rule.updated_at,
        version: rule.version,
    }
}

#[utoipa::path(get, path = "/resource-group-rules", operation_id = "listResourceGroupRules", tag = "resource groups",
    responses((status = 200, body = inline(Envelope<Vec<ResourceGroupRuleView>>), description = "every rule, by name"),
        Errors))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult<Vec<ResourceGroupRuleView>> {
    let items: Vec<ResourceGroupRuleView> = state
        .metastore
        .list_all::<ResourceGroupRule>()
        .await?
        .into_iter()
        .map(view)
        .collect();
    Ok(Reply::ok(items))
}

#[utoipa::path(get, path = "/resource-group-rule/{name}", operation_id = "getResourceGroupRule", tag = "resource groups",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<ResourceGroupRuleView>)),
        Errors))]
pub(crate) async fn read(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<ResourceGroupRuleView> {
    Ok(Reply::ok(view(find(&state, &name).await?)))
}

/// The record a body makes, its name being `name` (the body may repeat it, not change it).
fn record(name: RecordName, body: ResourceGroupRuleBody) -> Result<ResourceGroupRule, ApiError> {
    if let Some(named) = &body.name {
        if **named != *name {
            return Err(ApiError::bad_request(format!(
                "name {named:?} in the body is not the path's {name:?}"
            )));
        }
    }
    if body.fields.is_empty() {
        return Err(ApiError::bad_request("fields is empty"));
    }
    for f in &body.fields {
        if field(f).is_none() {
            return Err(ApiError::bad_request(format!(
                "field {f:?}: group by cluster, apiVersion, kind, namespace, name, labels.KEY or annotations.KEY"
            )));
        }
    }
    Ok(ResourceGroupRule {
        name: name.into(),
        description: body.description,
        fields: body.fields,
    })
}

/// The name of a body sent to Karpor's routes.
/// Karpor's form names the rule in the body: parsed as a path's name would be.
fn body_name(body: &ResourceGroupRuleBody) -> Result<RecordName, ApiError> {
    let name = body
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("name is required"))?;
    name.parse()
        .map_err(|e: InvalidName| ApiError::bad_request(e.to_string()))
}

#[utoipa::path(post, path = "/resource-group-rule/{name}", operation_id = "createResourceGroupRule", tag = "resource groups",
    params(NamePath),
    request_body = ResourceGroupRuleBody,
    responses((status = 201,
        links(
            ("getResourceGroupRule" = (operation_id = "getResourceGroupRule", parameters(("name" = "$response.body#/data/name")))),
            ("updateResourceGroupRule" = (operation_id = "updateResourceGroupRule", parameters(("name" = "$response.body#/data/name")))),
            ("deleteResourceGroupRule" = (operation_id = "deleteResourceGroupRule", parameters(("name" = "$response.body#/data/name")))),
            ("listResourceGroups" = (operation_id = "listResourceGroups", parameters(("name" = "$response.body#/data/name")))),
        ),
        body = inline(Envelope<ResourceGroupRuleView>)),
        Errors))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
    Body(body): Body<ResourceGroupRuleBody>,
) -> ApiResult<ResourceGroupRuleView> {
    let stored = state.metastore.create(record(name, body)?).await?;
    Ok(Reply::created(view(stored)))
}

#[utoipa::path(post, path = "/resource-group-rule", operation_id = "createResourceGroupRuleByBody", tag = "resource groups",
    request_body = ResourceGroupRuleBody,
    responses((status = 201, body = inline(Envelope<ResourceGroupRuleView>), description = "Karpor's form: the name in the body"),
        Errors))]
pub(crate) async fn create_named_in_body(
    State(state): State<AppState>,
    Body(body): Body<ResourceGroupRuleBody>,
) -> ApiResult<ResourceGroupRuleView> {
    let name = body_name(&body)?;
    let stored = state.metastore.create(record(name, body)?).await?;
    Ok(Reply::created(view(stored)))
}

#[utoipa::path(put, path = "/resource-group-rule/{name}", operation_id = "updateResourceGroupRule", tag = "resource groups",
    params(NamePath),
    request_body = ResourceGroupRuleBody,
    responses((status = 200, body = inline(Envelope<ResourceGroupRuleView>)),
        Errors))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
    Body(body): Body<ResourceGroupRuleBody>,
) -> ApiResult<ResourceGroupRuleView> {
    replace(&state, name, body).await
}

#[utoipa::path(put, path = "/resource-group-rule", operation_id = "updateResourceGroupRuleByBody", tag = "resource groups",
    request_body = ResourceGroupRuleBody,
    responses((status = 200, body = inline(Envelope<ResourceGroupRuleView>), description = "Karpor's form: the name in the body"),
        Errors))]
pub(crate) async fn update_named_in_body(
    State(state): State<AppState>,
    Body(body): Body<ResourceGroupRuleBody>,
) -> ApiResult<ResourceGroupRuleView> {
    let name = body_name(&body)?;
    replace(&state, name, body).await
}

async fn replace(
    state: &AppState,
    name: RecordName,
    body: ResourceGroupRuleBody,
) -> ApiResult<ResourceGroupRuleView> {
    let current = find(state, &name).await?;
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
pub(crate) async fn remove(
    State(state): State<AppState>,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<&'static str> {
    let current = find(&state, &name).await?;
    state
        .metastore
        .delete::<ResourceGroupRule>(&name, Some(current.version))
        .await?;
    Ok(Reply::ok(DELETED))
}

#[utoipa::path(get, path = "/resource-groups/{name}", operation_id = "listResourceGroups", tag = "resource groups",
    params(NamePath),
    responses((status = 200, body = inline(Envelope<GroupList>)),
        Errors))]
pub(crate) async fn groups(
    State(state): State<AppState>,
    visible: Visible,
    Path(NamePath { name }): Path<NamePath>,
) -> ApiResult<GroupList> {
    let rule = find(&state, &name).await?.record;
    let mut fields = Vec::new();
    for name in &rule.fields {
        match field(name) {
            Some(f) => fields.push((name.clone(), f)),
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
            for bucket in visible.terms(field, &query, BUCKETS).await? {
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
                values.insert(name.clone(), bucket.key);
                next.push((filter, values, bucket.count));
            }
        }
        level = next;
    }
    let items: Vec<Group> = level
        .into_iter()
        .map(|(_, values, count)| Group { values, count })
        .collect();
    let groups = items.iter().map(|g| resource_group(&g.values)).collect();
    Ok(Reply::ok(GroupList {
        fields: rule.fields,
        groups,
        rule: rule.name,
        total: items.len(),
        items,
    }))
}

fn resource_group(values: &BTreeMap<String, String>) -> ResourceGroup {
    let mut group = ResourceGroup::default();
    for (name, value) in values {
        let value = Some(value.clone()).filter(|v| !v.is_empty());
        match field(name) {
            Some(Field::Cluster) => group.cluster = value,
            Some(Field::ApiVersion) => group.api_version = value,
            Some(Field::Kind) => group.kind = value,
            Some(Field::Namespace) => group.namespace = value,
            Some(Field::Name) => group.name = value,
            Some(Field::Label(key)) => {
                group.labels.insert(key, value.unwrap_or_default());
            }
            Some(Field::Annotation(key)) => {
                group.annotations.insert(key, value.unwrap_or_default());
            }
            _ => {}
        }
    }
    group
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
