//! A cluster as the API answers it: Karpor's `Cluster` resource (`apiVersion`, `kind`,
//! `metadata`, `spec`, `status`), so Karpor's clients read what they expect, with
//! karpor's own fields beside it (never instead): the flat names, the masked kubeconfig
//! (admins only), its summary, times, version and the sync status (with its rules and
//! each watched type's state).

use std::time::Duration;

use crate::scope::Visible;
use crate::types::{
    ClusterAccess, ClusterMetadata, ClusterSpec, ClusterStatus, ClusterView, Credential,
    RuleInForceView, SyncView, TypeView,
};
use crate::AppState;
use karpor_core::model::Cluster;
use karpor_kube::{kubeconfig, Summary};
use karpor_metastore::Stored;
use karpor_syncer::{SyncState, TypeSnapshot, TypeState};
use kube::config::Kubeconfig;

/// Karpor's Cluster resource group and version.
pub(super) const CLUSTER_API_VERSION: &str = "cluster.karpor.io/v1beta1";

/// How long a cluster's document count may take before it is answered unknown.
const COUNT_TIMEOUT: Duration = Duration::from_secs(1);

fn type_view(t: &TypeSnapshot) -> TypeView {
    TypeView {
        group: t.group.clone(),
        version: t.version.clone(),
        kind: t.kind.clone(),
        resource: t.resource.clone(),
        namespaced: t.namespaced,
        namespace: t.namespace.clone(),
        rule: t.rule.clone(),
        state: t.state.as_str().to_owned(),
        reason: match t.state {
            TypeState::Error(e) => Some(e.as_str().to_owned()),
            _ => None,
        },
        objects: t.objects,
        last_event: t.last_event,
    }
}

/// Karpor's name for a kind of credential.
fn credential_kind(auth_kind: &str) -> &'static str {
    match auth_kind {
        "token" | "tokenFile" => "ServiceAccountToken",
        "clientCertificate" => "X509Certificate",
        "exec" | "authProvider" => "OIDC",
        "basic" => "Basic",
        _ => "None",
    }
}

/// The `spec.access` of a kubeconfig's selected context.
pub(super) fn access(summary: &Summary) -> ClusterAccess {
    ClusterAccess {
        endpoint: summary.server.clone(),
        insecure: summary.insecure_skip_tls_verify.then_some(true),
        credential: Some(Credential {
            kind: credential_kind(&summary.auth_kind).to_owned(),
        }),
    }
}

/// The Cluster resource Karpor would make of a kubeconfig (for an upload's answer).
pub(super) fn resource_yaml(
    name: &str,
    display_name: &str,
    description: &str,
    config: &Kubeconfig,
) -> String {
    let summary = kubeconfig::summary(config);
    let resource = serde_json::json!({
        "apiVersion": CLUSTER_API_VERSION,
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {
            "provider": "",
            "access": access(&summary),
            "description": description,
            "displayName": if display_name.is_empty() { name } else { display_name },
        },
        "status": {},
    });
    serde_saphyr::to_string(&resource).unwrap_or_default()
}

/// A cluster as answered; `with_kubeconfig` adds the masked kubeconfig (admins).
pub(super) async fn view(
    state: &AppState,
    visible: &Visible,
    cluster: &Stored<Cluster>,
    with_kubeconfig: bool,
) -> ClusterView {
    let record = &cluster.record;
    let snapshot = state.sync.as_ref().and_then(|s| s.cluster(&record.name));
    // The record is the metadata store's: storage only adds a count, and a slow or dead
    // storage leaves it unknown rather than holding the answer.
    let count = tokio::time::timeout(COUNT_TIMEOUT, visible.count(Some(&record.name)));
    let objects_stored = match count.await {
        Ok(Ok(n)) => Some(n),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "cannot count a cluster's documents");
            None
        }
        Err(_) => None,
    };
    let claim = match tokio::time::timeout(COUNT_TIMEOUT, state.metastore.claims()).await {
        Ok(Ok(claims)) => claims.into_iter().find(|c| c.cluster == record.name),
        _ => None,
    };
    let parsed = karpor_kube::parse_off_runtime(record.kubeconfig.0.clone())
        .await
        .ok();
    let summary = parsed.as_ref().map(kubeconfig::summary);
    let healthy = snapshot.as_ref().and_then(|s| match s.state {
        SyncState::Synced | SyncState::Syncing => Some(true),
        SyncState::Error(_) => Some(false),
        SyncState::Pending => None,
    });
    let display_name = if record.display_name.is_empty() {
        record.name.clone()
    } else {
        record.display_name.clone()
    };
    ClusterView {
        api_version: CLUSTER_API_VERSION.to_owned(),
        kind: "Cluster".to_owned(),
        metadata: ClusterMetadata {
            name: record.name.clone(),
            creation_timestamp: Some(cluster.created_at),
            resource_version: cluster.version.to_string(),
            labels: record.labels.clone(),
        },
        spec: ClusterSpec {
            provider: String::new(),
            access: summary.as_ref().map(access).unwrap_or(ClusterAccess {
                endpoint: String::new(),
                insecure: None,
                credential: None,
            }),
            description: record.description.clone(),
            display_name,
        },
        status: ClusterStatus { healthy },
        name: record.name.clone(),
        display_name: record.display_name.clone(),
        description: record.description.clone(),
        labels: record.labels.clone(),
        kube_config: match (&parsed, with_kubeconfig) {
            (Some(config), true) => Some(kubeconfig::to_yaml(&kubeconfig::mask(config))),
            _ => None,
        },
        kubeconfig_summary: summary,
        created_at: cluster.created_at,
        updated_at: cluster.updated_at,
        version: cluster.version,
        mode: record.mode,
        sync_status: SyncView {
            state: snapshot
                .as_ref()
                .map_or("unknown", |s| s.state.as_str())
                .to_owned(),
            reason: snapshot.as_ref().and_then(|s| match &s.state {
                SyncState::Error(reason) => Some(reason.to_string()),
                _ => None,
            }),
            message: snapshot.as_ref().and_then(|s| s.refused.clone()),
            objects_synced: snapshot.as_ref().map(|s| s.objects_synced),
            last_event: snapshot.as_ref().and_then(|s| s.last_event),
            objects_stored,
            rules: snapshot.as_ref().map(|s| {
                s.rules
                    .iter()
                    .map(|r| RuleInForceView {
                        name: r.name.clone(),
                        version: r.version,
                    })
                    .collect()
            }),
            types: snapshot
                .as_ref()
                .map(|s| s.types.iter().map(type_view).collect()),
            owner: claim.as_ref().map(|c| c.member.clone()),
            epoch: claim.map(|c| c.epoch),
        },
    }
}
