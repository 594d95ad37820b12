//! The two member clusters: private kube-apiservers the suite kills and pauses, with
//! objects created, updated and deleted in one namespace of each, and what is live there.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::json;
use tokio::sync::RwLock;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Where the churn happens, in each cluster.
pub(crate) const NAMESPACE: &str = "churn";
/// Live ConfigMaps the churn keeps around (it creates below, deletes above).
const TARGET: usize = 30;
const STEP: Duration = Duration::from_millis(100);

/// uid to resourceVersion.
pub(crate) type Objects = BTreeMap<String, String>;

/// A member cluster as the suite drives it.
#[derive(Clone)]
pub(crate) struct Member {
    pub name: &'static str,
    pub kubeconfig: String,
    client: Client,
    /// Each churn step holds it for reading; a comparison takes it for writing, so the
    /// cluster holds still while storage is compared with it.
    still: Arc<RwLock<()>>,
    /// Churn steps the API server refused or never answered (it may be down on purpose).
    pub refused: Arc<AtomicUsize>,
}

fn configmaps() -> ApiResource {
    ApiResource::erase::<ConfigMap>(&())
}

fn namespaces() -> ApiResource {
    ApiResource::erase::<Namespace>(&())
}

impl Member {
    pub(crate) async fn connect(name: &'static str, kubeconfig: String) -> Member {
        let parsed = Kubeconfig::from_yaml(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
            .await
            .unwrap();
        let member = Member {
            name,
            kubeconfig,
            client: Client::try_from(config).unwrap(),
            still: Arc::default(),
            refused: Arc::default(),
        };
        member.wait_answering().await;
        let namespace: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}
        }))
        .unwrap();
        match Api::<DynamicObject>::all_with(member.client.clone(), &namespaces())
            .create(&PostParams::default(), &namespace)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("{name}: create namespace {NAMESPACE}: {e}"),
        }
        member
    }

    /// Until the API server answers (after a start or restart).
    pub(crate) async fn wait_answering(&self) {
        let started = Instant::now();
        while let Err(e) = self.client.apiserver_version().await {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{}: the API server does not answer: {e}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NAMESPACE, &configmaps())
    }

    /// The live ConfigMaps of the churn namespace.
    pub(crate) async fn live(&self) -> Result<Objects, kube::Error> {
        let list = self.api().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|o| {
                (
                    o.metadata.uid.unwrap_or_default(),
                    o.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect())
    }

    /// Holds the churn until the guard is dropped.
    pub(crate) async fn hold_still(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.still.clone().write_owned().await
    }

    /// Creates one ConfigMap now (outside the churn), returning its uid.
    pub(crate) async fn create(&self, name: &str) -> Result<String, kube::Error> {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"v": "0"}
        }))
        .unwrap();
        let created = self.api().create(&PostParams::default(), &object).await?;
        Ok(created.metadata.uid.unwrap_or_default())
    }

    /// Creates, updates and deletes ConfigMaps every 100 ms until `stop`.
    pub(crate) fn churn(&self, tag: &str, stop: CancellationToken) -> JoinHandle<()> {
        let member = self.clone();
        let tag = tag.to_owned();
        tokio::spawn(async move {
            let api = member.api();
            let mut names: Vec<String> = Vec::new();
            for step in 0usize.. {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(STEP) => {}
                }
                let _still = member.still.read().await;
                let result =
                    if names.len() < TARGET / 2 || (step % 3 == 0 && names.len() < 2 * TARGET) {
                        let name = format!("{tag}-{step}");
                        let made = member.create(&name).await.map(|_| ());
                        if made.is_ok() {
                            names.push(name);
                        }
                        made
                    } else if step % 3 == 1 {
                        let name = &names[step % names.len()];
                        let patch = json!({"data": {"v": step.to_string()}});
                        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                            .await
                            .map(|_| ())
                    } else {
                        let name = names.remove(step % names.len());
                        api.delete(&name, &DeleteParams::default())
                            .await
                            .map(|_| ())
                    };
                if result.is_err() {
                    member.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    }
}
