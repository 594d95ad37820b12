//! A rule tried against a cluster without storing it: the types it would select, found by
//! discovery and the same resolution the syncer uses, and how many objects each has now,
//! counted by the cluster (metadata-only lists, one page when the API server counts the
//! rest). Nothing is written.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use karpor_core::model::{Cluster, SyncRule};
use karpor_kube::{ExecSettings, Timeouts};
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};

use crate::rules::discovery::discover;
use crate::rules::resolve::{resolve, selects, Target};
use crate::status::watched_types::TypeError;

/// Calls to the cluster wait at most this long.
const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(5),
    read: Some(Duration::from_secs(15)),
};
/// Types counted at once.
const CONCURRENT_COUNTS: usize = 8;
/// Objects per page while counting what the API server does not count itself (it does
/// not with a label or field selector).
const PAGE: u32 = 500;

/// What a rule would select in one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DryRun {
    /// Whether the rule's cluster selector picks this cluster.
    pub selects_cluster: bool,
    pub resources: Vec<Selection>,
}

/// One type a rule selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
    /// The namespaces it is watched in; empty: all.
    pub namespaces: Vec<String>,
    /// The rule that would watch it beside the others in force: this one, or one that
    /// names the type more precisely (or as precisely and first by name).
    pub watched_by: String,
    /// Objects the rule's selectors select now; `None` when they cannot be counted.
    pub objects: Option<u64>,
    /// Why not.
    pub error: Option<TypeError>,
}

/// Why a dry run could not ask the cluster at all.
#[derive(Debug, thiserror::Error)]
pub enum DryRunError {
    #[error("the cluster's kubeconfig cannot be used: {0}")]
    Misconfigured(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("the cluster is synced by its agent: the hub has no client of it to try a rule with")]
    InAgentMode,
}

/// `rule` against `cluster`, beside `others` (the other rules that would be in force,
/// for which rule watches each type).
pub async fn dry_run(
    cluster: &Cluster,
    rule: &SyncRule,
    others: &[SyncRule],
    exec: &Arc<ExecSettings>,
) -> Result<DryRun, DryRunError> {
    if !cluster.synced_by_hub() {
        return Err(DryRunError::InAgentMode);
    }
    let client = karpor_kube::connect(&cluster.kubeconfig.0, exec, TIMEOUTS)
        .await
        .map_err(|e| DryRunError::Misconfigured(e.to_string()))?
        .client;
    let found = discover(&client)
        .await
        .map_err(|e| DryRunError::Unreachable(karpor_kube::describe(&e)))?;
    let audit = Arc::default();
    let alone = resolve(std::slice::from_ref(rule), &found, &audit);
    let mut together: Vec<SyncRule> = others
        .iter()
        .filter(|r| r.name != rule.name)
        .cloned()
        .collect();
    together.push(rule.clone());
    together.sort_by(|a, b| a.name.cmp(&b.name));
    let in_force = resolve(&together, &found, &audit);
    // One selection per type: its targets are its namespaces.
    let mut types: Vec<Vec<Target>> = Vec::new();
    for target in alone {
        let same_type = |t: &&mut Vec<Target>| {
            t[0].resource.group == target.resource.group
                && t[0].resource.plural == target.resource.plural
        };
        match types.iter_mut().find(same_type) {
            Some(same) => same.push(target),
            None => types.push(vec![target]),
        }
    }
    let resources = futures::stream::iter(types)
        .map(|targets| {
            let client = client.clone();
            let watched_by = in_force
                .iter()
                .find(|t| {
                    t.resource.group == targets[0].resource.group
                        && t.resource.plural == targets[0].resource.plural
                })
                .map_or_else(|| rule.name.clone(), |t| t.options.rule.clone());
            async move { select(client, targets, watched_by).await }
        })
        .buffered(CONCURRENT_COUNTS)
        .collect()
        .await;
    Ok(DryRun {
        selects_cluster: selects(&rule.clusters, cluster),
        resources,
    })
}

/// A type's selection, counted in each of its namespaces.
async fn select(client: Client, targets: Vec<Target>, watched_by: String) -> Selection {
    let first = &targets[0];
    let r = &first.resource;
    let mut objects = Some(0);
    let mut error = None;
    for target in &targets {
        match count(&client, target).await {
            Ok(n) => objects = objects.map(|total| total + n),
            Err(e) => {
                error = Some(crate::status::reason::type_error(&e));
                objects = None;
                break;
            }
        }
    }
    Selection {
        group: r.group.clone(),
        version: r.version.clone(),
        kind: r.kind.clone(),
        resource: r.plural.clone(),
        namespaced: first.namespaced,
        namespaces: targets.iter().filter_map(|t| t.namespace.clone()).collect(),
        watched_by,
        objects,
        error,
    }
}

/// The objects a target's selectors select now: the API server's count where it gives
/// one (`remainingItemCount`), else the pages counted.
async fn count(client: &Client, target: &Target) -> Result<u64, kube::Error> {
    let api: Api<DynamicObject> = match &target.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &target.resource),
        None => Api::all_with(client.clone(), &target.resource),
    };
    let mut params = ListParams::default().limit(PAGE);
    if let Some(labels) = &target.options.label_selector {
        params = params.labels(labels);
    }
    if let Some(fields) = &target.options.field_selector {
        params = params.fields(fields);
    }
    let mut total = 0u64;
    loop {
        let page = api.list_metadata(&params).await?;
        total += page.items.len() as u64;
        if let Some(rest) = page.metadata.remaining_item_count {
            return Ok(total + u64::try_from(rest).unwrap_or(0));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(total),
        }
    }
}
