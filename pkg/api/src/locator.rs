//! What the insight routes are about, as Karpor's clients say it: `cluster`,
//! `apiVersion`, `kind`, `namespace`, `name`, `labels` and `annotations` (`k=v,k2=v2`),
//! sorted into Karpor's kinds of scope, and turned into a search over stored documents.

use std::collections::BTreeMap;

use karpor_core::names::{self, ApiVersion, ClusterName, KindName, Namespace, ObjectName};
use karpor_search::{Expr, Field, Op, Query, Value};
use serde::Deserialize;
use utoipa::IntoParams;

/// Karpor's locator. Unknown parameters are ignored and empty ones are absent, as
/// Karpor does; names are parsed by Kubernetes' rules (a 400 names the field).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct Locator {
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub cluster: Option<ClusterName>,
    /// `apps/v1`, or `v1` for the core group.
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub api_version: Option<ApiVersion>,
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub kind: Option<KindName>,
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub namespace: Option<Namespace>,
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub name: Option<ObjectName>,
    /// `key=value` pairs, comma-separated.
    pub labels: Option<String>,
    /// `key=value` pairs, comma-separated.
    pub annotations: Option<String>,
}

/// Karpor's kinds of scope, decided in Karpor's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// No cluster, labels or annotations, or an odd mix of fields.
    Custom,
    /// apiVersion, kind, namespace and name.
    Resource,
    /// apiVersion, kind and name of a cluster-scoped object.
    NonNamespacedResource,
    /// apiVersion, kind and namespace.
    ClusterGvkNamespace,
    /// apiVersion and kind.
    Gvk,
    /// Only a namespace.
    Namespace,
    /// Only the cluster.
    Cluster,
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// `k=v,k2=v2` as a map: pairs split at their first `=`, trimmed; others dropped.
fn pairs(text: &Option<String>) -> BTreeMap<String, String> {
    given(text)
        .map(|text| {
            text.split(',')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .filter(|(k, _)| !k.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

impl Locator {
    pub(crate) fn cluster(&self) -> Option<&str> {
        self.cluster.as_ref().map(ClusterName::as_str)
    }

    pub(crate) fn api_version(&self) -> Option<&str> {
        self.api_version.as_ref().map(ApiVersion::as_str)
    }

    pub(crate) fn kind(&self) -> Option<&str> {
        self.kind.as_ref().map(KindName::as_str)
    }

    pub(crate) fn namespace(&self) -> Option<&str> {
        self.namespace.as_ref().map(Namespace::as_str)
    }

    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_ref().map(ObjectName::as_str)
    }

    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
        pairs(&self.labels)
    }

    pub(crate) fn annotations(&self) -> BTreeMap<String, String> {
        pairs(&self.annotations)
    }

    pub(crate) fn scope(&self) -> Scope {
        if self.cluster().is_none() || !self.labels().is_empty() || !self.annotations().is_empty() {
            return Scope::Custom;
        }
        match (
            self.api_version().is_some(),
            self.kind().is_some(),
            self.namespace().is_some(),
            self.name().is_some(),
        ) {
            (true, true, true, true) => Scope::Resource,
            (true, true, false, true) => Scope::NonNamespacedResource,
            (true, true, true, false) => Scope::ClusterGvkNamespace,
            (true, true, false, false) => Scope::Gvk,
            (false, false, true, false) => Scope::Namespace,
            (false, false, false, false) => Scope::Cluster,
            _ => Scope::Custom,
        }
    }

    /// For a namespace's locator (cluster and namespace), the locator of the Namespace
    /// object itself, which is what Karpor's detail answers for it.
    pub(crate) fn namespace_object(&self) -> Option<Locator> {
        if self.scope() != Scope::Namespace {
            return None;
        }
        Some(Locator {
            cluster: self.cluster.clone(),
            api_version: "v1".parse().ok(),
            kind: "Namespace".parse().ok(),
            namespace: None,
            name: self.namespace()?.parse().ok(),
            labels: None,
            annotations: None,
        })
    }

    /// The stored documents the locator covers; deleted ones only with `deleted`.
    pub(crate) fn query(&self, deleted: bool) -> Query {
        let eq = |field, value: &str| Expr::Compare {
            field,
            op: Op::Eq,
            value: Value::Text(value.to_owned()),
        };
        let mut all = Vec::new();
        if !deleted {
            all.push(Expr::Compare {
                field: Field::Deleted,
                op: Op::Eq,
                value: Value::Bool(false),
            });
        }
        for (field, value) in [
            (Field::Cluster, self.cluster()),
            (Field::ApiVersion, self.api_version()),
            (Field::Kind, self.kind()),
            (Field::Namespace, self.namespace()),
            (Field::Name, self.name()),
        ] {
            if let Some(v) = value {
                all.push(eq(field, v));
            }
        }
        for (k, v) in self.labels() {
            all.push(eq(Field::Label(k), &v));
        }
        for (k, v) in self.annotations() {
            all.push(eq(Field::Annotation(k), &v));
        }
        Query {
            filter: if all.is_empty() {
                Expr::All
            } else {
                Expr::And(all)
            },
            order_by: Vec::new(),
            limit: None,
            offset: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(query: &str) -> Locator {
        serde_urlencoded::from_str(query).unwrap()
    }

    #[test]
    fn a_namespace_is_answered_by_its_namespace_object() {
        let object = at("cluster=a&namespace=web").namespace_object().unwrap();
        assert_eq!(object.scope(), Scope::NonNamespacedResource);
        assert_eq!(
            (object.api_version(), object.kind(), object.name()),
            (Some("v1"), Some("Namespace"), Some("web"))
        );
        assert!(at("cluster=a").namespace_object().is_none());
        assert!(at("cluster=a&namespace=web&kind=Pod&apiVersion=v1")
            .namespace_object()
            .is_none());
    }

    #[test]
    fn scopes_are_decided_as_karpor_does() {
        for (query, scope) in [
            ("cluster=a", Scope::Cluster),
            ("cluster=a&namespace=ns", Scope::Namespace),
            ("cluster=a&apiVersion=v1&kind=Pod", Scope::Gvk),
            (
                "cluster=a&apiVersion=v1&kind=Pod&namespace=ns",
                Scope::ClusterGvkNamespace,
            ),
            (
                "cluster=a&apiVersion=v1&kind=Pod&namespace=ns&name=p",
                Scope::Resource,
            ),
            (
                "cluster=a&apiVersion=v1&kind=Node&name=n",
                Scope::NonNamespacedResource,
            ),
            ("cluster=a&kind=Pod", Scope::Custom),
            ("namespace=ns", Scope::Custom),
            ("cluster=a&labels=app%3Dweb", Scope::Custom),
            ("cluster=a&namespace=&name=", Scope::Cluster),
            ("cluster=a&unknown=1", Scope::Cluster),
        ] {
            assert_eq!(at(query).scope(), scope, "{query}");
        }
        for bad in [
            "cluster=a&namespace=a%2Fb",
            "cluster=a&namespace=x%3Fy",
            "cluster=a&apiVersion=v1&kind=Node&name=a%2F..%2Fproxy",
            "cluster=A",
            "cluster=a&kind=Pod%2Fx",
            "cluster=a&apiVersion=v1%2Fx%2Fy",
        ] {
            assert!(serde_urlencoded::from_str::<Locator>(bad).is_err(), "{bad}");
        }
        assert_eq!(
            at("labels=app%3Dweb,%20tier%20%3D%20db,broken").labels(),
            BTreeMap::from([("app".into(), "web".into()), ("tier".into(), "db".into())])
        );
    }
}
