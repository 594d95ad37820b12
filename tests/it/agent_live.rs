//! Live reads through an agent, on the real binary: the hub's REST API reads an agent
//! cluster's objects, events and pod logs over the agent's control stream (the hub holds
//! no credential of it; the agent's is a ServiceAccount token with the read-only
//! ClusterRole of its chart), redacted; a subresource such as `nodes/proxy` is no read; a
//! stalled agent times out its own cluster's reads and nobody else's; a revoked agent's
//! session ends at once.

use futures::StreamExt;
use karpor_testkit::api::Client;
use karpor_testkit::cluster::{
    configmaps, kube_name as unique, namespaces, resource, secrets, Kube, LIMIT,
};
use karpor_testkit::kubelet::{self, Kubelet};
use karpor_testkit::process::{get, wait_for};
use serde_json::{json, Value};

use crate::agent::{call, linked, Linked};

/// A hub that syncs only the ConfigMaps of `namespace` (an agent's and its own clusters
/// alike: a whole test cluster twice would load the machine for nothing), and its agent.
async fn linked_for(kubeconfig: &str, namespace: &str) -> Linked {
    let rule = json!({"clusters": "*", "namespaces": [namespace],
        "resources": [{"version": "v1", "resource": "configmaps"}]});
    linked("live", "", kubeconfig, Some(rule)).await
}

/// The read-only rules the agent's chart grants (`rbac.rules`), as a ClusterRole's.
fn chart_rules() -> Value {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/charts/karpor-agent/values.yaml"
    );
    let values: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    serde_json::to_value(&values["rbac"]["rules"]).unwrap()
}

/// The live detail of `kind` `name` (in `namespace` unless empty) in `cluster`.
fn detail(cluster: &str, kind: &str, namespace: &str, name: &str) -> String {
    let namespace = match namespace {
        "" => String::new(),
        ns => format!("&namespace={ns}"),
    };
    format!(
        "/rest-api/v1/insight/detail?live=true&cluster={cluster}&apiVersion=v1&kind={kind}{namespace}&name={name}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reads_events_and_logs_go_through_the_agent() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("agent-live");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let kubelet = Kubelet::start((0..5).map(|i| format!("line {i} of the log")).collect());
    let node = kubelet.node(&kube).await;
    let pod = unique("web");
    kubelet::pod(&kube, &ns, &pod, &node, &["web"]).await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "live-cm"}, "data": {"colour": "blue"}}),
    )
    .await;
    kube.create(
        &secrets(),
        Some(&ns),
        json!({"metadata": {"name": "live-secret"}, "data": {"password": "aHVudGVyMg=="}}),
    )
    .await;
    kube.create(
        &resource("", "v1", "Event", "events"),
        Some(&ns),
        json!({"metadata": {"name": "live-cm.probe"},
               "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "live-cm", "namespace": ns},
               "reason": "AgentProbe", "message": "read through the agent", "type": "Normal",
               "count": 1, "firstTimestamp": "2026-12-07T10:00:00Z", "lastTimestamp": "2026-12-07T10:00:00Z"}),
    )
    .await;

    // The agent's own credential: the read-only ClusterRole its chart grants.
    let member = kubelet::read_only(&kube, &ns, "karpor-agent", chart_rules()).await;
    let linked = linked_for(&member, &ns).await;
    let admin = Client::local_admin(&linked.hub);
    let cluster = linked.cluster.clone();

    // Synced with it: the ConfigMap is searchable in the hub.
    let sql = format!(
        "select * from resources where cluster = '{cluster}' and kind = 'ConfigMap' and namespace = '{ns}'"
    );
    let search = format!(
        "/rest-api/v1/search?query={}",
        url::form_urlencoded::byte_serialize(sql.as_bytes()).collect::<String>()
    );
    wait_for(LIMIT, "the ConfigMap is searchable in the hub", || {
        let (admin, search) = (&admin, search.clone());
        async move {
            let (code, page) = admin.call("GET", &search, None).await;
            code == 200
                && page["data"]["items"]
                    .as_array()
                    .is_some_and(|i| i.len() == 1)
        }
    })
    .await;

    // An object, as the cluster has it now: read by the agent once its session is open.
    let path = detail(&cluster, "ConfigMap", &ns, "live-cm");
    wait_for(LIMIT, "a live read through the agent answers", || {
        let (admin, path) = (&admin, path.clone());
        async move { admin.call("GET", &path, None).await.0 == 200 }
    })
    .await;
    let (code, answer) = admin.call("GET", &path, None).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["data"]["data"]["colour"], "blue", "{answer}");

    // A Secret: its values never leave the member cluster.
    let (code, answer) = admin
        .call("GET", &detail(&cluster, "Secret", &ns, "live-secret"), None)
        .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["data"]["data"], "[redacted]", "{answer}");
    assert!(!answer.to_string().contains("aHVudGVyMg=="), "{answer}");

    // What does not exist, and a subresource posing as a kind: nothing reaches a kubelet.
    let (code, answer) = admin
        .call("GET", &detail(&cluster, "ConfigMap", &ns, "no-such"), None)
        .await;
    assert_eq!(code, 404, "{answer}");
    let (code, answer) = admin
        .call(
            "GET",
            &detail(&cluster, "NodeProxyOptions", "", &node.name),
            None,
        )
        .await;
    assert_eq!(code, 404, "{answer}");

    // Events about the ConfigMap.
    let (code, events) = admin
        .call(
            "GET",
            &format!("/rest-api/v1/insight/events?cluster={cluster}&apiVersion=v1&kind=ConfigMap&namespace={ns}&name=live-cm"),
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
    assert_eq!(reasons, ["AgentProbe"], "{events}");

    // The pod's log: downloaded whole, and followed.
    let logs = format!("/rest-api/v1/insight/aggregator/log/pod/{cluster}/{ns}/{pod}");
    let response = admin
        .request(
            reqwest::Method::GET,
            &format!("{logs}?download=true&container=web"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    assert!(
        text.contains("line 0 of the log") && text.contains("line 4 of the log"),
        "{text}"
    );
    let response = admin
        .request(reqwest::Method::GET, &format!("{logs}?container=web"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut frames = response.bytes_stream();
    let mut seen = String::new();
    let followed = tokio::time::timeout(LIMIT, async {
        while let Some(Ok(chunk)) = frames.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("follow 1") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(followed, Ok(true), "{seen}");
    drop(frames);
    let asked: Vec<String> = kubelet.requests();
    assert!(
        asked
            .iter()
            .all(|r| r.starts_with(&format!("/containerLogs/{ns}/{pod}/web"))),
        "only the log reached the kubelet: {asked:?}"
    );

    // No member credential in anything the hub answered or logged.
    assert!(!linked
        .hub
        .logs()
        .contains(karpor_testkit::services::APISERVER_TOKEN));
    admin.assert_no_secret_answered();
    kubelet::delete_pods(&kube, &ns).await;
    node.delete().await;
    kubelet::delete_read_only(&kube, &ns, "karpor-agent").await;
    kube.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_agent_times_out_its_own_reads_and_a_revoked_one_is_cut_off() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = unique("agent-stall");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "cm"}}),
    )
    .await;
    let linked = linked_for(&kube.kubeconfig, &ns).await;
    let admin = Client::local_admin(&linked.hub);
    let cluster = linked.cluster.clone();
    // A cluster the hub reads itself, beside the agent's.
    let (code, created) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/direct",
            Some(json!({"kubeConfig": kube.kubeconfig})),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let through_agent = detail(&cluster, "ConfigMap", &ns, "cm");
    let direct = detail("direct", "ConfigMap", &ns, "cm");
    wait_for(LIMIT, "a live read through the agent answers", || {
        let (admin, path) = (&admin, through_agent.clone());
        async move { admin.call("GET", &path, None).await.0 == 200 }
    })
    .await;

    // The hub's readiness names each agent cluster's state, none of them critical.
    let lonely = unique("lonely");
    let (status, body) = call(
        &linked.hub,
        reqwest::Method::POST,
        &format!("/cluster/{lonely}"),
        json!({"mode": "agent"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let readyz = linked.hub.url("/readyz?verbose");
    let connected = format!("[+] Cluster/{cluster} ok");
    let never = format!("[-] Cluster/{lonely} failed: never joined");
    wait_for(LIMIT, "readiness says connected and never joined", || {
        let (readyz, connected, never) = (readyz.clone(), connected.clone(), never.clone());
        async move {
            let (code, body) = get(&readyz).await;
            code == 200 && body.contains(&connected) && body.contains(&never)
        }
    })
    .await;

    // Stopped, not gone: its session stays open and answers nothing.
    linked.agent.signal("STOP");
    let stalled = tokio::spawn({
        let request = reqwest::Client::new()
            .get(linked.hub.url(&through_agent))
            .bearer_auth(linked.hub.local_token());
        async move {
            let response = request.send().await.unwrap();
            let code = response.status().as_u16();
            (code, response.json::<Value>().await.unwrap())
        }
    });
    let (code, answer) = admin.call("GET", &direct, None).await;
    assert_eq!(code, 200, "the other cluster answers meanwhile: {answer}");
    let (code, answer) = tokio::time::timeout(LIMIT, stalled).await.unwrap().unwrap();
    assert_eq!(code, 503, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.contains("did not answer within"), "{answer}");
    linked.agent.signal("CONT");
    wait_for(LIMIT, "the agent answers again", || {
        let (admin, path) = (&admin, through_agent.clone());
        async move { admin.call("GET", &path, None).await.0 == 200 }
    })
    .await;

    // Revoked: the session ends with it, and the agent cannot open another.
    let (status, body) = call(
        &linked.hub,
        reqwest::Method::DELETE,
        &format!("/cluster/{cluster}/agent"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (code, answer) = admin.call("GET", &through_agent, None).await;
    assert_eq!(code, 503, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not connected"),
        "{answer}"
    );
    // Its next try at a session is refused, and no read reaches it after that.
    wait_for(LIMIT, "the agent is refused a new session", || {
        let logs = linked.agent.logs();
        async move { logs.contains("control stream lost") && logs.contains("revoked") }
    })
    .await;
    let (code, _) = admin.call("GET", &through_agent, None).await;
    assert_eq!(code, 503, "a revoked agent opens no new session");
    let disconnected = format!("[-] Cluster/{cluster} failed: disconnected");
    wait_for(LIMIT, "readiness says disconnected", || {
        let (readyz, disconnected) = (readyz.clone(), disconnected.clone());
        async move {
            let (code, body) = get(&readyz).await;
            code == 200 && body.contains(&disconnected)
        }
    })
    .await;
    kube.delete_namespace(&ns).await;
}
