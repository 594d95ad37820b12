//! An agent restarted after a clean stop sends again only the lists that changed while it
//! was away: each watched type's first list is compared with the digest of what the hub
//! holds of it (`POST /agent/v1/versions`), and a type that agrees is not sent at all.
//! The other way round, a hub whose storage comes back after an outage (and may have lost
//! what it acknowledged) has its agents send everything again.

use std::collections::BTreeMap;
use std::time::Duration;

use karpor_storage::{ResourceDocument, Storage, StorageConfig};
use karpor_testkit::cluster::{configmaps, kube_name as unique, namespaces, secrets, Kube, LIMIT};
use karpor_testkit::process::wait_for;
use serde_json::json;

use karpor_storage::ElasticConfig;
use karpor_testkit::process::get;
use karpor_testkit::services::Elastic;

use crate::agent::{linked, linked_with, spawn_agent};

/// The documents of `kind` in the cluster's namespace, by name.
async fn by_name(
    storage: &dyn Storage,
    cluster: &str,
    namespace: &str,
    kind: &str,
) -> BTreeMap<String, ResourceDocument> {
    let query = karpor_search::parse(&format!(
        "select * from resources where cluster = '{cluster}' and namespace = '{namespace}' and kind = '{kind}'"
    ))
    .unwrap();
    let found = storage.search(&query, 0, 50).await.unwrap().items;
    found.into_iter().map(|d| (d.name.clone(), d)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_sends_again_only_the_types_that_changed_while_it_was_away() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("resume");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    for name in ["kept", "changed", "removed"] {
        kube.create(
            &configmaps(),
            Some(&ns),
            json!({"metadata": {"name": name}, "data": {"v": "1"}}),
        )
        .await;
    }
    kube.create(
        &secrets(),
        Some(&ns),
        json!({"metadata": {"name": "untouched"}, "data": {"k": "dmFsdWU="}}),
    )
    .await;
    // Two targets of the test's namespace alone: other tests change the rest of the
    // shared cluster all the time.
    let rule = json!({"clusters": "*", "namespaces": [ns], "resources": [
        {"version": "v1", "resource": "configmaps"}, {"version": "v1", "resource": "secrets"}]});
    let mut linked = linked("resume", "", &kube.kubeconfig, Some(rule)).await;
    let cluster = linked.cluster.clone();
    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: linked.hub_dir.path().join("data/resources.db"),
    })
    .await
    .unwrap();
    wait_for(LIMIT, "both types reach the hub", || {
        let (storage, cluster, ns) = (storage.clone(), cluster.clone(), ns.clone());
        async move {
            by_name(storage.as_ref(), &cluster, &ns, "ConfigMap")
                .await
                .len()
                == 3
                && by_name(storage.as_ref(), &cluster, &ns, "Secret")
                    .await
                    .len()
                    == 1
        }
    })
    .await;
    let held = linked.agent_dir.path().join("agent-state.json.lists");
    wait_for(LIMIT, "the agent keeps which lists the hub holds", || {
        let count = std::fs::read(&held)
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<String>>(&b).ok())
            .map_or(0, |held| held.len());
        async move { count == 2 }
    })
    .await;
    let secret_before =
        by_name(storage.as_ref(), &cluster, &ns, "Secret").await["untouched"].clone();
    let kept_before = by_name(storage.as_ref(), &cluster, &ns, "ConfigMap").await["kept"].clone();

    linked.agent.signal("TERM");
    let exited = linked.agent.wait_exit(Duration::from_secs(30));
    assert!(exited.is_some_and(|s| s.success()), "{exited:?}");
    kube.patch(&configmaps(), &ns, "changed", json!({"data": {"v": "2"}}))
        .await;
    kube.delete(&configmaps(), Some(&ns), "removed").await;

    let agent = spawn_agent(&linked.agent_config, linked.agent_dir.path()).start();
    wait_for(LIMIT, "the change made while away reaches the hub", || {
        let (storage, cluster, ns) = (storage.clone(), cluster.clone(), ns.clone());
        async move {
            let maps = by_name(storage.as_ref(), &cluster, &ns, "ConfigMap").await;
            maps.len() == 2
                && maps
                    .get("changed")
                    .is_some_and(|d| d.object["data"]["v"] == "2")
        }
    })
    .await;
    wait_for(
        LIMIT,
        "the agent said why it sent the ConfigMaps again",
        || {
            let logs = agent.logs();
            async move { logs.contains("relisting: the cluster differs from what the hub holds") }
        },
    )
    .await;
    // The Secrets agreed with the hub: their list was not sent, so their document is the
    // one written before the restart. The ConfigMaps were sent again, all of them.
    let secret_after =
        by_name(storage.as_ref(), &cluster, &ns, "Secret").await["untouched"].clone();
    assert_eq!(
        secret_after.sync_at, secret_before.sync_at,
        "the Secret was sent again"
    );
    let kept_after = by_name(storage.as_ref(), &cluster, &ns, "ConfigMap").await["kept"].clone();
    assert!(
        kept_after.sync_at > kept_before.sync_at,
        "the ConfigMaps were not relisted"
    );
    let relists = agent
        .logs()
        .lines()
        .filter(|l| l.contains("relisting: the cluster differs"))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    assert_eq!(relists.len(), 1, "{relists:?}");
    assert!(relists[0].contains("ConfigMap"), "{relists:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_back_after_an_outage_has_the_agents_send_everything_again() {
    let Some(es) = Elastic::start() else {
        return;
    };
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("resync");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "kept-by-the-cluster"}, "data": {"v": "1"}}),
    )
    .await;
    let index = karpor_testkit::unique("resync");
    let storage_config = StorageConfig::Elasticsearch(ElasticConfig {
        url: es.url(),
        username: None,
        password: None,
        index: index.clone(),
        refresh: karpor_storage::RefreshPolicy::True,
    });
    let hub_storage = format!(
        "storage: {{backend: elasticsearch, url: '{}', index: '{index}', refresh: 'true'}}\n",
        es.url()
    );
    let rule = json!({"clusters": "*", "namespaces": [ns],
        "resources": [{"version": "v1", "resource": "configmaps"}]});
    let linked = linked_with(&hub_storage, "resync", "", &kube.kubeconfig, Some(rule)).await;
    let cluster = linked.cluster.clone();
    let storage = karpor_storage::connect(&storage_config).await.unwrap();
    let synced = || {
        let (storage, cluster, ns) = (storage.clone(), cluster.clone(), ns.clone());
        async move {
            by_name(storage.as_ref(), &cluster, &ns, "ConfigMap")
                .await
                .contains_key("kept-by-the-cluster")
        }
    };
    wait_for(LIMIT, "the ConfigMap reaches the hub", synced).await;

    // Storage loses the cluster's documents, then is unreachable for a while: nothing in
    // the cluster changes, so only a relist brings them back.
    storage.delete_cluster(&cluster).await.unwrap();
    wait_for(LIMIT, "the documents are gone from storage", || {
        let synced = synced();
        async move { !synced.await }
    })
    .await;
    es.process.pause();
    let readyz = linked.hub.url("/readyz");
    wait_for(LIMIT, "the hub sees its storage gone", || {
        let (readyz, logs) = (readyz.clone(), linked.hub.logs());
        async move {
            logs.contains("storage unreachable")
                && get(&readyz).await.1.contains("[-] Storage failed")
        }
    })
    .await;
    es.process.resume();
    wait_for(LIMIT, "the hub asks its agents to list again", || {
        let logs = linked.hub.logs();
        async move { logs.contains("storage is back: the agents connected here list again") }
    })
    .await;
    wait_for(LIMIT, "the agent lists again", || {
        let logs = linked.agent.logs();
        async move { logs.contains("listing every type again") }
    })
    .await;
    wait_for(LIMIT, "the agent sent its ConfigMaps again", synced).await;
}
