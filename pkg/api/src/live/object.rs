//! One object read from its member cluster now. Every part of the URL comes from a
//! validated type or from the cluster's own discovery: the group and version pick the
//! discovery document, the kind is looked up in it (its plural is the server's), the
//! namespace is a DNS-1123 label and the name one percent-encoded segment, so no value a
//! caller sends can add a path segment, a query or a subresource.

use karpor_core::names::{ApiVersion, KindName, Namespace, ObjectName};
use kube::api::{Api, DynamicObject, GroupVersionKind};
use kube::discovery::Scope as ResourceScope;
use kube::Client;
use serde_json::Value;

/// What a live read names.
#[derive(Debug, Clone)]
pub(crate) struct ObjectRef {
    pub api_version: ApiVersion,
    pub kind: KindName,
    pub namespace: Option<Namespace>,
    pub name: ObjectName,
}

/// Why no object was read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The cluster serves no such kind.
    NoKind,
    /// The kind is namespaced and no namespace was given, or the other way round.
    Scope(&'static str),
    /// The cluster did not answer.
    Cluster(kube::Error),
}

/// The object as its cluster answers it, or `None` when it has none of that name; not yet
/// redacted (the caller passes it through [`crate::redact::object`]).
pub(crate) async fn read(client: Client, at: &ObjectRef) -> Result<Option<Value>, ReadError> {
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

#[cfg(test)]
mod tests;
