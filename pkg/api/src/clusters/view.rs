//! A cluster as the API answers it: Karpor's `Cluster` resource (`apiVersion`, `kind`,
//! `metadata`, `spec`, `status`), so Karpor's clients read what they expect, with
//! karpor's own fields beside it (never instead): the flat names, the masked kubeconfig
//! (admins only), its summary, times, version and the sync status (with its rules and
//! each watched type's state).

use std::collections::BTreeMap;
use std::time::Duration;

use karpor_core::model::Cluster;
use karpor_kube::{kubeconfig, Summary};
use karpor_metastore::Stored;
use karpor_syncer::{SyncState, TypeSnapshot, TypeState};
use kube::config::Kubeconfig;
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::AppState;

/// Karpor's Cluster resource group and version.
pub(super) const CLUSTER_API_VERSION: &str = "cluster.karpor.io/v1beta1";

/// How long a cluster's document count may take before it is answered unknown.
const COUNT_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterView {
    /// `cluster.karpor.io/v1beta1`, as Karpor.
    pub api_version: &'static str,
    /// `Cluster`.
    pub kind: &'static str,
    pub metadata: ClusterMetadata,
    pub spec: ClusterSpec,
    pub status: ClusterStatus,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub labels: BTreeMap<String, String>,
    /// The stored kubeconfig with every credential replaced by `******`: for admins
    /// only.
    pub kube_config: Option<String>,
    pub kubeconfig_summary: Option<Summary>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
    /// The record's version in the metadata store (compare-and-swap).
    pub version: i64,
    pub sync_status: SyncView,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterMetadata {
    pub name: String,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub creation_timestamp: Option<OffsetDateTime>,
    /// The record's version, as Kubernetes spells versions.
    pub resource_version: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterSpec {
    /// Always empty: karpor does not know providers.
    pub provider: String,
    pub access: ClusterAccess,
    pub description: String,
    pub display_name: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterAccess {
    /// The API server's URL, without user-info.
    pub endpoint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// What kind of credential reaches it (its content is never answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<Credential>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Credential {
    /// `ServiceAccountToken`, `X509Certificate` or `OIDC` (an exec plugin), as Karpor
    /// names them; `Basic` or `None` otherwise.
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterStatus {
    /// Whether the cluster answers its syncer; absent while not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// A cluster's sync status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SyncView {
    /// `pending`, `syncing`, `synced`, `error`, or `unknown` (the syncer runs in another
    /// process, or has not picked the cluster up yet).
    pub state: String,
    /// The reason code of `error`.
    pub reason: Option<String>,
    /// Why, in words, when the cluster's rules are refused (naming the `syncer.limits`
    /// key they go over).
    pub message: Option<String>,
    /// Documents written since the syncer started the cluster.
    pub objects_synced: Option<u64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_event: Option<OffsetDateTime>,
    /// Documents in storage for the cluster now (null when storage cannot say within a
    /// second).
    pub objects_stored: Option<u64>,
    /// The sync rules its watchers follow (`version` null for a built-in rule); null
    /// when unknown.
    pub rules: Option<Vec<RuleInForceView>>,
    /// Each watched type (per namespace when its rule lists namespaces); null when
    /// unknown.
    pub types: Option<Vec<TypeView>>,
    /// The syncer member holding the cluster's claim (it alone syncs it); null while
    /// none does, or the metadata store cannot say within a second.
    pub owner: Option<String>,
    /// The owner's epoch: the store revision of its claim, larger for each later owner.
    pub epoch: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RuleInForceView {
    pub name: String,
    pub version: Option<i64>,
}

/// One watched type of a cluster.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TypeView {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
    /// The namespace its watcher is limited to, when its rule lists namespaces.
    pub namespace: Option<String>,
    /// The sync rule that watches it.
    pub rule: String,
    /// `syncing`, `synced` or `error`.
    pub state: &'static str,
    /// Why it cannot be listed (`error`): `forbidden`, `gone`, `invalid`, `unauthorized`
    /// or `unreachable`. An error of one type leaves the others syncing.
    pub reason: Option<&'static str>,
    /// Its documents in storage, as last counted.
    pub objects: Option<u64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_event: Option<OffsetDateTime>,
}

fn type_view(t: &TypeSnapshot) -> TypeView {
    TypeView {
        group: t.group.clone(),
        version: t.version.clone(),
        kind: t.kind.clone(),
        resource: t.resource.clone(),
        namespaced: t.namespaced,
        namespace: t.namespace.clone(),
        rule: t.rule.clone(),
        state: t.state.as_str(),
        reason: match t.state {
            TypeState::Error(e) => Some(e.as_str()),
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
    cluster: &Stored<Cluster>,
    with_kubeconfig: bool,
) -> ClusterView {
    let record = &cluster.record;
    let snapshot = state.sync.as_ref().and_then(|s| s.cluster(&record.name));
    // The record is the metadata store's: storage only adds a count, and a slow or dead
    // storage leaves it unknown rather than holding the answer.
    let count = tokio::time::timeout(COUNT_TIMEOUT, state.storage.count(Some(&record.name)));
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
        api_version: CLUSTER_API_VERSION,
        kind: "Cluster",
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
