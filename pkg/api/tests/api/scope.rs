//! Policies' scopes, as a property: for random objects across clusters and namespaces and
//! a random policy, no read route returns, counts or links an object outside the caller's
//! scope, and every object inside it is found. The routes are the router's own list (as
//! in the permission matrix), each asked about every cluster, namespace and object.

use std::collections::BTreeSet;

use karpor_api::{endpoints, Permission, Role};
use karpor_core::access::AccessPolicy;
use karpor_storage::{HistoryNote, ResourceDocument};
use karpor_testkit::api::THREE_CONTEXTS;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::app::{Api, Client, Setup};
use crate::urlencode;

const CLUSTERS: [&str; 3] = ["c0", "c1", "c2"];
const NAMESPACES: [&str; 3] = ["ns0", "ns1", "ns2"];
/// Kinds and whether each is namespaced.
const KINDS: [(&str, bool); 6] = [
    ("Pod", true),
    ("Deployment", true),
    ("Secret", true),
    ("ConfigMap", true),
    ("Node", false),
    ("Namespace", false),
];

/// An object of the fleet: where it is and what it is.
#[derive(Debug, Clone)]
struct Placed {
    cluster: usize,
    namespace: usize,
    kind: usize,
}

/// What a policy grants, by indexes into the constants; `None` is all.
#[derive(Debug, Clone)]
struct Grant {
    role: Role,
    clusters: Option<BTreeSet<usize>>,
    /// Clusters labelled `tier=gold` (c1): with `clusters`, either.
    gold: bool,
    namespaces: Option<BTreeSet<usize>>,
    kinds: Option<BTreeSet<usize>>,
    secrets: bool,
}

fn subset(n: usize) -> impl Strategy<Value = Option<BTreeSet<usize>>> {
    prop::option::of(prop::collection::btree_set(0..n, 1..=n))
}

fn grant() -> impl Strategy<Value = Grant> {
    // A policy naming anonymous callers gives viewer only: no write without a credential.
    (
        subset(CLUSTERS.len()),
        prop::bool::ANY,
        subset(NAMESPACES.len()),
        subset(KINDS.len()),
        prop::bool::ANY,
    )
        .prop_map(|(clusters, gold, namespaces, kinds, secrets)| Grant {
            role: Role::Viewer,
            clusters,
            gold,
            namespaces,
            kinds,
            secrets,
        })
}

fn objects() -> impl Strategy<Value = Vec<Placed>> {
    prop::collection::vec(
        (0..CLUSTERS.len(), 0..NAMESPACES.len(), 0..KINDS.len()).prop_map(
            |(cluster, namespace, kind)| Placed {
                cluster,
                namespace,
                kind,
            },
        ),
        4..24,
    )
    // One Namespace object per name in a cluster, as in Kubernetes.
    .prop_map(|mut objects| {
        let mut seen = BTreeSet::new();
        objects.retain(|o| KINDS[o.kind].0 != "Namespace" || seen.insert((o.cluster, o.namespace)));
        objects
    })
}

impl Placed {
    fn namespaced(&self) -> bool {
        KINDS[self.kind].1
    }

    /// Unique, and found in no other name (`o3x` is not in `o13x`); a Namespace is
    /// named after its namespace.
    fn name(&self, i: usize) -> String {
        match KINDS[self.kind].0 {
            "Namespace" => NAMESPACES[self.namespace].to_owned(),
            _ => format!("o{i}x"),
        }
    }

    fn document(&self, i: usize) -> ResourceDocument {
        let (kind, namespaced) = KINDS[self.kind];
        let api_version = if kind == "Deployment" {
            "apps/v1"
        } else {
            "v1"
        };
        let namespace = if namespaced {
            NAMESPACES[self.namespace]
        } else {
            ""
        };
        let name = self.name(i);
        let uid = format!("u{i}x");
        ResourceDocument {
            cluster: CLUSTERS[self.cluster].to_owned(),
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.clone(),
            uid: uid.clone(),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            annotations: Default::default(),
            owner_references: Vec::new(),
            creation_timestamp: None,
            deletion_timestamp: None,
            resource_version: "1".to_owned(),
            sync_at: time::OffsetDateTime::now_utc(),
            deleted: false,
            object: json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": namespace, "uid": uid,
                    "labels": {"app": "web"}}}),
            issues: Vec::new(),
            refs: Vec::new(),
            // Kept in history too: its creation is a change every caller may ask about.
            history: Some(HistoryNote {
                keep_until: time::OffsetDateTime::now_utc() + time::Duration::days(1),
                late: false,
                managers: vec!["kubectl-create".to_owned()],
                preexisting: false,
            }),
        }
    }
}

impl Grant {
    /// The model the server must agree with, written apart from its own.
    fn holds(&self, o: &Placed) -> bool {
        let (kind, _) = KINDS[o.kind];
        let cluster = match (&self.clusters, self.gold) {
            (None, false) => true,
            (names, gold) => {
                names.as_ref().is_some_and(|n| n.contains(&o.cluster)) || (gold && o.cluster == 1)
            }
        };
        let namespace = self.namespaces.as_ref().is_none_or(|n| {
            (o.namespaced() && n.contains(&o.namespace))
                || (kind == "Namespace" && n.contains(&o.namespace))
        });
        let kinds = self.kinds.as_ref().is_none_or(|k| k.contains(&o.kind));
        let secrets = kind != "Secret" || self.secrets || self.role >= Role::Editor;
        cluster && namespace && kinds && secrets
    }

    fn sees_cluster(&self, cluster: usize) -> bool {
        match (&self.clusters, self.gold) {
            (None, false) => true,
            (names, gold) => {
                names.as_ref().is_some_and(|n| n.contains(&cluster)) || (gold && cluster == 1)
            }
        }
    }

    fn policy(&self) -> AccessPolicy {
        let names = |set: &Option<BTreeSet<usize>>, all: &[&str]| {
            set.as_ref()
                .map(|s| s.iter().map(|i| json!(all[*i])).collect::<Vec<_>>())
        };
        let kinds: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
        let mut scope = json!({"secrets": self.secrets});
        if let Some(clusters) = names(&self.clusters, &CLUSTERS) {
            scope["clusters"] = json!(clusters);
        }
        if self.gold {
            scope["cluster_labels"] = json!("tier=gold");
        }
        if let Some(namespaces) = names(&self.namespaces, &NAMESPACES) {
            scope["namespaces"] = json!(namespaces);
        }
        if let Some(kinds) = names(&self.kinds, &kinds) {
            scope["kinds"] = json!(kinds);
        }
        serde_json::from_value(json!({
            "name": "team", "subjects": {"anonymous": true},
            "role": self.role, "scope": scope,
        }))
        .unwrap()
    }
}

async fn fleet(grant: &Grant, objects: &[Placed]) -> Api {
    let api = Setup {
        policies: vec![grant.policy()],
        ..Setup::default()
    }
    .start()
    .await;
    for (i, cluster) in CLUSTERS.iter().enumerate() {
        let labels = if i == 1 {
            json!({"tier": "gold"})
        } else {
            json!({})
        };
        let body = json!({"kubeConfig": THREE_CONTEXTS, "labels": labels});
        let (code, answer) = api
            .admin()
            .call(
                "POST",
                &format!("/rest-api/v1/cluster/{cluster}"),
                Some(body),
            )
            .await;
        assert_eq!(code, 201, "{answer}");
    }
    let rule = json!({"name": "by-namespace", "fields": ["namespace", "kind"]});
    let (code, answer) = api
        .admin()
        .call("POST", "/rest-api/v1/resource-group-rule", Some(rule))
        .await;
    assert_eq!(code, 201, "{answer}");
    let documents: Vec<ResourceDocument> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| o.document(i))
        .collect();
    api.storage.upsert(&documents).await.unwrap();
    api
}

/// The requests to ask a route: each path parameter and locator over the fleet.
fn asks(path: &str, objects: &[Placed]) -> Vec<String> {
    let mut asks = Vec::new();
    let locators = CLUSTERS
        .iter()
        .flat_map(|c| {
            let mut at = vec![format!("cluster={c}")];
            at.extend(
                NAMESPACES
                    .iter()
                    .map(|n| format!("cluster={c}&namespace={n}")),
            );
            at
        })
        .chain(objects.iter().enumerate().map(|(i, o)| {
            let d = o.document(i);
            let namespace = if d.namespace.is_empty() {
                String::new()
            } else {
                format!("&namespace={}", d.namespace)
            };
            format!(
                "cluster={}&apiVersion={}&kind={}&name={}{namespace}",
                d.cluster,
                urlencode(&d.api_version),
                d.kind,
                d.name
            )
        }))
        .chain([
            "labels=app%3Dweb".to_owned(),
            format!(
                "query={}&pageSize=1000",
                urlencode("select * from resources")
            ),
            "pattern=keyword&keyword=o&pageSize=1000".to_owned(),
        ]);
    for query in locators {
        for name in ["by-namespace", CLUSTERS[0], CLUSTERS[1], CLUSTERS[2]] {
            if !path.contains("{name}") && name != "by-namespace" {
                continue;
            }
            asks.push(format!("{}?{query}", path.replace("{name}", name)));
        }
    }
    asks
}

async fn check(grant: Grant, objects: Vec<Placed>) {
    let api = fleet(&grant, &objects).await;
    let caller: Client<'_> = api.anonymous();
    let visible: Vec<usize> = (0..objects.len())
        .filter(|i| grant.holds(&objects[*i]))
        .collect();
    let hidden: Vec<String> = (0..objects.len())
        .filter(|i| !visible.contains(i) && KINDS[objects[*i].kind].0 != "Namespace")
        .map(|i| objects[i].name(i))
        .collect();

    // Found: every visible object by search, with the right total.
    let search = format!(
        "/rest-api/v1/search?query={}&pageSize=1000",
        urlencode("select * from resources")
    );
    let (code, page) = caller.call("GET", &search, None).await;
    assert_eq!(code, 200, "{page}");
    assert_eq!(page["data"]["total"], visible.len(), "{grant:?} {page}");
    let found: BTreeSet<(String, String)> = page["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["cluster"].as_str().unwrap().to_owned(),
                i["object"]["metadata"]["uid"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = visible
        .iter()
        .map(|i| (CLUSTERS[objects[*i].cluster].to_owned(), format!("u{i}x")))
        .collect();
    assert_eq!(found, expected, "{grant:?}");

    // Counted: overall, per cluster, and in the score.
    let (_, stats) = caller.call("GET", "/rest-api/v1/insight/stats", None).await;
    assert_eq!(stats["data"]["resourceCount"], visible.len(), "{stats}");
    let seen_clusters = (0..CLUSTERS.len()).filter(|c| grant.sees_cluster(*c));
    assert_eq!(
        stats["data"]["clusterCount"],
        seen_clusters.count(),
        "{stats}"
    );
    let (_, score) = caller.call("GET", "/rest-api/v1/insight/score", None).await;
    assert_eq!(score["data"]["resourceTotal"], visible.len(), "{score}");
    let (_, clusters) = caller.call("GET", "/rest-api/v1/clusters", None).await;
    let listed: Vec<&str> = clusters["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = (0..CLUSTERS.len())
        .filter(|c| grant.sees_cluster(*c))
        .map(|c| CLUSTERS[c])
        .collect();
    assert_eq!(listed, expected, "{grant:?}");
    for (c, cluster) in CLUSTERS.iter().enumerate() {
        let (code, summary) = caller
            .call(
                "GET",
                &format!("/rest-api/v1/insight/summary?cluster={cluster}"),
                None,
            )
            .await;
        if !grant.sees_cluster(c) {
            assert_eq!(code, 404, "{summary}");
            continue;
        }
        let in_cluster = visible.iter().filter(|i| objects[**i].cluster == c).count();
        assert_eq!(summary["data"]["resourceCount"], in_cluster, "{summary}");
    }

    // Each object's detail: there exactly when visible.
    for (i, o) in objects.iter().enumerate() {
        let d = o.document(i);
        let namespace = if d.namespace.is_empty() {
            String::new()
        } else {
            format!("&namespace={}", d.namespace)
        };
        let path = format!(
            "/rest-api/v1/insight/detail?cluster={}&apiVersion={}&kind={}&name={}{namespace}",
            d.cluster,
            urlencode(&d.api_version),
            d.kind,
            d.name
        );
        let (code, answer) = caller.call("GET", &path, None).await;
        let wanted = if visible.contains(&i) { 200 } else { 404 };
        assert_eq!(code, wanted, "{path} {grant:?}: {answer}");
    }

    // Each object's history: there exactly when visible; what changed counts only what
    // is visible.
    for (i, o) in objects.iter().enumerate() {
        let d = o.document(i);
        let path = format!(
            "/rest-api/v1/insight/history?cluster={}&kind={}&name={}&namespace={}",
            d.cluster, d.kind, d.name, d.namespace
        );
        let (code, answer) = caller.call("GET", &path, None).await;
        let wanted = if visible.contains(&i) { 200 } else { 404 };
        assert_eq!(code, wanted, "{path} {grant:?}: {answer}");
    }
    let (code, changes) = caller
        .call(
            "GET",
            "/rest-api/v1/insight/changes?since=1h&pageSize=1000",
            None,
        )
        .await;
    assert_eq!(code, 200, "{changes}");
    assert_eq!(
        changes["data"]["total"],
        visible.len(),
        "{grant:?} {changes}"
    );
    // The same asked in the dialect, with no window: every change kept, within the scope.
    let (code, searched) = caller
        .call(
            "GET",
            "/rest-api/v1/insight/changes?query=select%20*%20from%20changes&pageSize=1000",
            None,
        )
        .await;
    assert_eq!(code, 200, "{searched}");
    assert_eq!(
        searched["data"]["total"],
        visible.len(),
        "{grant:?} {searched}"
    );

    // Nothing hidden in any read route's answer, whatever it is asked.
    for endpoint in endpoints() {
        if endpoint.permission != Permission::Read || endpoint.method != "GET" {
            continue;
        }
        // AI (refused) and what is read from member clusters now (none here): no stored
        // object; their scope is checked apart.
        if ["/stream", "/aggregator/", "/insight/events"]
            .iter()
            .any(|p| endpoint.path.contains(p))
        {
            continue;
        }
        for ask in asks(&endpoint.path, &objects) {
            let (_, answer) = caller.call("GET", &ask, None).await;
            let text = answer.to_string();
            for name in &hidden {
                let uid = format!("u{}", &name[1..]);
                assert!(
                    !text.contains(name.as_str()) && !text.contains(&uid),
                    "{ask} shows {name} outside {grant:?}: {text}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn no_route_returns_counts_or_links_what_the_scope_leaves_out(
        grant in grant(),
        objects in objects(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(check(grant, objects));
    }
}

/// A caller no policy names is refused, and `/authn` shows a scoped caller its scope.
#[tokio::test]
async fn no_policy_no_access_and_authn_shows_the_scope() {
    let grant = Grant {
        role: Role::Viewer,
        clusters: Some(BTreeSet::from([0])),
        gold: false,
        namespaces: Some(BTreeSet::from([1])),
        kinds: None,
        secrets: false,
    };
    let api = fleet(&grant, &[]).await;
    let (code, answer) = api
        .anonymous()
        .call("GET", "/rest-api/v1/authn", None)
        .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["data"]["scope"],
        json!([{"role": "viewer", "clusters": ["c0"], "namespaces": ["ns1"], "secrets": false}])
    );
    assert_eq!(answer["data"]["policies"], json!(["team"]));
    // The guest token has its own role everywhere, policies or not.
    let (code, _) = api.guest().call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 200);
    let _: Value = answer;
}

/// Policies stored through the API: in force at once, versioned, never under a configured
/// one's name, never a writer without a credential.
#[tokio::test]
async fn stored_policies_are_in_force_at_once_and_versioned() {
    let configured: AccessPolicy = serde_json::from_value(json!({
        "name": "configured", "subjects": {"groups": ["g"]}, "role": "viewer"}))
    .unwrap();
    let api = Setup {
        policies: vec![configured],
        ..Setup::default()
    }
    .start()
    .await;
    let (admin, nobody) = (api.admin(), api.anonymous());
    let (code, _) = nobody.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 401);
    let open = json!({"subjects": {"anonymous": true}, "role": "viewer",
        "scope": {"namespaces": ["web"]}});
    let (code, answer) = admin
        .call(
            "POST",
            "/rest-api/v1/access-policy/open",
            Some(open.clone()),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    let version = answer["data"]["version"].as_i64().unwrap();
    let (code, answer) = nobody.call("GET", "/rest-api/v1/authn", None).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["data"]["policies"], json!(["open"]));
    assert_eq!(answer["data"]["scope"][0]["namespaces"], json!(["web"]));
    // Readers of policies are admins; a viewer is not.
    let (code, _) = api
        .guest()
        .call("GET", "/rest-api/v1/access-policies", None)
        .await;
    assert_eq!(code, 403);
    let (code, list) = admin
        .call("GET", "/rest-api/v1/access-policies", None)
        .await;
    assert_eq!(code, 200);
    let names: Vec<(&str, bool)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["configured"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(names, [("configured", true), ("open", false)]);
    for (path, body, status) in [
        // A configured policy's name.
        ("/rest-api/v1/access-policy/configured", open.clone(), 409),
        // No write without a credential.
        (
            "/rest-api/v1/access-policy/open",
            json!({"subjects": {"anonymous": true}, "role": "editor"}),
            400,
        ),
        // A stale version.
        (
            &format!("/rest-api/v1/access-policy/open?version={}", version + 7),
            open.clone(),
            409,
        ),
    ] {
        let (code, answer) = admin.call("PUT", path, Some(body)).await;
        assert_eq!(code, status, "{path}: {answer}");
    }
    let (code, answer) = admin
        .call("DELETE", "/rest-api/v1/access-policy/open", None)
        .await;
    assert_eq!(code, 200, "{answer}");
    let (code, _) = nobody.call("GET", "/rest-api/v1/clusters", None).await;
    assert_eq!(code, 401, "in force at once: gone");
}
