//! The topology against a real kube-apiserver, on SQLite and on the Elasticsearch-API
//! server: a Deployment → ReplicaSet → Pod chain (owner references set by hand, as no
//! controller runs), Service → Pod by selector, Pod → ConfigMap, Secret, PVC and
//! ServiceAccount, Ingress → Service, and a custom resource related to a ConfigMap by a
//! rule written through the API: each graph is exactly right in both directions; a
//! relation appears and disappears as an object changes; the namespace's graph of kinds
//! has the counts and the relations.

use std::collections::{BTreeMap, BTreeSet};

use karpor_testkit::api::Client;
use karpor_testkit::cluster::{
    configmaps, kube_name, namespaces, resource, secrets, widgets, Kube, LIMIT,
};
use karpor_testkit::process::{import, wait_for, Spawn};
use karpor_testkit::services::Elastic;
use serde_json::{json, Value};

const CLUSTER: &str = "topo";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphs_are_exact_both_ways_on_sqlite() {
    let config = "shutdown: {drain_delay: 1s}\n".to_owned();
    related(&config).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphs_are_exact_both_ways_on_elasticsearch() {
    let elastic = Elastic::start().expect("test services: run scripts/services.sh start");
    let config = format!(
        "shutdown: {{drain_delay: 1s}}\nstorage: {{backend: elasticsearch, url: '{}', refresh: 'true'}}\n",
        elastic.url()
    );
    related(&config).await;
}

fn pods() -> kube::api::ApiResource {
    resource("", "v1", "Pod", "pods")
}

/// `(kind, name)` pairs of a node list, for comparison.
fn kinds_and_names(ids: &Value) -> BTreeSet<String> {
    ids.as_array()
        .unwrap()
        .iter()
        .map(|id| {
            // `GROUP/VERSION.KIND:NAMESPACE.NAME` → `KIND/NAME`.
            let id = id.as_str().unwrap();
            let (gvk, object) = id.split_once(':').unwrap();
            let kind = gvk.rsplit_once('.').unwrap().1;
            let name = object.split_once('.').unwrap().1;
            format!("{kind}/{name}")
        })
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The graph around one object: node id → its parents and children as `KIND/NAME`.
async fn graph(
    api: &Client,
    ns: &str,
    api_version: &str,
    kind: &str,
    name: &str,
    hops: u32,
) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let (code, answer) = api
        .call(
            "GET",
            &format!(
                "/rest-api/v1/insight/topology?cluster={CLUSTER}&apiVersion={api_version}&kind={kind}&namespace={ns}&name={name}&hops={hops}"
            ),
            None,
        )
        .await;
    if code == 404 {
        // Not stored yet: an empty graph.
        return BTreeMap::new();
    }
    assert_eq!(code, 200, "{answer}");
    answer["data"][CLUSTER]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, node)| {
            let (kind, object) = id.split_once(':').unwrap();
            let key = format!(
                "{}/{}",
                kind.rsplit_once('.').unwrap().1,
                object.split_once('.').unwrap().1
            );
            (
                key,
                (
                    kinds_and_names(&node["parents"]),
                    kinds_and_names(&node["children"]),
                ),
            )
        })
        .collect()
}

async fn related(config: &str) {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    kube.widget_crd().await;
    let ns = kube_name("topo");
    let dir = tempfile::tempdir().unwrap();
    let karpor = Spawn::serve(config).in_dir(dir.path()).start();
    // Everything of the test's namespace in the groups it uses (custom resources too).
    // Not `*` for groups: `extensions` serves Ingresses too, as another type.
    let group = |g: &str| json!({"group": g, "version": "*", "resource": "*"});
    let rule = json!({"name": "topology", "clusters": "*",
        "resources": [group(""), group("apps"), group("networking.k8s.io"), group("karpor.test")],
        "namespaces": [ns]});
    import(
        dir.path(),
        config,
        &[(CLUSTER, &kube.kubeconfig)],
        json!([rule]),
    );
    let api = Client::local_admin(&karpor);

    // The user's rule for the custom resource, through the API.
    let widget_rule = json!({
        "parent": {"group": "karpor.test", "kind": "Widget"},
        "child": {"kind": "ConfigMap"},
        "relation": {"type": "reference", "path": "spec", "name": "configMapName"}
    });
    let (code, created) = api
        .call(
            "POST",
            "/rest-api/v1/relation-rule/widget-configmap",
            Some(widget_rule),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let (code, bad) = api
        .call(
            "POST",
            "/rest-api/v1/relation-rule/broken",
            Some(
                json!({"parent": {"kind": "Widget"}, "child": {"kind": "ConfigMap"},
                        "relation": {"type": "selector", "path": "spec..selector"}}),
            ),
        )
        .await;
    assert_eq!(code, 400, "{bad}");
    assert!(
        bad["message"].as_str().unwrap().contains("relation.path"),
        "{bad}"
    );

    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let sa = resource("", "v1", "ServiceAccount", "serviceaccounts");
    // The admission of pods needs the default service account; no controller makes it.
    kube.create(&sa, Some(&ns), json!({"metadata": {"name": "default"}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}),
    )
    .await;
    kube.create(
        &secrets(),
        Some(&ns),
        json!({"metadata": {"name": "creds"}, "stringData": {"password": "topology-secret-value"}}),
    )
    .await;
    kube.create(
        &resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        Some(&ns),
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}});
    kube.create(
        &resource("apps", "v1", "Deployment", "deployments"),
        Some(&ns),
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": template}}),
    )
    .await;
    let uid = |r: kube::api::ApiResource, name: &'static str| {
        let api = kube.api(&r, Some(&ns));
        async move { api.get(name).await.unwrap().metadata.uid.unwrap() }
    };
    let deployment_uid = uid(resource("apps", "v1", "Deployment", "deployments"), "web").await;
    kube.create(
        &resource("apps", "v1", "ReplicaSet", "replicasets"),
        Some(&ns),
        json!({"metadata": {"name": "web-rs", "ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "Deployment", "name": "web", "uid": deployment_uid, "controller": true}]},
               "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}}),
    )
    .await;
    let rs_uid = uid(
        resource("apps", "v1", "ReplicaSet", "replicasets"),
        "web-rs",
    )
    .await;
    kube.create(
        &pods(),
        Some(&ns),
        json!({"metadata": {"name": "web-1", "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-rs", "uid": rs_uid, "controller": true}]},
               "spec": {"automountServiceAccountToken": false,
                 "containers": [{"name": "app", "image": "nginx:1.25",
                    "envFrom": [{"secretRef": {"name": "creds"}}]}],
                 "volumes": [{"name": "settings", "configMap": {"name": "settings"}},
                             {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    )
    .await;
    let services = resource("", "v1", "Service", "services");
    kube.create(
        &services,
        Some(&ns),
        json!({"metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
    )
    .await;
    kube.create(
        &resource("networking.k8s.io", "v1", "Ingress", "ingresses"),
        Some(&ns),
        json!({"metadata": {"name": "web"}, "spec": {"rules": [{"http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
    )
    .await;
    kube.create(
        &widgets(),
        Some(&ns),
        json!({"metadata": {"name": "w1"}, "spec": {"configMapName": "settings"}}),
    )
    .await;

    // The Pod, two hops up and down: its owner chain, what selects it and what routes
    // to that; what it names.
    let pod_graph = || graph(&api, &ns, "v1", "Pod", "web-1", 2);
    let expected_pod = BTreeMap::from([
        (
            "Pod/web-1".to_owned(),
            (
                set(&["ReplicaSet/web-rs", "Service/web"]),
                set(&[
                    "ConfigMap/settings",
                    "Secret/creds",
                    "PersistentVolumeClaim/data",
                    "ServiceAccount/default",
                ]),
            ),
        ),
        (
            "ReplicaSet/web-rs".to_owned(),
            (set(&["Deployment/web"]), set(&["Pod/web-1"])),
        ),
        (
            "Deployment/web".to_owned(),
            (set(&[]), set(&["ReplicaSet/web-rs"])),
        ),
        (
            "Service/web".to_owned(),
            (set(&["Ingress/web"]), set(&["Pod/web-1"])),
        ),
        ("Ingress/web".to_owned(), (set(&[]), set(&["Service/web"]))),
        (
            "ConfigMap/settings".to_owned(),
            (set(&["Pod/web-1"]), set(&[])),
        ),
        ("Secret/creds".to_owned(), (set(&["Pod/web-1"]), set(&[]))),
        (
            "PersistentVolumeClaim/data".to_owned(),
            (set(&["Pod/web-1"]), set(&[])),
        ),
        (
            "ServiceAccount/default".to_owned(),
            (set(&["Pod/web-1"]), set(&[])),
        ),
    ]);
    let waited = tokio::time::timeout(LIMIT, async {
        loop {
            if pod_graph().await == expected_pod {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
    .await;
    if waited.is_err() {
        let (_, ingresses) = api
            .call("GET", &format!("/rest-api/v1/search?query=select%20*%20from%20resources%20where%20kind%3D'Ingress'%20and%20namespace%3D'{ns}'"), None)
            .await;
        panic!(
            "the Pod's graph: {:#?}\ningresses: {ingresses}\nlogs: {}",
            pod_graph().await,
            karpor.logs()
        );
    }

    // The other way round: the ConfigMap's parents, the custom resource's among them.
    let config_graph = graph(&api, &ns, "v1", "ConfigMap", "settings", 1).await;
    assert_eq!(
        config_graph["ConfigMap/settings"].0,
        set(&["Pod/web-1", "Widget/w1"]),
        "{config_graph:?}"
    );
    let deployment_graph = graph(&api, &ns, "apps/v1", "Deployment", "web", 2).await;
    assert_eq!(
        deployment_graph.keys().cloned().collect::<BTreeSet<_>>(),
        set(&["Deployment/web", "ReplicaSet/web-rs", "Pod/web-1"])
    );

    // A relation goes with the selector that made it, and comes back with it.
    kube.patch(
        &services,
        &ns,
        "web",
        json!({"spec": {"selector": {"app": "other"}}}),
    )
    .await;
    wait_for(LIMIT, "the Service no longer selects the Pod", || async {
        !pod_graph().await["Pod/web-1"].0.contains("Service/web")
    })
    .await;
    kube.patch(
        &services,
        &ns,
        "web",
        json!({"spec": {"selector": {"app": "web"}}}),
    )
    .await;
    wait_for(LIMIT, "the Service selects the Pod again", || async {
        pod_graph().await == expected_pod
    })
    .await;

    // Events, live from the cluster: an event about the Pod, as `kubectl create event`
    // would make it.
    kube.create(
        &resource("", "v1", "Event", "events"),
        Some(&ns),
        json!({"metadata": {"name": "web-1.probe"},
               "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "web-1", "namespace": ns},
               "reason": "TopologyProbe", "message": "seen by the topology test", "type": "Warning",
               "count": 2, "firstTimestamp": "2026-11-30T10:00:00Z", "lastTimestamp": "2026-11-30T10:05:00Z"}),
    )
    .await;
    let (code, events) = api
        .call(
            "GET",
            &format!("/rest-api/v1/insight/events?cluster={CLUSTER}&apiVersion=v1&kind=Pod&namespace={ns}&name=web-1"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{events}");
    let reasons: Vec<&str> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(reasons, ["TopologyProbe"], "{events}");
    let (code, none) = api
        .call(
            "GET",
            &format!("/rest-api/v1/insight/events?cluster={CLUSTER}&apiVersion=v1&kind=Pod&namespace={ns}&name=other"),
            None,
        )
        .await;
    assert_eq!(
        (code, none["data"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    // Karpor's stream of the same events.
    let stream = api
        .request(
            reqwest::Method::GET,
            &format!(
                "/rest-api/v1/insight/aggregator/event/{CLUSTER}/{ns}/web-1?kind=Pod&apiVersion=v1"
            ),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut stream = stream;
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.chunk())
            .await
            .expect("a frame within 10 s")
            .unwrap()
            .expect("the stream goes on");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let frame = text.lines().find_map(|l| l.strip_prefix("data:")).unwrap();
    let frame: Value = serde_json::from_str(frame.trim()).unwrap();
    assert_eq!(frame[0]["reason"], "TopologyProbe", "{frame}");
    assert_eq!(frame[0]["count"], 2, "{frame}");

    // Live and stored detail; a Secret's values in neither.
    let detail = |name: &str, kind: &str, live: bool| {
        let path = format!(
            "/rest-api/v1/insight/detail?cluster={CLUSTER}&apiVersion=v1&kind={kind}&namespace={ns}&name={name}&live={live}"
        );
        let api = &api;
        async move { api.call("GET", &path, None).await }
    };
    for live in [true, false] {
        let (code, secret) = detail("creds", "Secret", live).await;
        assert_eq!(code, 200, "{secret}");
        assert_eq!(secret["data"]["data"], "[redacted]", "{secret}");
        assert_eq!(
            secret["data"]["karpor"]["source"],
            if live { "live" } else { "stored" }
        );
        assert!(!secret.to_string().contains("topology-secret-value"));
        assert!(
            !secret.to_string().contains("dG9wb2xvZ3ktc2VjcmV0LXZhbHVl"),
            "base64 of it"
        );
    }
    let (code, gone) = detail("nothing-here", "ConfigMap", true).await;
    assert_eq!(code, 404, "{gone}");

    // `karpor describe`: key fields, relations, findings, events.
    let describe = |args: &[&str]| {
        crate::cli::text(&crate::cli::karpor(
            args,
            &karpor.url(""),
            karpor.dir(),
            &[],
        ))
    };
    let target = format!("{CLUSTER}/pod/{ns}/web-1");
    let (code, out, err) = describe(&["describe", &target]);
    assert_eq!(code, 0, "{err}");
    let field = |label: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{label}:")))
            .map(|l| l[label.len() + 1..].trim().to_owned())
            .unwrap_or_default()
    };
    assert_eq!(field("Name"), "web-1", "{out}");
    assert_eq!(field("Namespace"), ns, "{out}");
    assert_eq!(field("Kind"), "Pod (v1)", "{out}");
    assert_eq!(field("Controlled By"), "ReplicaSet/web-rs", "{out}");
    assert_eq!(
        field("  Parents"),
        "Service/web, ReplicaSet/web-rs",
        "{out}"
    );
    assert!(
        out.contains("TopologyProbe") && out.contains("Findings ("),
        "{out}"
    );
    for child in [
        "ConfigMap/settings",
        "Secret/creds",
        "PersistentVolumeClaim/data",
    ] {
        assert!(out.contains(child), "{child} in\n{out}");
    }
    let (code, yaml, _) = describe(&["describe", &target, "-o", "yaml"]);
    assert_eq!(code, 0);
    assert!(yaml.contains("kind: Pod"), "{yaml}");
    let (code, _, err) = describe(&["describe", "nonsense"]);
    assert_eq!(code, 1);
    assert!(err.contains("CLUSTER/KIND/NAME"), "{err}");

    // The namespace's graph of kinds.
    let (code, kinds) = api
        .call(
            "GET",
            &format!("/rest-api/v1/insight/topology?cluster={CLUSTER}&namespace={ns}"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{kinds}");
    let kinds = &kinds["data"][CLUSTER];
    assert_eq!(kinds[".v1.Pod"]["count"], 1, "{kinds}");
    assert_eq!(kinds[".v1.Pod"]["resourceGroup"]["namespace"], ns.as_str());
    let pod = &kinds[".v1.Pod"]["relationship"];
    assert_eq!(pod["apps.v1.ReplicaSet"], "parent", "{kinds}");
    assert_eq!(pod[".v1.Service"], "parent", "{kinds}");
    assert_eq!(pod[".v1.ConfigMap"], "child", "{kinds}");
    assert_eq!(
        kinds["apps.v1.ReplicaSet"]["relationship"]["apps.v1.Deployment"],
        "parent"
    );
    assert_eq!(
        kinds["karpor.test.v1.Widget"]["relationship"][".v1.ConfigMap"],
        "child"
    );

    // Rules: the built-in ones and the user's, listed; a built-in one turned off.
    let (_, rules) = api.call("GET", "/rest-api/v1/relation-rules", None).await;
    let rules = rules["data"].as_array().unwrap();
    assert!(rules
        .iter()
        .any(|r| r["name"] == "service-pods" && r["builtIn"] == true));
    assert!(rules
        .iter()
        .any(|r| r["name"] == "widget-configmap" && r["stored"] == true));
    // The CLI: a built-in rule turned off from a YAML file; documents are re-indexed and
    // the relation leaves the graph; removing the stored rule brings it back.
    let file = karpor.dir().join("off.yaml");
    std::fs::write(
        &file,
        "- name: pod-serviceaccount\n  enabled: false\n  parent: {kind: Pod}\n  child: {kind: ServiceAccount}\n  \
         relation: {type: reference, path: spec, name: serviceAccountName}\n",
    )
    .unwrap();
    let (code, out, err) = describe(&["relation", "apply", "-f", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "relation/pod-serviceaccount applied\n");
    wait_for(
        LIMIT,
        "the Pod no longer names its service account",
        || async {
            !pod_graph().await["Pod/web-1"]
                .1
                .contains("ServiceAccount/default")
        },
    )
    .await;
    let (code, out, _) = describe(&["relation", "list", "-o", "name"]);
    assert_eq!(code, 0);
    assert!(
        out.lines().any(|l| l == "relation/widget-configmap"),
        "{out}"
    );
    let (code, _, err) = describe(&["relation", "rm", "pod-serviceaccount"]);
    assert_eq!(code, 0, "{err}");
    wait_for(LIMIT, "the built-in rule is back", || async {
        pod_graph().await == expected_pod
    })
    .await;
    kube.delete_namespace(&ns).await;
}
