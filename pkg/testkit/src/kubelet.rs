//! A kubelet stand-in, for what a kube-apiserver proxies to a kubelet (a pod's log): an
//! HTTPS listener on loopback serving the kubelet's `GET
//! /containerLogs/{namespace}/{pod}/{container}` from a fixed list of lines, and recording
//! every request it gets. Beside it, what makes a test kube-apiserver send requests there
//! (no kubelet runs): a [`Node`] whose status holds the stand-in's address and port, as a
//! kubelet reports them, and a [`pod`] bound to it. And [`without_pod_logs`]: a credential
//! that may read pods but not their logs.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use base64::Engine as _;
use futures::StreamExt;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod, ServiceAccount};
use karpor_server::{ConnectionLimits, TlsConfig};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::cluster::{kube_name, Kube, LIMIT};
use crate::process::wait_for;

/// How often a followed log gets a new line (`follow N`).
pub const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// The stand-in, serving until dropped.
pub struct Kubelet {
    port: u16,
    shared: Shared,
    stop: CancellationToken,
    /// Its certificate and key.
    _dir: tempfile::TempDir,
}

#[derive(Clone)]
struct Shared {
    /// The log: each line with the time it was written.
    lines: Arc<Vec<(OffsetDateTime, String)>>,
    requests: Arc<Mutex<Vec<String>>>,
    following: Arc<AtomicUsize>,
    /// How often a followed log grows; `None`: never (a quiet workload).
    follow_every: Option<Duration>,
}

impl Kubelet {
    /// Serves `lines` as every container's log; a followed log then grows by a line
    /// `follow N` (N from 1) every [`FOLLOW_EVERY`] until its client goes away. Needs a
    /// Tokio runtime (it serves on it).
    pub fn start(lines: Vec<String>) -> Kubelet {
        Kubelet::serve(lines, Some(FOLLOW_EVERY))
    }

    /// As [`Kubelet::start`], but a followed log never grows: the connection stays open
    /// with nothing more written, as for a workload that has gone quiet.
    pub fn quiet(lines: Vec<String>) -> Kubelet {
        Kubelet::serve(lines, None)
    }

    fn serve(lines: Vec<String>, follow_every: Option<Duration>) -> Kubelet {
        let dir = tempfile::tempdir().unwrap();
        crate::tls::self_signed(dir.path());
        // The lines were written one a millisecond, up to now.
        let now = OffsetDateTime::now_utc();
        let count = lines.len() as i64;
        let lines = lines
            .into_iter()
            .enumerate()
            .map(|(i, line)| (now - time::Duration::milliseconds(count - i as i64), line))
            .collect();
        let shared = Shared {
            lines: Arc::new(lines),
            requests: Arc::default(),
            following: Arc::default(),
            follow_every,
        };
        let router = Router::new()
            .route(
                "/containerLogs/{namespace}/{pod}/{container}",
                get(container_logs),
            )
            .fallback(elsewhere)
            .with_state(shared.clone());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let tls = TlsConfig {
            cert_file: dir.path().join(crate::tls::CERT_FILE),
            key_file: dir.path().join(crate::tls::KEY_FILE),
        };
        let stop = CancellationToken::new();
        let serving = karpor_server::serve(
            listener,
            router,
            Some(karpor_server::Tls::Files(tls)),
            ConnectionLimits::default(),
            stop.clone(),
            Duration::from_millis(100),
        );
        tokio::spawn(async move {
            if let Err(e) = serving.await {
                eprintln!("the kubelet stand-in stopped: {e}");
            }
        });
        Kubelet {
            port,
            shared,
            stop,
            _dir: dir,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every request so far, as `path?query`, in the order they came.
    pub fn requests(&self) -> Vec<String> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Followed logs being written now (a client that went away is no longer counted).
    pub fn following(&self) -> usize {
        self.shared.following.load(Ordering::SeqCst)
    }

    /// A Node (a name of its own) whose kubelet is this stand-in: created, then its
    /// status written as a kubelet writes it (`InternalIP` 127.0.0.1, the kubelet port).
    pub async fn node(&self, kube: &Kube) -> Node {
        let name = kube_name("kubelet");
        let nodes: Api<KubeNode> = Api::all(kube.client.clone());
        let node: KubeNode = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        nodes
            .create(&PostParams::default(), &node)
            .await
            .unwrap_or_else(|e| panic!("create node {name}: {e}"));
        // From here on the Node is deleted even if the status cannot be written.
        let guard = Node {
            name,
            kubeconfig: kube.kubeconfig.clone(),
            deleted: false,
        };
        let status = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
        }});
        nodes
            .patch_status(&guard.name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap_or_else(|e| panic!("write node {}'s status: {e}", guard.name));
        guard
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Counts a followed log while it is written.
struct Following(Arc<AtomicUsize>);

impl Following {
    fn new(count: &Arc<AtomicUsize>) -> Following {
        count.fetch_add(1, Ordering::SeqCst);
        Following(count.clone())
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    fn record(&self, uri: &Uri) {
        let request = uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
        self.requests.lock().unwrap().push(request);
    }
}

fn stamp(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap()
}

/// The kubelet's log endpoint: `tailLines`, `timestamps`, `limitBytes`, `follow`.
async fn container_logs(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    uri: Uri,
) -> Response {
    shared.record(&uri);
    let flag = |key: &str| query.get(key).is_some_and(|v| v == "true" || v == "1");
    let timestamps = flag("timestamps");
    let follow = flag("follow");
    let tail = query.get("tailLines").and_then(|v| v.parse::<usize>().ok());
    let mut budget = query
        .get("limitBytes")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let line = move |at: OffsetDateTime, text: &str| {
        if timestamps {
            format!("{} {text}\n", stamp(at))
        } else {
            format!("{text}\n")
        }
    };
    let skip = tail.map_or(0, |n| shared.lines.len().saturating_sub(n));
    let mut written = String::new();
    for (at, text) in &shared.lines[skip..] {
        written.push_str(&line(*at, text));
    }
    // At most `limitBytes`, as the kubelet cuts it (possibly within a line).
    let mut head = written.into_bytes();
    head.truncate(budget);
    budget -= head.len();
    let head = futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from(head)) });
    if !follow || budget == 0 {
        return text(Body::from_stream(head));
    }
    let grown = Following::new(&shared.following);
    let every = shared.follow_every;
    let more = futures::stream::unfold(
        (1u64, budget, grown),
        move |(n, budget, grown)| async move {
            let Some(every) = every else {
                // A quiet workload: nothing more, ever (until the client goes away).
                std::future::pending::<()>().await;
                return None;
            };
            if budget == 0 {
                return None;
            }
            tokio::time::sleep(every).await;
            let mut next = line(OffsetDateTime::now_utc(), &format!("follow {n}")).into_bytes();
            next.truncate(budget);
            let left = budget - next.len();
            Some((Ok(Bytes::from(next)), (n + 1, left, grown)))
        },
    );
    text(Body::from_stream(head.chain(more)))
}

fn text(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// Anything else the stand-in is asked: recorded, and not found.
async fn elsewhere(State(shared): State<Shared>, uri: Uri) -> Response {
    shared.record(&uri);
    (
        StatusCode::NOT_FOUND,
        "not served by the kubelet stand-in\n",
    )
        .into_response()
}

/// A Node made by [`Kubelet::node`]: deleted by [`Node::delete`], or on drop.
pub struct Node {
    pub name: String,
    /// The cluster's, to delete it from a drop.
    kubeconfig: String,
    deleted: bool,
}

impl Node {
    pub async fn delete(mut self) {
        delete_node(&Kube::from_text(self.kubeconfig.clone()).await, &self.name).await;
        self.deleted = true;
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        let (kubeconfig, name) = (self.kubeconfig.clone(), self.name.clone());
        let done = crate::process::finish_apart(async move {
            delete_node(&Kube::from_text(kubeconfig).await, &name).await;
        });
        if !done {
            eprintln!("the node {} may be left behind", self.name);
        }
    }
}

async fn delete_node(kube: &Kube, name: &str) {
    let nodes: Api<KubeNode> = Api::all(kube.client.clone());
    match nodes.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("delete node {name}: {e}"),
    }
}

/// A Pod on `node` with `containers` (any image: nothing runs it), and the namespace's
/// `default` ServiceAccount its admission needs (made when missing).
pub async fn pod(kube: &Kube, namespace: &str, name: &str, node: &Node, containers: &[&str]) {
    let accounts: Api<ServiceAccount> = Api::namespaced(kube.client.clone(), namespace);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create the default ServiceAccount of {namespace}: {e}"),
    }
    let containers: Vec<_> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "registry.invalid/log-writer:1"}))
        .collect();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node.name, "automountServiceAccountToken": false,
            "containers": containers},
    }))
    .unwrap();
    Api::<Pod>::namespaced(kube.client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {namespace}/{name}: {e}"));
}

/// Deletes every Pod of `namespace` at once: with no kubelet to confirm it, a graceful
/// deletion would wait for ever.
pub async fn delete_pods(kube: &Kube, namespace: &str) {
    let pods: Api<Pod> = Api::namespaced(kube.client.clone(), namespace);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    match pods.delete_collection(&now, &ListParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("delete the pods of {namespace}: {e}"),
    }
}

/// A kubeconfig for a ServiceAccount of `namespace` that may get, list and watch its
/// pods but not read their logs (no `pods/log`): its token from the TokenRequest API
/// (default audiences), the server and CA of `kube`'s kubeconfig. Returned once the
/// grant is in force. The ServiceAccount, Role and RoleBinding (`pod-reader`) go with
/// the namespace's contents.
pub async fn without_pod_logs(kube: &Kube, namespace: &str) -> String {
    const NAME: &str = "pod-reader";
    let rbac = |kind: &str, plural: &str| {
        crate::cluster::resource("rbac.authorization.k8s.io", "v1", kind, plural)
    };
    let ns = Some(namespace);
    kube.create(
        &crate::cluster::resource("", "v1", "ServiceAccount", "serviceaccounts"),
        ns,
        json!({"metadata": {"name": NAME}}),
    )
    .await;
    kube.create(
        &rbac("Role", "roles"),
        ns,
        json!({"metadata": {"name": NAME}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    kube.create(
        &rbac("RoleBinding", "rolebindings"),
        ns,
        json!({"metadata": {"name": NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]}),
    )
    .await;
    let kubeconfig = service_account_kubeconfig(kube, namespace, NAME).await;
    // The authorizer reads bindings from a cache: wait until the grant holds.
    let limited = Kube::from_text(kubeconfig.clone()).await;
    let pods: Api<Pod> = Api::namespaced(limited.client.clone(), namespace);
    wait_for(LIMIT, "the pod-reader may list pods", || {
        let pods = pods.clone();
        async move { pods.list(&ListParams::default()).await.is_ok() }
    })
    .await;
    kubeconfig
}

/// A kubeconfig for a ServiceAccount `name` of `namespace` bound to a ClusterRole of
/// `rules` (an agent's read-only credential, as its chart grants it): its token from the
/// TokenRequest API, the server and CA of `kube`'s kubeconfig. Returned once the grant
/// is in force (it may list Pods). The ClusterRole and its binding are named
/// `NAMESPACE-NAME`; [`delete_read_only`] removes them.
pub async fn read_only(
    kube: &Kube,
    namespace: &str,
    name: &str,
    rules: serde_json::Value,
) -> String {
    let rbac = |kind: &str, plural: &str| {
        crate::cluster::resource("rbac.authorization.k8s.io", "v1", kind, plural)
    };
    let role = format!("{namespace}-{name}");
    kube.create(
        &crate::cluster::resource("", "v1", "ServiceAccount", "serviceaccounts"),
        Some(namespace),
        json!({"metadata": {"name": name}}),
    )
    .await;
    kube.create(
        &rbac("ClusterRole", "clusterroles"),
        None,
        json!({"metadata": {"name": role}, "rules": rules}),
    )
    .await;
    kube.create(
        &rbac("ClusterRoleBinding", "clusterrolebindings"),
        None,
        json!({"metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}),
    )
    .await;
    let kubeconfig = service_account_kubeconfig(kube, namespace, name).await;
    let limited = Kube::from_text(kubeconfig.clone()).await;
    let pods: Api<Pod> = Api::all(limited.client.clone());
    wait_for(LIMIT, "the read-only credential may list pods", || {
        let pods = pods.clone();
        async move { pods.list(&ListParams::default()).await.is_ok() }
    })
    .await;
    kubeconfig
}

/// Removes what [`read_only`] made outside its namespace.
pub async fn delete_read_only(kube: &Kube, namespace: &str, name: &str) {
    let rbac = |kind: &str, plural: &str| {
        crate::cluster::resource("rbac.authorization.k8s.io", "v1", kind, plural)
    };
    let role = format!("{namespace}-{name}");
    kube.delete(
        &rbac("ClusterRoleBinding", "clusterrolebindings"),
        None,
        &role,
    )
    .await;
    kube.delete(&rbac("ClusterRole", "clusterroles"), None, &role)
        .await;
}

/// A kubeconfig of `kube`'s server and CA whose user is a fresh token of the
/// ServiceAccount `namespace/name` (default audiences, an hour).
async fn service_account_kubeconfig(kube: &Kube, namespace: &str, name: &str) -> String {
    let request: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}
    }))
    .unwrap();
    let token = Api::<ServiceAccount>::namespaced(kube.client.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"))
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .expect("the TokenRequest answered a token");
    with_token(&kube.kubeconfig, &token)
}

/// A kubeconfig of `kubeconfig`'s current server and CA, whose user is `token`.
fn with_token(kubeconfig: &str, token: &str) -> String {
    let config = Kubeconfig::from_yaml(kubeconfig).unwrap();
    let context = config
        .current_context
        .as_deref()
        .and_then(|current| config.contexts.iter().find(|c| c.name == current))
        .or(config.contexts.first())
        .and_then(|c| c.context.as_ref())
        .expect("the kubeconfig has a context");
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .expect("the context's cluster");
    let server = cluster.server.as_deref().expect("the cluster's server");
    let ca = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => Some(data.clone()),
        (None, Some(file)) => Some(
            base64::engine::general_purpose::STANDARD
                .encode(std::fs::read(file).unwrap_or_else(|e| panic!("{file}: {e}"))),
        ),
        (None, None) => None,
    };
    let trust = match ca {
        Some(ca) => format!("certificate-authority-data: {ca}"),
        None => "insecure-skip-tls-verify: true".to_owned(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    {trust}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    )
}
