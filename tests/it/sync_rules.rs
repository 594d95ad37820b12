//! Sync rules through a real `karpor serve` and real member clusters (their REST CRUD,
//! roles, versions and errors are tested in-process, `pkg/api/tests`): a custom resource
//! searchable with the built-in rules; `karpor rule apply -f` round trips and its dry run
//! counts what the cluster has; a rule narrowed to a custom resource leaves storage with
//! nothing else; a type the credentials may not list is that type's error (REST,
//! `cluster list -o wide`, metrics) while the rest syncs.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use karpor_testkit::api::Client;
use karpor_testkit::cluster::{configmaps, kube_name, namespaces, resource, secrets, Kube, LIMIT};
use karpor_testkit::process::{get, wait_for, Karpor, Spawn, EMBEDDED};
use karpor_testkit::service;
use karpor_testkit::services::APISERVER_TOKEN;
use kube::api::{Api, ApiResource, ListParams, PostParams};
use serde_json::{json, Value};

use crate::cli::{karpor, text};

/// Waits until `cluster` follows `rule` at `version` and has settled under it.
async fn settled(api: &Client, cluster: &str, rules: &[(&str, Option<i64>)]) -> Value {
    let want: Vec<Value> = rules
        .iter()
        .map(|(name, version)| json!({"name": name, "version": version}))
        .collect();
    let started = std::time::Instant::now();
    loop {
        let (_, answer) = api
            .call("GET", &format!("/rest-api/v1/cluster/{cluster}"), None)
            .await;
        let status = &answer["data"]["syncStatus"];
        let types = status["types"].as_array().cloned().unwrap_or_default();
        if status["rules"] == json!(want)
            && status["state"] == "synced"
            && types.iter().all(|t| t["state"] != "syncing")
        {
            return status.clone();
        }
        assert!(
            started.elapsed() < LIMIT,
            "{cluster} did not settle under {want:?}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn run(server: &Karpor, args: &[&str]) -> (i32, String, String) {
    text(&karpor(args, &server.url(""), server.dir(), &[]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_is_searchable_by_default_and_a_rule_round_trips_through_the_cli() {
    let path = service("KARPOR_TEST_KUBECONFIG_A").expect("test services: scripts/services.sh");
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = kube_name("rule-cli");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let in_ns = Some(ns.as_str());
    for i in 0..3 {
        kube.create(
            &configmaps(),
            in_ns,
            json!({"metadata": {"name": format!("cm-{i}"), "labels": {"tier": if i == 0 { "db" } else { "web" }}}}),
        )
        .await;
    }
    kube.create(&secrets(), in_ns, json!({"metadata": {"name": "s"}}))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let server = Spawn::serve(EMBEDDED).in_dir(dir.path()).start();
    let (code, out, err) = run(&server, &["cluster", "add", "a", "--kubeconfig", &path]);
    assert_eq!(code, 0, "{out}{err}");
    let api = Client::local_admin(&server);
    settled(
        &api,
        "a",
        &[("default", None), ("default-metadata-only", None)],
    )
    .await;

    // The first try: a custom resource made after the cluster was added is
    // searchable with the built-in rules, without anything else.
    let (databases, crd) = kube.database_crd("rules").await;
    for name in ["orders", "users"] {
        kube.create(
            &databases,
            in_ns,
            json!({"metadata": {"name": name}, "spec": {"engine": "postgres"}}),
        )
        .await;
    }
    let query = format!("select * from resources where kind='Database' and namespace='{ns}'");
    wait_for(LIMIT, "the Databases are found", || {
        let found = run(&server, &["search", &query]);
        async move { found.0 == 0 && found.1.contains("orders") && found.1.contains("users") }
    })
    .await;

    // A rule file kept in git: tried first, then applied.
    let group = databases.group.clone();
    let file = dir.path().join("databases.yaml");
    let rule = |extra: &str| {
        format!(
            "name: databases\ndescription: the team's databases\nclusters: \"*\"\nresources:\n\
             - {{group: {group}, version: \"*\", resource: databases}}\n\
             - {{group: \"\", version: v1, resource: configmaps}}\n\
             - {{group: \"\", version: v1, resource: secrets}}\nnamespaces: [{ns}]\n{extra}"
        )
    };
    std::fs::write(&file, rule("")).unwrap();
    let file_arg = file.to_str().unwrap();
    let (code, out, err) = run(
        &server,
        &[
            "rule",
            "apply",
            "-f",
            file_arg,
            "--dry-run",
            "--cluster",
            "a",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let dry: Value = serde_json::from_str(&out).unwrap();
    let counted = |dry: &Value, kind: &str| -> Option<u64> {
        dry["clusters"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == kind)
            .and_then(|r| r["objects"].as_u64())
    };
    // The cluster's own counts.
    let live = |r: ApiResource, labels: Option<&'static str>| {
        let api = kube.api(&r, in_ns);
        async move {
            let params = labels.map_or(ListParams::default(), |l| ListParams::default().labels(l));
            api.list(&params).await.unwrap().items.len() as u64
        }
    };
    assert_eq!(dry["clusters"][0]["cluster"], "a");
    assert_eq!(dry["clusters"][0]["selected"], true);
    assert_eq!(
        counted(&dry, "Database"),
        Some(live(databases.clone(), None).await)
    );
    assert_eq!(
        counted(&dry, "ConfigMap"),
        Some(live(configmaps(), None).await)
    );
    assert_eq!(counted(&dry, "Secret"), Some(live(secrets(), None).await));
    assert_eq!(counted(&dry, "Database"), Some(2));
    let resources = dry["clusters"][0]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 3, "{dry}");
    assert!(resources.iter().all(|r| r["namespaced"] == true
        && r["watchedBy"] == "databases"
        && r["namespaces"] == json!([ns])));
    // With a label selector the API server counts nothing itself: the pages are counted.
    std::fs::write(&file, rule("labelSelector: tier=db\n")).unwrap();
    let (code, out, err) = run(&server, &["rule", "apply", "-f", file_arg, "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("CLUSTER"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>().get(..5)
                == Some(&["a", "v1", "ConfigMap", "true", "1"][..])),
        "{out}"
    );
    assert_eq!(live(configmaps(), Some("tier=db")).await, 1);
    let (code, out, _) = run(&server, &["rule", "list", "-o", "name"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "syncrule/default\nsyncrule/default-metadata-only\n"),
        "a dry run stores nothing"
    );

    // Applied: created, unchanged, configured; what `get -o yaml` prints applies back.
    std::fs::write(&file, rule("")).unwrap();
    let (code, out, err) = run(&server, &["rule", "apply", "-f", file_arg]);
    assert_eq!(
        (code, out.as_str()),
        (0, "syncrule/databases created\n"),
        "{err}"
    );
    let (code, out, _) = run(&server, &["rule", "apply", "-f", file_arg]);
    assert_eq!((code, out.as_str()), (0, "syncrule/databases unchanged\n"));
    std::fs::write(
        &file,
        rule("keepAfterDelete: false\ntransform: {mode: full}\n"),
    )
    .unwrap();
    let (_, out, _) = run(&server, &["rule", "apply", "-f", file_arg]);
    assert_eq!(
        out, "syncrule/databases unchanged\n",
        "defaults spelt out are no change"
    );
    std::fs::write(&file, rule("transform: {trim: [spec.engine]}\n")).unwrap();
    let (code, out, err) = run(&server, &["rule", "apply", "-f", file_arg]);
    assert_eq!(
        (code, out.as_str()),
        (0, "syncrule/databases configured\n"),
        "{err}"
    );
    let (code, yaml, _) = run(&server, &["rule", "get", "databases", "-o", "yaml"]);
    assert_eq!(code, 0);
    assert!(yaml.contains("version: "), "{yaml}");
    let copy = dir.path().join("copy.yaml");
    std::fs::write(&copy, &yaml).unwrap();
    let (code, out, err) = run(&server, &["rule", "apply", "-f", copy.to_str().unwrap()]);
    assert_eq!(
        (code, out.as_str()),
        (0, "syncrule/databases unchanged\n"),
        "{err}"
    );
    let (code, out, _) = run(&server, &["rule", "list"]);
    assert_eq!(code, 0);
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[0], "databases", "{out}");
    assert_eq!(row[3], ns, "{out}");
    assert_eq!(row[4], "full+trim", "{out}");

    // The cluster settles under it: nothing it does not select stays in storage.
    let (_, stored) = api
        .call("GET", "/rest-api/v1/sync-rule/databases", None)
        .await;
    let version = stored["data"]["version"].as_i64().unwrap();
    let status = settled(&api, "a", &[("databases", Some(version))]).await;
    let types = status["types"].as_array().unwrap();
    assert_eq!(types.len(), 3, "{status}");
    let everything_but = "select * from resources where cluster='a' and kind!='Database' and kind!='ConfigMap' and kind!='Secret'";
    let (code, out, _) = run(&server, &["search", everything_but, "-o", "json"]);
    assert_eq!(code, 0);
    let found: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(found["total"], 0, "{out}");
    let (_, out, _) = run(&server, &["search", &query, "-o", "json"]);
    let found: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(found["total"], 2, "{out}");
    assert!(
        found["items"][0]["object"]["spec"].get("engine").is_none(),
        "trimmed: {out}"
    );

    let (code, out, _) = run(&server, &["rule", "rm", "databases"]);
    assert_eq!((code, out.as_str()), (0, "syncrule/databases deleted\n"));
    let (code, _, err) = run(&server, &["rule", "rm", "databases"]);
    assert_eq!(code, 1);
    assert!(err.contains("404"), "{err}");
    let crds = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    kube.delete(&crds, None, &crd).await;
    kube.delete_namespace(&ns).await;
    api.assert_no_secret_answered();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_the_credentials_may_not_list_is_that_types_error_while_the_rest_syncs() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_B").await;
    let ns = kube_name("forbidden");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let in_ns = Some(ns.as_str());
    kube.create(
        &configmaps(),
        in_ns,
        json!({"metadata": {"name": "readable"}}),
    )
    .await;
    kube.create(&secrets(), in_ns, json!({"metadata": {"name": "hidden"}}))
        .await;
    // A service account that may list and watch ConfigMaps, not Secrets.
    let role = kube_name("configmaps-only");
    let rbac = |kind: &str, plural: &str| resource("rbac.authorization.k8s.io", "v1", kind, plural);
    kube.create(
        &resource("", "v1", "ServiceAccount", "serviceaccounts"),
        in_ns,
        json!({"metadata": {"name": "reader"}}),
    )
    .await;
    kube.create(
        &rbac("ClusterRole", "clusterroles"),
        None,
        json!({"metadata": {"name": role}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
        ]}),
    )
    .await;
    kube.create(
        &rbac("ClusterRoleBinding", "clusterrolebindings"),
        None,
        json!({"metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]}),
    )
    .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(kube.client.clone(), &ns);
    let request: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}
    }))
    .unwrap();
    let token = accounts
        .create_token_request("reader", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap();
    let limited = kube.kubeconfig.replace(APISERVER_TOKEN, &token);
    assert_ne!(limited, kube.kubeconfig);

    let dir = tempfile::tempdir().unwrap();
    let server = Spawn::serve(EMBEDDED).in_dir(dir.path()).start();
    let api = Client::local_admin(&server);
    let (code, created) = api
        .call(
            "POST",
            "/rest-api/v1/sync-rule/objects",
            Some(json!({"clusters": "*", "namespaces": [ns], "resources": [
                {"version": "v1", "resource": "configmaps"},
                {"version": "v1", "resource": "secrets"}]})),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let version = created["data"]["version"].as_i64().unwrap();
    let (code, added) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/limited",
            Some(json!({"kubeConfig": limited})),
        )
        .await;
    assert_eq!(code, 201, "{added}");

    let status = settled(&api, "limited", &[("objects", Some(version))]).await;
    let state = |resource: &str| {
        let t = status["types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["resource"] == resource)
            .unwrap_or_else(|| panic!("{resource} not watched: {status}"))
            .clone();
        (t["state"].clone(), t["reason"].clone())
    };
    assert_eq!(state("secrets"), (json!("error"), json!("forbidden")));
    assert_eq!(state("configmaps"), (json!("synced"), Value::Null));
    // The rest synced, and readiness holds for nobody.
    let (code, out, _) = run(
        &server,
        &[
            "search",
            &format!("select * from resources where namespace='{ns}'"),
        ],
    );
    assert_eq!(code, 0);
    assert!(out.contains("readable") && !out.contains("hidden"), "{out}");
    let (code, readyz) = get(&server.url("/readyz")).await;
    assert_eq!(code, 200, "{readyz}");
    let (code, out, _) = run(&server, &["cluster", "list", "-o", "wide"]);
    assert_eq!(code, 0);
    assert!(out.contains("TYPES"), "{out}");
    assert!(out.contains("1/2 synced; secrets in "), "{out}");
    assert!(out.contains(": forbidden"), "{out}");
    let (_, metrics) = get(&server.url("/metrics")).await;
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("karpor_syncer_type_state{")
                && l.contains("resource=\"secrets\"")
                && l.contains("state=\"forbidden\"")
        })
        .unwrap_or_else(|| panic!("no forbidden secrets in the metrics:\n{metrics}"));
    assert!(line.ends_with(" 1"), "{line}");
    // The dry run says the same, type by type.
    let (code, dry) = api
        .call(
            "POST",
            "/rest-api/v1/sync-rule/objects/dry-run?cluster=limited",
            None,
        )
        .await;
    assert_eq!(code, 200, "{dry}");
    let resources = dry["data"]["clusters"][0]["resources"].as_array().unwrap();
    let secrets_row = resources.iter().find(|r| r["kind"] == "Secret").unwrap();
    assert_eq!(
        (&secrets_row["error"], &secrets_row["objects"]),
        (&json!("forbidden"), &Value::Null)
    );
    let configmaps_row = resources.iter().find(|r| r["kind"] == "ConfigMap").unwrap();
    assert_eq!(configmaps_row["objects"], 1);

    let (code, _) = api
        .call("DELETE", "/rest-api/v1/cluster/limited", None)
        .await;
    assert_eq!(code, 200);
    kube.delete(
        &rbac("ClusterRoleBinding", "clusterrolebindings"),
        None,
        &role,
    )
    .await;
    kube.delete(&rbac("ClusterRole", "clusterroles"), None, &role)
        .await;
    kube.delete_namespace(&ns).await;
    assert!(!server.logs().contains(&token), "the token was logged");
}
