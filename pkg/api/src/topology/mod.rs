//! The topology, from storage: `GET /insight/topology` in Karpor's shapes (a resource's
//! graph, hops out in both directions; a namespace's, a cluster's or a resource group's
//! graph of kinds with counts, the last over every cluster), and the relation rules behind it (`/relation-rules`, `/relation-rule/{name}`).
//! Karpor lists the related kinds from the member cluster on every request; here each
//! step is an index lookup (owner uids and reference keys are indexed at ingest).

mod kinds;
mod resource;
mod rules;

use std::collections::BTreeMap;

use crate::access::{Permission, Routes};
use axum::extract::{Query as QueryParams, State};
use karpor_core::model::RelationRule;
use karpor_search::Field;
use karpor_storage::SearchStorage;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::envelope::{ApiError, ApiResult, Reply};
use crate::locator::{Locator, Scope};
use crate::openapi::Errors;
use crate::scope::Visible;
use crate::types::{Envelope, TopologyAnswer};
use crate::AppState;

pub(crate) use resource::graph as resource_graph;

pub(crate) fn routes() -> Routes {
    Routes::new()
        .route(Permission::Read, routes!(topology))
        .merge(rules::routes())
}

/// Most hops a resource's graph goes out.
const MAX_HOPS: usize = 5;
/// Hops when none are asked for.
const DEFAULT_HOPS: usize = 2;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TopologyParams {
    /// A resource's graph: how many hops out, up its parents and down its children (1 to
    /// 5, default 2).
    pub hops: Option<String>,
    /// Karpor's: accepted and needless (the graph is read from storage each time).
    #[serde(rename = "forceNew")]
    #[param(value_type = Option<String>)]
    #[allow(dead_code)] // for the document only
    pub force_new: Option<String>,
}

/// Most clusters in a resource group's graph.
const MAX_CLUSTERS: usize = 500;

/// A resource group's graph (labels, annotations or fields, over every cluster unless
/// one is named): the graph of kinds of each cluster that holds matching objects, keyed
/// by cluster as Karpor's custom topology is.
async fn group_graph(
    state: &AppState,
    visible: &Visible,
    rules: &[RelationRule],
    at: &Locator,
) -> ApiResult<TopologyAnswer> {
    let scope = at.query(false);
    let clusters = match at.cluster() {
        Some(cluster) => {
            crate::insight::registered(state, visible, cluster).await?;
            vec![cluster.to_owned()]
        }
        None => visible
            .terms(&Field::Cluster, &scope, MAX_CLUSTERS)
            .await?
            .into_iter()
            .map(|bucket| bucket.key)
            .collect(),
    };
    let mut graphs = BTreeMap::new();
    for cluster in clusters {
        let graph = kinds::graph(visible, rules, &scope, &cluster, at.namespace()).await?;
        graphs.insert(cluster, graph);
    }
    Ok(Reply::ok(TopologyAnswer::Kinds(graphs)))
}

/// The relation rules in force: the built-in ones, replaced or added to by stored ones.
pub(crate) async fn rules_in_force(state: &AppState) -> Result<Vec<RelationRule>, ApiError> {
    let stored: Vec<RelationRule> = state
        .metastore
        .list_all::<RelationRule>()
        .await?
        .into_iter()
        .map(|s| s.record)
        .collect();
    Ok(karpor_topology::in_force(&stored))
}

#[utoipa::path(get, path = "/insight/topology", operation_id = "insightTopology", tag = "insight",
    params(Locator, TopologyParams),
    responses((status = 200, body = inline(Envelope<TopologyAnswer>),
        description = "by cluster name: a resource's graph (`{nodeId: ResourceNode}`), or a namespace's, a cluster's or a resource group's graph of kinds (`{kindId: KindNode}`; a group without a cluster: each cluster holding matching objects)"),
        Errors))]
pub(crate) async fn topology(
    State(state): State<AppState>,
    visible: Visible,
    QueryParams(at): QueryParams<Locator>,
    QueryParams(params): QueryParams<TopologyParams>,
) -> ApiResult<TopologyAnswer> {
    let rules = rules_in_force(&state).await?;
    if at.scope() == Scope::Custom {
        return group_graph(&state, &visible, &rules, &at).await;
    }
    let Some(cluster) = at.cluster() else {
        return Err(ApiError::bad_request(
            "a topology is of one cluster: give cluster",
        ));
    };
    crate::insight::registered(&state, &visible, cluster).await?;
    let cluster = cluster.to_owned();
    match at.scope() {
        Scope::Resource | Scope::NonNamespacedResource => {
            let hops = params
                .hops
                .as_deref()
                .and_then(|h| h.trim().parse().ok())
                .unwrap_or(DEFAULT_HOPS)
                .clamp(1, MAX_HOPS);
            let root = crate::insight::one(&visible, &at).await?;
            let graph = resource_graph(&visible, &rules, root, hops).await?;
            Ok(Reply::ok(TopologyAnswer::Resources(BTreeMap::from([(
                cluster,
                graph.nodes(),
            )]))))
        }
        Scope::Cluster | Scope::Namespace => {
            let graph =
                kinds::graph(&visible, &rules, &at.query(false), &cluster, at.namespace()).await?;
            Ok(Reply::ok(TopologyAnswer::Kinds(BTreeMap::from([(
                cluster, graph,
            )]))))
        }
        _ => Err(ApiError::bad_request(
            "a topology is of a resource (apiVersion, kind, name), a namespace or a cluster",
        )),
    }
}
