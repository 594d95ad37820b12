//! Agent mode end to end, on the real binary: a hub (`karpor serve` with `agents:`), a
//! cluster registered in agent mode (the hub holds no kubeconfig of it), a join token
//! from the API, and `karpor agent` syncing the first test kube-apiserver into the hub's
//! storage. Then what an agent must not be able to do: reuse a token, join a hub whose
//! pin differs, write another cluster's documents, keep Secret values, outlive a
//! revocation.

use std::path::Path;

use std::time::Duration;
use tempfile::TempDir;

use karpor_agent::key::AgentKey;
use karpor_agent::state::AgentState;
use karpor_agent::wire;
use karpor_storage::{ResourceDocument, Storage, StorageConfig};
use karpor_testkit::cluster::{configmaps, kube_name as unique, namespaces, Kube, LIMIT};
use karpor_testkit::process::{get, wait_for, Karpor, Spawn};
use karpor_testkit::services::{free_port, APISERVER_TOKEN};
use serde_json::{json, Value};

pub(crate) async fn call(
    hub: &Karpor,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let response = reqwest::Client::new()
        .request(method, hub.url(&format!("/rest-api/v1{path}")))
        .bearer_auth(hub.local_token())
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub(crate) fn agent_config(
    hub: &str,
    pin: &str,
    token: &str,
    dir: &Path,
    kubeconfig: &str,
) -> String {
    let member = dir.join("member.kubeconfig");
    std::fs::write(&member, kubeconfig).unwrap();
    format!(
        "shutdown: {{drain_delay: 1s}}\n\
         agent: {{hub: '{hub}', pin: '{pin}', token: '{token}', kubeconfig: '{}', \
         state_file: '{}', plan_interval: 1s, request_timeout: 10s}}\n",
        member.display(),
        dir.join("agent-state.json").display()
    )
}

pub(crate) fn spawn_agent<'a>(config: &'a str, dir: &'a Path) -> Spawn<'a> {
    Spawn {
        command: "agent",
        ..Spawn::serve(config)
    }
    .in_dir(dir)
}

/// A hub (in a directory of its own) with an agent listener (`listener`: more keys of
/// `agents:`), a cluster registered in agent mode, and its agent (member credential:
/// `kubeconfig`) started with a join token. With `rule`, the hub's one sync rule.
pub(crate) struct Linked {
    pub hub: Karpor,
    pub agent: Karpor,
    pub cluster: String,
    pub agent_dir: TempDir,
    pub hub_dir: TempDir,
    /// The agent's config, to start it again.
    pub agent_config: String,
}

pub(crate) async fn linked(
    tag: &str,
    listener: &str,
    kubeconfig: &str,
    rule: Option<Value>,
) -> Linked {
    linked_with("", tag, listener, kubeconfig, rule).await
}

/// As [`linked`], the hub's config file beginning with `hub` (its storage, say).
pub(crate) async fn linked_with(
    hub: &str,
    tag: &str,
    listener: &str,
    kubeconfig: &str,
    rule: Option<Value>,
) -> Linked {
    let hub_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "{hub}shutdown: {{drain_delay: 1s}}\nagents: {{listen: '127.0.0.1:{port}', names: ['127.0.0.1']{listener}}}\n"
    );
    let hub = Spawn::serve(&config).in_dir(hub_dir.path()).start();
    if let Some(rule) = rule {
        let (status, body) = call(
            &hub,
            reqwest::Method::POST,
            "/sync-rule/only-the-test",
            rule,
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let enrolled = enrol(&hub, tag, kubeconfig).await;
    Linked {
        hub,
        agent: enrolled.agent,
        cluster: enrolled.cluster,
        agent_dir: enrolled.dir,
        hub_dir,
        agent_config: enrolled.config,
    }
}

/// A cluster registered in agent mode on `hub` and its agent, started with the join token
/// the hub issued (the install line's hub, pin and token).
pub(crate) struct Enrolled {
    pub cluster: String,
    pub agent: Karpor,
    pub dir: TempDir,
    pub config: String,
}

pub(crate) async fn enrol(hub: &Karpor, tag: &str, kubeconfig: &str) -> Enrolled {
    let cluster = unique(tag);
    let (status, body) = call(
        hub,
        reqwest::Method::POST,
        &format!("/cluster/{cluster}"),
        json!({"mode": "agent"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        hub,
        reqwest::Method::POST,
        &format!("/cluster/{cluster}/agent-token"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let issued = &body["data"];
    let dir = tempfile::tempdir().unwrap();
    let config = agent_config(
        issued["hub"].as_str().unwrap(),
        issued["pin"].as_str().unwrap(),
        issued["token"].as_str().unwrap(),
        dir.path(),
        kubeconfig,
    );
    let agent = spawn_agent(&config, dir.path()).start();
    Enrolled {
        cluster,
        agent,
        dir,
        config,
    }
}

/// A client of the hub's agent listener holding the agent's own certificate, as a
/// compromised agent would use it.
fn as_the_agent(state_file: &Path) -> reqwest::Client {
    let state = AgentState::load(state_file).unwrap().unwrap();
    let key = AgentKey::from_pem(&state.state.key_pem).unwrap();
    let tls =
        karpor_agent::tls::agent_client(state.pin, Some((&state.state.certificate_pem, &key)))
            .unwrap();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .unwrap()
}

/// A document as an agent would send it, synced now: a list of its type that began
/// before it does not purge it (the agent's own lists may still be under way).
fn forged(cluster: &str, uid: &str, kind: &str, object: Value) -> Value {
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    json!({"cluster": cluster, "apiVersion": "v1", "kind": kind, "namespace": "default",
        "name": uid, "uid": uid, "labels": {}, "annotations": {}, "ownerReferences": [],
        "creationTimestamp": null, "deletionTimestamp": null, "resourceVersion": "1",
        "syncAt": now, "deleted": false, "object": object})
}

async fn find(storage: &dyn Storage, query: &str) -> Vec<ResourceDocument> {
    let query = karpor_search::parse(query).unwrap();
    storage.search(&query, 0, 50).await.unwrap().items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_syncs_its_cluster_into_the_hub_and_nothing_else() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let hub_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let hub_config = format!(
        "shutdown: {{drain_delay: 1s}}\nagents: {{listen: '127.0.0.1:{port}', names: ['127.0.0.1', localhost]}}\n"
    );
    let hub = Spawn::serve(&hub_config).in_dir(hub_dir.path()).start();
    let cluster = unique("agent");

    // Registered without a kubeconfig; a token for it, and the install line.
    let (status, body) = call(
        &hub,
        reqwest::Method::POST,
        &format!("/cluster/{cluster}"),
        json!({"mode": "agent"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &hub,
        reqwest::Method::POST,
        &format!("/cluster/{cluster}/agent-token"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let issued = &body["data"];
    let (token, pin, address) = (
        issued["token"].as_str().unwrap().to_owned(),
        issued["pin"].as_str().unwrap().to_owned(),
        issued["hub"].as_str().unwrap().to_owned(),
    );
    assert_eq!(address, format!("https://127.0.0.1:{port}"));
    assert!(issued["install"].as_str().unwrap().contains(&pin), "{body}");

    // A hub whose pin is another's: the agent never joins (so never sends its token).
    let wrong_dir = tempfile::tempdir().unwrap();
    let wrong_pin = format!("sha256:{}", "0".repeat(64));
    let wrong = agent_config(
        &address,
        &wrong_pin,
        &token,
        wrong_dir.path(),
        &kube.kubeconfig,
    );
    let wrong_agent = spawn_agent(&wrong, wrong_dir.path()).start();
    wait_for(LIMIT, "the agent refuses a hub of another pin", || {
        let logs = wrong_agent.logs();
        async move { logs.contains("does not match the pin") }
    })
    .await;
    let (code, readyz) = get(&wrong_agent.url("/readyz")).await;
    assert_eq!(code, 503, "{readyz}");
    assert!(readyz.contains("[-] Hub failed"), "{readyz}");
    assert!(!wrong_dir.path().join("agent-state.json").exists());
    drop(wrong_agent);

    // The real agent: joins, syncs.
    let agent_dir = tempfile::tempdir().unwrap();
    let config = agent_config(&address, &pin, &token, agent_dir.path(), &kube.kubeconfig);
    let agent = spawn_agent(&config, agent_dir.path()).start();
    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: hub_dir.path().join("data/resources.db"),
    })
    .await
    .unwrap();
    let ns = unique("agent-ns");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "through-the-agent"}}),
    )
    .await;
    let query = format!(
        "select * from resources where cluster = '{cluster}' and kind = 'ConfigMap' and namespace = '{ns}'"
    );
    wait_for(
        LIMIT,
        "the agent's ConfigMap is in the hub's storage",
        || {
            let (storage, query) = (storage.clone(), query.clone());
            async move { find(storage.as_ref(), &query).await.len() == 1 }
        },
    )
    .await;
    let probe = agent.url("/readyz");
    wait_for(LIMIT, "the agent is ready", || {
        let probe = probe.clone();
        async move {
            let (code, body) = get(&probe).await;
            code == 200 && body.contains("[+] Hub ok")
        }
    })
    .await;

    // No syncer of the hub holds the agent's cluster, and none has to.
    let (code, readyz) = get(&hub.url("/readyz")).await;
    assert_eq!(code, 200, "{readyz}");

    // The token was used: another agent with it is refused and stops.
    let again_dir = tempfile::tempdir().unwrap();
    let again = agent_config(&address, &pin, &token, again_dir.path(), &kube.kubeconfig);
    let mut second = spawn_agent(&again, again_dir.path()).start();
    let exited = second.wait_exit(Duration::from_secs(30));
    assert!(exited.is_some_and(|s| !s.success()), "{}", second.logs());
    assert!(second.logs().contains("used already"), "{}", second.logs());

    // A forged write: another cluster named, a Secret's values, a ConfigMap that is a
    // Secret by its object. All land in the agent's own cluster, values dropped.
    let as_agent = as_the_agent(&agent_dir.path().join("agent-state.json"));
    let writes = format!("{address}/agent/v1/writes");
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "forged-secret", "namespace": "default", "uid": "forged-secret"},
        "data": {"password": "c2VjcmV0"}});
    let batch = json!({"writes": [{"op": "upsert", "documents": [
        forged("someone-else", "forged-secret", "ConfigMap", secret),
    ]}]});
    let response = as_agent.post(&writes).json(&batch).send().await.unwrap();
    assert_eq!(
        response.status().as_u16(),
        200,
        "{}",
        response.text().await.unwrap()
    );
    assert!(find(
        storage.as_ref(),
        "select * from resources where cluster = 'someone-else'"
    )
    .await
    .is_empty());
    let landed = find(
        storage.as_ref(),
        &format!("select * from resources where cluster = '{cluster}' and name = 'forged-secret'"),
    )
    .await;
    assert_eq!(landed.len(), 1);
    assert_eq!(landed[0].kind, "Secret", "the object's own kind");
    assert_eq!(landed[0].object["data"]["password"], Value::Null);

    // The hub holds no credential of the member cluster.
    let (_, view) = call(
        &hub,
        reqwest::Method::GET,
        &format!("/cluster/{cluster}"),
        Value::Null,
    )
    .await;
    assert!(!view.to_string().contains(APISERVER_TOKEN), "{view}");
    assert!(!hub.logs().contains(APISERVER_TOKEN));

    // One agent's requests at once are bounded: with the agent itself stopped, as many
    // writes as the bound whose bodies never end hold its places, and another request is
    // 429 until they end.
    drop(agent);
    let (ends, hanging): (Vec<_>, Vec<_>) = (0..wire::EXCHANGES_PER_AGENT)
        .map(|_| {
            let (mut end, body) =
                futures::channel::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
            // A first byte, so the request is under way at the hub; the rest never comes.
            end.try_send(Ok(b"{".to_vec())).unwrap();
            // A client each: requests sharing one would wait for its one connection.
            let request = as_the_agent(&agent_dir.path().join("agent-state.json"))
                .post(&writes)
                .header("content-type", "application/json")
                .body(reqwest::Body::wrap_stream(body))
                .send();
            (end, tokio::spawn(request))
        })
        .unzip();
    let plan = format!("{address}{}{}", wire::PREFIX, wire::PLAN);
    let plan_status = || {
        let (client, plan) = (as_agent.clone(), plan.clone());
        async move { client.get(&plan).send().await.map(|r| r.status().as_u16()) }
    };
    wait_for(LIMIT, "a request past the agent's bound is 429", || {
        let status = plan_status();
        async move {
            let s = status.await;
            matches!(s, Ok(429))
        }
    })
    .await;
    let limited = as_agent.get(&plan).send().await.unwrap();
    assert!(limited.headers().contains_key("retry-after"));
    let text = limited.text().await.unwrap();
    assert!(
        text.contains("requests of this agent are under way"),
        "{text}"
    );
    drop(ends);
    for request in hanging {
        let answered = request.await.unwrap().unwrap();
        assert_eq!(
            answered.status().as_u16(),
            400,
            "a body cut short is no batch"
        );
    }
    assert_eq!(
        plan_status().await.unwrap(),
        200,
        "the places were given back"
    );

    // Revoked: the agent's certificate is refused at once.
    let (status, body) = call(
        &hub,
        reqwest::Method::DELETE,
        &format!("/cluster/{cluster}/agent"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let refused = as_agent.post(&writes).json(&batch).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let text = refused.text().await.unwrap();
    assert!(text.contains("revoked"), "{text}");

    // The CLI registers a cluster in agent mode and prints the install line.
    let printed = std::process::Command::new(karpor_testkit::process::binary())
        .args(["cluster", "add", &unique("by-cli"), "--mode", "agent"])
        .args(["--server", &hub.url(""), "--token", &hub.local_token()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&printed.stdout);
    assert!(
        printed.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    assert!(
        text.contains(&format!("karpor agent --hub {address} --pin {pin}")),
        "{text}"
    );
    assert!(text.contains("KARPOR_AGENT__TOKEN=karpor-join."), "{text}");
}

/// Certificates of 30 s: the agent renews past two thirds of that while it syncs, and a
/// change made after the renewal still reaches the hub (the new certificate is used).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_renews_its_certificate_and_goes_on_syncing() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let linked = linked(
        "renewing",
        ", certificate_lifetime: 30s",
        &kube.kubeconfig,
        None,
    )
    .await;
    let (agent, cluster) = (&linked.agent, linked.cluster.clone());
    let state_file = linked.agent_dir.path().join("agent-state.json");
    wait_for(LIMIT, "the agent joined", || {
        let exists = state_file.exists();
        async move { exists }
    })
    .await;
    let first = AgentState::load(&state_file).unwrap().unwrap().not_after;
    wait_for(LIMIT, "the agent renewed its certificate", || {
        let logs = agent.logs();
        async move { logs.contains("renewed the certificate") }
    })
    .await;
    let renewed = AgentState::load(&state_file).unwrap().unwrap();
    assert!(
        renewed.not_after > first,
        "{first} then {}",
        renewed.not_after
    );
    assert_eq!(renewed.identity.cluster.to_string(), cluster);

    let storage = karpor_storage::connect(&StorageConfig::Sqlite {
        path: linked.hub_dir.path().join("data/resources.db"),
    })
    .await
    .unwrap();
    let ns = unique("renewed-ns");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(
        &configmaps(),
        Some(&ns),
        json!({"metadata": {"name": "after-renewal"}}),
    )
    .await;
    let query = format!(
        "select * from resources where cluster = '{cluster}' and kind = 'ConfigMap' and namespace = '{ns}'"
    );
    wait_for(LIMIT, "a change after the renewal reaches the hub", || {
        let (storage, query) = (storage.clone(), query.clone());
        async move { find(storage.as_ref(), &query).await.len() == 1 }
    })
    .await;
    assert!(!agent.logs().contains("cannot renew"), "{}", agent.logs());
}

/// `agents.approve_joins`: a good token is not enough; the join waits, recorded with the
/// key the agent logged, until an admin approves that key (another key is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_join_waits_for_the_admins_approval_of_its_key() {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let linked = linked("approved", ", approve_joins: true", &kube.kubeconfig, None).await;
    let (hub, agent, cluster) = (&linked.hub, &linked.agent, linked.cluster.clone());

    // The key the agent logs is the one the hub holds the join for.
    let status_path = format!("/cluster/{cluster}/agent");
    wait_for(LIMIT, "the hub holds the join", || {
        let hub = &linked.hub;
        let path = status_path.clone();
        async move {
            let (_, body) = call(hub, reqwest::Method::GET, &path, Value::Null).await;
            body["data"]["pending"]["key"].is_string()
        }
    })
    .await;
    let (_, body) = call(hub, reqwest::Method::GET, &status_path, Value::Null).await;
    let pending = &body["data"]["pending"];
    let key = pending["key"].as_str().unwrap().to_owned();
    assert_eq!(pending["approved"], false, "{body}");
    let logged = agent
        .logs()
        .lines()
        .find(|l| l.contains("joining the hub"))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(logged.contains(&key), "{logged} / {key}");
    let state_file = linked.agent_dir.path().join("agent-state.json");
    assert!(!state_file.exists(), "joined before the approval");
    assert!(agent.logs().contains("approval"), "{}", agent.logs());

    // Another key is not approved; the agent's is, and it joins.
    let other = format!("sha256:{}", "ab".repeat(32));
    let (status, body) = call(
        hub,
        reqwest::Method::POST,
        &format!("/cluster/{cluster}/agent/approve"),
        json!({"key": other}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    // Through the CLI: the held join as `cluster agent` shows it, then approved.
    let shown = cli(hub, &["cluster", "agent", &cluster]);
    assert!(
        shown.contains(&key) && shown.contains("waiting for approval"),
        "{shown}"
    );
    let approved = cli(hub, &["cluster", "approve", &cluster, "--key", &key]);
    assert!(approved.contains("approved"), "{approved}");
    let (_, body) = call(hub, reqwest::Method::GET, &status_path, Value::Null).await;
    assert_eq!(body["data"]["pending"]["approved"], true, "{body}");
    wait_for(LIMIT, "the approved agent joined", || {
        let exists = state_file.exists();
        async move { exists }
    })
    .await;
    wait_for(LIMIT, "the hub says it joined and is connected", || {
        let hub = &linked.hub;
        let path = status_path.clone();
        async move {
            let (_, body) = call(hub, reqwest::Method::GET, &path, Value::Null).await;
            let data = &body["data"];
            data["joinedAt"].is_string() && data["pending"].is_null() && data["connected"] == true
        }
    })
    .await;
    assert!(cli(hub, &["cluster", "agent", &cluster]).contains("connected:  yes"));
    // Revoked through the CLI: its session ends with it.
    let revoked = cli(hub, &["cluster", "revoke", &cluster]);
    assert!(revoked.contains("revoked"), "{revoked}");
    assert!(cli(hub, &["cluster", "agent", &cluster]).contains("connected:  no"));
}

/// `karpor ARGS` against `hub` with its admin token: what it printed (it must succeed).
fn cli(hub: &Karpor, args: &[&str]) -> String {
    let output = std::process::Command::new(karpor_testkit::process::binary())
        .args(args)
        .args(["--server", &hub.url(""), "--token", &hub.local_token()])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "karpor {args:?}: {printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    printed
}
