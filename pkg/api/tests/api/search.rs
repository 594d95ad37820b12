//! Search, insight and resource groups over documents written straight into SQLite
//! storage (no syncer: nothing else writes or purges them), with Karpor's requests and
//! the fields its page reads.

use karpor_storage::ResourceDocument;
use karpor_testkit::api::THREE_CONTEXTS;
use serde_json::{json, Value};

use crate::app::{Api, Client, Setup};
use crate::{cluster_body, urlencode};

pub(crate) fn document(
    cluster: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    object: Value,
) -> ResourceDocument {
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
        cluster: cluster.to_owned(),
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

/// A registered cluster `c1` with three documents: ConfigMaps `settings` in `a` and `b`,
/// Deployment `web` in `a`, all labelled `app` and holding `colour: teal`.
async fn three_documents() -> Api {
    let api = Setup::default().start().await;
    let (code, _) = api
        .admin()
        .call(
            "POST",
            "/rest-api/v1/cluster/c1",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 201);
    let teal = || json!({"data": {"colour": "teal"}});
    api.storage
        .upsert(&[
            document("c1", "ConfigMap", "a", "settings", teal()),
            document("c1", "ConfigMap", "b", "settings", teal()),
            document("c1", "Deployment", "a", "web", teal()),
        ])
        .await
        .unwrap();
    api
}

fn sql(query: &str) -> String {
    format!("/rest-api/v1/search?query={}", urlencode(query))
}

#[tokio::test]
async fn search_answers_from_storage_and_refuses_what_it_cannot_run() {
    let api = three_documents().await;
    let guest = api.guest();
    let (code, found) = guest
        .call(
            "GET",
            &sql("select * from resources where kind='ConfigMap' order by namespace"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{found}");
    assert_eq!(found["data"]["total"], 2);
    let item = &found["data"]["items"][0];
    assert_eq!(item["cluster"], "c1");
    assert_eq!(item["object"]["metadata"]["namespace"], "a");
    assert_eq!(item["deleted"], false);
    assert!(item["syncAt"].is_string());
    assert!(item["issues"].is_array(), "{item}");
    let (code, page) = guest
        .call(
            "GET",
            &format!(
                "{}&page=2&pageSize=1&pattern=sql",
                sql("select * from resources order by name")
            ),
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            page["data"]["currentPage"].as_u64(),
            page["data"]["pageSize"].as_u64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(page["data"]["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["data"]["total"], 3);
    let (code, by_keyword) = guest
        .call("GET", "/rest-api/v1/search?keyword=web", None)
        .await;
    assert_eq!((code, by_keyword["data"]["total"].as_u64()), (200, Some(1)));
    let (code, by_keyword) = guest
        .call(
            "GET",
            "/rest-api/v1/search?pattern=keyword&query=teal",
            None,
        )
        .await;
    assert_eq!((code, by_keyword["data"]["total"].as_u64()), (200, Some(3)));
    let (code, custom) = guest
        .call(
            "GET",
            &format!(
                "{}&format=custom-columns=NAME:.metadata.name",
                sql("select * from resources where kind='Deployment'")
            ),
            None,
        )
        .await;
    assert_eq!(code, 200, "{custom}");
    assert_eq!(
        custom["data"]["items"][0]["object"],
        json!({"fields": {"NAME": "web"}, "titles": ["NAME"]}),
        "{custom}"
    );
    for (query, expected) in [
        (sql("select * from resources where colour = 'x'"), "colour"),
        (sql("delete from resources"), "only select"),
        (
            format!("{}&pageSize=5000", sql("select * from resources")),
            "pageSize",
        ),
        (
            "/rest-api/v1/search?pattern=nl&query=x".to_owned(),
            "pattern",
        ),
        ("/rest-api/v1/search".to_owned(), "required"),
        (
            "/rest-api/v1/search?pattern=keyword&query=x&keyword=y".to_owned(),
            "not both",
        ),
        (
            "/rest-api/v1/search?pattern=sql&keyword=y".to_owned(),
            "required",
        ),
        (
            "/rest-api/v1/search?pattern=dsl&query=kind".to_owned(),
            "kind",
        ),
    ] {
        let (code, answer) = guest.call("GET", &query, None).await;
        assert_eq!(code, 400, "{query}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(expected),
            "{query}: {answer}"
        );
    }
    api.assert_no_secret_answered();
}

#[tokio::test]
async fn insight_counts_and_reads_stored_objects() {
    let api = three_documents().await;
    let guest = api.guest();
    let (code, stats) = guest.call("GET", "/rest-api/v1/insight/stats", None).await;
    assert_eq!(code, 200);
    assert_eq!(
        stats["data"],
        json!({"clusterCount": 1, "resourceCount": 3, "resourceGroupRuleCount": 0})
    );
    let (code, summary) = guest
        .call("GET", "/rest-api/v1/insight/summary?cluster=c1", None)
        .await;
    assert_eq!(code, 200, "{summary}");
    assert_eq!(summary["data"]["resourceCount"], 3);
    assert_eq!(
        summary["data"]["countByKind"],
        json!([{"key": "ConfigMap", "count": 2}, {"key": "Deployment", "count": 1}])
    );
    assert_eq!(
        summary["data"]["countByNamespace"],
        json!([{"key": "a", "count": 2}, {"key": "b", "count": 1}])
    );
    let (code, summary) = guest
        .call(
            "GET",
            "/rest-api/v1/insight/summary?cluster=c1&namespace=b",
            None,
        )
        .await;
    assert_eq!(
        (code, summary["data"]["resourceCount"].as_u64()),
        (200, Some(1))
    );
    let (code, summary) = guest
        .call(
            "GET",
            "/rest-api/v1/insight/summary?cluster=c1&namespace=a&apiVersion=apps/v1&kind=Deployment&name=web",
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        summary["data"]["resource"]["apiVersion"], "apps/v1",
        "{summary}"
    );
    let (code, detail) = guest
        .call(
            "GET",
            "/rest-api/v1/insight/detail?cluster=c1&namespace=b&kind=ConfigMap&name=settings",
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        detail["data"]["data"]["colour"], "teal",
        "the object itself, as Karpor"
    );
    assert_eq!(detail["data"]["karpor"]["cluster"], "c1", "{detail}");
    assert_eq!(detail["data"]["karpor"]["source"], "stored", "{detail}");
    for (path, status) in [
        ("/rest-api/v1/insight/summary?cluster=nope", 404),
        (
            "/rest-api/v1/insight/detail?cluster=c1&kind=ConfigMap&name=missing",
            404,
        ),
        (
            "/rest-api/v1/insight/detail?cluster=c1&kind=ConfigMap&name=settings",
            409,
        ),
        ("/rest-api/v1/insight/detail?cluster=c1&kind=ConfigMap", 400),
    ] {
        let (code, answer) = guest.call("GET", path, None).await;
        assert_eq!(code, status, "{path}: {answer}");
    }

    // The cluster's sync status is unknown (no syncer here); its stored count is known.
    let (_, cluster) = guest.call("GET", "/rest-api/v1/cluster/c1", None).await;
    assert_eq!(cluster["data"]["syncStatus"]["state"], "unknown");
    assert_eq!(cluster["data"]["syncStatus"]["objectsStored"], 3);
    api.assert_no_secret_answered();
}

#[tokio::test]
async fn resource_group_rules_have_crud_and_group_stored_objects() {
    let api = three_documents().await;
    let (admin, guest) = (api.admin(), api.guest());
    let rule = |fields: Value| Some(json!({"description": "d", "fields": fields}));
    let (code, created) = admin
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule/kinds",
            rule(json!(["kind"])),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let (code, _) = admin
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule/kinds",
            rule(json!(["kind"])),
        )
        .await;
    assert_eq!(code, 409);
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule/bad",
            rule(json!(["colour"])),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    let (code, groups) = guest
        .call("GET", "/rest-api/v1/resource-groups/kinds", None)
        .await;
    assert_eq!(code, 200, "{groups}");
    assert_eq!(
        groups["data"]["items"],
        json!([{"values": {"kind": "ConfigMap"}, "count": 2}, {"values": {"kind": "Deployment"}, "count": 1}])
    );
    let (code, _) = admin
        .call(
            "PUT",
            "/rest-api/v1/resource-group-rule/kinds",
            rule(json!(["namespace", "kind"])),
        )
        .await;
    assert_eq!(code, 200);
    let (_, groups) = guest
        .call("GET", "/rest-api/v1/resource-groups/kinds", None)
        .await;
    assert_eq!(groups["data"]["total"], 3, "{groups}");
    assert_eq!(
        groups["data"]["items"][0],
        json!({"values": {"namespace": "a", "kind": "ConfigMap"}, "count": 1})
    );
    let (code, list) = guest
        .call("GET", "/rest-api/v1/resource-group-rules", None)
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        list["data"].as_array().map(Vec::len),
        Some(1),
        "an array, as Karpor"
    );
    let (code, stats) = guest.call("GET", "/rest-api/v1/insight/stats", None).await;
    assert_eq!(
        (code, &stats["data"]["resourceGroupRuleCount"]),
        (200, &json!(1))
    );
    let (code, _) = guest
        .call("GET", "/rest-api/v1/resource-group-rule/kinds", None)
        .await;
    assert_eq!(code, 200);
    let (code, deleted) = admin
        .call("DELETE", "/rest-api/v1/resource-group-rule/kinds", None)
        .await;
    assert_eq!(
        (code, &deleted["data"]),
        (200, &json!("ResourceGroupRule deleted successfully"))
    );
    for path in [
        "/rest-api/v1/resource-groups/kinds",
        "/rest-api/v1/resource-group-rule/kinds",
    ] {
        let (code, _) = guest.call("GET", path, None).await;
        assert_eq!(code, 404, "{path}");
    }
    api.assert_no_secret_answered();
}

/// Documents as Karpor's page reads them: a node, a running pod, a Deployment, two
/// ConfigMaps in cluster `prod`.
async fn karpors_documents(api: &Api) {
    let (code, _) = api
        .admin()
        .call(
            "POST",
            "/rest-api/v1/cluster/prod",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 201);
    let node = json!({"status": {
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}});
    let pod = json!({
        "spec": {"containers": [{"name": "web",
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]},
        "status": {"phase": "Running",
            "containerStatuses": [{"name": "web", "state": {"running": {}}}]}});
    api.storage
        .upsert(&[
            document("prod", "Node", "", "node-1", node),
            document("prod", "Pod", "shop", "web-1", pod),
            document(
                "prod",
                "Deployment",
                "shop",
                "web",
                json!({"spec": {"replicas": 1}}),
            ),
            document(
                "prod",
                "ConfigMap",
                "shop",
                "settings",
                json!({"data": {"a": "1"}}),
            ),
            document(
                "prod",
                "ConfigMap",
                "tools",
                "settings",
                json!({"data": {"a": "2"}}),
            ),
        ])
        .await
        .unwrap();
}

async fn data(client: &Client<'_>, path: &str) -> Value {
    let (code, answer) = client.call("GET", path, None).await;
    assert_eq!(code, 200, "{path}: {answer}");
    answer["data"].clone()
}

/// SQL (with Karpor's page's empty `keyword=`, and narrowed by a keyword), the DSL and
/// the answer's `sqlQuery`; the summary's five variants and the detail's two formats;
/// rules named in the body, groups as `{fields, groups}`.
#[tokio::test]
async fn karpors_page_reads_search_insight_and_groups_unchanged() {
    let api = Setup::default().start().await;
    karpors_documents(&api).await;
    let admin = api.admin();
    let search = "/rest-api/v1/search?";
    let page = data(
        &admin,
        &format!(
            "{search}query=select%20*%20from%20resources&pattern=sql&keyword=&page=1&pageSize=20"
        ),
    )
    .await;
    assert_eq!(page["total"], 5, "{page}");
    assert_eq!(page["sqlQuery"], "select * from resources");
    let page = data(
        &admin,
        &format!("{search}query=select%20*%20from%20resources%20where%20namespace%3D'shop'&pattern=sql&keyword=web"),
    )
    .await;
    assert_eq!(page["total"], 2, "Deployment web, Pod web-1: {page}");
    assert_eq!(
        page["sqlQuery"],
        "select * from resources where namespace='shop' AND (name LIKE '%web%' OR namespace LIKE '%web%')"
    );
    let page = data(
        &admin,
        &format!("{search}query=select%20*%20from%20resources&keyword=tool"),
    )
    .await;
    assert_eq!(page["total"], 1, "namespace tools: {page}");
    let page = data(
        &admin,
        &format!("{search}pattern=dsl&query=kind%3DConfigMap,namespace%3Dshop"),
    )
    .await;
    assert_eq!(page["total"], 1, "{page}");
    let page = data(
        &admin,
        &format!("{search}pattern=dsl&query=labels.app%3Dweb"),
    )
    .await;
    assert_eq!(page["total"], 2, "{page}");

    let summary = "/rest-api/v1/insight/summary?";
    let cluster = data(&admin, &format!("{summary}cluster=prod")).await;
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
    let gvk = data(
        &admin,
        &format!("{summary}cluster=prod&apiVersion=apps/v1&kind=Deployment"),
    )
    .await;
    assert_eq!(
        gvk,
        json!({"cluster": "prod", "group": "apps", "version": "v1", "kind": "Deployment", "count": 1})
    );
    let namespace = data(&admin, &format!("{summary}cluster=prod&namespace=shop")).await;
    assert_eq!(namespace["cluster"], "prod");
    assert_eq!(namespace["namespace"], "shop");
    assert_eq!(
        namespace["countByGVK"],
        json!({"ConfigMap.v1": 1, "Deployment.apps/v1": 1, "Pod.v1": 1})
    );
    let custom = data(&admin, &format!("{summary}kind=ConfigMap")).await;
    assert_eq!(custom["countByGVK"], json!({"ConfigMap.v1": 2}), "{custom}");
    // The locator's fields beside the counts, those not given left out (Karpor's shape).
    assert_eq!(custom["kind"], json!("ConfigMap"), "{custom}");
    assert!(custom.get("cluster").is_none(), "{custom}");
    let resource = data(
        &admin,
        &format!("{summary}cluster=prod&apiVersion=v1&kind=Pod&namespace=shop&name=web-1"),
    )
    .await;
    assert_eq!(
        resource["resource"],
        json!({"cluster": "prod", "apiVersion": "v1", "kind": "Pod",
            "namespace": "shop", "name": "web-1", "status": "Running"})
    );
    assert_eq!(resource["uid"], "uid-Pod-shop-web-1");
    assert_eq!(resource["resourceVersion"], "7");

    let detail = "/rest-api/v1/insight/detail?cluster=prod&apiVersion=apps/v1&kind=Deployment&namespace=shop&name=web";
    let object = data(&admin, detail).await;
    assert_eq!(object["kind"], "Deployment");
    assert_eq!(object["spec"]["replicas"], 1);
    let yaml = data(&admin, &format!("{detail}&format=yaml")).await;
    assert!(yaml.as_str().unwrap().contains("kind: Deployment"));

    let rule = json!({"name": "apps", "description": "by app", "fields": ["kind", "labels.app"]});
    let (code, created) = admin
        .call("POST", "/rest-api/v1/resource-group-rule", Some(rule))
        .await;
    assert_eq!(code, 201, "{created}");
    let rules = data(&admin, "/rest-api/v1/resource-group-rules").await;
    let rules = rules.as_array().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0]["name"], "apps");
    assert_eq!(rules[0]["fields"], json!(["kind", "labels.app"]));
    assert!(rules[0]["id"].is_string());
    let groups = data(&admin, "/rest-api/v1/resource-groups/apps").await;
    assert_eq!(groups["fields"], json!(["kind", "labels.app"]));
    let groups = groups["groups"].as_array().unwrap();
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
    assert_eq!(updated["data"]["fields"], json!(["namespace"]), "{updated}");
    api.assert_no_secret_answered();
}

/// What Karpor's namespace and group pages ask, on the embedded default: a namespace's
/// detail is its Namespace object (or its YAML); a label group's topology is the graph
/// of kinds of each cluster holding matching objects, keyed by cluster, only the named
/// cluster's when one is given.
#[tokio::test]
async fn karpors_namespace_and_group_pages_read_unchanged() {
    let api = Setup::default().start().await;
    karpors_documents(&api).await;
    api.storage
        .upsert(&[
            document("prod", "Namespace", "", "shop", json!({})),
            document("other", "Pod", "shop", "web-2", json!({})),
        ])
        .await
        .unwrap();
    let admin = api.admin();
    let namespace = data(
        &admin,
        "/rest-api/v1/insight/detail?cluster=prod&namespace=shop",
    )
    .await;
    assert_eq!(
        (&namespace["kind"], &namespace["metadata"]["name"]),
        (&json!("Namespace"), &json!("shop")),
        "{namespace}"
    );
    let yaml = data(
        &admin,
        "/rest-api/v1/insight/detail?cluster=prod&namespace=shop&format=yaml",
    )
    .await;
    assert!(yaml.as_str().unwrap().contains("kind: Namespace"), "{yaml}");
    let (code, missing) = admin
        .call(
            "GET",
            "/rest-api/v1/insight/detail?cluster=prod&namespace=tools",
            None,
        )
        .await;
    assert_eq!(code, 404, "no Namespace object stored for tools: {missing}");

    let graph = data(&admin, "/rest-api/v1/insight/topology?labels=app%3Dweb").await;
    let clusters: Vec<&String> = graph.as_object().unwrap().keys().collect();
    assert_eq!(clusters, ["other", "prod"], "{graph}");
    assert_eq!(graph["prod"][".v1.Pod"]["count"], 1, "{graph}");
    assert_eq!(graph["prod"]["apps.v1.Deployment"]["count"], 1, "{graph}");
    assert_eq!(graph["prod"][".v1.Pod"]["resourceGroup"]["cluster"], "prod");
    assert_eq!(graph["other"][".v1.Pod"]["count"], 1, "{graph}");
    assert!(graph["prod"].get(".v1.ConfigMap").is_none(), "{graph}");
    let graph = data(
        &admin,
        "/rest-api/v1/insight/topology?cluster=prod&labels=app%3Dweb",
    )
    .await;
    let clusters: Vec<&String> = graph.as_object().unwrap().keys().collect();
    assert_eq!(clusters, ["prod"], "{graph}");
    let graph = data(&admin, "/rest-api/v1/insight/topology?labels=app%3Dnothing").await;
    assert_eq!(graph, json!({}), "no cluster holds a match");
    api.assert_no_secret_answered();
}

fn rows(query: &str) -> String {
    format!("/rest-api/v1/search/rows?query={}", urlencode(query))
}

/// Columns, groups and counts as rows: values from the documents as answered, paged as
/// search pages, groups most first; what the dialect does not take is a 400 saying why.
#[tokio::test]
async fn rows_answer_columns_groups_and_counts() {
    let api = three_documents().await;
    let mut applied = document("c1", "ConfigMap", "c", "applied", json!({}));
    applied.annotations = [
        (
            "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
            "{\"data\":{\"password\":\"hunter2\"}}".to_owned(),
        ),
        ("team".to_owned(), "blue".to_owned()),
    ]
    .into();
    api.storage.upsert(&[applied]).await.unwrap();
    let guest = api.guest();

    let (code, found) = guest
        .call(
            "GET",
            &format!(
                "{}&page=1&pageSize=2",
                rows("select name, namespace, labels['app'], annotations.team, creationTimestamp from resources where kind = 'ConfigMap' order by namespace")
            ),
            None,
        )
        .await;
    assert_eq!(code, 200, "{found}");
    let data = &found["data"];
    assert_eq!(
        data["columns"],
        json!([
            "name",
            "namespace",
            "labels['app']",
            "annotations.team",
            "creationTimestamp"
        ])
    );
    assert_eq!(
        data["rows"],
        json!([
            ["settings", "a", "settings", null, null],
            ["settings", "b", "settings", null, null]
        ])
    );
    assert_eq!(
        (data["total"].as_u64(), data["totalRelation"].as_str()),
        (Some(3), Some("eq"))
    );

    let (code, grouped) = guest
        .call(
            "GET",
            &rows("select namespace, count(*) from resources group by namespace order by count(*) desc limit 2"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{grouped}");
    assert_eq!(grouped["data"]["rows"], json!([["a", 2], ["b", 1]]));
    assert_eq!(grouped["data"]["columns"], json!(["namespace", "count(*)"]));

    let (code, counted) = guest
        .call(
            "GET",
            &rows("select count(*) from resources where kind = 'ConfigMap'"),
            None,
        )
        .await;
    assert_eq!((code, &counted["data"]["rows"]), (200, &json!([[3]])));

    // kubectl's applied copy is never answered: not as a column, not as groups.
    let last_applied = "annotations.`kubectl.kubernetes.io/last-applied-configuration`";
    let (code, column) = guest
        .call(
            "GET",
            &rows(&format!(
                "select name, {last_applied} from resources where name = 'applied'"
            )),
            None,
        )
        .await;
    assert_eq!(
        (code, &column["data"]["rows"]),
        (200, &json!([["applied", null]]))
    );
    let (code, refused) = guest
        .call(
            "GET",
            &rows(&format!(
                "select {last_applied}, count(*) from resources group by {last_applied}"
            )),
            None,
        )
        .await;
    assert_eq!(code, 400, "{refused}");
    assert!(!refused.to_string().contains("hunter2"));

    for (query, says) in [
        ("select * from resources", "stands alone"),
        ("select name, count(*) from resources", "GROUP BY"),
        (
            "select syncAt, count(*) from resources group by syncAt",
            "cannot group",
        ),
        (
            "select name from resources; drop table resources",
            "one statement",
        ),
    ] {
        let (code, refused) = guest.call("GET", &rows(query), None).await;
        assert_eq!(code, 400, "{query}: {refused}");
        assert!(
            refused["message"]
                .as_str()
                .unwrap_or_default()
                .contains(says),
            "{query}: {refused}"
        );
    }
    let (code, _) = guest.call("GET", "/rest-api/v1/search/rows", None).await;
    assert_eq!(code, 400);
    // The documents' search still answers `select *` only, and says where columns go.
    let (code, refused) = guest
        .call("GET", &sql("select name from resources"), None)
        .await;
    assert_eq!(code, 400);
    assert!(refused.to_string().contains("/search/rows"), "{refused}");
}
