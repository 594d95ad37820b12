//! karpor's MCP server against a real MCP client no one here wrote: the official TypeScript
//! SDK (`tests/mcp/client.mjs`) over the streamable HTTP transport at `/mcp` and over stdio
//! through `karpor mcp`, with a `karpor serve` syncing the shared kube-apiserver A.
//! Initialize and version negotiation, the tools' schemas, each tool's answer, bad arguments
//! as MCP errors, a guest that sees only its namespace, refused tokens, no Secret value
//! anywhere, each call in the access log, and the rate per caller.

use std::process::Command;
use std::time::Duration;

use karpor_testkit::api::{Client, ADMIN};
use karpor_testkit::cluster::{configmaps, kube_name, namespaces, resource, secrets, Kube, LIMIT};
use karpor_testkit::process::{import, wait_for, Karpor, Spawn};
use serde_json::{json, Value};

const CLUSTER: &str = "mcp";
/// The guest's token: a viewer of one namespace by policy.
const TEAM: &str = "team-token-for-mcp";
/// What a Secret of the scene holds: it must never reach an answer.
const SECRET_VALUE: &str = "mcp-secret-value-4417";

fn config(extra: &str) -> String {
    format!(
        "shutdown: {{drain_delay: 1s}}\nauth:\n  anonymous: none\n  tokens:\n  - {{name: ops, role: admin, token: {ADMIN}}}\n  - {{name: team, token: {TEAM}}}\n  policies:\n  - {{name: team-a, subjects: {{tokens: [team]}}, role: viewer, scope: {{namespaces: [NS_A]}}}}\n{extra}"
    )
}

/// Two namespaces of the cluster synced by karpor: A (the guest's) with a Deployment, a
/// ConfigMap changed once and a Secret; B with a ConfigMap the guest may not see.
struct Scene {
    karpor: Karpor,
    kube: Kube,
    ns_a: String,
    ns_b: String,
    _dir: tempfile::TempDir,
}

impl Scene {
    async fn start(extra: &str) -> Scene {
        let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
        let (ns_a, ns_b) = (kube_name("mcp-a"), kube_name("mcp-b"));
        let config = config(extra).replace("NS_A", &ns_a);
        let dir = tempfile::tempdir().unwrap();
        let rule = json!({"name": "mcp", "clusters": "*",
            "resources": [{"group": "", "version": "v1", "resource": "configmaps"},
                {"group": "", "version": "v1", "resource": "secrets"},
                {"group": "apps", "version": "v1", "resource": "deployments"}],
            "namespaces": [ns_a, ns_b]});
        import(
            dir.path(),
            &config,
            &[(CLUSTER, &kube.kubeconfig)],
            json!([rule]),
        );
        for ns in [&ns_a, &ns_b] {
            kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
                .await;
        }
        kube.create(
            &configmaps(),
            Some(&ns_a),
            json!({"metadata": {"name": "settings"}, "data": {"mode": "a"}}),
        )
        .await;
        kube.create(
            &secrets(),
            Some(&ns_a),
            json!({"metadata": {"name": "creds"}, "stringData": {"password": SECRET_VALUE}}),
        )
        .await;
        kube.create(
            &configmaps(),
            Some(&ns_b),
            json!({"metadata": {"name": "hidden"}, "data": {"mode": "b"}}),
        )
        .await;
        let template = json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
        kube.create(
            &resource("apps", "v1", "Deployment", "deployments"),
            Some(&ns_a),
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 2,
                "selector": {"matchLabels": {"app": "web"}}, "template": template}}),
        )
        .await;
        // An Event about the Deployment, as its controller would write one: `describe`
        // reads it from the cluster.
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        kube.create(
            &resource("", "v1", "Event", "events"),
            Some(&ns_a),
            json!({"metadata": {"name": "web.scaled"}, "type": "Normal",
                "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment",
                    "namespace": ns_a, "name": "web"},
                "reason": "ScalingReplicaSet", "message": "Scaled up replica set web-1 to 2",
                "count": 1, "firstTimestamp": now, "lastTimestamp": now,
                "source": {"component": "deployment-controller"}}),
        )
        .await;
        let karpor = Spawn::serve(&config).in_dir(dir.path()).start();
        let admin = Client::with_token(&karpor, ADMIN);
        let stored = |ns: String| {
            let admin = &admin;
            async move {
                let (code, found) = admin
                    .call(
                        "GET",
                        &format!("/rest-api/v1/search?query=select%20*%20from%20resources%20where%20namespace%3D%27{ns}%27&pageSize=10"),
                        None,
                    )
                    .await;
                if code == 200 {
                    found["data"]["total"].as_u64().unwrap_or(0)
                } else {
                    0
                }
            }
        };
        wait_for(LIMIT, "namespace A's 3 objects stored", || async {
            stored(ns_a.clone()).await >= 3
        })
        .await;
        wait_for(LIMIT, "namespace B's ConfigMap stored", || async {
            stored(ns_b.clone()).await >= 1
        })
        .await;
        // One change the history keeps.
        kube.patch(
            &configmaps(),
            &ns_a,
            "settings",
            json!({"data": {"mode": "b"}}),
        )
        .await;
        wait_for(LIMIT, "the ConfigMap's change kept", || async {
            let (code, found) = admin
                .call(
                    "GET",
                    &format!("/rest-api/v1/insight/history?cluster={CLUSTER}&kind=ConfigMap&namespace={ns_a}&name=settings"),
                    None,
                )
                .await;
            code == 200 && found["data"]["revisions"].as_array().map_or(0, Vec::len) >= 2
        })
        .await;
        Scene {
            karpor,
            kube,
            ns_a,
            ns_b,
            _dir: dir,
        }
    }

    /// The TypeScript SDK's report of its calls (`tests/mcp/client.mjs`).
    fn client_report(&self) -> Value {
        let root = env!("CARGO_MANIFEST_DIR");
        let sdk =
            std::path::Path::new(root).join("tests/mcp/node_modules/@modelcontextprotocol/sdk");
        assert!(
            sdk.exists(),
            "the MCP TypeScript SDK is not installed: run scripts/services.sh install"
        );
        let tokens = tempfile::tempdir().unwrap();
        let admin_file = tokens.path().join("admin");
        let wrong_file = tokens.path().join("wrong");
        std::fs::write(&admin_file, format!("{ADMIN}\n")).unwrap();
        std::fs::write(&wrong_file, "not-a-token\n").unwrap();
        let output = Command::new("node")
            .arg(format!("{root}/tests/mcp/client.mjs"))
            .env("KARPOR_URL", format!("http://{}", self.karpor.addr))
            .env("KARPOR_BIN", karpor_testkit::process::binary())
            .env("KARPOR_ADMIN_TOKEN", ADMIN)
            .env("KARPOR_ADMIN_TOKEN_FILE", &admin_file)
            .env("KARPOR_WRONG_TOKEN_FILE", &wrong_file)
            .env("KARPOR_GUEST_TOKEN", TEAM)
            .env("KARPOR_CLUSTER", CLUSTER)
            .env("KARPOR_NS_A", &self.ns_a)
            .env("KARPOR_NS_B", &self.ns_b)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "the MCP client failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }
}

/// A call's outcome as the report has it.
fn ok<'a>(report: &'a Value, what: &str) -> &'a Value {
    let outcome = &report[what];
    assert!(outcome["error"].is_null(), "{what} threw: {outcome}");
    &outcome["ok"]
}

/// A tool call that answered without error: its structured content.
fn answered<'a>(calls: &'a Value, tool: &str) -> &'a Value {
    let call = ok(calls, tool);
    assert_eq!(call["isError"], false, "{tool}: {call}");
    assert!(!call["text"].as_str().unwrap().is_empty(), "{tool}: {call}");
    &call["structured"]
}

/// A call whose arguments were refused: a tool error naming what is wrong (MCP asks input
/// validation to be a tool error, which the assistant can correct).
fn refused_arguments(calls: &Value, what: &str, naming: &str) {
    let call = ok(&calls["bad"], what);
    assert_eq!(call["isError"], true, "{what}: {call}");
    assert!(
        call["text"].as_str().unwrap().contains(naming),
        "{what}: {call}"
    );
}

/// Every tool over one transport, as the admin.
fn check_tools(calls: &Value, ns_a: &str) {
    assert_eq!(calls["server"]["name"], "karpor", "{calls}");
    assert!(calls["instructions"].as_u64().unwrap() > 100);
    let tools = calls["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["audit", "changes", "clusters", "describe", "history", "search", "topology"]
    );
    for tool in tools {
        assert_eq!(tool["input"], "valid", "{tool}");
        assert_eq!(tool["inputType"], "object", "{tool}");
        assert_eq!(tool["output"], "valid", "{tool}");
        assert_eq!(tool["readOnly"], true, "{tool}");
        assert_eq!(tool["described"], true, "{tool}");
    }

    let clusters = answered(calls, "clusters");
    let cluster = &clusters["clusters"][0];
    assert_eq!(cluster["name"], CLUSTER, "{clusters}");
    assert!(cluster["sync"]["state"].is_string(), "{clusters}");
    assert!(!clusters.to_string().contains("kubeConfig"), "{clusters}");

    let search = answered(calls, "search");
    assert_eq!(search["total"], 1, "{search}");
    let item = &search["items"][0];
    assert_eq!(
        (
            &item["kind"],
            &item["name"],
            &item["namespace"],
            &item["apiVersion"]
        ),
        (
            &json!("Deployment"),
            &json!("web"),
            &json!(ns_a),
            &json!("apps/v1")
        ),
        "{search}"
    );
    assert!(
        search["sqlQuery"].as_str().unwrap().contains("Deployment"),
        "{search}"
    );
    // The Deployment runs `nginx` with no tag: an audit finding.
    assert!(!item["findings"].as_array().unwrap().is_empty(), "{search}");
    let keyword = answered(calls, "keyword");
    assert!(
        keyword["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "settings"),
        "{keyword}"
    );

    let described = answered(calls, "describe");
    assert_eq!(described["summary"]["apiVersion"], "apps/v1", "{described}");
    assert_eq!(described["object"]["spec"]["replicas"], 2, "{described}");
    assert!(described["score"].as_f64().unwrap() < 100.0, "{described}");
    assert!(
        !described["findings"].as_array().unwrap().is_empty(),
        "{described}"
    );
    let events = described["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "ScalingReplicaSet" && e["type"] == "Normal"),
        "{described}"
    );
    assert!(
        described["unavailable"].as_array().unwrap().is_empty(),
        "{described}"
    );
    assert!(
        !described.to_string().contains("managedFields\":["),
        "{described}"
    );

    let graph = answered(calls, "topology");
    assert_eq!(graph["of"], "resources", "{graph}");
    assert!(
        graph["nodes"]
            .as_object()
            .unwrap()
            .keys()
            .any(|id| id.ends_with(".web")),
        "{graph}"
    );
    let kinds = answered(calls, "kinds");
    assert_eq!(kinds["of"], "kinds", "{kinds}");
    let kind_ids: Vec<&String> = kinds["nodes"].as_object().unwrap().keys().collect();
    assert!(kind_ids.iter().any(|k| k.ends_with("ConfigMap")), "{kinds}");

    let audit = answered(calls, "audit");
    assert!(audit["issueTotal"].as_u64().unwrap() > 0, "{audit}");
    let groups = audit["groups"].as_array().unwrap();
    assert!(!groups.is_empty() && groups.len() <= 5, "{audit}");
    let weight = |g: &Value| match g["severity"].as_str().unwrap() {
        "Critical" => 4,
        "High" => 3,
        "Medium" => 2,
        "Low" => 1,
        _ => 0,
    };
    assert!(
        groups.windows(2).all(|w| weight(&w[0]) >= weight(&w[1])),
        "most severe first: {audit}"
    );

    let changes = answered(calls, "changes");
    assert!(changes["total"].as_u64().unwrap() >= 1, "{changes}");
    assert!(
        changes["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "settings" && c["change"] == "updated"),
        "{changes}"
    );
    let history = answered(calls, "history");
    let revisions = history["revisions"].as_array().unwrap();
    assert!(revisions.len() >= 2, "{history}");
    assert_eq!(revisions[0]["change"], "updated", "{history}");
    assert!(
        revisions[0]["diff"].to_string().contains("/data/mode"),
        "{history}"
    );

    // A Secret is found, its values are not shown.
    let secrets = answered(calls, "secrets");
    assert_eq!(secrets["total"], 1, "{secrets}");
    let secret = answered(calls, "secret");
    assert_eq!(secret["summary"]["name"], "creds", "{secret}");

    for (what, naming) in [
        ("type", "expected a string"),
        ("unknownField", "colour"),
        ("missing", "kind"),
        ("name", "namespace"),
        ("pageSize", "pageSize"),
    ] {
        refused_arguments(calls, what, naming);
    }
    // The prompt names the tools and the object; a name Kubernetes would not take is
    // refused before it reaches a prompt.
    assert_eq!(
        calls["prompts"],
        json!([{"name": "diagnose", "arguments": ["cluster", "kind", "name", "namespace?"]}]),
        "{calls}"
    );
    let prompt = ok(calls, "prompt").as_str().unwrap();
    assert!(
        prompt.contains("`describe`") && prompt.contains(ns_a),
        "{prompt}"
    );
    assert_eq!(calls["badPrompt"]["code"], -32602, "{calls}");
    // An object's YAML as a resource, redacted as everywhere; a URI that is not an
    // object's is refused.
    assert_eq!(
        calls["templates"],
        json!([
            "karpor://{cluster}/{kind}/{namespace}/{name}",
            "karpor://{cluster}/{kind}/{name}"
        ])
    );
    let resource = &ok(calls, "resource")[0];
    assert_eq!(resource["mimeType"], "application/yaml", "{resource}");
    assert!(
        resource["text"].as_str().unwrap().contains("mode: b"),
        "{resource}"
    );
    let secret = &ok(calls, "secretResource")[0];
    assert!(
        secret["text"].as_str().unwrap().contains("[redacted]"),
        "{secret}"
    );
    assert!(calls["badResource"]["code"].is_i64(), "{calls}");
    // A tool that is not there is the protocol's error.
    assert_eq!(calls["bad"]["unknownTool"]["code"], -32602, "{calls}");
    // What the assistant can correct: a tool error with the reason.
    let sql = ok(&calls["bad"], "sql");
    assert_eq!(sql["isError"], true, "{sql}");
    assert!(sql["text"].as_str().unwrap().contains("nowhere"), "{sql}");
    let absent = ok(&calls["bad"], "absent");
    assert_eq!(absent["isError"], true, "{absent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_uses_every_tool_over_http_and_stdio_within_the_callers_scope() {
    // Many calls in a few seconds: the rate per caller is its own test's.
    let scene =
        Scene::start("server: {limits: {mcp: {calls_per_minute: 10000, burst: 1000}}}\n").await;
    let report = scene.client_report();
    let text = report.to_string();
    assert!(
        !text.contains(SECRET_VALUE),
        "a Secret value was answered: {text}"
    );

    let http = ok(&report, "http");
    check_tools(http, &scene.ns_a);
    // The SDK speaks 2025-11-25; karpor answers that version.
    assert_eq!(http["protocol"], "2025-11-25", "{http}");
    let stdio = ok(&report, "stdio");
    check_tools(stdio, &scene.ns_a);

    // The guest sees its namespace only: B's ConfigMap is not found, not refused.
    let guest = ok(&report, "guest");
    let configmaps = answered(guest, "configmaps");
    let namespaces: Vec<&str> = configmaps["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["namespace"].as_str().unwrap())
        .collect();
    assert!(namespaces.contains(&scene.ns_a.as_str()), "{configmaps}");
    assert!(
        namespaces.iter().all(|ns| *ns == scene.ns_a),
        "{configmaps}"
    );
    let hidden = ok(guest, "hidden");
    assert_eq!(hidden["isError"], true, "{hidden}");
    assert!(!hidden.to_string().contains("\"mode\""), "{hidden}");
    assert_eq!(guest["hiddenResource"]["code"], -32002, "{guest}");
    let audit = answered(guest, "audit");
    assert!(!audit.to_string().contains(&scene.ns_b), "{audit}");
    let changes = answered(guest, "changes");
    assert!(!changes.to_string().contains(&scene.ns_b), "{changes}");

    // No token, a wrong one: refused before MCP (401), over HTTP and through `karpor mcp`.
    let refused = &report["refused"];
    for how in ["none", "wrong"] {
        assert_eq!(refused[how]["code"], 401, "{how}: {refused}");
    }
    assert!(
        refused["stdioWrong"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("401"),
        "{refused}"
    );

    // Each call is a line of the access log, with its caller.
    let logs = scene.karpor.logs();
    for (who, tool) in [("ops", "search"), ("ops", "describe"), ("team", "audit")] {
        assert!(
            logs.lines().any(|l| l.contains("karpor::access")
                && l.contains(&format!("who={who}"))
                && l.contains(&format!("tool={tool}"))),
            "no access line for {who} calling {tool}"
        );
    }
    scene.kube.delete_namespace(&scene.ns_a).await;
    scene.kube.delete_namespace(&scene.ns_b).await;
}

/// One JSON-RPC message posted to `/mcp` as `token`: the HTTP status and the body.
async fn post(karpor: &Karpor, token: &str, message: Value) -> (u16, Value) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut request = http
        .post(karpor.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream");
    // After the handshake, as a client sends it.
    if message["method"] != "initialize" {
        request = request.header("mcp-protocol-version", "2025-11-25");
    }
    let response = request.json(&message).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_negotiated_and_each_caller_has_its_own_rate() {
    let config = "shutdown: {drain_delay: 1s}\nserver: {limits: {mcp: {calls_per_minute: 1, burst: 2}}}\nauth:\n  anonymous: none\n  tokens:\n  - {name: ops, role: admin, token: admin-token-xyz}\n  - {name: viewer, role: guest, token: guest-token-xyz}\n";
    let karpor = Spawn::serve(config).start();
    let initialize = |version: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
    };
    // A version karpor speaks is answered as asked; an unknown one gets karpor's newest
    // with a handshake, for the client to accept or leave.
    for (asked, answered) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let (status, body) = post(&karpor, ADMIN, initialize(asked)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["protocolVersion"], answered, "{body}");
    }
    let search = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "clusters", "arguments": {}}})
    };
    // The admin's burst of two, then its rate refuses; the guest still has its own.
    for id in 1..=2 {
        let (status, body) = post(&karpor, ADMIN, search(id)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["isError"], false, "{body}");
    }
    let (_, refused) = post(&karpor, ADMIN, search(3)).await;
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("calls_per_minute"),
        "{refused}"
    );
    let (_, guest) = post(&karpor, "guest-token-xyz", search(4)).await;
    assert_eq!(guest["result"]["isError"], false, "{guest}");
    // Too large, not JSON-RPC, no token, GET: refused, and the server is still well.
    let large = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "search", "arguments": {"query": "x".repeat(300 * 1024)}}});
    let (status, _) = post(&karpor, ADMIN, large).await;
    assert_eq!(status, 413);
    let (status, _) = post(&karpor, ADMIN, json!({"not": "json-rpc"})).await;
    assert!((400..500).contains(&status), "{status}");
    let (status, body) = post(&karpor, "wrong", initialize("2025-11-25")).await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = karpor_testkit::process::get(&karpor.url("/mcp")).await;
    assert_eq!(status, 401);
    let bearer = format!("Bearer {ADMIN}");
    let (status, _) = karpor_testkit::process::get_with(
        &karpor.url("/mcp"),
        &[("authorization", &bearer), ("accept", "text/event-stream")],
    )
    .await;
    assert_eq!(status, 405, "no stream to resume: the server is stateless");
    let (status, _) = karpor_testkit::process::get(&karpor.url("/livez")).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpor_mcp_answers_every_request_when_the_server_is_away_and_stops_at_the_end_of_input() {
    use tokio::io::AsyncWriteExt;
    // Nothing listens on port 1: every request gets an error, none is left waiting.
    let mut child = tokio::process::Command::new(karpor_testkit::process::binary())
        .args(["mcp", "--server", "http://127.0.0.1:1", "--token", "t"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let too_long = format!("{{\"x\": \"{}\"}}\n", "y".repeat(300 * 1024));
    let input = [
        "not json\n".to_owned(),
        too_long,
        json!({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
        .to_string()
            + "\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string() + "\n",
    ];
    for line in input {
        stdin.write_all(line.as_bytes()).await.unwrap();
    }
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("karpor mcp did not stop at the end of its input")
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let answers: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Two parse errors and the request's error; nothing for the notification.
    assert_eq!(answers.len(), 3, "{answers:?}");
    let codes: Vec<&Value> = answers.iter().map(|a| &a["error"]["code"]).collect();
    assert_eq!(
        codes,
        [&json!(-32700), &json!(-32700), &json!(-32000)],
        "{answers:?}"
    );
    assert_eq!(answers[2]["id"], 7, "{answers:?}");
    assert!(
        answers[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach"),
        "{answers:?}"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot reach"));
}
