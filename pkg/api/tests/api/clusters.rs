//! Clusters: created from kubeconfigs of every shape, read, listed in Karpor's orders,
//! updated and deleted with truthful statuses; Karpor's register flow (upload, validate,
//! create); broken input named in a 400. No credential is answered or logged.

use axum::body::Body;
use axum::http::header;
use karpor_kube::ExecSettings;
use karpor_testkit::api::THREE_CONTEXTS;
use serde_json::{json, Value};

use crate::app::{Client, Setup};
use crate::cluster_body;
use crate::logs;

/// A kubeconfig as a user uploads it: a token credential, an unreachable server.
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: secret-token-1}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";

fn names(list: &Value) -> Vec<String> {
    list["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn clusters_are_created_read_listed_updated_and_deleted_with_truthful_statuses() {
    // The exec user's command is allowed (exec users are off by default).
    let api = Setup {
        exec: ExecSettings {
            allowed_commands: vec!["/bin/false".to_owned()],
            allowed_env: [("/bin/false".to_owned(), vec!["TOKEN".to_owned()])].into(),
            ..ExecSettings::default()
        },
        ..Setup::default()
    }
    .start()
    .await;
    let admin = api.admin();

    let (code, created) = admin
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
        let path = format!("/rest-api/v1/cluster/{context}");
        let (code, created) = admin.call("POST", &path, Some(body)).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["data"]["kubeconfigSummary"]["authKind"], kind);
    }

    let (code, again) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 409, "{again}");

    let (code, one) = admin.call("GET", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 200);
    assert_eq!(one["data"]["version"], created["data"]["version"].clone());
    // No syncer in this process: the state is unknown, the stored count known.
    assert_eq!(one["data"]["syncStatus"]["state"], "unknown", "{one}");
    assert_eq!(one["data"]["syncStatus"]["objectsStored"], 0, "{one}");
    let (code, missing) = admin.call("GET", "/rest-api/v1/cluster/nope", None).await;
    assert_eq!(code, 404, "{missing}");
    assert!(missing["message"]
        .as_str()
        .unwrap()
        .contains("\"nope\" not found"));

    let (code, list) = admin
        .call(
            "GET",
            "/rest-api/v1/clusters?orderBy=name&descending=true",
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(list["data"]["total"], 3);
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
    let (code, list) = admin
        .call(
            "GET",
            "/rest-api/v1/clusters?orderBy=timestamp&ascending=true",
            None,
        )
        .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["one", "first", "third"], "in creation order");
    let (code, list) = admin
        .call("GET", "/rest-api/v1/clusters?orderBy=size", None)
        .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["first", "one", "third"]);
    let (code, summary) = admin
        .call("GET", "/rest-api/v1/clusters?summary=true", None)
        .await;
    assert_eq!(code, 200, "{summary}");
    assert_eq!(summary["data"]["totalCount"], 3, "{summary}");
    let counted = summary["data"]["healthyCount"].as_u64().unwrap()
        + summary["data"]["unhealthyCount"].as_u64().unwrap();
    assert_eq!(counted, 3, "{summary}");

    let (code, updated) = admin
        .call(
            "PUT",
            "/rest-api/v1/cluster/one",
            Some(json!({"displayName": "Renamed"})),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"]["displayName"], "Renamed");
    assert_eq!(updated["data"]["kubeconfigSummary"]["context"], "second");
    let (code, updated) = admin
        .call(
            "PUT",
            "/rest-api/v1/cluster/one?context=first",
            Some(json!({"kubeConfig": THREE_CONTEXTS})),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"]["kubeconfigSummary"]["context"], "first");
    assert_eq!(updated["data"]["displayName"], "Renamed");
    let (code, _) = admin
        .call(
            "PUT",
            "/rest-api/v1/cluster/nope",
            Some(json!({"displayName": "x"})),
        )
        .await;
    assert_eq!(code, 404);

    let (code, deleted) = admin.call("DELETE", "/rest-api/v1/cluster/one", None).await;
    assert_eq!((code, &deleted["data"]), (200, &json!("Cluster deleted")));
    let (code, _) = admin.call("DELETE", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 404);
    let (code, _) = admin.call("GET", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 404);

    api.assert_no_secret_answered();
    logs::assert_no_secret_logged();
}

#[tokio::test]
async fn broken_input_is_a_400_that_names_the_problem() {
    let api = Setup::default().start().await;
    let admin = api.admin();
    let missing_ca = THREE_CONTEXTS.replace(
        "certificate-authority-data: \"Q0E=\"",
        "certificate-authority: /etc/karpor-test/ca.crt",
    );
    let no_current = THREE_CONTEXTS.replace("current-context: first", "");
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "Bad_Name",
            cluster_body(THREE_CONTEXTS),
            "is not valid: only lowercase letters, digits and '-' are allowed",
        ),
        (
            "x",
            json!({"displayName": "no kubeconfig"}),
            "kubeConfig is required",
        ),
        (
            "x",
            cluster_body("clusters: [\n - {name: a\n token: secret-token-1"),
            "at line",
        ),
        (
            "x",
            cluster_body("just text with secret-token-1"),
            "not a kubeconfig",
        ),
        (
            "x",
            cluster_body("apiVersion: v1\nkind: Config\n"),
            "has no contexts",
        ),
        (
            "x?context=fourth",
            cluster_body(THREE_CONTEXTS),
            "\"fourth\" is not in the kubeconfig (it has: first, second, third)",
        ),
        (
            "x",
            cluster_body(&missing_ca),
            "certificate-authority names a file on the server",
        ),
        (
            "x",
            cluster_body(&no_current),
            "no current-context: choose one of first, second, third",
        ),
        (
            "x",
            cluster_body(
                THREE_CONTEXTS
                    .replace("current-context: first", "current-context: third")
                    .as_str(),
            ),
            "exec users are off on this server",
        ),
        (
            "x",
            json!({"kubeConfig": THREE_CONTEXTS, "colour": "red"}),
            "unknown field `colour`",
        ),
        ("x", json!({"kubeConfig": 7}), "invalid type"),
        (
            "x",
            json!({"kubeConfig": THREE_CONTEXTS, "labels": "secret-token-1"}),
            "invalid type: string \"…\"",
        ),
    ];
    for (path, body, expected) in cases {
        let (code, answer) = admin
            .call("POST", &format!("/rest-api/v1/cluster/{path}"), Some(body))
            .await;
        assert_eq!(code, 400, "{path}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(expected), "{path}: {message}");
    }
    // Not JSON at all, and JSON of the wrong content type.
    let (code, _) = admin
        .send(
            admin
                .request("POST", "/rest-api/v1/cluster/x")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{not json"))
                .unwrap(),
        )
        .await;
    assert_eq!(code, 400);
    let (code, _) = admin
        .send(
            admin
                .request("POST", "/rest-api/v1/cluster/x")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
    assert_eq!(code, 415);
    // Names in a locator follow Kubernetes' rules.
    for path in [
        "/rest-api/v1/insight/detail?cluster=c1&kind=ConfigMap&namespace=a_b&name=x",
        "/rest-api/v1/insight/summary?cluster=no%20pe",
    ] {
        let (code, answer) = admin.call("GET", path, None).await;
        assert_eq!(code, 400, "{path}: {answer}");
    }
    let (code, answer) = admin.call("GET", "/rest-api/v1/no-such-route", None).await;
    assert_eq!(
        (code, answer["message"].as_str()),
        (404, Some("no such route"))
    );
    let (code, _) = admin.call("PATCH", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 405);
    // Karpor ignores what it does not know in a query string.
    let (code, _) = admin
        .call("GET", "/rest-api/v1/clusters?summary=maybe&page=2", None)
        .await;
    assert_eq!(code, 200);
    let (code, list) = admin.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!((code, list["data"]["total"].as_u64()), (200, Some(0)));
    api.assert_no_secret_answered();
    logs::assert_no_secret_logged();
}

/// A multipart upload: `fields` as form fields, then `content` as the `file` field.
fn upload(
    client: &Client<'_>,
    fields: &[(&str, &str)],
    content: &[u8],
) -> axum::http::Request<Body> {
    let boundary = "karpor-test-boundary";
    let mut body = Vec::new();
    for (field, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"config\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    client
        .request("POST", "/rest-api/v1/cluster/config/file")
        .header(
            header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(Body::from(body))
        .unwrap()
}

#[tokio::test]
async fn an_uploaded_kubeconfig_is_parsed_and_its_contexts_listed_without_credentials() {
    let api = Setup::default().start().await;
    let admin = api.admin();
    // The uploader's own file comes back as `content` (Karpor's register flow sends it on
    // to validate and create); nothing else in the answer carries a credential.
    let (code, answer) = admin
        .send_echoing(
            upload(&admin, &[], THREE_CONTEXTS.as_bytes()),
            Some("content"),
        )
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
    let (code, answer) = admin.send(upload(&admin, &[], b"{ nope: [")).await;
    assert_eq!(code, 400, "{answer}");
    let (code, answer) = admin
        .send(
            admin
                .request("POST", "/rest-api/v1/cluster/config/file")
                .header(header::CONTENT_TYPE, "multipart/form-data; boundary=x")
                .body(Body::from(
                    "--x\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nv\r\n--x--\r\n",
                ))
                .unwrap(),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    // A guest may not: the answer holds the credential.
    let guest = api.guest();
    let (code, _) = guest
        .send(upload(&guest, &[], THREE_CONTEXTS.as_bytes()))
        .await;
    assert_eq!(code, 403);
    api.assert_no_secret_answered();
    logs::assert_no_secret_logged();
}

/// Karpor's register flow: upload the file with the form's fields, send its `content`
/// back to validate (as text) and create (with `name` in the body); then read, list,
/// update and delete with Karpor's shapes.
#[tokio::test]
async fn karpors_register_flow_and_cluster_shapes() {
    let api = Setup::default().start().await;
    let admin = api.admin();
    let form = [
        ("name", "prod"),
        ("displayName", "Production"),
        ("description", "the main one"),
    ];
    let (code, uploaded) = admin
        .send_echoing(
            upload(&admin, &form, KUBECONFIG.as_bytes()),
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
                .request("POST", "/rest-api/v1/cluster/config/validate")
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from(content.clone()))
                .unwrap(),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("cannot reach the API server"), "{answer}");

    let body = json!({"name": "prod", "displayName": "Production",
        "description": "the main one", "kubeConfig": content});
    let (code, created) = admin
        .call("POST", "/rest-api/v1/cluster/prod", Some(body))
        .await;
    assert_eq!(code, 201, "{created}");
    let cluster = &created["data"];
    assert_eq!(cluster["apiVersion"], "cluster.karpor.io/v1beta1");
    assert_eq!(cluster["kind"], "Cluster");
    assert_eq!(cluster["metadata"]["name"], "prod");
    assert!(cluster["metadata"]["creationTimestamp"].is_string());
    assert_eq!(cluster["spec"]["displayName"], "Production");
    assert_eq!(cluster["spec"]["description"], "the main one");
    assert_eq!(cluster["spec"]["access"]["endpoint"], "https://127.0.0.1:1");
    assert_eq!(
        cluster["spec"]["access"]["credential"]["type"],
        "ServiceAccountToken"
    );
    // A name in the body that is not the path's.
    let body = json!({"name": "other", "kubeConfig": KUBECONFIG});
    let (code, answer) = admin
        .call("POST", "/rest-api/v1/cluster/prod2", Some(body))
        .await;
    assert_eq!(code, 400, "{answer}");

    let (code, yaml) = admin
        .call("GET", "/rest-api/v1/cluster/prod?format=yaml", None)
        .await;
    assert_eq!(code, 200, "{yaml}");
    let yaml = yaml["data"].as_str().unwrap();
    assert!(yaml.contains("kind: Cluster") && yaml.contains("displayName: Production"));

    let (code, summary) = admin
        .call("GET", "/rest-api/v1/clusters?summary=true", None)
        .await;
    assert_eq!(code, 200, "{summary}");
    let summary = &summary["data"];
    assert_eq!(summary["totalCount"], 1);
    let named = summary["healthyClusters"]
        .as_array()
        .unwrap()
        .iter()
        .chain(summary["unhealthyClusters"].as_array().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(named, [&json!("prod")]);

    let update = json!({"name": "prod", "displayName": "Prod", "description": "renamed"});
    let (code, updated) = admin
        .call("PUT", "/rest-api/v1/cluster/prod", Some(update))
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"]["spec"]["displayName"], "Prod");
    api.assert_no_secret_answered();
    logs::assert_no_secret_logged();
}

/// A record's name in a path is parsed before anything reads it: a name that cannot be
/// one is a 400 on every route that takes one, never a lookup that finds nothing.
#[tokio::test]
async fn a_name_that_cannot_be_a_records_is_a_400_on_every_route() {
    let api = Setup::default().start().await;
    let admin = api.admin();
    for (method, path) in [
        ("GET", "/rest-api/v1/cluster/UPPER"),
        ("DELETE", "/rest-api/v1/cluster/UPPER"),
        ("GET", "/rest-api/v1/sync-rule/a_b"),
        ("DELETE", "/rest-api/v1/relation-rule/-x"),
        ("GET", "/rest-api/v1/resource-group-rule/UPPER"),
    ] {
        let (code, answer) = admin.call(method, path, None).await;
        assert_eq!(code, 400, "{method} {path}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.contains("is not valid"),
            "{method} {path}: {message}"
        );
    }
}
