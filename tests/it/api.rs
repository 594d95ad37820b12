//! The REST API on a real `karpor serve`: envelopes and truthful statuses on every route,
//! clusters from kubeconfigs of every shape, roles, read-only mode, limits, a backend down,
//! and no credential in any answer or log line.

use std::time::{Duration, Instant};

use karpor_storage::{ResourceDocument, StorageConfig};
use karpor_testkit::api::{
    assert_no_secret_logged, Client, ADMIN, GUEST, SECRETS, THREE_CONTEXTS, WITH_TOKENS,
};
use karpor_testkit::process;
use karpor_testkit::process::{Spawn, EMBEDDED};
use karpor_testkit::service;
use serde_json::{json, Value};

fn cluster_body(kubeconfig: &str) -> Value {
    json!({"displayName": "One", "description": "test", "kubeConfig": kubeconfig})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_are_created_read_listed_updated_and_deleted_with_truthful_statuses() {
    // No syncer: it would try these unreachable clusters. The exec user's command is
    // allowed (exec users are off by default).
    let karpor = Spawn::serve(
        "server: {syncer: false}\nshutdown: {drain_delay: 1s}\nkubernetes: {exec: {allowed_commands: [/bin/false], allowed_env: {/bin/false: [TOKEN]}}}\n",
    )
    .start();
    let api = Client::local_admin(&karpor);

    let (code, created) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/one?context=second",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let data = &created["data"];
    assert_eq!(data["name"], "one");
    assert_eq!(data["displayName"], "One");
    assert_eq!(data["kubeconfigSummary"]["context"], "second");
    assert_eq!(data["kubeconfigSummary"]["authKind"], "clientCertificate");
    assert_eq!(data["kubeconfigSummary"]["namespace"], "apps");
    let masked = data["kubeConfig"].as_str().unwrap();
    assert!(masked.contains("client-key-data: \"******\""), "{masked}");
    // Only the chosen context is kept.
    assert!(
        !masked.contains("token-user") && !masked.contains("exec-user"),
        "{masked}"
    );

    for (context, kind) in [("first", "token"), ("third", "exec")] {
        let mut body = cluster_body(THREE_CONTEXTS);
        body["context"] = json!(context);
        let (code, created) = api
            .call(
                "POST",
                &format!("/rest-api/v1/cluster/{context}"),
                Some(body),
            )
            .await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["data"]["kubeconfigSummary"]["authKind"], kind);
    }

    let (code, again) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 409, "{again}");

    let (code, one) = api.call("GET", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 200);
    assert_eq!(one["data"]["version"], created["data"]["version"]);
    assert!(one["data"]["syncStatus"]["state"].is_string());
    let (code, missing) = api.call("GET", "/rest-api/v1/cluster/nope", None).await;
    assert_eq!(code, 404, "{missing}");
    assert!(missing["message"]
        .as_str()
        .unwrap()
        .contains("\"nope\" not found"));

    let (code, list) = api
        .call(
            "GET",
            "/rest-api/v1/clusters?orderBy=name&descending=true",
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(list["data"]["total"], 3);
    let names = |list: &Value| -> Vec<String> {
        list["data"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&list), ["third", "one", "first"]);
    let first = &list["data"]["items"][0];
    assert_eq!(first["apiVersion"], "cluster.karpor.io/v1beta1");
    assert_eq!(first["kind"], "Cluster");
    assert_eq!(
        first["name"], "third",
        "karpor's flat fields stay beside Karpor's"
    );
    // Karpor's clients send `ascending` and `orderBy=timestamp`; an unknown order is by
    // name, as in Karpor.
    let (code, list) = api
        .call(
            "GET",
            "/rest-api/v1/clusters?orderBy=timestamp&ascending=true",
            None,
        )
        .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["one", "first", "third"], "in creation order");
    let (code, list) = api
        .call("GET", "/rest-api/v1/clusters?orderBy=size", None)
        .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["first", "one", "third"]);
    let (code, summary) = api
        .call("GET", "/rest-api/v1/clusters?summary=true", None)
        .await;
    assert_eq!(code, 200, "{summary}");
    assert_eq!(summary["data"]["totalCount"], 3, "{summary}");
    let counted = summary["data"]["healthyCount"].as_u64().unwrap()
        + summary["data"]["unhealthyCount"].as_u64().unwrap();
    assert_eq!(counted, 3, "{summary}");

    let (code, updated) = api
        .call(
            "PUT",
            "/rest-api/v1/cluster/one",
            Some(json!({"displayName": "Renamed"})),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"]["displayName"], "Renamed");
    assert_eq!(updated["data"]["kubeconfigSummary"]["context"], "second");
    let (code, updated) = api
        .call(
            "PUT",
            "/rest-api/v1/cluster/one?context=first",
            Some(json!({"kubeConfig": THREE_CONTEXTS})),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"]["kubeconfigSummary"]["context"], "first");
    assert_eq!(updated["data"]["displayName"], "Renamed");
    let (code, _) = api
        .call(
            "PUT",
            "/rest-api/v1/cluster/nope",
            Some(json!({"displayName": "x"})),
        )
        .await;
    assert_eq!(code, 404);

    let (code, _) = api.call("DELETE", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 200);
    let (code, _) = api.call("DELETE", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 404);
    let (code, _) = api.call("GET", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 404);

    api.assert_no_secret_answered();
    assert_no_secret_logged(&karpor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_input_is_a_400_that_names_the_problem() {
    let karpor = Spawn::serve("server: {syncer: false}\nshutdown: {drain_delay: 1s}\n").start();
    let api = Client::local_admin(&karpor);
    let dir = tempfile::tempdir().unwrap();
    let missing_ca = THREE_CONTEXTS.replace(
        "certificate-authority-data: \"Q0E=\"",
        &format!(
            "certificate-authority: {}",
            dir.path().join("ca.crt").display()
        ),
    );
    let no_current = THREE_CONTEXTS.replace("current-context: first", "");
    let cases: Vec<(String, Value, &str)> = vec![
        (
            "Bad_Name".into(),
            cluster_body(THREE_CONTEXTS),
            "not a DNS-1123 label",
        ),
        (
            "x".into(),
            json!({"displayName": "no kubeconfig"}),
            "kubeConfig is required",
        ),
        (
            "x".into(),
            cluster_body("clusters: [\n - {name: a\n token: secret-token-1"),
            "at line",
        ),
        (
            "x".into(),
            cluster_body("just text with secret-token-1"),
            "not a kubeconfig",
        ),
        (
            "x".into(),
            cluster_body("apiVersion: v1\nkind: Config\n"),
            "has no contexts",
        ),
        (
            "x?context=fourth".into(),
            cluster_body(THREE_CONTEXTS),
            "\"fourth\" is not in the kubeconfig (it has: first, second, third)",
        ),
        (
            "x".into(),
            cluster_body(&missing_ca),
            "certificate-authority names a file on the server",
        ),
        (
            "x".into(),
            cluster_body(&no_current),
            "no current-context: choose one of first, second, third",
        ),
        (
            "x".into(),
            json!({"kubeConfig": THREE_CONTEXTS, "colour": "red"}),
            "unknown field `colour`",
        ),
        ("x".into(), json!({"kubeConfig": 7}), "invalid type"),
        (
            "x".into(),
            json!({"kubeConfig": THREE_CONTEXTS, "labels": "secret-token-1"}),
            "invalid type: string \"…\"",
        ),
    ];
    for (path, body, expected) in cases {
        let (code, answer) = api
            .call("POST", &format!("/rest-api/v1/cluster/{path}"), Some(body))
            .await;
        assert_eq!(code, 400, "{path}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(expected), "{path}: {message}");
    }
    // Not JSON at all, and JSON of the wrong content type.
    let (code, _) = api
        .send(
            api.request(reqwest::Method::POST, "/rest-api/v1/cluster/x")
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;
    assert_eq!(code, 400);
    let (code, _) = api
        .send(
            api.request(reqwest::Method::POST, "/rest-api/v1/cluster/x")
                .body("{}"),
        )
        .await;
    assert_eq!(code, 415);
    let (code, _) = api.call("GET", "/rest-api/v1/no-such-route", None).await;
    assert_eq!(code, 404);
    let (code, _) = api.call("PATCH", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 405);
    // Karpor ignores what it does not know in a query string.
    let (code, _) = api
        .call("GET", "/rest-api/v1/clusters?summary=maybe&page=2", None)
        .await;
    assert_eq!(code, 200);
    let (code, list) = api.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!((code, list["data"]["total"].as_u64()), (200, Some(0)));
    api.assert_no_secret_answered();
    assert_no_secret_logged(&karpor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grant_their_roles_and_nothing_is_anonymous_unless_configured() {
    let karpor = Spawn {
        env: vec![("GUEST_TOKEN", GUEST.to_owned())],
        ..Spawn::serve(WITH_TOKENS)
    }
    .start();
    let nobody = Client::new(&karpor);
    let wrong = Client::with_token(&karpor, "admin-token-xy");
    let guest = Client::with_token(&karpor, GUEST);
    let admin = Client::with_token(&karpor, ADMIN);

    let response = reqwest::get(karpor.url("/rest-api/v1/clusters"))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    for client in [&nobody, &wrong] {
        let (code, answer) = client.call("GET", "/rest-api/v1/clusters", None).await;
        assert_eq!(code, 401, "{answer}");
    }
    let (code, _) = nobody
        .send(
            nobody
                .http()
                .get(nobody.url("/rest-api/v1/clusters"))
                .header("authorization", "Basic YTpi"),
        )
        .await;
    assert_eq!(code, 401);
    let (code, _) = guest.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200);
    let (code, answer) = guest
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 403, "{answer}");
    let (code, _) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 201);
    let (code, _) = guest.call("DELETE", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 403);
    let (code, _) = guest.call("GET", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 200);
    // Health stays open; the document too.
    let (code, _) = process::get(&karpor.url("/livez")).await;
    assert_eq!(code, 200);
    let (code, _) = process::get(&karpor.url("/openapi.json")).await;
    assert_eq!(code, 200);
    for client in [&nobody, &wrong, &guest, &admin] {
        client.assert_no_secret_answered();
    }
    assert_no_secret_logged(&karpor);
    assert!(karpor.logs().contains("tokens=2"), "{}", karpor.logs());
    // Writes are logged with the token's name, never the token.
    assert!(
        karpor
            .logs()
            .contains("cluster registered cluster=one by=ops"),
        "{}",
        karpor.logs()
    );

    // Anonymous guests, when configured, read and are asked for a token to write.
    let karpor = Spawn::serve("auth: {anonymous: guest}\nshutdown: {drain_delay: 1s}\n").start();
    let nobody = Client::new(&karpor);
    let (code, _) = nobody.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200);
    let (code, _) = nobody
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_refuses_every_write_with_405() {
    let config = format!("{WITH_TOKENS}server: {{read_only: true}}\n");
    let karpor = Spawn {
        env: vec![("GUEST_TOKEN", GUEST.to_owned())],
        ..Spawn::serve(&config)
    }
    .start();
    let admin = Client::with_token(&karpor, ADMIN);
    for (method, path) in [
        ("POST", "/rest-api/v1/cluster/one"),
        ("PUT", "/rest-api/v1/cluster/one"),
        ("DELETE", "/rest-api/v1/cluster/one"),
        ("POST", "/rest-api/v1/resource-group-rule/kinds"),
    ] {
        let (code, answer) = admin
            .call(method, path, Some(cluster_body(THREE_CONTEXTS)))
            .await;
        assert_eq!(code, 405, "{method} {path}: {answer}");
        assert!(answer["message"].as_str().unwrap().contains("read-only"));
    }
    let (code, _) = admin.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200);
    // Validating a kubeconfig stores nothing: an admin may, read-only or not.
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_ne!(code, 405, "{answer}");
    // Authentication still comes first.
    let (code, _) = Client::new(&karpor)
        .call("POST", "/rest-api/v1/cluster/one", None)
        .await;
    assert_eq!(code, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_and_kubeconfigs_above_their_limits_are_413() {
    let karpor =
        Spawn::serve("server: {limits: {body_bytes: 3000000}}\nshutdown: {drain_delay: 1s}\n")
            .start();
    let api = Client::local_admin(&karpor);
    // Above the body limit.
    let huge = format!("{THREE_CONTEXTS}#{}\n", "x".repeat(3_100_000));
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/big",
            Some(cluster_body(&huge)),
        )
        .await;
    assert_eq!(code, 413, "{answer}");
    // Within it, but a kubeconfig above 2 MiB.
    let big = format!("{THREE_CONTEXTS}#{}\n", "x".repeat(2_200_000));
    let (code, answer) = api
        .call("POST", "/rest-api/v1/cluster/big", Some(cluster_body(&big)))
        .await;
    assert_eq!(code, 413, "{answer}");
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("above the limit"));
    let (code, answer) = api.send(upload(&api, big.as_bytes())).await;
    assert_eq!(code, 413, "{answer}");
    let (code, _) = api.call("GET", "/rest-api/v1/cluster/big", None).await;
    assert_eq!(code, 404);
}

/// A multipart upload of `content` as the `file` field.
fn upload(api: &Client, content: &[u8]) -> reqwest::RequestBuilder {
    let boundary = "karpor-test-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"config\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    api.request(reqwest::Method::POST, "/rest-api/v1/cluster/config/file")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_kubeconfig_is_parsed_and_its_contexts_listed_without_credentials() {
    let karpor = Spawn::serve(EMBEDDED).start();
    let api = Client::local_admin(&karpor);
    // The uploader's own file comes back as `content` (Karpor's register flow sends it on
    // to validate and create); nothing else in the answer carries a credential.
    let (code, answer) = api
        .send_echoing(upload(&api, THREE_CONTEXTS.as_bytes()), Some("content"))
        .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["data"]["content"], THREE_CONTEXTS);
    let sanitized = answer["data"]["sanitizedClusterContent"].as_str().unwrap();
    assert!(sanitized.contains("kind: Cluster"), "{sanitized}");
    assert!(
        sanitized.contains("type: ServiceAccountToken"),
        "{sanitized}"
    );
    assert_eq!(answer["data"]["currentContext"], "first");
    assert_eq!(answer["data"]["fileName"], "config");
    let contexts: Vec<&str> = answer["data"]["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(contexts, ["first", "second", "third"]);
    let (code, answer) = api.send(upload(&api, b"{ nope: [")).await;
    assert_eq!(code, 400, "{answer}");
    let (code, answer) = api
        .send(
            api.request(reqwest::Method::POST, "/rest-api/v1/cluster/config/file")
                .header("content-type", "multipart/form-data; boundary=x")
                .body(
                    "--x\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nv\r\n--x--\r\n",
                ),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    api.assert_no_secret_answered();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_reaches_the_api_server_or_says_why_not_within_seconds() {
    let path = service("KARPOR_TEST_KUBECONFIG_A").expect("test services: scripts/services.sh");
    let kubeconfig = process::flat_kubeconfig(&path);
    let karpor = Spawn::serve(EMBEDDED).start();
    let api = Client::local_admin(&karpor);
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": kubeconfig})),
        )
        .await;
    assert_eq!(code, 200, "{answer}");
    assert!(answer["data"]["gitVersion"]
        .as_str()
        .unwrap()
        .starts_with("v1."));
    assert_eq!(answer["data"]["summary"]["authKind"], "token");

    let started = Instant::now();
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": THREE_CONTEXTS})),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(started.elapsed() < Duration::from_secs(7));
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("cannot reach the API server"));
    // An exec user whose command fails: the message must not quote its arguments.
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": THREE_CONTEXTS, "context": "third"})),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    let (code, _) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(json!({"kubeConfig": "not: [yaml"})),
        )
        .await;
    assert_eq!(code, 400);
    api.assert_no_secret_answered();
    assert_no_secret_logged(&karpor);
}

fn document(cluster: &str, kind: &str, namespace: &str, name: &str) -> ResourceDocument {
    let api_version = if kind == "Deployment" {
        "apps/v1"
    } else {
        "v1"
    };
    ResourceDocument {
        cluster: cluster.to_owned(),
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: format!("{kind}-{namespace}-{name}"),
        labels: [("app".to_owned(), "demo".to_owned())].into(),
        annotations: Default::default(),
        owner_references: Vec::new(),
        creation_timestamp: None,
        deletion_timestamp: None,
        resource_version: "1".to_owned(),
        sync_at: time::OffsetDateTime::now_utc(),
        deleted: false,
        object: json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}, "data": {"colour": "teal"}}),
        issues: Vec::new(),
        refs: Vec::new(),
    }
}

/// Search, insight and resource groups over documents written straight into storage (the
/// syncer is off, so nothing else writes or purges them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_insight_and_resource_groups_answer_from_storage() {
    let karpor = Spawn::serve("server: {syncer: false}\nshutdown: {drain_delay: 1s}\n").start();
    let api = Client::local_admin(&karpor);
    let (code, _) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/c1",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 201);
    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: karpor.dir().join("data/resources.db"),
    })
    .await
    .unwrap();
    storage
        .upsert(&[
            document("c1", "ConfigMap", "a", "settings"),
            document("c1", "ConfigMap", "b", "settings"),
            document("c1", "Deployment", "a", "web"),
        ])
        .await
        .unwrap();

    let sql = |q: &str| format!("/rest-api/v1/search?query={}", urlencode(q));
    let (code, found) = api
        .call(
            "GET",
            &sql("select * from resources where kind='ConfigMap' order by namespace"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{found}");
    assert_eq!(found["data"]["total"], 2);
    assert_eq!(found["data"]["items"][0]["cluster"], "c1");
    assert_eq!(
        found["data"]["items"][0]["object"]["metadata"]["namespace"],
        "a"
    );
    assert_eq!(found["data"]["items"][0]["deleted"], false);
    assert!(found["data"]["items"][0]["syncAt"].is_string());
    let (code, page) = api
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
    let (code, by_keyword) = api
        .call("GET", "/rest-api/v1/search?keyword=web", None)
        .await;
    assert_eq!((code, by_keyword["data"]["total"].as_u64()), (200, Some(1)));
    let (code, by_keyword) = api
        .call(
            "GET",
            "/rest-api/v1/search?pattern=keyword&query=teal",
            None,
        )
        .await;
    assert_eq!((code, by_keyword["data"]["total"].as_u64()), (200, Some(3)));
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
        let (code, answer) = api.call("GET", &query, None).await;
        assert_eq!(code, 400, "{query}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(expected),
            "{query}: {answer}"
        );
    }

    let (code, stats) = api.call("GET", "/rest-api/v1/insight/stats", None).await;
    assert_eq!(code, 200);
    assert_eq!(
        stats["data"],
        json!({"clusterCount": 1, "resourceCount": 3, "resourceGroupRuleCount": 0})
    );
    let (code, summary) = api
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
    let (code, summary) = api
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
    let (code, summary) = api
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
    let (code, detail) = api
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
        let (code, answer) = api.call("GET", path, None).await;
        assert_eq!(code, status, "{path}: {answer}");
    }

    // The cluster's sync status is unknown (no syncer here); its stored count is known.
    let (_, cluster) = api.call("GET", "/rest-api/v1/cluster/c1", None).await;
    assert_eq!(cluster["data"]["syncStatus"]["state"], "unknown");
    assert_eq!(cluster["data"]["syncStatus"]["objectsStored"], 3);

    let rule = |fields: Value| Some(json!({"description": "d", "fields": fields}));
    let (code, created) = api
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule/kinds",
            rule(json!(["kind"])),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let (code, _) = api
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule/kinds",
            rule(json!(["kind"])),
        )
        .await;
    assert_eq!(code, 409);
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule/bad",
            rule(json!(["colour"])),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    let (code, groups) = api
        .call("GET", "/rest-api/v1/resource-groups/kinds", None)
        .await;
    assert_eq!(code, 200, "{groups}");
    assert_eq!(
        groups["data"]["items"],
        json!([{"values": {"kind": "ConfigMap"}, "count": 2}, {"values": {"kind": "Deployment"}, "count": 1}])
    );
    let (code, _) = api
        .call(
            "PUT",
            "/rest-api/v1/resource-group-rule/kinds",
            rule(json!(["namespace", "kind"])),
        )
        .await;
    assert_eq!(code, 200);
    let (_, groups) = api
        .call("GET", "/rest-api/v1/resource-groups/kinds", None)
        .await;
    assert_eq!(groups["data"]["total"], 3, "{groups}");
    assert_eq!(
        groups["data"]["items"][0],
        json!({"values": {"namespace": "a", "kind": "ConfigMap"}, "count": 1})
    );
    let (code, list) = api
        .call("GET", "/rest-api/v1/resource-group-rules", None)
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        list["data"].as_array().map(Vec::len),
        Some(1),
        "an array, as Karpor"
    );
    let (code, _) = api
        .call("GET", "/rest-api/v1/resource-group-rule/kinds", None)
        .await;
    assert_eq!(code, 200);
    let (code, _) = api
        .call("DELETE", "/rest-api/v1/resource-group-rule/kinds", None)
        .await;
    assert_eq!(code, 200);
    for path in [
        "/rest-api/v1/resource-groups/kinds",
        "/rest-api/v1/resource-group-rule/kinds",
    ] {
        let (code, _) = api.call("GET", path, None).await;
        assert_eq!(code, 404, "{path}");
    }
    api.assert_no_secret_answered();
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A backend that is down is a 503 with the envelope, never a 500, and its address is
/// not in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_down_is_503() {
    let dead = format!("http://127.0.0.1:{}", karpor_testkit::services::free_port());
    let config = format!(
        "storage: {{backend: elasticsearch, url: '{dead}'}}\n\
         metadata: {{backend: etcd, etcd: {{endpoints: ['{dead}']}}}}\n\
         server: {{syncer: false, limits: {{request_timeout: 4s}}}}\n\
         shutdown: {{drain_delay: 1s}}\n"
    );
    let karpor = Spawn::serve(&config).start();
    let api = Client::new(&karpor);
    for path in [
        "/rest-api/v1/search?keyword=x",
        "/rest-api/v1/clusters",
        "/rest-api/v1/insight/stats",
        "/rest-api/v1/resource-group-rules",
    ] {
        let (code, answer) = api.call("GET", path, None).await;
        assert_eq!(code, 503, "{path}: {answer}");
        assert!(
            !answer["message"].as_str().unwrap().contains("127.0.0.1"),
            "{answer}"
        );
    }
    let _ = SECRETS;
}

/// The API's config sections are validated like the rest: exit 2, naming file and key.
#[test]
fn a_bad_auth_or_limits_section_exits_2_naming_the_key() {
    let cases = [
        (
            "auth: {tokens: [{name: ops, role: admin, token: {env: KARPOR_TEST_NO_SUCH_VAR}}]}\n",
            "auth.tokens[0].token",
        ),
        (
            "auth: {tokens: [{name: ops, role: root, token: x}]}\n",
            "root",
        ),
        (
            "auth: {tokens: [{name: a, role: admin, token: x}, {name: a, role: guest, token: y}]}\n",
            "auth.tokens[1].name",
        ),
        (
            "auth: {tokens: [{name: a, role: admin, token: x}, {name: b, role: guest, token: x}]}\n",
            "`auth.tokens[1].token`: the same token as auth.tokens[0]",
        ),
        ("auth: {anonymous: everyone}\n", "everyone"),
        ("server: {limits: {body_bytes: 1000}}\n", "server.limits.body_bytes"),
        ("server: {limits: {concurrency: 0}}\n", "server.limits.concurrency"),
        ("server: {read_only: maybe}\n", "server.read_only"),
    ];
    for (yaml, key) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.yaml"), yaml).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_karpor"))
            .args(["serve", "--config", "bad.yaml"])
            .current_dir(dir.path())
            .env_remove("KARPOR_CONFIG")
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(2), "{yaml}: {stderr}");
        assert!(
            stderr.contains("bad.yaml") && stderr.contains(key),
            "{yaml}: {stderr}"
        );
        assert!(!dir.path().join("data").exists(), "nothing may start");
    }
}

/// A request past `request_timeout` is a 503; past `concurrency`, requests wait their turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_time_out_with_503_and_others_wait_for_a_slot() {
    // An API server that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let karpor = Spawn::serve(
        "server: {syncer: false, limits: {request_timeout: 2s, concurrency: 1}}\n\
         shutdown: {drain_delay: 1s}\n",
    )
    .start();
    let api = std::sync::Arc::new(Client::local_admin(&karpor));
    let kubeconfig =
        THREE_CONTEXTS.replace("https://127.0.0.1:1", &format!("https://127.0.0.1:{port}"));
    let slow = {
        let api = api.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let answer = api
                .call(
                    "POST",
                    "/rest-api/v1/cluster/config/validate",
                    Some(json!({"kubeConfig": kubeconfig})),
                )
                .await;
            (answer, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let (code, _) = api.call("GET", "/rest-api/v1/clusters", None).await;
    let waited = started.elapsed();
    let ((slow_code, slow_answer), slow_took) = slow.await.unwrap();
    assert_eq!(slow_code, 503, "{slow_answer}");
    assert!(slow_took >= Duration::from_secs(2) && slow_took < Duration::from_secs(4));
    assert_eq!(code, 200);
    assert!(
        waited >= Duration::from_millis(1200),
        "it did not wait: {waited:?}"
    );
    hold.abort();
}

/// Each route is registered once, with its document entry: every path and method of the
/// document reaches a handler (never the fallback's 404 or a 405).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_operation_reaches_its_handler() {
    let karpor = Spawn::serve("server: {syncer: false}\nshutdown: {drain_delay: 1s}\n").start();
    let api = Client::local_admin(&karpor);
    let document: Value = reqwest::get(karpor.url("/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = document["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, methods) in paths {
        assert!(path.starts_with("/rest-api/v1/"), "{path}");
        for method in methods.as_object().unwrap().keys() {
            let concrete = path.replace("{name}", "no-such-name");
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let mut request = api.request(method.clone(), &concrete);
            if matches!(method, reqwest::Method::POST | reqwest::Method::PUT) {
                request = request.json(&json!({}));
            }
            // Raw: the AI streams answer outside the envelope, as Karpor's do.
            let response = request.send().await.unwrap();
            let code = response.status().as_u16();
            let answer = response.text().await.unwrap();
            assert_ne!(code, 405, "{method} {path}: {answer}");
            assert!(!answer.contains("no such route"), "{method} {path}");
            operations += 1;
        }
    }
    assert!(operations >= 17, "{operations} operations documented");
    // A record is an object: serde would read a struct from an array (`[]` for a policy
    // whose fields all have defaults), so bodies are refused unless they are objects.
    for (method, path) in [
        ("PUT", "/rest-api/v1/audit/policy"),
        ("POST", "/rest-api/v1/sync-rule/no-such-name"),
        ("POST", "/rest-api/v1/relation-rule/no-such-name"),
    ] {
        let (code, answer) = api.call(method, path, Some(json!([]))).await;
        assert_eq!(code, 400, "{method} {path}: {answer}");
        assert_eq!(answer["message"], "the body must be a JSON object");
    }
    // And the fallback still answers what is not a route.
    let (code, answer) = api.call("GET", "/rest-api/v1/nothing-here", None).await;
    assert_eq!(
        (code, answer["message"].as_str()),
        (404, Some("no such route"))
    );
}
