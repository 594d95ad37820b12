//! Live reads are no proxy into a member cluster (a real kube-apiserver): names a caller
//! sends are parsed before they reach a URL, answers are redacted by their own kind, and
//! the work a caller causes is bounded (live calls per cluster, streams per caller and in
//! total).

use std::time::{Duration, Instant};

use base64::Engine as _;
use karpor_testkit::api::{Client, ADMIN, GUEST, WITH_TOKENS};
use karpor_testkit::cluster::{configmaps, kube_name, namespaces, resource, secrets, Kube};
use karpor_testkit::process::Spawn;
use serde_json::{json, Value};

const CLUSTER: &str = "live";
const SECRET_VALUE: &str = "live-secret-value-5b1f";

fn limits() -> String {
    format!(
        "{WITH_TOKENS}server:\n  limits:\n    live: {{calls_per_second: 1, burst: 12, streams_per_caller: 2, streams: 3}}\n"
    )
}

fn detail(query: &str) -> String {
    format!("/rest-api/v1/insight/detail?live=true&cluster={CLUSTER}&{query}")
}

fn no_secret(answer: &Value) {
    let text = answer.to_string();
    let encoded = base64::engine::general_purpose::STANDARD.encode(SECRET_VALUE);
    assert!(
        !text.contains(SECRET_VALUE) && !text.contains(&encoded),
        "a Secret value was answered: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reads_are_no_proxy_and_are_bounded() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let ns = kube_name("live");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &secrets(),
        Some(&ns),
        json!({"metadata": {"name": "token"}, "stringData": {"password": SECRET_VALUE}}),
    )
    .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "cm"}, "data": {"a": "b"}}),
    )
    .await;
    let events = resource("", "v1", "Event", "events");
    kube.create(
        &events,
        Some(&ns),
        json!({"metadata": {"name": "ev"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": ns},
        "reason": "Tested", "message": "an event", "type": "Normal"}),
    )
    .await;

    let karpor = Spawn::serve(&limits())
        .with_env("GUEST_TOKEN", GUEST)
        .start();
    let admin = Client::with_token(&karpor, ADMIN);
    let guest = Client::with_token(&karpor, GUEST);
    let (code, created) = admin
        .call(
            "POST",
            &format!("/rest-api/v1/cluster/{CLUSTER}"),
            Some(json!({"displayName": "live", "kubeConfig": kube.kubeconfig})),
        )
        .await;
    assert_eq!(code, 201, "{created}");

    // The observed attacks: a Secret URL in a ConfigMap read's namespace, every Secret
    // through a cluster-scoped kind's name, the kubelet through a Node's name.
    let encode = |s: &str| {
        s.replace('/', "%2F")
            .replace('?', "%3F")
            .replace('=', "%3D")
    };
    for (query, field) in [
        (
            format!(
                "apiVersion=v1&kind=ConfigMap&namespace={}&name=cm",
                encode(&format!("{ns}/secrets/token?x="))
            ),
            "namespace",
        ),
        (
            format!(
                "apiVersion=v1&kind=Namespace&name={}",
                encode(&format!("{ns}/secrets"))
            ),
            "name",
        ),
        (
            "apiVersion=v1&kind=Node&name=n1%2Fproxy%2Fpods".to_owned(),
            "name",
        ),
        (
            "apiVersion=v1%2Fsecrets%2Fx&kind=Secret&name=x".to_owned(),
            "apiVersion",
        ),
        (
            "apiVersion=v1&kind=Secret%3Fwatch%3D1&name=x".to_owned(),
            "kind",
        ),
    ] {
        let (code, answer) = guest.call("GET", &detail(&query), None).await;
        assert_eq!(code, 400, "{query}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(field),
            "{query}: the refusal names {field}: {message}"
        );
        no_secret(&answer);
    }
    let (code, answer) = guest
        .call(
            "GET",
            &format!("/rest-api/v1/insight/aggregator/event/{CLUSTER}/a%2Fb/x"),
            None,
        )
        .await;
    assert_eq!(code, 400, "{answer}");

    // Redaction from the answer: a Secret read live is redacted, and so is every event.
    let (code, answer) = guest
        .call(
            "GET",
            &detail(&format!(
                "apiVersion=v1&kind=Secret&namespace={ns}&name=token"
            )),
            None,
        )
        .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["data"]["data"], "[redacted]", "{answer}");
    assert_eq!(answer["data"]["metadata"]["managedFields"], "[redacted]");
    no_secret(&answer);
    let (code, answer) = guest
        .call(
            "GET",
            &format!("/rest-api/v1/insight/events?cluster={CLUSTER}&namespace={ns}"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{answer}");
    let listed = answer["data"].as_array().unwrap();
    assert!(!listed.is_empty(), "{answer}");
    for event in listed {
        assert_eq!(event["metadata"]["managedFields"], "[redacted]", "{event}");
    }

    // Live calls per cluster: a burst, then the rate; beyond it 429 with Retry-After.
    let started = Instant::now();
    let (mut allowed, mut limited) = (0, 0);
    while started.elapsed() < Duration::from_secs(3) {
        let response = guest
            .request(
                reqwest::Method::GET,
                &detail(&format!(
                    "apiVersion=v1&kind=ConfigMap&namespace={ns}&name=cm"
                )),
            )
            .send()
            .await
            .unwrap();
        match response.status().as_u16() {
            200 => allowed += 1,
            429 => {
                assert!(response.headers().contains_key("retry-after"));
                limited += 1;
            }
            other => panic!("{other}: {}", response.text().await.unwrap()),
        }
    }
    eprintln!("live calls in 3 s: {allowed} allowed, {limited} limited (burst 12, 1/s)");
    assert!(limited > 0, "no call was limited");
    assert!(
        allowed <= 12 + 4,
        "{allowed} calls allowed in 3 s at 1/s after a burst of 12"
    );

    // Event streams: two per caller, three in all.
    let stream = |client: &Client| {
        client
            .request(
                reqwest::Method::GET,
                &format!("/rest-api/v1/insight/aggregator/event/{CLUSTER}/{ns}/cm?kind=ConfigMap&apiVersion=v1"),
            )
            .send()
    };
    let first = stream(&guest).await.unwrap();
    let second = stream(&guest).await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = stream(&guest).await.unwrap();
    assert_eq!(third.status(), 429, "a third stream of one caller");
    assert!(third.headers().contains_key("retry-after"));
    let admins = stream(&admin).await.unwrap();
    assert_eq!(admins.status(), 200);
    let over = stream(&admin).await.unwrap();
    assert_eq!(over.status(), 429, "a fourth stream in all");
    drop((first, second, admins));
    // A stream's place is given back when its client goes away.
    let (open, guest) = (&stream, &guest);
    karpor_testkit::process::wait_for(
        Duration::from_secs(15),
        "a stream place freed",
        || async move { open(guest).await.unwrap().status() == 200 },
    )
    .await;

    let (_, metrics) = karpor_testkit::process::get(&karpor.url("/metrics")).await;
    assert!(
        metrics.contains("karpor_api_live_calls_total{"),
        "{metrics}"
    );
    assert!(metrics.contains("outcome=\"limited\""));
    assert!(metrics.contains("karpor_api_event_streams_refused_total{reason=\"caller\"}"));
    kube.delete_namespace(&ns).await;
}
