//! The live reads karpor makes in a member cluster, typed, for the hub (with a
//! kubeconfig's client) and for an agent (with its own read-only one) alike: one object,
//! the events about something, a pod's log. Every part of a URL comes from a validated
//! name or from the cluster's own discovery: the group and version pick the discovery
//! document, the kind is looked up in it (its plural is the server's, and a subresource
//! is never one), the namespace is a DNS-1123 label and the name one percent-encoded
//! segment, so no value a caller sends can add a path segment, a query or a subresource.
//! There is no read here that writes, executes, attaches, forwards or proxies.

use futures::io::AsyncBufRead;
use k8s_openapi::api::core::v1::{Event, Pod};
use karpor_core::names::{ApiVersion, ContainerName, KindName, Namespace, ObjectName};
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams, LogParams};
use kube::discovery::Scope as ResourceScope;
use kube::Client;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One object: what a live detail names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRef {
    pub api_version: ApiVersion,
    pub kind: KindName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Namespace>,
    pub name: ObjectName,
}

/// Why no object was read.
#[derive(Debug)]
pub enum ReadError {
    /// The cluster serves no such kind.
    NoKind,
    /// The kind is namespaced and no namespace was given, or the other way round.
    Scope(&'static str),
    /// The cluster did not answer.
    Cluster(kube::Error),
}

/// The object as its cluster answers it, or `None` when it has none of that name; not yet
/// redacted (pass it through [`crate::redact::object`]).
pub async fn object(client: Client, at: &ObjectRef) -> Result<Option<Value>, ReadError> {
    let gvk = GroupVersionKind::gvk(
        at.api_version.group(),
        at.api_version.version(),
        at.kind.as_str(),
    );
    let (resource, capabilities) =
        kube::discovery::pinned_kind(&client, &gvk)
            .await
            .map_err(|e| match e {
                kube::Error::Discovery(_) => ReadError::NoKind,
                other => ReadError::Cluster(other),
            })?;
    // A kind whose resource is a subresource (`nodes/proxy`, `pods/exec`) is no object.
    if resource.plural.contains('/') {
        return Err(ReadError::NoKind);
    }
    let api: Api<DynamicObject> = match (&capabilities.scope, &at.namespace) {
        (ResourceScope::Namespaced, Some(namespace)) => {
            Api::namespaced_with(client, namespace.as_str(), &resource)
        }
        (ResourceScope::Cluster, None) => Api::all_with(client, &resource),
        (ResourceScope::Namespaced, None) => {
            return Err(ReadError::Scope("the kind is namespaced: give namespace"))
        }
        (ResourceScope::Cluster, Some(_)) => {
            return Err(ReadError::Scope(
                "the kind is cluster-scoped: give no namespace",
            ))
        }
    };
    // kube-rs puts the name into the path as it is given: the encoded segment is what
    // the API server decodes back to exactly this name.
    let object = api
        .get_opt(&at.name.url_segment())
        .await
        .map_err(ReadError::Cluster)?;
    let Some(object) = object else {
        return Ok(None);
    };
    let mut value = serde_json::to_value(object).unwrap_or_default();
    // The answer's own type, or the discovered one: never the caller's words.
    if value.get("kind").is_none() {
        value["apiVersion"] = Value::String(resource.api_version.clone());
        value["kind"] = Value::String(resource.kind.clone());
    }
    Ok(Some(value))
}

/// Which events: those in a namespace (all when `None`), about a kind, about one object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Namespace>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<KindName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<ObjectName>,
}

/// The events `at` selects, as the cluster lists them (selected by field, in its order).
pub async fn events(client: Client, at: &EventsRef) -> Result<Vec<Event>, kube::Error> {
    let mut selectors = Vec::new();
    if let Some(name) = &at.name {
        selectors.push(format!("involvedObject.name={name}"));
    }
    if let Some(kind) = &at.kind {
        selectors.push(format!("involvedObject.kind={kind}"));
    }
    let api: Api<Event> = match &at.namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let params = ListParams::default().fields(&selectors.join(","));
    Ok(api.list(&params).await?.items)
}

/// A pod's log: which pod, and the cluster's log parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogRef {
    pub namespace: Namespace,
    pub pod: ObjectName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerName>,
    #[serde(default)]
    pub follow: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_lines: Option<i64>,
    #[serde(default)]
    pub timestamps: bool,
}

impl LogRef {
    /// `pod`'s log in `namespace` with `params`' container and bounds.
    pub fn new(namespace: Namespace, pod: ObjectName, params: &LogParams) -> Result<Self, String> {
        let container = params
            .container
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: karpor_core::names::InvalidName| e.to_string())?;
        Ok(LogRef {
            namespace,
            pod,
            container,
            follow: params.follow,
            limit_bytes: params.limit_bytes,
            since_seconds: params.since_seconds,
            tail_lines: params.tail_lines,
            timestamps: params.timestamps,
        })
    }

    pub fn params(&self) -> LogParams {
        LogParams {
            container: self.container.clone().map(String::from),
            follow: self.follow,
            limit_bytes: self.limit_bytes,
            since_seconds: self.since_seconds,
            tail_lines: self.tail_lines,
            timestamps: self.timestamps,
            ..LogParams::default()
        }
    }
}

/// The log as the cluster streams it, once it has started answering.
pub async fn log(
    client: Client,
    at: &LogRef,
) -> Result<impl AsyncBufRead + Send + 'static, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client, &at.namespace);
    pods.log_stream(&at.pod, &at.params()).await
}
