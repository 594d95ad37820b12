//! What the API says about itself: `/openapi.json` (every operation in it reaches its
//! handler, with its permission in `karpor_api::endpoints()`), `/server-configs` in
//! Karpor's names, and the AI routes answering as Karpor's do with AI off.

use axum::body::Body;
use axum::http::header;
use karpor_api::{endpoints, Permission, Role};
use serde_json::{json, Value};

use crate::app::{text, Api, Client, Setup};

async fn public_json(api: &Api, path: &str) -> Value {
    let response = api
        .raw(
            api.anonymous()
                .request("GET", path)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(response.status(), 200, "{path}");
    let content_type = response.headers()[header::CONTENT_TYPE].clone();
    assert_eq!(content_type, "application/json", "{path}");
    serde_json::from_str(&text(response).await).unwrap()
}

/// Each route is registered once, with its document entry: every path and method of the
/// document reaches a handler (never the fallback's 404 or a 405), and is an endpoint
/// with a permission.
#[tokio::test]
async fn every_documented_operation_reaches_its_handler() {
    let api = Setup::default().start().await;
    let admin = api.admin();
    let document = public_json(&api, "/openapi.json").await;
    assert_eq!(document, karpor_api::document(), "served as built");
    let endpoints = endpoints();
    let paths = document["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, methods) in paths {
        assert!(path.starts_with("/rest-api/v1/"), "{path}");
        for method in methods.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            let endpoint = endpoints
                .iter()
                .find(|e| e.method.as_str() == method && &e.path == path);
            assert!(endpoint.is_some(), "{method} {path} has no permission");
            let concrete = path
                .replace("{name}", "no-such-name")
                .replace("{cluster}", "no-such-cluster")
                .replace("{namespace}", "default");
            let request = admin.request(&method, &concrete);
            let request = if method == "POST" || method == "PUT" {
                request
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from("{}"))
            } else {
                request.body(Body::empty())
            };
            // Raw: the AI streams answer outside the envelope, as Karpor's do.
            let response = api.raw(request.unwrap()).await;
            let code = response.status().as_u16();
            let answer = if code == 200 {
                String::new()
            } else {
                text(response).await
            };
            assert_ne!(code, 405, "{method} {path}: {answer}");
            assert!(!answer.contains("no such route"), "{method} {path}");
            operations += 1;
        }
    }
    // Every endpoint but those outside the prefix is documented: the two public ones and
    // the MCP endpoint (JSON-RPC, described by its tools' own schemas).
    let outside: Vec<_> = endpoints
        .iter()
        .filter(|e| !e.path.starts_with(karpor_api::PREFIX))
        .map(|e| (e.line(), e.permission))
        .collect();
    assert_eq!(
        outside,
        [
            ("GET\t/openapi.json".to_owned(), Permission::Public),
            ("GET\t/server-configs".to_owned(), Permission::Public),
            ("POST\t/mcp".to_owned(), Permission::Read),
        ]
    );
    assert_eq!(operations, endpoints.len() - outside.len());
    for path in [
        "/rest-api/v1/sync-rules",
        "/rest-api/v1/sync-rule/{name}",
        "/rest-api/v1/sync-rule/{name}/dry-run",
    ] {
        assert!(
            document["paths"][path].is_object(),
            "{path} is not documented"
        );
    }
    // A record is an object: serde would read a struct from an array (`[]` for a policy
    // whose fields all have defaults), so bodies are refused unless they are objects.
    for (method, path) in [
        ("PUT", "/rest-api/v1/audit/policy"),
        ("POST", "/rest-api/v1/sync-rule/no-such-name"),
        ("POST", "/rest-api/v1/relation-rule/no-such-name"),
    ] {
        let (code, answer) = admin.call(method, path, Some(json!([]))).await;
        assert_eq!(code, 400, "{method} {path}: {answer}");
        assert_eq!(answer["message"], "the body must be a JSON object");
    }
}

async fn server_configs_for(api: &Api, client: &Client<'_>) -> Value {
    let response = api
        .raw(
            client
                .request("GET", "/server-configs")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    assert_eq!(response.headers()[header::VARY], "authorization");
    serde_json::from_str(&text(response).await).unwrap()
}

/// `/server-configs` outside the envelope with the fields Karpor's page reads.
#[tokio::test]
async fn server_configs_answer_karpors_page_outside_the_envelope() {
    let api = Setup::default().start().await;
    let configs = public_json(&api, "/server-configs").await;
    assert!(configs.get("success").is_none(), "not enveloped: {configs}");
    assert_eq!(
        configs["Version"],
        format!("v{}", env!("CARGO_PKG_VERSION")),
        "{configs}"
    );
    assert_eq!(configs["AIOptions"]["AIModel"], "", "AI is off: {configs}");
    assert_eq!(configs["AIOptions"]["AIAuthToken"], "", "{configs}");
    assert_eq!(
        configs["StorageOptions"]["SearchStorageType"], "sqlite",
        "{configs}"
    );
    api.assert_no_secret_answered();
}

/// `/server-configs` says what the page should offer its caller: anonymous readers every
/// page without a login and no write buttons; a token's holder the login and what its
/// role may do; anyone else (no anonymous reads, a stale token) the login page.
#[tokio::test]
async fn server_configs_answer_for_the_caller() {
    for (anonymous, read_only) in [(Some(Role::Viewer), false), (None, false), (None, true)] {
        let api = Setup {
            anonymous,
            read_only,
            ..Setup::default()
        }
        .start()
        .await;
        let stale = api.client(Some("a-token-nobody-issued"));
        let cases = [
            (
                "nobody",
                api.anonymous(),
                anonymous.is_none(),
                anonymous.is_some() || read_only,
            ),
            ("an admin", api.admin(), true, read_only),
            ("a guest", api.guest(), true, true),
            ("a stale token", stale, true, read_only),
        ];
        for (who, client, rbac, read_only_mode) in cases {
            let configs = server_configs_for(&api, &client).await;
            let core = &configs["CoreOptions"];
            assert_eq!(
                (core["EnableRBAC"].as_bool(), core["ReadOnlyMode"].as_bool()),
                (Some(rbac), Some(read_only_mode)),
                "{who} (anonymous {anonymous:?}, read-only {read_only}): {configs}"
            );
        }
    }
}

/// Without a model service the AI routes answer as Karpor's do: the diagnosis streams
/// 503 in plain text, the interpret streams one `error` event.
#[tokio::test]
async fn the_ai_routes_answer_as_karpors_do_without_ai() {
    let api = Setup::default().start().await;
    let guest = api.guest();
    let post = |path: &str, body: Value| {
        guest
            .request("POST", path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    for path in [
        "/rest-api/v1/insight/aggregator/log/diagnosis/stream",
        "/rest-api/v1/insight/aggregator/event/diagnosis/stream",
    ] {
        let response = api
            .raw(post(path, json!({"logs": ["x"], "language": "English"})))
            .await;
        assert_eq!(response.status(), 503, "{path}");
        assert_eq!(text(response).await, "AI service is not available");
    }
    for path in [
        "/rest-api/v1/insight/yaml/interpret/stream",
        "/rest-api/v1/insight/issue/interpret/stream",
    ] {
        let response = api
            .raw(post(
                path,
                json!({"yaml": "kind: Pod", "language": "English"}),
            ))
            .await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream",
            "{path}"
        );
        let text = text(response).await;
        let event: Value =
            serde_json::from_str(text.trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(
            event,
            json!({"type": "error", "content": "AI service not configured"})
        );
    }
}
