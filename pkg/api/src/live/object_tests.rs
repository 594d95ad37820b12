//! No value of any locator field changes the path karpor asks a member API server for
//! ([`karpor_kube::reads::object`], the hub's and the agent's read alike):
//! the requests kube-rs actually sends are recorded by a stand-in transport (the real
//! API server's side of this is `tests/security/live.rs`).

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use proptest::prelude::*;
use serde_json::json;

use crate::live::object_ref;
use crate::locator::Locator;
use karpor_kube::reads::{object as read, ReadError};

/// Answers discovery of the core group (ConfigMaps, namespaced; Nodes, cluster-scoped)
/// and any object read with a ConfigMap; records every request's path and query.
fn recording_client() -> (kube::Client, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: Request<Body>| {
        let log = log.clone();
        async move {
            let uri = request.uri().clone();
            log.lock().unwrap().push(
                uri.path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_default(),
            );
            let body = if uri.path() == "/api/v1" {
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                    "resources": [
                        {"name": "configmaps", "singularName": "configmap", "namespaced": true,
                         "kind": "ConfigMap", "verbs": ["get", "list"]},
                        {"name": "nodes", "singularName": "node", "namespaced": false,
                         "kind": "Node", "verbs": ["get", "list"]},
                        {"name": "nodes/proxy", "singularName": "", "namespaced": false,
                         "kind": "NodeProxyOptions", "verbs": ["get"]}]})
            } else {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "x", "namespace": "y"}})
            };
            Ok::<_, std::convert::Infallible>(Response::new(Body::from(
                serde_json::to_vec(&body).unwrap(),
            )))
        }
    });
    (kube::Client::new(service, "default"), seen)
}

fn query(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap()
}

/// Reads what the locator names; the object requests made (discovery left out).
fn object_requests(pairs: &[(&str, &str)]) -> Option<Vec<String>> {
    let at: Locator = serde_urlencoded::from_str(&query(pairs)).ok()?;
    let at = object_ref(&at).ok()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let seen = runtime.block_on(async {
        let (client, seen) = recording_client();
        match read(client, &at).await {
            Ok(_) | Err(ReadError::NoKind | ReadError::Scope(_)) => {}
            Err(ReadError::Cluster(e)) => panic!("{e}"),
        }
        seen
    });
    let seen = seen.lock().unwrap().clone();
    Some(seen.into_iter().filter(|p| p != "/api/v1").collect())
}

fn decoded(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .unwrap()
        .into_owned()
}

/// Hostile text: the URL's delimiters, dot segments, encodings, and any character.
fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        // Valid often enough that reads are made and checked.
        "[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?",
        "[A-Za-z0-9.:_-]{1,20}",
        "[a-z0-9./?%#:@&=;+ -]{0,24}",
        any::<String>(),
        Just("../../secrets".to_owned()),
        Just("x?labelSelector=a".to_owned()),
        Just("n/proxy/metrics".to_owned()),
        Just("%2e%2e".to_owned()),
    ]
}

proptest! {
    // No regression files: a run must not write into the tree.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_namespaced_read_asks_for_exactly_that_object(namespace in hostile(), name in hostile()) {
        let pairs = [("cluster", "c"), ("apiVersion", "v1"), ("kind", "ConfigMap"),
            ("namespace", namespace.as_str()), ("name", name.as_str())];
        if let Some(requests) = object_requests(&pairs) {
            if namespace.is_empty() {
                // A namespaced kind without a namespace is refused before any read.
                prop_assert!(requests.is_empty(), "{:?}", requests);
                return Ok(());
            }
            prop_assert_eq!(requests.len(), 1, "{:?}", requests);
            let path = &requests[0];
            prop_assert!(!path.contains('?') && !path.contains('#'), "{}", path);
            let segments: Vec<&str> = path.split('/').collect();
            prop_assert_eq!(&segments[..5], &["", "api", "v1", "namespaces", namespace.as_str()]);
            prop_assert_eq!(segments[5], "configmaps");
            prop_assert_eq!(segments.len(), 7, "{}", path);
            prop_assert_eq!(decoded(segments[6]), name);
        }
    }

    #[test]
    fn a_cluster_scoped_read_asks_for_exactly_that_object(name in hostile(), kind in prop_oneof![
        Just("Node".to_owned()), Just("NodeProxyOptions".to_owned()), "[A-Za-z/?.]{1,12}"]) {
        let pairs = [("cluster", "c"), ("apiVersion", "v1"), ("kind", kind.as_str()),
            ("name", name.as_str())];
        if let Some(requests) = object_requests(&pairs) {
            for path in &requests {
                let segments: Vec<&str> = path.split('/').collect();
                prop_assert_eq!(&segments[..4], &["", "api", "v1", "nodes"], "{}", path);
                prop_assert_eq!(segments.len(), 5, "{}", path);
                prop_assert_eq!(decoded(segments[4]), name.clone());
                prop_assert!(!path.contains('?'), "{}", path);
            }
        }
    }
}

#[test]
fn valid_names_are_read_at_their_own_path() {
    let requests = object_requests(&[
        ("cluster", "c"),
        ("apiVersion", "v1"),
        ("kind", "Node"),
        ("name", "system:node-1"),
    ]);
    assert_eq!(
        requests,
        Some(vec!["/api/v1/nodes/system:node-1".to_owned()])
    );
    let requests = object_requests(&[
        ("cluster", "c"),
        ("apiVersion", "v1"),
        ("kind", "ConfigMap"),
        ("namespace", "ns"),
        ("name", "cm"),
    ]);
    assert_eq!(
        requests,
        Some(vec!["/api/v1/namespaces/ns/configmaps/cm".to_owned()])
    );
}

#[test]
fn the_observed_attacks_are_refused_before_any_request() {
    for pairs in [
        // A Secret URL carried in a ConfigMap read's namespace.
        [
            ("namespace", "default/secrets/token?x="),
            ("name", "cm"),
            ("kind", "ConfigMap"),
        ],
        // A list of Secrets through a cluster-scoped kind's name.
        [
            ("namespace", ""),
            ("name", "x/../../namespaces/default/secrets"),
            ("kind", "Node"),
        ],
        // The kubelet through a Node's name.
        [
            ("namespace", ""),
            ("name", "n1/proxy/pods"),
            ("kind", "Node"),
        ],
    ] {
        let mut all = vec![("cluster", "c"), ("apiVersion", "v1")];
        all.extend(pairs);
        assert_eq!(object_requests(&all), None, "{all:?}");
    }
}
