//! Audit at ingest, end to end against a real kube-apiserver, on SQLite and on the
//! Elasticsearch-API server: objects with known problems (one rule each) and a clean one
//! are created; each stored document's findings are exactly what the auditors make of the
//! live object (so each finding is where expected and nowhere else); `issue`, `severity`
//! and `score` filter in SQL; fixing an object removes its finding; a rule turned off
//! through the API disappears from every document after the re-audit; `/insight/score`
//! matches Karpor's formula computed by hand.

use karpor_audit::AuditConfig;
use karpor_testkit::api::Client;
use karpor_testkit::cluster::{kube_name, namespaces, resource, Kube, LIMIT};
use karpor_testkit::process::{wait_for, Karpor, Spawn};
use karpor_testkit::services::Elastic;
use kube::api::ApiResource;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

fn deployments() -> ApiResource {
    resource("apps", "v1", "Deployment", "deployments")
}
fn services() -> ApiResource {
    resource("", "v1", "Service", "services")
}
fn pdbs() -> ApiResource {
    resource(
        "policy",
        "v1beta1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    )
}

/// A container no rule objects to.
fn clean_container(image: &str) -> Value {
    json!({
        "name": "app",
        "image": image,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                      "limits": {"cpu": "100m", "memory": "64Mi"}},
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
        "livenessProbe": {"httpGet": {"path": "/", "port": 8080}},
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 1000,
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}
        }
    })
}

fn container(d: &mut Value) -> &mut Value {
    &mut d["spec"]["template"]["spec"]["containers"][0]
}

/// A Deployment no rule objects to (with the budget [`budget`] makes), changed by `edit`.
fn deployment(name: &str, replicas: i64, edit: impl FnOnce(&mut Value)) -> Value {
    let mut object = json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "protected": "yes"}},
                "spec": {
                    "automountServiceAccountToken": false,
                    "containers": [clean_container("registry.example/app:1.2.3")]
                }
            }
        }
    });
    edit(&mut object);
    object
}

fn budget() -> Value {
    json!({"metadata": {"name": "protected"},
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"protected": "yes"}}}})
}

/// Each object and the one rule it breaks (None: clean).
fn objects() -> Vec<(ApiResource, Value, Option<&'static str>)> {
    vec![
        (deployments(), deployment("clean", 2, |_| {}), None),
        (
            deployments(),
            deployment("host-net", 2, |d| {
                d["spec"]["template"]["spec"]["hostNetwork"] = json!(true)
            }),
            Some("host-network"),
        ),
        (
            deployments(),
            deployment("latest", 2, |d| {
                container(d)["image"] = json!("registry.example/app:latest")
            }),
            Some("image-tag"),
        ),
        (
            deployments(),
            deployment("caps", 2, |d| {
                container(d)["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN"])
            }),
            Some("capabilities-added"),
        ),
        (
            deployments(),
            deployment("no-probe", 2, |d| {
                container(d)
                    .as_object_mut()
                    .unwrap()
                    .remove("readinessProbe");
            }),
            Some("readiness-probe-missing"),
        ),
        (
            deployments(),
            deployment("single", 1, |_| {}),
            Some("single-replica"),
        ),
        (
            deployments(),
            deployment("unprotected", 3, |d| {
                d["spec"]["template"]["metadata"]["labels"]["protected"] = json!("no")
            }),
            Some("pdb-missing"),
        ),
        (
            services(),
            json!({"metadata": {"name": "exposed"},
                   "spec": {"type": "NodePort", "selector": {"app": "clean"},
                            "ports": [{"port": 80}]}}),
            Some("service-node-port"),
        ),
        (
            services(),
            json!({"metadata": {"name": "internal"},
                   "spec": {"selector": {"app": "clean"}, "ports": [{"port": 80}]}}),
            None,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_stored_where_the_auditors_put_them_on_sqlite() {
    let karpor = Spawn::serve("shutdown: {drain_delay: 1s}\n").start();
    audited(&karpor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_stored_where_the_auditors_put_them_on_elasticsearch() {
    let elastic = Elastic::start().expect("test services: run scripts/services.sh start");
    let config = format!(
        "shutdown: {{drain_delay: 1s}}\nstorage: {{backend: elasticsearch, url: '{}', refresh: 'true'}}\n",
        elastic.url()
    );
    let karpor = Spawn::serve(&config).start();
    audited(&karpor).await;
}

/// `(name, kind) -> rule ids` of the stored documents of the namespace.
async fn stored(api: &Client, ns: &str) -> BTreeMap<(String, String), Vec<Value>> {
    let sql = format!("select * from resources where namespace = '{ns}'");
    let (code, page) = api
        .call(
            "GET",
            &format!(
                "/rest-api/v1/search?pageSize=1000&query={}",
                urlencoding(&sql)
            ),
            None,
        )
        .await;
    assert_eq!(code, 200, "{page}");
    page["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let o = &item["object"];
            (
                (
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                    o["kind"].as_str().unwrap().to_owned(),
                ),
                item["issues"].as_array().cloned().unwrap_or_default(),
            )
        })
        .collect()
}

fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Names of the namespace's objects an SQL condition selects.
async fn selected(api: &Client, ns: &str, condition: &str) -> BTreeSet<String> {
    let sql = format!("select * from resources where namespace = '{ns}' and {condition}");
    let (code, page) = api
        .call(
            "GET",
            &format!(
                "/rest-api/v1/search?pageSize=1000&query={}",
                urlencoding(&sql)
            ),
            None,
        )
        .await;
    assert_eq!(code, 200, "{condition}: {page}");
    page["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["object"]["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn ids(findings: &[Value]) -> BTreeSet<String> {
    findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect()
}

async fn audited(karpor: &Karpor) {
    let kube = Kube::shared("KARPOR_TEST_KUBECONFIG_A").await;
    let api = Client::local_admin(karpor);
    let (code, answer) = api
        .call(
            "POST",
            "/rest-api/v1/cluster/audited",
            Some(json!({"kubeConfig": kube.kubeconfig})),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    let ns = kube_name("audit");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    kube.create(&pdbs(), Some(&ns), budget()).await;
    let objects = objects();
    for (r, object, _) in &objects {
        kube.create(r, Some(&ns), object.clone()).await;
    }
    let expected_names: BTreeSet<String> = objects
        .iter()
        .map(|(_, o, _)| o["metadata"]["name"].as_str().unwrap().to_owned())
        .chain(["protected".to_owned()])
        .collect();
    wait_for(LIMIT, "every object is stored", || async {
        let names: BTreeSet<String> = stored(&api, &ns).await.into_keys().map(|k| k.0).collect();
        names == expected_names
    })
    .await;

    // Every document's findings are the auditors' verdict on the live object; each
    // object breaks its rule (and the clean ones none).
    let live_findings = |object: &Value| -> BTreeSet<String> {
        karpor_audit::audit(object, &AuditConfig::default())
            .into_iter()
            .map(|f| f.rule)
            .collect()
    };
    let mut expected_rules = BTreeMap::new();
    for (r, object, rule) in &objects {
        let name = object["metadata"]["name"].as_str().unwrap();
        let live = kube.api(r, Some(&ns)).get(name).await.unwrap();
        let mut live = serde_json::to_value(live).unwrap();
        live["apiVersion"] = json!(r.api_version);
        live["kind"] = json!(r.kind);
        let mut want = live_findings(&live);
        if *rule == Some("pdb-missing") {
            want.insert("pdb-missing".to_owned());
        }
        match rule {
            Some(rule) => assert_eq!(want, BTreeSet::from([rule.to_string()]), "{name}"),
            None => assert!(want.is_empty(), "{name}: {want:?}"),
        }
        expected_rules.insert((name.to_owned(), r.kind.clone()), want);
    }
    let live = kube.api(&pdbs(), Some(&ns)).get("protected").await.unwrap();
    let mut live = serde_json::to_value(live).unwrap();
    live["apiVersion"] = json!(pdbs().api_version);
    live["kind"] = json!("PodDisruptionBudget");
    expected_rules.insert(
        ("protected".to_owned(), "PodDisruptionBudget".to_owned()),
        live_findings(&live),
    );
    wait_for(LIMIT, "stored findings equal the auditors'", || async {
        let stored = stored(&api, &ns).await;
        expected_rules
            .iter()
            .all(|(key, want)| stored.get(key).map(|f| ids(f)).as_ref() == Some(want))
    })
    .await;

    // SQL on findings: each rule selects its object alone.
    for (_, object, rule) in &objects {
        let Some(rule) = rule else { continue };
        let name = object["metadata"]["name"].as_str().unwrap();
        assert_eq!(
            selected(&api, &ns, &format!("issue = '{rule}'")).await,
            BTreeSet::from([name.to_owned()]),
            "{rule}"
        );
    }
    let with_findings = |keep: &dyn Fn(&BTreeSet<String>) -> bool| -> BTreeSet<String> {
        expected_rules
            .iter()
            .filter(|(_, rules)| keep(rules))
            .map(|((name, _), _)| name.clone())
            .collect()
    };
    assert_eq!(
        selected(&api, &ns, "severity = 'high'").await,
        BTreeSet::from(["host-net".to_owned()])
    );
    assert_eq!(
        selected(&api, &ns, "score = 100").await,
        with_findings(&|r| r.is_empty())
    );
    assert!(selected(&api, &ns, "score = 100").await.contains("clean"));
    assert_eq!(
        selected(&api, &ns, "issue != 'image-tag'").await,
        with_findings(&|r| !r.is_empty() && !r.contains("image-tag"))
    );

    // Karpor's score, by hand: one High finding (weight 3) is 100·e^(−0.04·1 − 0.06·3).
    let high = 100.0 * (-0.22f64).exp();
    let (code, one) = api
        .call(
            "GET",
            &format!("/rest-api/v1/insight/score?cluster=audited&apiVersion=apps/v1&kind=Deployment&namespace={ns}&name=host-net"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{one}");
    assert!(
        (one["data"]["score"].as_f64().unwrap() - high).abs() < 1e-6,
        "{one}"
    );
    assert_eq!(one["data"]["severityStatistic"], json!({"High": 1}));
    // The namespace: the mean of each object's score, by the same formula.
    let weight = |rule: &str| match karpor_audit::rule(rule).unwrap().severity.as_str() {
        "High" => 3.0,
        "Medium" => 2.0,
        _ => 1.0,
    };
    let scores: Vec<f64> = expected_rules
        .values()
        .map(|rules| {
            let s: f64 = rules.iter().map(|r| weight(r)).sum();
            100.0 * (-0.04 * rules.len() as f64 - 0.06 * s).exp()
        })
        .collect();
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    let (_, whole) = api
        .call(
            "GET",
            &format!("/rest-api/v1/insight/score?cluster=audited&namespace={ns}"),
            None,
        )
        .await;
    assert_eq!(whole["data"]["resourceTotal"], scores.len(), "{whole}");
    assert!(
        (whole["data"]["score"].as_f64().unwrap() - mean).abs() < 1e-6,
        "{whole} vs {mean}"
    );
    let (code, audit) = api
        .call(
            "GET",
            &format!("/rest-api/v1/insight/audit?cluster=audited&namespace={ns}&forceNew=true"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{audit}");
    let findings: usize = expected_rules.values().map(BTreeSet::len).sum();
    assert_eq!(audit["data"]["issueTotal"], findings, "{audit}");
    assert_eq!(audit["data"]["bySeverity"]["High"], 1, "{audit}");
    let groups = audit["data"]["issueGroups"].as_array().unwrap();
    assert_eq!(
        groups[0]["issue"]["rule"], "host-network",
        "most severe first"
    );
    assert_eq!(groups[0]["issue"]["severity"], "High");
    assert_eq!(
        groups[0]["resourceGroups"],
        json!([{"cluster": "audited", "apiVersion": "apps/v1", "kind": "Deployment",
                "namespace": ns, "name": "host-net"}])
    );

    // The CLI: the score line, then a row per finding; `--severity` filters.
    let (code, out, err) = crate::cli::text(&crate::cli::karpor(
        &[
            "audit",
            &format!("audited/{ns}"),
            "--severity",
            "high",
            "-o",
            "name",
        ],
        &karpor.url(""),
        karpor.dir(),
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("host-network audited/deployment/{ns}/host-net\n")
    );
    let (code, out, err) = crate::cli::text(&crate::cli::karpor(
        &["audit", &format!("audited/{ns}")],
        &karpor.url(""),
        karpor.dir(),
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("score {:.1} · {} resources", mean, scores.len())),
        "{out}"
    );
    assert!(
        out.contains("pdb-missing") && out.contains("unprotected"),
        "{out}"
    );

    // Fixing an object removes its finding once the update is synced.
    kube.patch(
        &deployments(),
        &ns,
        "latest",
        json!({"spec": {"template": {"spec": {"containers": [
            clean_container("registry.example/app:2.0.0")]}}}}),
    )
    .await;
    wait_for(LIMIT, "the fixed image's finding is gone", || async {
        selected(&api, &ns, "issue = 'image-tag'").await.is_empty()
    })
    .await;

    // A rule turned off through the API leaves every document after the re-audit.
    let (code, policy) = api
        .call(
            "PUT",
            "/rest-api/v1/audit/policy",
            Some(json!({"disabled": ["single-replica"], "severities": {"host-network": "Low"}})),
        )
        .await;
    assert_eq!(code, 200, "{policy}");
    assert_eq!(policy["data"]["source"], "stored");
    wait_for(LIMIT, "the re-audit went through every cluster", || async {
        let (_, policy) = api.call("GET", "/rest-api/v1/audit/policy", None).await;
        let reaudit = &policy["data"]["reaudit"];
        reaudit["generation"].as_u64() >= Some(2) && reaudit["audited"] == reaudit["clusters"]
    })
    .await;
    assert!(selected(&api, &ns, "issue = 'single-replica'")
        .await
        .is_empty());
    assert!(selected(&api, &ns, "severity = 'High'").await.is_empty());
    assert_eq!(
        selected(&api, &ns, "issue = 'host-network' and severity = 'Low'").await,
        BTreeSet::from(["host-net".to_owned()])
    );
    let (_, rules) = api.call("GET", "/rest-api/v1/audit/rules", None).await;
    let single = rules["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "single-replica")
        .unwrap();
    assert!(single["effectiveSeverity"].is_null(), "{single}");
    // An unknown rule is refused, naming it.
    let (code, refused) = api
        .call(
            "PUT",
            "/rest-api/v1/audit/policy",
            Some(json!({"disabled": ["nope"]})),
        )
        .await;
    assert_eq!(code, 400, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("nope"));
    kube.delete_namespace(&ns).await;
}
