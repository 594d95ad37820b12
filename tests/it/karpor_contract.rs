//! Karpor's REST contract, route by route, as Karpor's clients use it: the requests its
//! page and scripts send (extra query parameters, `name` in bodies, an empty
//! `Authorization:` header, multipart uploads, text bodies) and the fields they read from
//! the answers. Run by a real server on etcd with the Elasticsearch-API server, where
//! `/endpoints` (the server's) is listed too; the same contract on the embedded default
//! is tested in-process beside the API crate (`pkg/api/tests`).

use karpor_storage::{ElasticConfig, RefreshPolicy, ResourceDocument, StorageConfig};
use karpor_testkit::api::{Client, SECRETS};
use karpor_testkit::process::{Karpor, Spawn, EMBEDDED};
use karpor_testkit::services::{Elastic, Etcd};
use serde_json::{json, Value};

const SERVE: &str = "server: {syncer: false}\nshutdown: {drain_delay: 1s}\n";
const CLUSTER: &str = "prod";
/// A kubeconfig as a user uploads it: a token credential, an unreachable server.
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: secret-token-1}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpors_clients_work_unchanged_on_etcd_and_elasticsearch() {
    let missing = "test services: run scripts/services.sh start";
    let etcd = Etcd::start().expect(missing);
    let elastic = Elastic::start().expect(missing);
    let config = format!(
        "{SERVE}metadata: {{backend: etcd, etcd: {{endpoints: ['{}']}}}}\n\
         storage: {{backend: elasticsearch, url: '{}', refresh: 'true'}}\n",
        etcd.url(),
        elastic.url()
    );
    let karpor = Spawn::serve(&config).start();
    let storage = StorageConfig::Elasticsearch(ElasticConfig {
        url: elastic.url(),
        username: None,
        password: None,
        index: "karpor-resources".to_owned(),
        refresh: RefreshPolicy::True,
    });
    contract(&karpor, &storage, "elasticsearch").await;
}

/// Karpor's `namespace` resource group rule on the embedded default: made at the first
/// start (its Insight page opens on it), left deleted once a user deletes it, across a
/// restart; a read-only server makes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_namespace_rule_is_made_once_on_the_embedded_default() {
    const RULE: &str = "/rest-api/v1/resource-group-rule/namespace";
    let mut karpor = Spawn::serve(EMBEDDED).start();
    let admin = Client::local_admin(&karpor);
    let (code, rule) = admin.call("GET", RULE, None).await;
    assert_eq!(code, 200, "{rule}");
    assert_eq!(rule["data"]["fields"], json!(["namespace"]));
    let (code, deleted) = admin.call("DELETE", RULE, None).await;
    assert_eq!(code, 200, "{deleted}");
    karpor.signal("TERM");
    assert!(karpor
        .wait_exit(std::time::Duration::from_secs(10))
        .is_some());
    karpor.serve_again(EMBEDDED);
    let admin = Client::local_admin(&karpor);
    let (code, rule) = admin.call("GET", RULE, None).await;
    assert_eq!(code, 404, "deleted stays deleted: {rule}");

    let read_only =
        Spawn::serve("server: {read_only: true}\nshutdown: {drain_delay: 1s}\n").start();
    let (code, rule) = Client::new(&read_only).call("GET", RULE, None).await;
    assert_eq!(code, 404, "a read-only server writes nothing: {rule}");
}

async fn contract(karpor: &Karpor, storage: &StorageConfig, backend: &str) {
    let admin = Client::local_admin(karpor);
    server_configs_and_endpoints(karpor, &admin, backend).await;
    authn(karpor, &admin).await;
    clusters(&admin).await;
    seed(storage).await;
    search(&admin).await;
    insight(&admin).await;
    resource_groups(&admin).await;
    ai_routes(karpor, &admin).await;
    namespaces_and_groups(storage, &admin).await;
    admin.assert_no_secret_answered();
}

/// What Karpor's namespace and resource group pages ask: a namespace's detail is its
/// Namespace object; a label group's topology is the graph of kinds of each cluster that
/// holds matching objects, keyed by cluster.
async fn namespaces_and_groups(config: &StorageConfig, admin: &Client) {
    let storage = karpor_storage::connect(config).await.unwrap();
    let mut elsewhere = document("Pod", "shop", "web-2", json!({}));
    elsewhere.cluster = "other".to_owned();
    storage
        .upsert(&[document("Namespace", "", "shop", json!({})), elsewhere])
        .await
        .unwrap();
    let (code, namespace) = admin
        .call(
            "GET",
            "/rest-api/v1/insight/detail?cluster=prod&namespace=shop",
            None,
        )
        .await;
    assert_eq!(code, 200, "{namespace}");
    assert_eq!(
        (
            &namespace["data"]["kind"],
            &namespace["data"]["metadata"]["name"]
        ),
        (&json!("Namespace"), &json!("shop")),
        "{namespace}"
    );
    let (code, yaml) = admin
        .call(
            "GET",
            "/rest-api/v1/insight/detail?cluster=prod&namespace=shop&format=yaml",
            None,
        )
        .await;
    assert_eq!(code, 200, "{yaml}");
    assert!(
        yaml["data"].as_str().unwrap().contains("kind: Namespace"),
        "{yaml}"
    );

    let (code, graph) = admin
        .call(
            "GET",
            "/rest-api/v1/insight/topology?labels=app%3Dweb",
            None,
        )
        .await;
    assert_eq!(code, 200, "{graph}");
    let by_cluster = graph["data"].as_object().unwrap();
    assert_eq!(
        by_cluster.keys().collect::<Vec<_>>(),
        ["other", "prod"],
        "{graph}"
    );
    assert_eq!(by_cluster["prod"][".v1.Pod"]["count"], 1, "{graph}");
    assert_eq!(
        by_cluster["prod"]["apps.v1.Deployment"]["count"], 1,
        "{graph}"
    );
    assert_eq!(by_cluster["other"][".v1.Pod"]["count"], 1, "{graph}");
    assert!(by_cluster["prod"].get(".v1.ConfigMap").is_none(), "{graph}");
    let (code, graph) = admin
        .call(
            "GET",
            "/rest-api/v1/insight/topology?cluster=prod&labels=app%3Dweb",
            None,
        )
        .await;
    assert_eq!(code, 200, "{graph}");
    let clusters: Vec<&String> = graph["data"].as_object().unwrap().keys().collect();
    assert_eq!(clusters, ["prod"], "{graph}");
}

/// `/server-configs` outside the envelope with the fields Karpor's page reads;
/// `/endpoints` as sorted `METHOD\tPATH` lines.
async fn server_configs_and_endpoints(karpor: &Karpor, admin: &Client, backend: &str) {
    let response = reqwest::get(karpor.url("/server-configs")).await.unwrap();
    assert_eq!(response.status(), 200);
    let configs: Value = response.json().await.unwrap();
    assert!(configs.get("success").is_none(), "not enveloped: {configs}");
    // On loopback, anonymous callers read: every page without a login, no write buttons.
    assert_eq!(configs["CoreOptions"]["ReadOnlyMode"], true, "{configs}");
    assert_eq!(configs["CoreOptions"]["EnableRBAC"], false, "{configs}");
    let response = admin
        .request(reqwest::Method::GET, "/server-configs")
        .send()
        .await
        .unwrap();
    let as_admin: Value = response.json().await.unwrap();
    assert_eq!(as_admin["CoreOptions"]["ReadOnlyMode"], false, "{as_admin}");
    assert_eq!(as_admin["CoreOptions"]["EnableRBAC"], true, "{as_admin}");
    assert!(configs["Version"].as_str().unwrap().starts_with('v'));
    assert_eq!(configs["AIOptions"]["AIModel"], "", "AI is off: {configs}");
    assert_eq!(
        configs["StorageOptions"]["SearchStorageType"], backend,
        "{configs}"
    );
    let response = reqwest::get(karpor.url("/endpoints")).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = response.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted);
    for route in [
        "GET\t/rest-api/v1/clusters",
        "POST\t/rest-api/v1/resource-group-rule",
        "GET\t/rest-api/v1/authn",
        "GET\t/server-configs",
        "GET\t/readyz",
        "GET\t/endpoints",
    ] {
        assert!(lines.contains(&route), "{route} in\n{text}");
    }
}

/// `/authn` answers 200 (with who the caller is) for an accepted credential, and for
/// none; an empty `Authorization:` header is no credential, as in Karpor.
async fn authn(karpor: &Karpor, admin: &Client) {
    let (code, answer) = admin.call("GET", "/rest-api/v1/authn", None).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["data"]["role"], "admin", "{answer}");
    let anonymous = Client::new(karpor);
    for header in ["", "Bearer", "Bearer  "] {
        let (code, answer) = anonymous
            .send(
                anonymous
                    .http()
                    .get(anonymous.url("/rest-api/v1/authn"))
                    .header("authorization", header),
            )
            .await;
        assert_eq!(code, 200, "Authorization: {header:?}: {answer}");
    }
    let wrong = Client::with_token(karpor, "not-a-token");
    let (code, _) = wrong.call("GET", "/rest-api/v1/authn", None).await;
    assert_eq!(code, 401);
}

/// Karpor's register flow: upload the file, send its `content` back to validate and
/// create; then read, list, update and delete with Karpor's shapes.
async fn clusters(admin: &Client) {
    // Karpor's page sends the form's fields beside the file.
    let boundary = "karpor-contract";
    let mut form = String::new();
    for (field, value) in [
        ("name", CLUSTER),
        ("displayName", "Production"),
        ("description", "the main one"),
    ] {
        form.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n"
        ));
    }
    form.push_str(&format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"config\"\r\n\r\n{KUBECONFIG}\r\n--{boundary}--\r\n"
    ));
    let (code, uploaded) = admin
        .send_echoing(
            admin
                .request(reqwest::Method::POST, "/rest-api/v1/cluster/config/file")
                .header(
                    "content-type",
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(form),
            Some("content"),
        )
        .await;
    assert_eq!(code, 200, "{uploaded}");
    let content = uploaded["data"]["content"].as_str().unwrap().to_owned();
    assert_eq!(content, KUBECONFIG);
    assert!(uploaded["data"]["sanitizedClusterContent"]
        .as_str()
        .unwrap()
        .contains("kind: Cluster"));

    // Validation takes the text as Karpor's page sends it; this server is unreachable.
    let (code, answer) = admin
        .send(
            admin
                .request(
                    reqwest::Method::POST,
                    "/rest-api/v1/cluster/config/validate",
                )
                .header("content-type", "text/plain")
                .body(content.clone()),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(
        !answer["message"].as_str().unwrap().contains("content type"),
        "the text body is read: {answer}"
    );

    let body = json!({"name": CLUSTER, "displayName": "Production",
        "description": "the main one", "kubeConfig": content});
    let path = format!("/rest-api/v1/cluster/{CLUSTER}");
    let (code, created) = admin.call("POST", &path, Some(body)).await;
    assert!((200..300).contains(&code), "{created}");
    let cluster = &created["data"];
    assert_eq!(cluster["apiVersion"], "cluster.karpor.io/v1beta1");
    assert_eq!(cluster["kind"], "Cluster");
    assert_eq!(cluster["metadata"]["name"], CLUSTER);
    assert!(cluster["metadata"]["creationTimestamp"].is_string());
    assert_eq!(cluster["spec"]["displayName"], "Production");
    assert_eq!(cluster["spec"]["description"], "the main one");
    assert_eq!(cluster["spec"]["access"]["endpoint"], "https://127.0.0.1:1");
    assert_eq!(
        cluster["spec"]["access"]["credential"]["type"],
        "ServiceAccountToken"
    );

    let (code, yaml) = admin
        .call("GET", &format!("{path}?format=yaml"), None)
        .await;
    assert_eq!(code, 200, "{yaml}");
    let yaml = yaml["data"].as_str().unwrap();
    assert!(yaml.contains("kind: Cluster") && yaml.contains("displayName: Production"));

    let (code, list) = admin
        .call(
            "GET",
            "/rest-api/v1/clusters?orderBy=timestamp&ascending=true",
            None,
        )
        .await;
    assert_eq!(code, 200, "{list}");
    let item = &list["data"]["items"][0];
    assert_eq!(
        (&item["metadata"]["name"], &item["spec"]["displayName"]),
        (&json!(CLUSTER), &json!("Production"))
    );
    let (code, summary) = admin
        .call("GET", "/rest-api/v1/clusters?summary=true", None)
        .await;
    assert_eq!(code, 200, "{summary}");
    let summary = &summary["data"];
    assert_eq!(summary["totalCount"], 1);
    assert_eq!(
        summary["healthyCount"].as_u64().unwrap() + summary["unhealthyCount"].as_u64().unwrap(),
        1
    );
    let named = summary["healthyClusters"]
        .as_array()
        .unwrap()
        .iter()
        .chain(summary["unhealthyClusters"].as_array().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(named, [&json!(CLUSTER)]);

    let update = json!({"name": CLUSTER, "displayName": "Prod", "description": "renamed"});
    let (code, updated) = admin.call("PUT", &path, Some(update)).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"]["spec"]["displayName"], "Prod");

    // A second cluster to delete, as Karpor answers it.
    let body = json!({"displayName": "Gone", "kubeConfig": KUBECONFIG});
    let (code, _) = admin
        .call("POST", "/rest-api/v1/cluster/gone", Some(body))
        .await;
    assert_eq!(code, 201);
    let (code, deleted) = admin
        .call("DELETE", "/rest-api/v1/cluster/gone", None)
        .await;
    assert_eq!((code, &deleted["data"]), (200, &json!("Cluster deleted")));
}

fn document(kind: &str, namespace: &str, name: &str, object: Value) -> ResourceDocument {
    let api_version = match kind {
        "Deployment" => "apps/v1",
        _ => "v1",
    };
    let mut object = object;
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    object["metadata"]["name"] = json!(name);
    if !namespace.is_empty() {
        object["metadata"]["namespace"] = json!(namespace);
    }
    ResourceDocument {
        cluster: CLUSTER.to_owned(),
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: format!("uid-{kind}-{namespace}-{name}"),
        labels: [("app".to_owned(), name.split('-').next().unwrap().to_owned())].into(),
        annotations: Default::default(),
        owner_references: Vec::new(),
        creation_timestamp: None,
        deletion_timestamp: None,
        resource_version: "7".to_owned(),
        sync_at: time::OffsetDateTime::now_utc(),
        deleted: false,
        object,
        issues: Vec::new(),
        refs: Vec::new(),
        history: None,
    }
}

async fn seed(config: &StorageConfig) {
    let storage = karpor_storage::connect(config).await.unwrap();
    let node = json!({"status": {
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}});
    let pod = json!({
        "spec": {"containers": [{"name": "web",
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]},
        "status": {"phase": "Running",
            "containerStatuses": [{"name": "web", "state": {"running": {}}}]}});
    storage
        .upsert(&[
            document("Node", "", "node-1", node),
            document("Pod", "shop", "web-1", pod),
            document(
                "Deployment",
                "shop",
                "web",
                json!({"spec": {"replicas": 1}}),
            ),
            document("ConfigMap", "shop", "settings", json!({"data": {"a": "1"}})),
            document(
                "ConfigMap",
                "tools",
                "settings",
                json!({"data": {"a": "2"}}),
            ),
        ])
        .await
        .unwrap();
}

/// SQL (with Karpor's page's empty `keyword=`, and narrowed by a keyword), the DSL, and
/// the answer's `sqlQuery`.
async fn search(admin: &Client) {
    let get = |query: &'static str| async move {
        let (code, answer) = admin
            .call("GET", &format!("/rest-api/v1/search?{query}"), None)
            .await;
        assert_eq!(code, 200, "{query}: {answer}");
        answer["data"].clone()
    };
    let page =
        get("query=select%20*%20from%20resources&pattern=sql&keyword=&page=1&pageSize=20").await;
    assert_eq!(page["total"], 5, "{page}");
    assert_eq!(page["sqlQuery"], "select * from resources");
    let page = get(
        "query=select%20*%20from%20resources%20where%20namespace%3D'shop'&pattern=sql&keyword=web",
    )
    .await;
    assert_eq!(page["total"], 2, "Deployment web, Pod web-1: {page}");
    assert_eq!(
        page["sqlQuery"],
        "select * from resources where namespace='shop' AND (name LIKE '%web%' OR namespace LIKE '%web%')"
    );
    let page = get("query=select%20*%20from%20resources&keyword=tool").await;
    assert_eq!(page["total"], 1, "namespace tools: {page}");
    let page = get("pattern=dsl&query=kind%3DConfigMap,namespace%3Dshop").await;
    assert_eq!(page["total"], 1, "{page}");
    let page = get("pattern=dsl&query=labels.app%3Dweb").await;
    assert_eq!(page["total"], 2, "{page}");
}

/// The summary's five variants and the detail's two formats.
async fn insight(admin: &Client) {
    let summary = |query: &'static str| async move {
        let (code, answer) = admin
            .call(
                "GET",
                &format!("/rest-api/v1/insight/summary?{query}"),
                None,
            )
            .await;
        assert_eq!(code, 200, "{query}: {answer}");
        answer["data"].clone()
    };
    let cluster = summary("cluster=prod").await;
    assert_eq!(
        (
            &cluster["nodeCount"],
            &cluster["readyNodes"],
            &cluster["notReadyNodes"]
        ),
        (&json!(1), &json!(1), &json!(0)),
        "{cluster}"
    );
    assert_eq!(cluster["cpuCapacity"], 4000);
    assert_eq!(cluster["memoryCapacity"], 8i64 << 30);
    assert_eq!(cluster["podsCapacity"], 110);
    assert_eq!(cluster["podsUsage"], 1);
    assert_eq!(cluster["cpuUsage"], 250.0);
    assert_eq!(cluster["metricsEnabled"], false);
    for key in ["serverVersion", "latency", "cpuMetrics", "memoryMetrics"] {
        assert!(cluster.get(key).is_some(), "{key}: {cluster}");
    }
    let gvk = summary("cluster=prod&apiVersion=apps/v1&kind=Deployment").await;
    assert_eq!(
        gvk,
        json!({"cluster": "prod", "group": "apps", "version": "v1", "kind": "Deployment", "count": 1})
    );
    let namespace = summary("cluster=prod&namespace=shop").await;
    assert_eq!(namespace["cluster"], "prod");
    assert_eq!(namespace["namespace"], "shop");
    assert_eq!(
        namespace["countByGVK"],
        json!({"ConfigMap.v1": 1, "Deployment.apps/v1": 1, "Pod.v1": 1})
    );
    let custom = summary("kind=ConfigMap").await;
    assert_eq!(custom["countByGVK"], json!({"ConfigMap.v1": 2}), "{custom}");
    let resource = summary("cluster=prod&apiVersion=v1&kind=Pod&namespace=shop&name=web-1").await;
    assert_eq!(
        resource["resource"],
        json!({"cluster": "prod", "apiVersion": "v1", "kind": "Pod",
            "namespace": "shop", "name": "web-1", "status": "Running"})
    );
    assert_eq!(resource["uid"], "uid-Pod-shop-web-1");
    assert_eq!(resource["resourceVersion"], "7");

    let detail = "/rest-api/v1/insight/detail?cluster=prod&apiVersion=apps/v1&kind=Deployment&namespace=shop&name=web";
    let (code, object) = admin.call("GET", detail, None).await;
    assert_eq!(code, 200, "{object}");
    assert_eq!(object["data"]["kind"], "Deployment");
    assert_eq!(object["data"]["spec"]["replicas"], 1);
    let (code, yaml) = admin
        .call("GET", &format!("{detail}&format=yaml"), None)
        .await;
    assert_eq!(code, 200, "{yaml}");
    assert!(yaml["data"].as_str().unwrap().contains("kind: Deployment"));
}

/// Karpor's built-in `namespace` rule (its Insight page opens on it) is there from the
/// start; rules named in the body, any field (labels too), groups as `{fields, groups}`.
async fn resource_groups(admin: &Client) {
    let (code, built_in) = admin
        .call("GET", "/rest-api/v1/resource-group-rule/namespace", None)
        .await;
    assert_eq!(code, 200, "{built_in}");
    assert_eq!(built_in["data"]["fields"], json!(["namespace"]));
    assert_eq!(
        built_in["data"]["description"],
        "Default resource group rule for namespace"
    );
    let (code, groups) = admin
        .call("GET", "/rest-api/v1/resource-groups/namespace", None)
        .await;
    assert_eq!(code, 200, "{groups}");
    assert_eq!(groups["data"]["fields"], json!(["namespace"]));
    assert!(
        groups["data"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!({"namespace": "shop"})),
        "{groups}"
    );

    let rule = json!({"name": "apps", "description": "by app", "fields": ["kind", "labels.app"]});
    let (code, created) = admin
        .call("POST", "/rest-api/v1/resource-group-rule", Some(rule))
        .await;
    assert!((200..300).contains(&code), "{created}");
    let (code, rules) = admin
        .call("GET", "/rest-api/v1/resource-group-rules", None)
        .await;
    assert_eq!(code, 200);
    let rules = rules["data"].as_array().unwrap().clone();
    let names: Vec<&str> = rules.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["apps", "namespace"]);
    assert_eq!(rules[0]["fields"], json!(["kind", "labels.app"]));
    assert!(rules[0]["id"].is_string());

    let (code, groups) = admin
        .call("GET", "/rest-api/v1/resource-groups/apps", None)
        .await;
    assert_eq!(code, 200, "{groups}");
    assert_eq!(groups["data"]["fields"], json!(["kind", "labels.app"]));
    let groups = groups["data"]["groups"].as_array().unwrap().clone();
    assert!(
        groups.contains(&json!({"kind": "ConfigMap", "labels": {"app": "settings"}})),
        "{groups:?}"
    );
    assert!(
        groups.contains(&json!({"kind": "Pod", "labels": {"app": "web"}})),
        "{groups:?}"
    );

    let rule = json!({"name": "apps", "description": "by namespace", "fields": ["namespace"]});
    let (code, updated) = admin
        .call("PUT", "/rest-api/v1/resource-group-rule", Some(rule))
        .await;
    assert_eq!(code, 200, "{updated}");
    let (code, deleted) = admin
        .call("DELETE", "/rest-api/v1/resource-group-rule/apps", None)
        .await;
    assert_eq!(
        (code, &deleted["data"]),
        (200, &json!("ResourceGroupRule deleted successfully"))
    );
}

/// Without a model service the AI routes answer as Karpor's do: the diagnosis streams
/// 503 in plain text, the interpret streams one `error` event. Anyone may ask (they
/// change nothing), as in Karpor.
async fn ai_routes(karpor: &Karpor, admin: &Client) {
    let anonymous = reqwest::Client::new();
    for path in [
        "/rest-api/v1/insight/aggregator/log/diagnosis/stream",
        "/rest-api/v1/insight/aggregator/event/diagnosis/stream",
    ] {
        let response = anonymous
            .post(karpor.url(path))
            .json(&json!({"logs": ["x"], "language": "English"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 503, "{path}");
        assert_eq!(
            response.text().await.unwrap(),
            "AI service is not available"
        );
    }
    for path in [
        "/rest-api/v1/insight/yaml/interpret/stream",
        "/rest-api/v1/insight/issue/interpret/stream",
    ] {
        let response = admin
            .request(reqwest::Method::POST, path)
            .json(&json!({"yaml": "kind: Pod", "language": "English"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "{path}"
        );
        let text = response.text().await.unwrap();
        let event: Value =
            serde_json::from_str(text.trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(
            event,
            json!({"type": "error", "content": "AI service not configured"})
        );
    }
    for secret in SECRETS {
        assert!(!karpor.logs().contains(secret), "{secret} logged");
    }
}
