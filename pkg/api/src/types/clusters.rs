//! Clusters: Karpor's `Cluster` resource with karpor's fields beside, the list or its
//! health summary, the body that registers or changes one, and a kubeconfig's upload and
//! validation.

use std::collections::BTreeMap;

use karpor_kube::{ContextInfo, Summary};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// The document's example: a kubeconfig whose server is closed.
pub(crate) const EXAMPLE_KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: example}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

/// A cluster as answered.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// `cluster.karpor.io/v1beta1`, as Karpor.
    pub api_version: String,
    /// `Cluster`.
    pub kind: String,
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
    /// `kubeconfig`: the hub syncs the cluster; `agent`: its agent does, and the hub
    /// holds no credential of it.
    #[serde(default)]
    pub mode: karpor_core::model::ClusterMode,
    pub sync_status: SyncView,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterMetadata {
    pub name: String,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub creation_timestamp: Option<OffsetDateTime>,
    /// The record's version, as Kubernetes spells versions.
    pub resource_version: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Always empty: karpor does not know providers.
    pub provider: String,
    pub access: ClusterAccess,
    pub description: String,
    pub display_name: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAccess {
    /// The API server's URL, without user-info.
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// What kind of credential reaches it (its content is never answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<Credential>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Credential {
    /// `ServiceAccountToken`, `X509Certificate` or `OIDC` (an exec plugin), as Karpor
    /// names them; `Basic` or `None` otherwise.
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Whether the cluster answers its syncer; absent while not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// A cluster's sync status.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncView {
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

/// A sync rule a cluster's watchers follow.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RuleInForceView {
    pub name: String,
    pub version: Option<i64>,
}

/// One watched type of a cluster.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypeView {
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
    pub state: String,
    /// Why it cannot be listed (`error`): `forbidden`, `gone`, `invalid`, `unauthorized`
    /// or `unreachable`. An error of one type leaves the others syncing.
    pub reason: Option<String>,
    /// Its documents in storage, as last counted.
    pub objects: Option<u64>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_event: Option<OffsetDateTime>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClusterList {
    pub items: Vec<ClusterView>,
    pub total: usize,
}

/// Karpor's `?summary=true` answer: which clusters are healthy.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    pub total_count: usize,
    pub healthy_count: usize,
    pub healthy_clusters: Vec<String>,
    pub unhealthy_count: usize,
    pub unhealthy_clusters: Vec<String>,
}

/// The list, or with `summary=true` the health summary.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ClusterListAnswer {
    List(ClusterList),
    Summary(ClusterSummary),
}

/// A cluster's body; `kubeConfig` is required to create.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterBody {
    /// The path's name, which Karpor's page sends again; another name is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// A kubeconfig's text; only the chosen context is kept.
    #[schema(example = json!(EXAMPLE_KUBECONFIG))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<String>,
    /// The context to keep (default: the kubeconfig's current context).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// `agent`: the cluster is synced by an agent inside it (no kubeConfig then);
    /// `kubeconfig` (the default) by the hub. Fixed once the cluster is registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<karpor_core::model::ClusterMode>,
}

/// An uploaded kubeconfig: Karpor's fields (`fileName`, `fileSize`, `content`,
/// `sanitizedClusterContent`) and karpor's (`currentContext`, `contexts`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadView {
    pub file_name: String,
    pub file_size: usize,
    /// The uploaded text as sent: the uploader's own file, for the register form (Karpor's
    /// flow sends it back to validate and create). Never a stored credential.
    pub content: String,
    /// The Cluster resource Karpor would make of it, credentials left out, as YAML.
    pub sanitized_cluster_content: String,
    pub current_context: Option<String>,
    pub contexts: Vec<ContextInfo>,
}

/// A kubeconfig to check (or the kubeconfig itself as a `text/plain` body).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidateBody {
    #[schema(example = json!(EXAMPLE_KUBECONFIG))]
    pub kube_config: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// What the API server said.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidateView {
    pub summary: Summary,
    pub git_version: String,
    pub platform: String,
}

/// `POST /cluster/{name}/agent-token`: how long the join token lives (default 1 hour,
/// at most 24).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentTokenBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
}

/// A join token for a cluster's agent, shown once: the hub keeps only its digest.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentTokenView {
    pub cluster: String,
    /// `karpor-join.CLUSTER.SECRET`: single use.
    pub token: String,
    /// The hub authority's pin the agent checks the hub by.
    pub pin: String,
    /// The hub's agent listener.
    pub hub: String,
    /// RFC 3339.
    pub expires_at: String,
    /// The agent's command line, its token from the environment.
    pub install: String,
}

/// `DELETE /cluster/{name}/agent`: every certificate of the cluster's agent refused from
/// now on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentRevokedView {
    pub cluster: String,
    /// The generation a new join gets.
    pub generation: u64,
}

/// `POST /cluster/{name}/agent/approve`: the key of the join to approve, as the agent
/// logged it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentApproveBody {
    /// `sha256:HEX`.
    pub key: String,
}

/// `GET /cluster/{name}/agent`: where the cluster's agent stands on this hub.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatusView {
    pub cluster: String,
    /// The generation its certificates carry.
    pub generation: u64,
    /// RFC 3339; absent when no agent has joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined_at: Option<String>,
    /// RFC 3339 expiry of a join token not used yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_expires_at: Option<String>,
    /// A join waiting for approval (`agents.approve_joins`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingJoinView>,
    /// Whether it holds a session with this hub replica now, or (`agents.peer_url`)
    /// with another one.
    pub connected: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingJoinView {
    /// The key the join came with: `sha256:HEX`, as the agent logs it.
    pub key: String,
    /// RFC 3339.
    pub requested_at: String,
    pub approved: bool,
}
