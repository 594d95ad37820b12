//! Who may call what: every route of `karpor_api::endpoints()` tried as an admin, a
//! guest, a caller without a token and one with a wrong token, on a normal server, a
//! read-only one and one with anonymous guests; the refusals' statuses and envelopes.

use axum::body::Body;
use axum::http::{header, Method};
use karpor_api::{endpoints, Endpoint, Permission, Role};
use karpor_testkit::api::THREE_CONTEXTS;
use serde_json::json;

use crate::app::{text, Api, Client, Setup};
use crate::cluster_body;
use crate::logs;

/// A request to `endpoint` with its path parameters filled in, and `{}` as the body of a
/// POST or PUT.
fn request(client: &Client<'_>, endpoint: &Endpoint) -> axum::http::Request<Body> {
    let path = endpoint
        .path
        .replace("{name}", "no-such-name")
        .replace("{cluster}", "no-such-cluster")
        .replace("{namespace}", "default");
    let request = client.request(endpoint.method.as_str(), &path);
    if matches!(endpoint.method, Method::POST | Method::PUT) {
        request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap()
    } else {
        request.body(Body::empty()).unwrap()
    }
}

/// `(status, body)` of `endpoint` for `client`; the body is read only when it cannot be a
/// stream (an event stream that was let through answers 200 and is not read).
async fn try_endpoint(api: &Api, client: &Client<'_>, endpoint: &Endpoint) -> (u16, String) {
    let response = api.raw(request(client, endpoint)).await;
    let status = response.status().as_u16();
    let body = if status == 200 {
        String::new()
    } else {
        text(response).await
    };
    (status, body)
}

/// Not refused for who the caller is, and served by the route (not the fallback).
fn assert_let_through(endpoint: &Endpoint, who: &str, (status, body): &(u16, String)) {
    let line = endpoint.line();
    assert!(
        ![401, 403, 405].contains(status),
        "{line} as {who}: {status} {body}"
    );
    assert!(!body.contains("no such route"), "{line} as {who}: {body}");
}

#[tokio::test]
async fn every_route_answers_each_role_as_its_permission_says() {
    let api = Setup::default().start().await;
    let (admin, guest, nobody, wrong) = (
        api.admin(),
        api.guest(),
        api.anonymous(),
        api.client(Some("admin-token-xy")),
    );
    let endpoints = endpoints();
    assert!(endpoints.len() > 40, "{endpoints:?}");
    for endpoint in &endpoints {
        let line = endpoint.line();
        let permission = endpoint.permission;
        assert_let_through(
            endpoint,
            "admin",
            &try_endpoint(&api, &admin, endpoint).await,
        );

        let (status, body) = try_endpoint(&api, &guest, endpoint).await;
        match permission {
            Permission::Public | Permission::Read => {
                assert_let_through(endpoint, "guest", &(status, body));
            }
            // Pod logs need the admin role unless `auth.pod_logs` says otherwise.
            Permission::Admin | Permission::Write | Permission::PodLogs => {
                assert_eq!(status, 403, "{line} as guest: {body}");
                assert!(body.contains("needs the admin role"), "{line}: {body}");
            }
            Permission::Edit => {
                assert_eq!(status, 403, "{line} as guest: {body}");
                assert!(body.contains("needs the editor role"), "{line}: {body}");
            }
            Permission::AgentJoin | Permission::Agent | Permission::AgentPeer => {
                panic!("{line}: an agent route among the API's")
            }
        }

        for (who, client) in [("nobody", &nobody), ("a wrong token", &wrong)] {
            let response = api.raw(request(client, endpoint)).await;
            let status = response.status().as_u16();
            if permission == Permission::Public {
                assert_ne!(status, 401, "{line} as {who}");
                continue;
            }
            assert_eq!(status, 401, "{line} as {who}");
            assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
        }
    }
    // The AI routes are for anyone who may read, as in Karpor: they change nothing. The
    // diagnosis of a pod's log karpor reads itself reads the workload's data: the role
    // that reads logs.
    let ai = endpoints
        .iter()
        .filter(|e| e.path.contains("/stream"))
        .collect::<Vec<_>>();
    assert_eq!(ai.len(), 5, "{ai:?}");
    for endpoint in ai {
        let wanted = if endpoint.path.contains("/log/pod/") {
            Permission::PodLogs
        } else {
            Permission::Read
        };
        assert_eq!(endpoint.permission, wanted, "{endpoint:?}");
    }
}

#[tokio::test]
async fn a_read_only_server_refuses_every_write_with_405_and_nothing_else() {
    let api = Setup {
        read_only: true,
        ..Setup::default()
    }
    .start()
    .await;
    let (admin, guest, nobody) = (api.admin(), api.guest(), api.anonymous());
    for endpoint in &endpoints() {
        let line = endpoint.line();
        let (status, body) = try_endpoint(&api, &admin, endpoint).await;
        if !endpoint.permission.allowed_when_read_only() {
            assert_eq!(status, 405, "{line}: {body}");
            assert!(body.contains("read-only"), "{line}: {body}");
            // Checks run in order: token, read-only mode, role.
            let (status, _) = try_endpoint(&api, &nobody, endpoint).await;
            assert_eq!(status, 401, "{line} as nobody");
            let (status, _) = try_endpoint(&api, &guest, endpoint).await;
            assert_eq!(status, 405, "{line} as guest");
        } else {
            assert_let_through(endpoint, "admin", &(status, body));
        }
    }
    // Validating a kubeconfig stores nothing: an admin may, read-only or not.
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/config/validate",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 400, "unreachable, not refused: {answer}");
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 405, "{answer}");
    assert_eq!(
        answer["message"],
        "the server is read-only (server.read_only): writes are refused"
    );
    let (code, configs) = admin.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200, "{configs}");
    let response = api
        .raw(
            nobody
                .request("GET", "/server-configs")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    let configs: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(configs["CoreOptions"]["ReadOnlyMode"], true, "{configs}");
    api.assert_no_secret_answered();
}

#[tokio::test]
async fn tokens_grant_their_roles_and_writes_are_logged_with_the_tokens_name() {
    let api = Setup::default().start().await;
    let (admin, guest, nobody) = (api.admin(), api.guest(), api.anonymous());
    for client in [&nobody, &api.client(Some("admin-token-xy"))] {
        let (code, answer) = client.call("GET", "/rest-api/v1/clusters", None).await;
        assert_eq!(code, 401, "{answer}");
    }
    let (code, answer) = nobody.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 401);
    assert_eq!(answer["message"], "a bearer token is required");
    for authorization in ["Basic YTpi", "Token admin-token-xyz"] {
        let (code, answer) = nobody
            .send(
                nobody
                    .request("GET", "/rest-api/v1/clusters")
                    .header(header::AUTHORIZATION, authorization)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(code, 401, "{authorization}: {answer}");
        assert_eq!(
            answer["message"],
            "the Authorization header must be `Bearer TOKEN`"
        );
    }
    let (code, _) = guest.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200);
    let body = Some(cluster_body(THREE_CONTEXTS));
    let (code, answer) = guest
        .call("POST", "/rest-api/v1/cluster/one", body.clone())
        .await;
    assert_eq!(code, 403, "{answer}");
    let (code, answer) = admin.call("POST", "/rest-api/v1/cluster/one", body).await;
    assert_eq!(code, 201, "{answer}");
    let (code, _) = guest.call("DELETE", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 403);
    let (code, one) = guest.call("GET", "/rest-api/v1/cluster/one", None).await;
    assert_eq!(code, 200);
    assert!(
        one["data"]["kubeConfig"].is_null(),
        "a guest sees no kubeconfig: {one}"
    );
    assert_eq!(one["data"]["kubeconfigSummary"]["authKind"], "token");
    api.assert_no_secret_answered();
    // Writes are logged with the token's name, never the token.
    let logs = logs::text();
    assert!(
        logs.lines()
            .any(|l| l.contains("cluster registered cluster=one by=ops")),
        "{logs}"
    );
    logs::assert_no_secret_logged();
}

#[tokio::test]
async fn anonymous_guests_read_and_are_asked_for_a_token_to_write() {
    let api = Setup {
        anonymous: Some(Role::Viewer),
        ..Setup::default()
    }
    .start()
    .await;
    let nobody = api.anonymous();
    for endpoint in &endpoints() {
        let (status, body) = try_endpoint(&api, &nobody, endpoint).await;
        match endpoint.permission {
            Permission::Public | Permission::Read => {
                assert_let_through(endpoint, "an anonymous guest", &(status, body));
            }
            Permission::Admin | Permission::Write | Permission::PodLogs => {
                assert_eq!(status, 401, "{}: {body}", endpoint.line());
                assert!(body.contains("admin role"), "{body}");
            }
            Permission::Edit => {
                assert_eq!(status, 401, "{}: {body}", endpoint.line());
                assert!(body.contains("editor role"), "{body}");
            }
            Permission::AgentJoin | Permission::Agent | Permission::AgentPeer => {
                panic!("{}: an agent route among the API's", endpoint.line())
            }
        }
    }
    let (code, _) = nobody
        .call(
            "POST",
            "/rest-api/v1/cluster/one",
            Some(cluster_body(THREE_CONTEXTS)),
        )
        .await;
    assert_eq!(code, 401);
    // A token that is not accepted is refused, even where no token would do.
    let (code, _) = api
        .client(Some("anything"))
        .call("GET", "/rest-api/v1/clusters", None)
        .await;
    assert_eq!(code, 401);
}

/// `/authn` answers 200 with who the caller is and what it may do for an accepted
/// credential, and for none where anonymous reads are on; an empty `Authorization:`
/// header is no credential, as in Karpor (its page sends one when RBAC is off).
#[tokio::test]
async fn authn_accepts_what_karpors_page_sends() {
    let api = Setup {
        anonymous: Some(Role::Viewer),
        ..Setup::default()
    }
    .start()
    .await;
    let (code, answer) = api.admin().call("GET", "/rest-api/v1/authn", None).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["data"],
        json!({"user": "ops", "groups": [], "role": "admin", "anonymous": false,
               "may": ["read", "edit", "write", "admin", "pod-logs"], "policies": [],
               "scope": [{"role": "admin", "secrets": true}]})
    );
    let (_, answer) = api.guest().call("GET", "/rest-api/v1/authn", None).await;
    assert_eq!(
        answer["data"],
        json!({"user": "viewer", "groups": [], "role": "viewer", "anonymous": false, "may": ["read"],
               "policies": [], "scope": [{"role": "viewer", "secrets": true}]})
    );
    let (_, answer) = api
        .anonymous()
        .call("GET", "/rest-api/v1/authn", None)
        .await;
    assert_eq!(
        answer["data"],
        json!({"user": "anonymous", "groups": [], "role": "viewer", "anonymous": true, "may": ["read"],
               "policies": [], "scope": [{"role": "viewer", "secrets": true}]})
    );
    let nobody = api.anonymous();
    for authorization in ["", "Bearer", "Bearer  "] {
        let (code, answer) = nobody
            .send(
                nobody
                    .request("GET", "/rest-api/v1/authn")
                    .header(header::AUTHORIZATION, authorization)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(code, 200, "Authorization: {authorization:?}: {answer}");
    }
    let (code, _) = api
        .client(Some("not-a-token"))
        .call("GET", "/rest-api/v1/authn", None)
        .await;
    assert_eq!(code, 401);
}

/// Every write, admin action and pod log read is one line of the `karpor::access` log,
/// allowed or refused: who, the permission, the method and path, the outcome, the status.
/// (One subscriber per process: under nextest, one test; the lines are told apart by the
/// rule's name.)
#[tokio::test]
async fn writes_and_refusals_are_lines_of_the_access_log() {
    let api = Setup::default().start().await;
    let rule = json!({"name": "access-logged", "fields": ["namespace"]});
    let (code, answer) = api
        .admin()
        .call(
            "POST",
            "/rest-api/v1/resource-group-rule",
            Some(rule.clone()),
        )
        .await;
    assert!((200..300).contains(&code), "{answer}");
    let (code, _) = api
        .guest()
        .call(
            "DELETE",
            "/rest-api/v1/resource-group-rule/access-logged",
            None,
        )
        .await;
    assert_eq!(code, 403);
    let (code, _) = api
        .guest()
        .call("GET", "/rest-api/v1/resource-group-rules", None)
        .await;
    assert_eq!(code, 200);
    let logs = logs::text();
    let lines: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("karpor::access"))
        .collect();
    let written = lines
        .iter()
        .find(|l| l.contains("method=POST") && l.contains("/resource-group-rule"));
    let written = written.unwrap_or_else(|| panic!("no line for the write in\n{logs}"));
    for field in [
        "who=ops",
        "permission=\"edit\"",
        "outcome=\"allowed\"",
        "status=20",
    ] {
        assert!(written.contains(field), "{field} in {written}");
    }
    let refused = lines
        .iter()
        .find(|l| l.contains("method=DELETE") && l.contains("access-logged"))
        .unwrap_or_else(|| panic!("no line for the refused delete in\n{logs}"));
    for field in ["who=viewer", "outcome=\"refused\"", "status=403"] {
        assert!(refused.contains(field), "{field} in {refused}");
    }
    assert!(
        !lines.iter().any(|l| l.contains("/resource-group-rules")),
        "reads of what karpor keeps are not access lines: {lines:?}"
    );
    logs::assert_no_secret_logged();
}
