//! A pod's log through a real `karpor serve`, end to end: the shared kube-apiserver A
//! proxies `pods/log` to a kubelet stand-in (`karpor_testkit::kubelet`) on a Node made for
//! the test. The stream's frames (the tail, timestamps apart, the container forwarded),
//! following, the download, a cluster credential without `pods/log`, who may read logs,
//! the stream bounds (per caller, how long), bad parameters, nothing of a log in storage,
//! `karpor logs`, and a diagnosis of the newest lines by the shared test model server.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use karpor_testkit::api::{Client, GUEST};
use karpor_testkit::cluster::{kube_name, namespaces, resource, Kube, LIMIT};
use karpor_testkit::kubelet::{self, Kubelet, Node};
use karpor_testkit::model::ModelServer;
use karpor_testkit::process::{wait_for, Karpor, Spawn, EMBEDDED};
use kube::api::{ApiResource, DeleteParams, ListParams};
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The server without its syncer: a pod's log is read live, storage plays no part.
const SERVE: &str = "server: {syncer: false}\nshutdown: {drain_delay: 1s}\n";
/// The cluster's name in karpor.
const CLUSTER: &str = "a";

/// The pod's log, as the kubelet stand-in has it (spaces inside: only the first one of a
/// timestamped line separates the time).
fn lines() -> Vec<String> {
    (0..10)
        .map(|i| format!("GET /orders/{i} 200 {i}ms"))
        .collect()
}

/// A namespace with a pod (containers `web` and `sidecar`) on a Node whose kubelet is the
/// stand-in, and a `karpor serve` with the cluster registered as [`CLUSTER`]. Whatever it
/// made in the cluster is deleted on drop.
struct Scene {
    karpor: Karpor,
    admin: Client,
    /// Streams: no overall timeout (a test bounds each read itself).
    http: reqwest::Client,
    kube: Kube,
    kubelet: Kubelet,
    node: Node,
    ns: String,
    pod: String,
    _cleanup: Cleanup,
}

impl Scene {
    async fn start(config: &str) -> Scene {
        Scene::with(config, Kubelet::start(lines()), None).await
    }

    /// With `kubelet`, and a sync rule created before the cluster is registered (made
    /// by `rule(namespace)`).
    async fn with(config: &str, kubelet: Kubelet, rule: Option<&dyn Fn(&str) -> Value>) -> Scene {
        let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
        let ns = kube_name("pod-logs");
        kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
            .await;
        let cleanup = Cleanup {
            kubeconfig: kube.kubeconfig.clone(),
            ns: ns.clone(),
        };
        let node = kubelet.node(&kube).await;
        let pod = kube_name("shop");
        kubelet::pod(&kube, &ns, &pod, &node, &["web", "sidecar"]).await;
        let karpor = Spawn::serve(config).start();
        let admin = Client::local_admin(&karpor);
        if let Some(rule) = rule {
            let (code, created) = admin
                .call("POST", "/rest-api/v1/sync-rule/pods", Some(rule(&ns)))
                .await;
            assert_eq!(code, 201, "{created}");
        }
        register(&admin, CLUSTER, &kube.kubeconfig).await;
        Scene {
            karpor,
            admin,
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            kube,
            kubelet,
            node,
            ns,
            pod,
            _cleanup: cleanup,
        }
    }

    /// The route for this scene's pod, with `query`.
    fn path(&self, query: &str) -> String {
        format!(
            "/rest-api/v1/insight/aggregator/log/pod/{CLUSTER}/{}/{}?{query}",
            self.ns, self.pod
        )
    }

    /// `GET` of the pod's log with `token` (anonymous if `None`), the response as it
    /// comes.
    async fn get(&self, token: Option<&str>, query: &str) -> reqwest::Response {
        self.get_path(token, &self.path(query)).await
    }

    async fn get_path(&self, token: Option<&str>, path: &str) -> reqwest::Response {
        let mut request = self.http.get(self.karpor.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        tokio::time::timeout(LIMIT, request.send())
            .await
            .unwrap_or_else(|_| panic!("GET {path}: no answer within {LIMIT:?}"))
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// The admin's stream of the pod's log with `query`, once answered 200 as events.
    async fn stream(&self, query: &str) -> Sse {
        let token = self.karpor.local_token();
        Sse::of(self.get(Some(&token), query).await).await
    }

    /// The kubelet's requests for `container`'s log, each as `(path, query)`.
    fn asked(&self, container: &str) -> Vec<BTreeMap<String, String>> {
        let path = format!("/containerLogs/{}/{}/{container}", self.ns, self.pod);
        self.kubelet
            .requests()
            .iter()
            .filter_map(|r| {
                let (p, q) = r.split_once('?').unwrap_or((r, ""));
                (p == path).then(|| query_pairs(q))
            })
            .collect()
    }
}

/// Deletes the test's namespace with what is in it (a drop cannot await: on a thread
/// with a runtime of its own). Without a controller manager nothing else empties it.
struct Cleanup {
    kubeconfig: String,
    ns: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (kubeconfig, ns) = (self.kubeconfig.clone(), self.ns.clone());
        let done = karpor_testkit::process::finish_apart(async move {
            let kube = Kube::from_text(kubeconfig).await;
            kubelet::delete_pods(&kube, &ns).await;
            let rbac = |kind: &str, plural: &str| {
                resource("rbac.authorization.k8s.io", "v1", kind, plural)
            };
            for r in [
                rbac("RoleBinding", "rolebindings"),
                rbac("Role", "roles"),
                resource("", "v1", "ServiceAccount", "serviceaccounts"),
            ] {
                delete_all(&kube, &r, &ns).await;
            }
            kube.delete_namespace(&ns).await;
        });
        if !done {
            eprintln!("namespace {} may be left behind", self.ns);
        }
    }
}

async fn delete_all(kube: &Kube, r: &ApiResource, ns: &str) {
    kube.api(r, Some(ns))
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete the {} of {ns}: {e}", r.plural));
}

async fn register(admin: &Client, name: &str, kubeconfig: &str) {
    let (code, created) = admin
        .call(
            "POST",
            &format!("/rest-api/v1/cluster/{name}"),
            Some(json!({"kubeConfig": kubeconfig})),
        )
        .await;
    assert_eq!(code, 201, "{created}");
}

fn query_pairs(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// A response's server-sent events, frame by frame.
struct Sse {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Sse {
    async fn of(response: reqwest::Response) -> Sse {
        let status = response.status();
        let kind = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        if status != 200 {
            panic!("{status}: {}", response.text().await.unwrap_or_default());
        }
        assert_eq!(kind.as_deref(), Some("text/event-stream"));
        Sse {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next `data:` frame as JSON (comments skipped), `None` once the body has
    /// ended; fails when none comes within [`LIMIT`].
    async fn next(&mut self) -> Option<Value> {
        self.next_by(tokio::time::Instant::now() + LIMIT).await
    }

    /// As [`Sse::next`], failing at `deadline`.
    async fn next_by(&mut self, deadline: tokio::time::Instant) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8(block).unwrap();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() {
                    continue; // a keep-alive
                }
                let data = data.join("\n");
                return Some(
                    serde_json::from_str(&data)
                        .unwrap_or_else(|e| panic!("a frame that is not JSON ({e}): {data}")),
                );
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no frame, nor the end of the stream, in time"))
                .unwrap_or_else(|e| panic!("the stream broke: {e}"));
            match chunk {
                Some(bytes) => self.buffer.extend_from_slice(&bytes),
                None => {
                    let rest = String::from_utf8_lossy(&self.buffer);
                    assert!(rest.trim().is_empty(), "a partial frame at the end: {rest}");
                    return None;
                }
            }
        }
    }

    /// The next frame's `content`, failing on the end of the stream or an error frame.
    async fn content(&mut self) -> String {
        let frame = self.next().await.expect("another frame");
        assert!(frame.get("error").is_none(), "{frame}");
        frame["content"]
            .as_str()
            .unwrap_or_else(|| panic!("no content: {frame}"))
            .to_owned()
    }
}

/// `(status, envelope)` of a refused request: karpor's JSON envelope.
async fn refusal(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let envelope: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"));
    assert_eq!(envelope["success"], json!(false), "{status}: {text}");
    assert!(envelope["message"].is_string(), "{text}");
    (status, envelope)
}

fn message(envelope: &Value) -> &str {
    envelope["message"].as_str().unwrap()
}

fn is_rfc3339(text: &str) -> bool {
    OffsetDateTime::parse(text, &Rfc3339).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_stream_frames_the_tail_with_timestamps_apart() {
    let scene = Scene::start(SERVE).await;
    let all = lines();

    let mut timed = scene
        .stream("container=web&tailLines=3&timestamps=true")
        .await;
    for expected in &all[7..] {
        let frame = timed.next().await.expect("a frame");
        assert_eq!(frame["content"], json!(expected), "{frame}");
        let at = frame["timestamp"]
            .as_str()
            .unwrap_or_else(|| panic!("{frame}"));
        assert!(is_rfc3339(at), "the timestamp is the line's time: {frame}");
        assert!(frame.get("error").is_none(), "{frame}");
    }
    drop(timed);

    // Without timestamps the line is whole, and no timestamp is sent.
    let mut plain = scene.stream("container=sidecar&tailLines=2").await;
    for expected in &all[8..] {
        let frame = plain.next().await.expect("a frame");
        assert_eq!(frame["content"], json!(expected), "{frame}");
        assert!(frame.get("timestamp").is_none(), "{frame}");
    }
    drop(plain);

    // No tailLines: the last 1000 lines, so here the whole log from its first line.
    let mut default = scene.stream("container=web").await;
    assert_eq!(default.content().await, all[0]);
    drop(default);

    let web = scene.asked("web");
    assert_eq!(web.len(), 2, "{:?}", scene.kubelet.requests());
    let get = |q: &BTreeMap<String, String>, k: &str| q.get(k).cloned();
    assert_eq!(get(&web[0], "tailLines").as_deref(), Some("3"), "{web:?}");
    assert_eq!(
        get(&web[0], "timestamps").as_deref(),
        Some("true"),
        "{web:?}"
    );
    assert_eq!(get(&web[0], "follow").as_deref(), Some("true"), "{web:?}");
    assert_eq!(
        get(&web[1], "tailLines").as_deref(),
        Some("1000"),
        "{web:?}"
    );
    assert_ne!(
        get(&web[1], "timestamps").as_deref(),
        Some("true"),
        "{web:?}"
    );
    let sidecar = scene.asked("sidecar");
    assert_eq!(sidecar.len(), 1, "{:?}", scene.kubelet.requests());
    assert_eq!(get(&sidecar[0], "tailLines").as_deref(), Some("2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_stream_follows_until_the_client_leaves() {
    let scene = Scene::start(SERVE).await;
    let mut stream = scene.stream("container=web&tailLines=1").await;
    assert_eq!(stream.content().await, lines()[9]);
    // The kubelet writes `follow 1`, `follow 2`, ... as the workload goes on.
    for n in 1..=3 {
        assert_eq!(stream.content().await, format!("follow {n}"));
    }
    assert_eq!(scene.kubelet.following(), 1);
    drop(stream);
    // The client gone, karpor lets go of the cluster's stream too.
    wait_for(LIMIT, "the kubelet's followed log is closed", || async {
        scene.kubelet.following() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_download_is_the_whole_log_as_an_attachment() {
    let scene = Scene::start(SERVE).await;
    let token = scene.karpor.local_token();
    let all = lines();

    let response = scene.get(Some(&token), "container=web&download=true").await;
    assert_eq!(response.status(), 200);
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(
        header(&response, "content-type").as_deref(),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        header(&response, "content-disposition"),
        Some(format!("attachment; filename=\"{}-web.log\"", scene.pod))
    );
    let body = tokio::time::timeout(LIMIT, response.text())
        .await
        .expect("the download ends")
        .unwrap();
    assert_eq!(body, format!("{}\n", all.join("\n")));
    // Not followed, not cut to a tail, within the download limit (32 MiB by default).
    let asked = scene.asked("web");
    assert_eq!(asked.len(), 1, "{:?}", scene.kubelet.requests());
    assert_ne!(
        asked[0].get("follow").map(String::as_str),
        Some("true"),
        "{asked:?}"
    );
    assert_eq!(asked[0].get("tailLines"), None, "{asked:?}");
    assert_eq!(
        asked[0].get("limitBytes").map(String::as_str),
        Some("33554432"),
        "{asked:?}"
    );

    // A tail of it, with the cluster's timestamps.
    let response = scene
        .get(
            Some(&token),
            "container=sidecar&download=true&tailLines=2&timestamps=true",
        )
        .await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    let got: Vec<(&str, &str)> = body
        .lines()
        .map(|l| l.split_once(' ').unwrap_or_else(|| panic!("{body}")))
        .collect();
    assert_eq!(got.len(), 2, "{body}");
    for ((at, text), expected) in got.iter().zip(&all[8..]) {
        assert!(is_rfc3339(at), "{body}");
        assert_eq!(text, expected);
    }

    // `since` reaches the cluster in seconds.
    let response = scene
        .get(Some(&token), "container=sidecar&download=true&since=5m")
        .await;
    assert_eq!(response.status(), 200);
    let sidecar = scene.asked("sidecar");
    assert_eq!(
        sidecar
            .last()
            .and_then(|q| q.get("sinceSeconds"))
            .map(String::as_str),
        Some("300"),
        "{sidecar:?}"
    );

    // A pod of one container: no container named, the file is POD-pod.log.
    let single = kube_name("single");
    kubelet::pod(&scene.kube, &scene.ns, &single, &scene.node, &["app"]).await;
    let path = format!(
        "/rest-api/v1/insight/aggregator/log/pod/{CLUSTER}/{}/{single}?download=true",
        scene.ns
    );
    let response = scene.get_path(Some(&token), &path).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-disposition"),
        Some(format!("attachment; filename=\"{single}-pod.log\""))
    );
    assert_eq!(
        response.text().await.unwrap(),
        format!("{}\n", all.join("\n"))
    );
    let asked: Vec<String> = scene.kubelet.requests();
    assert!(
        asked
            .iter()
            .any(|r| r.starts_with(&format!("/containerLogs/{}/{single}/app", scene.ns))),
        "{asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_without_pods_log_in_the_cluster_is_403_naming_it() {
    let scene = Scene::start(SERVE).await;
    let limited = kubelet::without_pod_logs(&scene.kube, &scene.ns).await;
    register(&scene.admin, "limited", &limited).await;
    let token = scene.karpor.local_token();
    for query in ["container=web", "container=web&download=true"] {
        let path = format!(
            "/rest-api/v1/insight/aggregator/log/pod/limited/{}/{}?{query}",
            scene.ns, scene.pod
        );
        let (status, answer) = refusal(scene.get_path(Some(&token), &path).await).await;
        assert_eq!(status, 403, "{query}: {answer}");
        assert!(message(&answer).contains("pods/log"), "{query}: {answer}");
    }
    // The credential may read the pod itself: only its log is refused, by the cluster.
    let (code, detail) = scene
        .admin
        .call(
            "GET",
            &format!(
                "/rest-api/v1/insight/detail?cluster=limited&apiVersion=v1&kind=Pod&namespace={}&name={}&live=true",
                scene.ns, scene.pod
            ),
            None,
        )
        .await;
    assert_eq!(code, 200, "{detail}");
    assert!(
        scene.kubelet.requests().is_empty(),
        "nothing reached the kubelet: {:?}",
        scene.kubelet.requests()
    );
    scene.admin.assert_no_secret_answered();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_needs_the_pod_logs_role() {
    // By default (auth.pod_logs: admin): anonymous callers are asked for a token, guests
    // are refused, the admin reads.
    let config =
        format!("{SERVE}auth:\n  tokens:\n  - {{name: viewer, role: guest, token: {GUEST}}}\n");
    let scene = Scene::start(&config).await;
    let query = "container=web&download=true";
    let (status, answer) = refusal(scene.get(None, query).await).await;
    assert_eq!(status, 401, "{answer}");
    let (status, answer) = refusal(scene.get(Some(GUEST), query).await).await;
    assert_eq!(status, 403, "{answer}");
    assert!(message(&answer).contains("auth.pod_logs"), "{answer}");
    assert!(
        scene.kubelet.requests().is_empty(),
        "refused before the cluster"
    );
    let token = scene.karpor.local_token();
    let response = scene.get(Some(&token), query).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().await.unwrap(),
        format!("{}\n", lines().join("\n"))
    );

    // auth.pod_logs: guest: everyone who may read (a local install's anonymous callers
    // are guests).
    let config = format!(
        "{SERVE}auth:\n  pod_logs: guest\n  tokens:\n  - {{name: viewer, role: guest, token: {GUEST}}}\n"
    );
    let open = Spawn::serve(&config).start();
    register(&Client::local_admin(&open), CLUSTER, &scene.kube.kubeconfig).await;
    let path = format!("{}{}", open.url(""), scene.path(query));
    for token in [None, Some(GUEST)] {
        let mut request = scene.http.get(&path);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, 200, "{token:?}: {body}");
        assert_eq!(body, format!("{}\n", lines().join("\n")), "{token:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_streams_per_caller_are_bounded() {
    let config = "server: {syncer: false, limits: {live: {streams_per_caller: 2}}}\n\
                  shutdown: {drain_delay: 1s}\n";
    let scene = Scene::start(config).await;
    let token = scene.karpor.local_token();
    let mut first = scene.stream("container=web&tailLines=1").await;
    let mut second = scene.stream("container=sidecar&tailLines=1").await;
    assert_eq!(first.content().await, lines()[9]);
    assert_eq!(second.content().await, lines()[9]);

    // A third, followed or downloaded, is one too many.
    for query in ["container=web&tailLines=1", "container=web&download=true"] {
        let response = scene.get(Some(&token), query).await;
        let retry = response.headers().get("retry-after").cloned();
        let (status, answer) = refusal(response).await;
        assert_eq!(status, 429, "{query}: {answer}");
        assert!(retry.is_some(), "{query}: 429 without Retry-After");
    }

    // One closed, a new one is let in (once the server has seen the client go).
    drop(first);
    let mut third = None;
    let started = Instant::now();
    while third.is_none() {
        let response = scene.get(Some(&token), "container=web&tailLines=1").await;
        match response.status().as_u16() {
            200 => third = Some(Sse::of(response).await),
            429 => {
                assert!(
                    started.elapsed() < LIMIT,
                    "a closed stream's place is not given back within {LIMIT:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("{other}: {}", response.text().await.unwrap()),
        }
    }
    let mut third = third.unwrap();
    assert_eq!(third.content().await, lines()[9]);
    // And the two held again are the most.
    let (status, answer) = refusal(scene.get(Some(&token), "container=web").await).await;
    assert_eq!(status, 429, "{answer}");
    assert!(second.content().await.starts_with("follow "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_streams_in_total_are_bounded() {
    // Two streams in all, two per caller: a guest (who may read logs here) holding one
    // and the admin one, neither gets another.
    let config = format!(
        "server: {{syncer: false, limits: {{live: {{streams_per_caller: 2, streams: 2}}}}}}\n\
         shutdown: {{drain_delay: 1s}}\n\
         auth:\n  pod_logs: guest\n  tokens:\n  - {{name: viewer, role: guest, token: {GUEST}}}\n"
    );
    let scene = Scene::start(&config).await;
    let token = scene.karpor.local_token();
    let mut admins = scene.stream("container=web&tailLines=1").await;
    let mut guests = Sse::of(scene.get(Some(GUEST), "container=web&tailLines=1").await).await;
    assert_eq!(admins.content().await, lines()[9]);
    assert_eq!(guests.content().await, lines()[9]);
    for who in [Some(GUEST), Some(token.as_str())] {
        let response = scene.get(who, "container=web&tailLines=1").await;
        assert!(response.headers().contains_key("retry-after"));
        let (status, answer) = refusal(response).await;
        assert_eq!(status, 429, "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_download_is_capped_and_paced() {
    // 100 bytes at 20 bytes a second: about 5 s, never much less.
    let config = "server: {syncer: false, limits: {live: {log_download_bytes: 100, log_bytes_per_second: 20}}}\n\
                  shutdown: {drain_delay: 1s}\n";
    let scene = Scene::start(config).await;
    let token = scene.karpor.local_token();
    let started = Instant::now();
    let response = scene.get(Some(&token), "container=web&download=true").await;
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(LIMIT, response.text())
        .await
        .expect("the download ends")
        .unwrap();
    let took = started.elapsed();
    let whole = format!("{}\n", lines().join("\n"));
    assert_eq!(
        body,
        whole[..100],
        "the first log_download_bytes of the log"
    );
    assert!(
        took >= Duration::from_millis(2500),
        "100 bytes at 20 B/s in {took:?}"
    );
    let asked = scene.asked("web");
    assert_eq!(
        asked[0].get("limitBytes").map(String::as_str),
        Some("100"),
        "{asked:?}"
    );
}

/// Reads `stream` to its end: the frames' contents; fails if it has not ended within
/// [`LIMIT`] (keep-alives or not).
async fn to_the_end(stream: &mut Sse) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut contents = Vec::new();
    while let Some(frame) = stream.next_by(deadline).await {
        assert!(frame.get("error").is_none(), "{frame}");
        contents.push(frame["content"].as_str().unwrap().to_owned());
    }
    contents
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_stream_ends_after_log_stream_for() {
    let config = "server: {syncer: false, limits: {live: {log_stream_for: 2s}}}\n\
                  shutdown: {drain_delay: 1s}\n";
    let scene = Scene::start(config).await;
    let mut stream = scene.stream("container=web&tailLines=1").await;
    let contents = to_the_end(&mut stream).await;
    assert_eq!(contents.first(), Some(&lines()[9]), "{contents:?}");
    assert!(
        contents[1..].iter().all(|c| c.starts_with("follow ")),
        "{contents:?}"
    );
    wait_for(LIMIT, "the kubelet's followed log is closed", || async {
        scene.kubelet.following() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_stream_of_a_quiet_pod_ends_after_log_stream_for_too() {
    let config = "server: {syncer: false, limits: {live: {log_stream_for: 2s}}}\n\
                  shutdown: {drain_delay: 1s}\n";
    let scene = Scene::with(config, Kubelet::quiet(lines()), None).await;
    let mut stream = scene.stream("container=web&tailLines=1").await;
    assert_eq!(stream.content().await, lines()[9]);
    // Then nothing more is written: the stream still ends on time.
    let contents = to_the_end(&mut stream).await;
    assert_eq!(contents, Vec::<String>::new());
    wait_for(LIMIT, "the kubelet's followed log is closed", || async {
        scene.kubelet.following() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_refusals_bad_tail_lines_unknown_pod_and_cluster() {
    let scene = Scene::start(SERVE).await;
    let token = scene.karpor.local_token();
    for tail in ["0", "x", "-1", "10001"] {
        let query = format!("container=web&tailLines={tail}");
        let (status, answer) = refusal(scene.get(Some(&token), &query).await).await;
        assert_eq!(status, 400, "{query}: {answer}");
        assert!(
            message(&answer).contains("tailLines") || message(&answer).contains("log_tail_lines"),
            "{query}: {answer}"
        );
    }
    let path = |cluster: &str, pod: &str| {
        format!(
            "/rest-api/v1/insight/aggregator/log/pod/{cluster}/{}/{pod}?container=web",
            scene.ns
        )
    };
    let (status, answer) = refusal(
        scene
            .get_path(Some(&token), &path(CLUSTER, "no-such-pod"))
            .await,
    )
    .await;
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = refusal(
        scene
            .get_path(Some(&token), &path("nowhere", &scene.pod))
            .await,
    )
    .await;
    assert_eq!(status, 404, "{answer}");
    assert!(
        scene.kubelet.requests().is_empty(),
        "nothing reached the kubelet: {:?}",
        scene.kubelet.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_lines_never_reach_storage() {
    // A word found nowhere but in the log.
    let marker = kube_name("logonly").replace('-', "");
    let lines: Vec<String> = (0..5).map(|i| format!("{marker} line {i}")).collect();
    // The syncer on, storing the namespace's pods (and only them).
    let rule = |ns: &str| {
        json!({"clusters": "*", "namespaces": [ns],
            "resources": [{"version": "v1", "resource": "pods"}]})
    };
    let scene = Scene::with(EMBEDDED, Kubelet::start(lines.clone()), Some(&rule)).await;
    let search = |word: String| {
        let admin = &scene.admin;
        async move {
            let (code, page) = admin
                .call(
                    "GET",
                    &format!("/rest-api/v1/search?pattern=keyword&pageSize=100&query={word}"),
                    None,
                )
                .await;
            assert_eq!(code, 200, "{page}");
            page["data"]["items"].as_array().unwrap().clone()
        }
    };
    // The pod is stored: the search would find what is there.
    wait_for(LIMIT, "the pod is stored", || {
        let found = search(scene.pod.clone());
        async move { !found.await.is_empty() }
    })
    .await;

    let mut stream = scene.stream("container=web&tailLines=5").await;
    for line in &lines {
        assert_eq!(&stream.content().await, line);
    }
    let token = scene.karpor.local_token();
    let download = scene.get(Some(&token), "container=web&download=true").await;
    assert_eq!(download.status(), 200);
    assert!(download.text().await.unwrap().contains(&marker));
    // While the stream still runs, and after.
    assert_eq!(search(marker.clone()).await, Vec::<Value>::new());
    drop(stream);
    wait_for(LIMIT, "the kubelet's followed log is closed", || async {
        scene.kubelet.following() == 0
    })
    .await;
    assert_eq!(search(marker.clone()).await, Vec::<Value>::new());
    // Nor anywhere in the server's files (the stores, their journals), nor its log.
    let mut files = vec![scene.karpor.dir().to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            let found = bytes.windows(marker.len()).any(|w| w == marker.as_bytes());
            assert!(!found, "a log line in {}", path.display());
        }
    }
    assert!(
        !scene.karpor.logs().contains(&marker),
        "a log line in karpor's log"
    );
}

/// `karpor logs ARGS` against the scene's server, run in its directory (where the local
/// admin token is): `(status, stdout, stderr)`, killed if it runs past [`LIMIT`].
async fn karpor_logs(scene: &Scene, args: &[&str]) -> (i32, String, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_karpor"));
    command
        .arg("logs")
        .args(args)
        .current_dir(scene.karpor.dir())
        .env("KARPOR_SERVER", scene.karpor.url(""))
        .env_remove("KARPOR_TOKEN")
        .env_remove("KARPOR_TOKEN_FILE")
        .kill_on_drop(true);
    let output = tokio::time::timeout(LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("karpor logs {args:?} still runs after {LIMIT:?}"))
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_cli_prints_the_tail_follows_and_fails_with_the_status() {
    let config = "server: {syncer: false, limits: {live: {log_stream_for: 3s}}}\n\
                  shutdown: {drain_delay: 1s}\n";
    let scene = Scene::start(config).await;
    let all = lines();
    let target = format!("{CLUSTER}/{}/{}", scene.ns, scene.pod);

    let (code, out, err) = karpor_logs(&scene, &[&target, "-c", "web", "--tail", "3"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("{}\n", all[7..].join("\n")), "{err}");

    // Followed, with timestamps, until the server ends the stream (log_stream_for).
    let (code, out, err) = karpor_logs(
        &scene,
        &[&target, "-c", "web", "-f", "--tail", "2", "--timestamps"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let printed: Vec<(&str, &str)> = out
        .lines()
        .map(|l| l.split_once(' ').unwrap_or_else(|| panic!("{out}")))
        .collect();
    assert!(printed.len() >= 2, "{out}");
    for (i, (at, text)) in printed.iter().enumerate() {
        assert!(is_rfc3339(at), "{out}");
        match i {
            0 | 1 => assert_eq!(*text, all[8 + i], "{out}"),
            _ => assert!(text.starts_with("follow "), "{out}"),
        }
    }
    let asked = scene.asked("web");
    assert_eq!(asked.len(), 2, "{:?}", scene.kubelet.requests());
    assert_eq!(asked[1].get("follow").map(String::as_str), Some("true"));

    // A pod that does not exist: exit 1, the status and karpor's message.
    let missing = format!("{CLUSTER}/{}/no-such-pod", scene.ns);
    let (code, out, err) = karpor_logs(&scene, &[&missing, "-c", "web"]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.starts_with("karpor: 404"), "{err}");
    assert!(err.contains("no-such-pod"), "{err}");
}

/// How long a generation may take at the one shared test model server, queued behind
/// other tests' generations.
const MODEL_LIMIT: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_log_diagnosis_reads_the_newest_lines_within_the_role_and_the_bounds() {
    let Some(model) = ModelServer::shared() else {
        return;
    };
    // Lines only this test sends, one with a credential in it.
    let marker = karpor_testkit::unique("diagnosed");
    let mut log: Vec<String> = (0..20).map(|i| format!("{marker} line {i}")).collect();
    log[18] = format!("{marker} connecting with password=hunter2-{marker}");
    let config = format!(
        "server: {{syncer: false, limits: {{request_timeout: 6m, live: {{streams_per_caller: 1}}}}, \
         connections: {{idle_timeout: 7m}}}}\nshutdown: {{drain_delay: 1s}}\n\
         auth:\n  tokens:\n  - {{name: viewer, role: guest, token: {GUEST}}}\n\
         ai:\n  base_url: {}\n  model: {}\n  api_key: {}\n  max_tokens: 20\n  first_token_timeout: 5m\n",
        model.url, model.name, model.key
    );
    let scene = Scene::with(&config, Kubelet::start(log.clone()), None).await;
    let token = scene.karpor.local_token();
    let diagnose = |token: Option<String>, query: &str| {
        let path = scene.path(query).replacen('?', "/diagnosis/stream?", 1);
        let mut request = scene
            .http
            .post(scene.karpor.url(&path))
            .json(&json!({"language": "en"}));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            tokio::time::timeout(MODEL_LIMIT, request.send())
                .await
                .expect("an answer in time")
                .unwrap()
        }
    };

    // The role that reads logs (admin by default) and nothing asked of the cluster or
    // the model before it.
    let mark = model.mark();
    let (status, answer) = refusal(diagnose(None, "container=web").await).await;
    assert_eq!(status, 401, "{answer}");
    let (status, answer) = refusal(diagnose(Some(GUEST.into()), "container=web").await).await;
    assert_eq!(status, 403, "{answer}");
    assert!(message(&answer).contains("auth.pod_logs"), "{answer}");
    let (status, answer) = refusal(diagnose(Some(token.clone()), "tailLines=0").await).await;
    assert_eq!(status, 400, "{answer}");
    assert!(message(&answer).contains("tailLines"), "{answer}");
    assert!(
        scene.kubelet.requests().is_empty(),
        "refused before the cluster"
    );
    assert!(!model.log_contains(&marker), "refused before the model");

    // The newest 5 lines, read by karpor, reach the model scrubbed; the stream completes.
    let mut frames =
        Sse::of(diagnose(Some(token.clone()), "container=web&tailLines=5").await).await;
    let deadline = tokio::time::Instant::now() + MODEL_LIMIT;
    let mut kinds = Vec::new();
    while let Some(frame) = frames.next_by(deadline).await {
        kinds.push(frame["type"].as_str().unwrap_or_default().to_owned());
        assert_ne!(frame["type"], "error", "{frame}");
    }
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("start"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("complete"),
        "{kinds:?}"
    );
    let asked = scene.asked("web");
    assert_eq!(asked.len(), 1, "{:?}", scene.kubelet.requests());
    assert_eq!(asked[0].get("tailLines").map(String::as_str), Some("5"));
    assert_ne!(asked[0].get("follow").map(String::as_str), Some("true"));
    let sent: Vec<Value> = model
        .requests_since(mark)
        .into_iter()
        .filter(|r| r["body"].to_string().contains(&marker))
        .collect();
    assert_eq!(sent.len(), 1, "the model was asked once");
    let prompt = sent[0]["body"].to_string();
    for i in [15, 16, 17, 19] {
        assert!(
            prompt.contains(&format!("{marker} line {i}")),
            "line {i}: {prompt}"
        );
    }
    assert!(!prompt.contains(&format!("{marker} line 14")), "{prompt}");
    assert!(
        !model.log_contains(&format!("hunter2-{marker}")),
        "a credential reached the model"
    );

    // From the command line: the diagnosis printed as it is written.
    let target = format!("{CLUSTER}/{}/{}", scene.ns, scene.pod);
    let (code, out, err) =
        karpor_logs(&scene, &[&target, "-c", "web", "--tail", "3", "--diagnose"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!out.trim().is_empty(), "the diagnosis is printed: {err}");
    let asked = scene.asked("web");
    assert_eq!(
        asked
            .last()
            .and_then(|q| q.get("tailLines"))
            .map(String::as_str),
        Some("3")
    );

    // A pod the cluster does not have is the cluster's 404, in the envelope.
    let path = format!(
        "/rest-api/v1/insight/aggregator/log/pod/{CLUSTER}/{}/no-such-pod/diagnosis/stream",
        scene.ns
    );
    let response = scene
        .http
        .post(scene.karpor.url(&path))
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, answer) = refusal(response).await;
    assert_eq!(status, 404, "{answer}");

    // Reading the lines holds one of the caller's streams: with its only one taken by a
    // followed log, the diagnosis is refused before the model is asked.
    let mut followed = scene.stream("container=web&tailLines=1").await;
    assert_eq!(followed.content().await, log[19]);
    let mark = model.mark();
    let response = diagnose(Some(token.clone()), "container=web").await;
    assert!(response.headers().get("retry-after").is_some());
    let (status, answer) = refusal(response).await;
    assert_eq!(status, 429, "{answer}");
    drop(followed);
    assert!(
        model
            .requests_since(mark)
            .iter()
            .all(|r| !r["body"].to_string().contains(&marker)),
        "a refused diagnosis asked the model"
    );
}
