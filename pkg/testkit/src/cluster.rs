//! A member cluster as tests drive it: a kube-rs client on one of the test script's
//! kube-apiservers (or a private one), objects created, patched and deleted, what is live
//! listed for comparison with storage.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;

use crate::process::wait_for;
use crate::service;

/// How long a cluster may take to answer or to serve a new type.
pub const LIMIT: Duration = Duration::from_secs(60);

/// An object as compared between a cluster and storage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Obj {
    pub kind: String,
    pub name: String,
    pub version: String,
}

pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn configmaps() -> ApiResource {
    resource("", "v1", "ConfigMap", "configmaps")
}
pub fn secrets() -> ApiResource {
    resource("", "v1", "Secret", "secrets")
}
pub fn namespaces() -> ApiResource {
    resource("", "v1", "Namespace", "namespaces")
}
pub fn widgets() -> ApiResource {
    resource("karpor.test", "v1", "Widget", "widgets")
}

/// A cluster as the tests drive it.
#[derive(Clone)]
pub struct Kube {
    pub client: Client,
    /// Self-contained, as karpor stores it.
    pub kubeconfig: String,
}

impl Kube {
    pub async fn from_text(kubeconfig: String) -> Kube {
        let parsed = Kubeconfig::from_yaml(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
            .await
            .unwrap();
        let kube = Kube {
            client: Client::try_from(config).unwrap(),
            kubeconfig,
        };
        let started = std::time::Instant::now();
        while let Err(e) = kube.client.apiserver_version().await {
            assert!(
                started.elapsed() < LIMIT,
                "the API server does not answer: {e}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        kube
    }

    pub async fn shared(var: &str) -> Kube {
        let path = service(var).expect("test services: run scripts/services.sh start");
        Kube::from_text(crate::process::flat_kubeconfig(&path)).await
    }

    pub fn api(&self, r: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, r),
            None => Api::all_with(self.client.clone(), r),
        }
    }

    pub async fn create(
        &self,
        r: &ApiResource,
        namespace: Option<&str>,
        object: serde_json::Value,
    ) {
        let mut object = object;
        object["apiVersion"] = r.api_version.clone().into();
        object["kind"] = r.kind.clone().into();
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        // A fresh CRD can make the server drop a connection once: retry transport errors.
        let mut attempts = 0;
        loop {
            match self
                .api(r, namespace)
                .create(&PostParams::default(), &object)
                .await
            {
                Ok(_) => return,
                Err(kube::Error::Service(e)) if attempts < 5 => {
                    attempts += 1;
                    eprintln!("create {}: {e}; retrying", r.kind);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("create {}: {e}", r.kind),
            }
        }
    }

    pub async fn patch(
        &self,
        r: &ApiResource,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) {
        self.api(r, Some(namespace))
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("patch {}: {e}", r.kind));
    }

    pub async fn delete(&self, r: &ApiResource, namespace: Option<&str>, name: &str) {
        self.api(r, namespace)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete {}: {e}", r.kind));
    }

    /// A namespace, gone for good: without a controller manager nobody else finalizes it.
    pub async fn delete_namespace(&self, name: &str) {
        self.delete(&namespaces(), None, name).await;
        let api = self.api(&namespaces(), None);
        let finalize = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name}, "spec": {"finalizers": []}});
        api.replace_subresource("finalize", name, &PostParams::default(), &finalize)
            .await
            .unwrap();
    }

    /// The live objects the test's rule selects: in `namespace`, and the namespace.
    pub async fn live(&self, namespace: &str, types: &[ApiResource]) -> BTreeMap<String, Obj> {
        let mut all = BTreeMap::new();
        let named = ListParams::default().fields(&format!("metadata.name={namespace}"));
        let found = self.api(&namespaces(), None).list(&named).await.unwrap();
        for t in types {
            let list = if t.kind == "Namespace" {
                found.clone()
            } else {
                self.api(t, Some(namespace))
                    .list(&ListParams::default())
                    .await
                    .unwrap()
            };
            for o in list.items {
                all.insert(
                    o.metadata.uid.clone().unwrap(),
                    Obj {
                        kind: t.kind.clone(),
                        name: o.metadata.name.clone().unwrap(),
                        version: o.metadata.resource_version.clone().unwrap(),
                    },
                );
            }
        }
        all
    }

    /// The widgets CRD, once per cluster (its name is fixed; tests share it).
    pub async fn widget_crd(&self) {
        let crds = resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        );
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.karpor.test"},
            "spec": {
                "group": "karpor.test", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        });
        let crd: DynamicObject = serde_json::from_value(crd).unwrap();
        match self
            .api(&crds, None)
            .create(&PostParams::default(), &crd)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create the CRD: {e}"),
        }
        let api = self.api(&widgets(), Some("default"));
        wait_for(LIMIT, "the widgets CRD is served", || {
            let api = api.clone();
            async move { api.list(&ListParams::default()).await.is_ok() }
        })
        .await;
    }
}

impl Kube {
    /// A `Database` CRD in a group of its own (`TAG-...karpor.test`), served once this
    /// returns: its resource and the CRD's name.
    pub async fn database_crd(&self, tag: &str) -> (ApiResource, String) {
        let group = format!("{}.karpor.test", kube_name(tag));
        let crds = resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        );
        let name = format!("databases.{group}");
        self.create(
            &crds,
            None,
            json!({
                "metadata": {"name": name},
                "spec": {
                    "group": group, "scope": "Namespaced",
                    "names": {"plural": "databases", "singular": "database", "kind": "Database"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object",
                            "x-kubernetes-preserve-unknown-fields": true}}}]
                }
            }),
        )
        .await;
        let databases = resource(&group, "v1", "Database", "databases");
        let api = self.api(&databases, Some("default"));
        wait_for(LIMIT, "the Database CRD is served", || {
            let api = api.clone();
            async move { api.list(&ListParams::default()).await.is_ok() }
        })
        .await;
        (databases, name)
    }
}

/// A name no other test or run uses, valid as a Kubernetes name.
pub fn kube_name(tag: &str) -> String {
    crate::unique(tag).replace('_', "-")
}
