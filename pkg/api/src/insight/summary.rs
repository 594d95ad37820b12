//! `GET /insight/summary`: Karpor's variants by scope, answered from storage (Karpor calls
//! the member cluster on every request): a cluster's nodes, capacity and requests, a
//! namespace's or a custom scope's counts by type, one type's count, one resource.
//! karpor's counts by kind and namespace and the sync state sit beside Karpor's fields.

use std::collections::BTreeMap;

use axum::extract::{Query as QueryParams, State};
use karpor_kube::quantity;
use karpor_search::{Expr, Field, Op, Query, Value as SearchValue};
use karpor_storage::{ResourceDocument, SearchStorage};
use serde_json::Value;

use super::{every, one, registered};
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::locator::{Locator, Scope};
use crate::openapi::Errors;
use crate::scope::Visible;
use crate::types::{
    ClusterDetail, Count, CustomSummary, Envelope, GvkSummary, NamespaceSummary, ResourceGroup,
    ResourceSummary, SummarizedResource, SummaryAnswer,
};
use crate::AppState;

/// Most buckets listed per count.
const BUCKETS: usize = 100;
/// Karpor lists this many types in `countByGVK`.
const TOP_TYPES: usize = 5;
/// Most nodes and pods read for a cluster's capacity and requests.
const MAX_OBJECTS: u64 = 200_000;

#[utoipa::path(get, path = "/insight/summary", operation_id = "insightSummary", tag = "insight", params(Locator),
    responses((status = 200, body = inline(Envelope<SummaryAnswer>),
        description = "by scope: a cluster, one resource, a type, a namespace, or any other locator"),
        Errors))]
pub(crate) async fn summary(
    State(state): State<AppState>,
    visible: Visible,
    QueryParams(at): QueryParams<Locator>,
) -> ApiResult<SummaryAnswer> {
    if let Some(cluster) = at.cluster() {
        registered(&state, &visible, cluster).await?;
    }
    let answer = match at.scope() {
        Scope::Cluster => SummaryAnswer::Cluster(cluster_detail(&state, &visible, &at).await?),
        Scope::Resource | Scope::NonNamespacedResource => {
            SummaryAnswer::Resource(resource(one(&visible, &at).await?))
        }
        Scope::Gvk | Scope::ClusterGvkNamespace => {
            let api_version = at.api_version().unwrap_or_default();
            let (group, version) = match api_version.split_once('/') {
                Some((g, v)) => (g.to_owned(), v.to_owned()),
                None => (String::new(), api_version.to_owned()),
            };
            SummaryAnswer::Gvk(GvkSummary {
                cluster: at.cluster().unwrap_or_default().to_owned(),
                group,
                version,
                kind: at.kind().unwrap_or_default().to_owned(),
                count: visible.search(&at.query(false), 0, 0).await?.total,
                namespace: at.namespace().map(str::to_owned),
            })
        }
        Scope::Namespace => {
            let query = at.query(false);
            SummaryAnswer::Namespace(NamespaceSummary {
                cluster: at.cluster().unwrap_or_default().to_owned(),
                namespace: at.namespace().unwrap_or_default().to_owned(),
                count_by_gvk: count_by_gvk(&visible, &query).await?,
                resource_count: visible.search(&query, 0, 0).await?.total,
                count_by_kind: counts(&visible, Field::Kind, &query).await?,
            })
        }
        Scope::Custom => {
            let query = at.query(false);
            SummaryAnswer::Custom(CustomSummary {
                scope: ResourceGroup {
                    cluster: at.cluster().map(str::to_owned),
                    api_version: at.api_version().map(str::to_owned),
                    kind: at.kind().map(str::to_owned),
                    namespace: at.namespace().map(str::to_owned),
                    name: at.name().map(str::to_owned),
                    labels: at.labels(),
                    annotations: at.annotations(),
                },
                count_by_gvk: count_by_gvk(&visible, &query).await?,
                resource_count: visible.search(&query, 0, 0).await?.total,
            })
        }
    };
    Ok(Reply::ok(answer))
}

async fn counts(visible: &Visible, field: Field, query: &Query) -> Result<Vec<Count>, ApiError> {
    Ok(visible
        .terms(&field, query, BUCKETS)
        .await?
        .into_iter()
        .map(|b| Count {
            key: b.key,
            count: b.count,
        })
        .collect())
}

/// The commonest types as `Kind.apiVersion` (Karpor's keys), five at most.
async fn count_by_gvk(visible: &Visible, query: &Query) -> Result<BTreeMap<String, u64>, ApiError> {
    let mut types = Vec::new();
    for kind in visible.terms(&Field::Kind, query, TOP_TYPES).await? {
        let mut of_kind = query.clone();
        of_kind.filter = Expr::And(vec![
            query.filter.clone(),
            Expr::Compare {
                field: Field::Kind,
                op: Op::Eq,
                value: SearchValue::Text(kind.key.clone()),
            },
        ]);
        for version in visible
            .terms(&Field::ApiVersion, &of_kind, TOP_TYPES)
            .await?
        {
            types.push((format!("{}.{}", kind.key, version.key), version.count));
        }
    }
    types.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    types.truncate(TOP_TYPES);
    Ok(types.into_iter().collect())
}

fn resource(document: ResourceDocument) -> ResourceSummary {
    let status = (document.kind == "Pod").then(|| pod_status(&document.object));
    ResourceSummary {
        resource: SummarizedResource {
            cluster: document.cluster,
            api_version: document.api_version,
            kind: document.kind,
            namespace: document.namespace,
            name: document.name,
            status,
        },
        creation_timestamp: document.creation_timestamp,
        resource_version: document.resource_version,
        uid: document.uid,
        labels: document.labels,
        sync_at: document.sync_at,
    }
}

/// Karpor's Pod status: its first container's state.
fn pod_status(pod: &Value) -> String {
    let state = &pod["status"]["containerStatuses"][0]["state"];
    if state.get("running").is_some() {
        "Running".to_owned()
    } else if let Some(waiting) = state.get("waiting") {
        waiting["reason"].as_str().unwrap_or("Waiting").to_owned()
    } else if state.get("terminated").is_some() {
        "Terminated".to_owned()
    } else {
        "Unknown".to_owned()
    }
}

async fn cluster_detail(
    state: &AppState,
    visible: &Visible,
    at: &Locator,
) -> Result<ClusterDetail, ApiError> {
    let cluster = at.cluster().unwrap_or_default().to_owned();
    let of_kind = |kind: &str| Locator {
        cluster: at.cluster.clone(),
        kind: kind.parse().ok(),
        ..Locator::default()
    };
    let mut detail = ClusterDetail {
        cluster: cluster.clone(),
        ..ClusterDetail::default()
    };
    for node in every(visible, &of_kind("Node").query(false), MAX_OBJECTS).await? {
        let status = &node.object["status"];
        detail.node_count += 1;
        let ready = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        if ready {
            detail.ready_nodes += 1;
        } else {
            detail.not_ready_nodes += 1;
        }
        let resources = if status["allocatable"].is_object() {
            &status["allocatable"]
        } else {
            &status["capacity"]
        };
        detail.cpu_capacity += resources["cpu"]
            .as_str()
            .and_then(quantity::millicores)
            .unwrap_or(0);
        detail.memory_capacity += resources["memory"]
            .as_str()
            .and_then(quantity::whole)
            .unwrap_or(0);
        detail.pods_capacity += resources["pods"]
            .as_str()
            .and_then(quantity::whole)
            .unwrap_or(0);
    }
    for pod in every(visible, &of_kind("Pod").query(false), MAX_OBJECTS).await? {
        let phase = pod.object["status"]["phase"].as_str().unwrap_or_default();
        if matches!(phase, "Succeeded" | "Failed") {
            continue;
        }
        detail.pods_usage += 1;
        let containers = pod.object["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for container in containers {
            let requests = &container["resources"]["requests"];
            if let Some(cpu) = requests["cpu"].as_str().and_then(quantity::parse) {
                detail.cpu_usage += cpu * 1000.0;
            }
            if let Some(memory) = requests["memory"].as_str().and_then(quantity::parse) {
                detail.memory_usage += memory;
            }
        }
    }
    let everything = at.query(false);
    detail.resource_count = visible.search(&everything, 0, 0).await?.total;
    detail.count_by_kind = counts(visible, Field::Kind, &everything).await?;
    detail.count_by_namespace = counts(visible, Field::Namespace, &everything).await?;
    let snapshot = state.sync.as_ref().and_then(|s| s.cluster(&cluster));
    detail.sync_state = snapshot
        .as_ref()
        .map_or("unknown", |s| s.state.as_str())
        .to_owned();
    detail.server_version = snapshot
        .as_ref()
        .and_then(|s| s.server_version.clone())
        .unwrap_or_default();
    detail.latency = snapshot.as_ref().and_then(|s| s.latency_ms).unwrap_or(0) as i64;
    detail.server_measured_at = snapshot.and_then(|s| s.server_seen_at);
    Ok(detail)
}
