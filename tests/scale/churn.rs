//! ConfigMaps created, updated and deleted every 100 ms in one namespace of each
//! apiserver, and what is live there.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use karpor_testkit::cluster::{configmaps, namespaces, Kube};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::json;
use tokio::sync::RwLock;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const STEP: Duration = Duration::from_millis(100);
/// Live ConfigMaps the churn keeps around in each namespace (about).
const TARGET: usize = 20;

/// uid → resourceVersion.
pub(crate) type Objects = BTreeMap<String, String>;

pub(crate) struct Churn {
    namespace: String,
    kubes: Vec<Kube>,
    /// Each step holds it for reading; a comparison takes it for writing, so the clusters
    /// hold still while storage is compared with them.
    still: Arc<RwLock<()>>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Churn {
    pub(crate) async fn start(kubes: &[&Kube], namespace: &str) -> Churn {
        let still = Arc::new(RwLock::new(()));
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        for (i, kube) in kubes.iter().enumerate() {
            let namespace_object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
            }))
            .unwrap();
            kube.api(&namespaces(), None)
                .create(&PostParams::default(), &namespace_object)
                .await
                .unwrap_or_else(|e| panic!("create namespace {namespace}: {e}"));
            tasks.push(tokio::spawn(churn(
                (*kube).clone(),
                namespace.to_owned(),
                format!("cm{i}"),
                still.clone(),
                stop.clone(),
            )));
        }
        Churn {
            namespace: namespace.to_owned(),
            kubes: kubes.iter().map(|k| (*k).clone()).collect(),
            still,
            stop,
            tasks,
        }
    }

    /// Holds the churn until the guard is dropped.
    pub(crate) async fn hold_still(&self) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        self.still.write().await
    }

    /// The live ConfigMaps of apiserver `i`.
    pub(crate) async fn live(&self, i: usize) -> Objects {
        let list = self.kubes[i]
            .api(&configmaps(), Some(&self.namespace))
            .list(&ListParams::default())
            .await
            .unwrap();
        list.items
            .into_iter()
            .map(|o| {
                (
                    o.metadata.uid.unwrap_or_default(),
                    o.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect()
    }

    pub(crate) async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
    }
}

async fn churn(
    kube: Kube,
    namespace: String,
    tag: String,
    still: Arc<RwLock<()>>,
    stop: CancellationToken,
) {
    let api = kube.api(&configmaps(), Some(&namespace));
    let mut names: Vec<String> = Vec::new();
    for step in 0usize.. {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(STEP) => {}
        }
        let _still = still.read().await;
        if names.len() < TARGET / 2 || (step % 3 == 0 && names.len() < 2 * TARGET) {
            let name = format!("{tag}-{step}");
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name}, "data": {"v": "0"}
            }))
            .unwrap();
            if api.create(&PostParams::default(), &object).await.is_ok() {
                names.push(name);
            }
        } else if step % 3 == 1 {
            let name = &names[step % names.len()];
            let patch = json!({"data": {"v": step.to_string()}});
            let _ = api
                .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await;
        } else {
            let name = names.remove(step % names.len());
            let _ = api.delete(&name, &DeleteParams::default()).await;
        }
    }
}
