//! Every route karpor serves, as `/endpoints` lists it, called by an anonymous caller, a
//! guest, an admin, and each again on a read-only server: each answer must be what the
//! route's declared permission says (`karpor_api::endpoints()`), so a new route can never
//! be left open by omission. Path parameters are `stream`: a path ending in `/stream` once
//! skipped the role check and read-only mode.

use std::collections::BTreeMap;

use karpor_api::Permission;
use karpor_testkit::api::{Client, ADMIN, GUEST, WITH_TOKENS};
use karpor_testkit::process::{Karpor, Spawn};
use serde_json::json;

/// The server's own routes, outside the API: open to anyone.
const SERVER_ROUTES: &[&str] = &["/", "/endpoints", "/livez", "/readyz", "/metrics"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    Guest,
    Admin,
}

/// What a caller must get: `None` for "the route ran" (any status but a refusal's).
fn expected(
    permission: Permission,
    who: Who,
    anonymous_reads: bool,
    read_only: bool,
) -> Option<u16> {
    use Permission::*;
    match (permission, who) {
        (Public, _) => None,
        (_, Who::Anonymous) if !anonymous_reads => Some(401),
        (Write | Edit, _) if read_only => Some(405),
        (Read, _) => None,
        (_, Who::Admin) => None,
        (_, Who::Anonymous) => Some(401),
        (_, Who::Guest) => Some(403),
    }
}

fn concrete(path: &str) -> String {
    ["{name}", "{cluster}", "{namespace}", "{check}", "{*check}"]
        .iter()
        .fold(path.to_owned(), |path, parameter| {
            path.replace(parameter, "stream")
        })
}

async fn served_routes(karpor: &Karpor) -> Vec<(String, String)> {
    let text = reqwest::get(karpor.url("/endpoints"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .map(|line| {
            let (method, path) = line.split_once('\t').expect("METHOD\\tPATH");
            (method.to_owned(), path.to_owned())
        })
        .collect()
}

async fn status(client: &Client, method: &str, path: &str) -> u16 {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client.request(method.clone(), path);
    if method != reqwest::Method::GET {
        request = request.json(&json!({}));
    }
    let response = request
        .timeout(std::time::Duration::from_secs(20))
        .send()
        .await
        .unwrap();
    response.status().as_u16()
}

/// Calls every route as each caller of `callers` and checks each answer.
async fn check_server(
    karpor: &Karpor,
    callers: &[(Who, Client)],
    anonymous_reads: bool,
    read_only: bool,
) -> usize {
    let declared: BTreeMap<(String, String), Permission> = karpor_api::endpoints()
        .into_iter()
        .map(|e| ((e.method.to_string(), e.path), e.permission))
        .collect();
    let served = served_routes(karpor).await;
    for key in declared.keys() {
        assert!(
            served.contains(key),
            "{key:?} is declared but not listed by /endpoints"
        );
    }
    let mut checked = 0;
    for (method, path) in &served {
        let permission = match declared.get(&(method.clone(), path.clone())) {
            Some(permission) => *permission,
            None => {
                let open = SERVER_ROUTES.contains(&path.as_str())
                    || path.starts_with("/readyz/")
                    || path.starts_with("/livez/");
                assert!(
                    open,
                    "{method} {path} is served without a declared permission"
                );
                Permission::Public
            }
        };
        for (who, client) in callers {
            let got = status(client, method, &concrete(path)).await;
            let context = format!("{method} {path} as {who:?} (read_only={read_only}): {got}");
            match expected(permission, *who, anonymous_reads, read_only) {
                Some(refusal) => assert_eq!(got, refusal, "{context}, declared {permission:?}"),
                None => assert!(
                    ![401, 403, 405].contains(&got),
                    "{context}: refused, but declared {permission:?}"
                ),
            }
            checked += 1;
        }
    }
    checked
}

fn callers(karpor: &Karpor) -> Vec<(Who, Client)> {
    vec![
        (Who::Anonymous, Client::new(karpor)),
        (Who::Guest, Client::with_token(karpor, GUEST)),
        (Who::Admin, Client::with_token(karpor, ADMIN)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_caller_as_its_permission_says() {
    let mut checked = 0;
    for (config, anonymous_reads, read_only) in [
        (WITH_TOKENS.to_owned(), false, false),
        (
            WITH_TOKENS.replace("anonymous: none", "anonymous: guest"),
            true,
            false,
        ),
        (
            format!("{WITH_TOKENS}server: {{read_only: true}}\n"),
            false,
            true,
        ),
        (
            format!(
                "{}server: {{read_only: true}}\n",
                WITH_TOKENS.replace("anonymous: none", "anonymous: guest")
            ),
            true,
            true,
        ),
    ] {
        let karpor = Spawn::serve(&config).with_env("GUEST_TOKEN", GUEST).start();
        checked += check_server(&karpor, &callers(&karpor), anonymous_reads, read_only).await;
    }
    assert!(checked > 4 * 3 * 40, "only {checked} calls checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_named_stream_are_writes_like_any_other() {
    // The observed attack: anonymous and guest callers created, replaced and deleted
    // `cluster/stream` and `sync-rule/stream`, also on a read-only server.
    let config = WITH_TOKENS.replace("anonymous: none", "anonymous: guest");
    let karpor = Spawn::serve(&config).with_env("GUEST_TOKEN", GUEST).start();
    let body = json!({"displayName": "x", "kubeConfig": "apiVersion: v1\nkind: Config\n"});
    for (who, client) in [
        ("anonymous", Client::new(&karpor)),
        ("guest", Client::with_token(&karpor, GUEST)),
    ] {
        for path in [
            "/rest-api/v1/cluster/stream",
            "/rest-api/v1/sync-rule/stream",
            "/rest-api/v1/relation-rule/stream",
            "/rest-api/v1/resource-group-rule/stream",
        ] {
            for method in ["POST", "PUT", "DELETE"] {
                let (code, answer) = client.call(method, path, Some(body.clone())).await;
                let refused = if who == "anonymous" { 401 } else { 403 };
                assert_eq!(code, refused, "{who} {method} {path}: {answer}");
            }
        }
    }
    let (_, rules) = Client::new(&karpor)
        .call("GET", "/rest-api/v1/sync-rules", None)
        .await;
    assert!(
        !rules.to_string().contains("\"stream\""),
        "nothing was written: {rules}"
    );
}
