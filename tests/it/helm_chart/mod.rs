//! The Helm chart (`charts/karpor`): every supported combination lints, renders and
//! passes `kubernetes-validate --strict`; invalid combinations and wrong values fail with
//! a clear message; the Deployments carry the health spec's probes and the hardening;
//! API tokens, policies, OIDC and TokenReview, the model service, the encryption key, the Ingress,
//! monitoring, disruption budgets and network policies render as karpor and Kubernetes
//! need them; and the config file the chart renders is accepted by the real binary.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use karpor_testkit::service;
use serde::Deserialize as _;
use serde_yaml::Value;

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/karpor");
const RELEASE: &str = "karpor";
const NAMESPACE: &str = "karpor-test";
/// The chart's minimum (`kubeVersion` in Chart.yaml) and the version helm renders for.
const KUBE_VERSIONS: &[&str] = &["1.30.0", "1.35.0"];

/// The values files of the supported combinations, in `charts/karpor/ci`.
const ETCD_ELASTICSEARCH: &str = "ci/etcd-elasticsearch-values.yaml";
const MYSQL_ELASTICSEARCH: &str = "ci/mysql-elasticsearch-values.yaml";
const SQLITE_SQLITE: &str = "ci/sqlite-sqlite-values.yaml";
/// What an operator adds to share karpor with a team (the file's header lists it).
const EXPOSED: &str = "ci/exposed-values.yaml";

struct Tools {
    helm: String,
    validate: PathBuf,
}

/// helm and kubernetes-validate from the test script; a failure under CI when missing.
fn tools() -> Option<Tools> {
    let helm = service("KARPOR_TEST_HELM")?;
    let venv = service("KARPOR_TEST_VENV")?;
    Some(Tools {
        helm,
        validate: Path::new(&venv).join("bin/kubernetes-validate"),
    })
}

/// `-f FILE` for a values file of the chart, or `--set`s.
fn values_file(file: &str) -> Vec<String> {
    vec!["-f".into(), format!("{CHART}/{file}")]
}

fn sets(pairs: &[&str]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|p| ["--set".to_owned(), (*p).to_owned()])
        .collect()
}

/// `--set-json`s, for values that are lists or objects.
fn set_json(pairs: &[&str]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|p| ["--set-json".to_owned(), (*p).to_owned()])
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Tools {
    fn helm(&self, args: &[String]) -> Output {
        Command::new(&self.helm)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{} runs: {e}", self.helm))
    }

    fn lint(&self, values: &[String]) -> Output {
        self.lint_of(CHART, values)
    }

    fn lint_of(&self, chart: &str, values: &[String]) -> Output {
        let mut args = vec!["lint".to_owned(), "--strict".into(), chart.into()];
        args.extend_from_slice(values);
        self.helm(&args)
    }

    fn template_of(&self, chart: &str, values: &[String]) -> Output {
        let mut args = vec![
            "template".to_owned(),
            RELEASE.into(),
            chart.into(),
            "--namespace".into(),
            NAMESPACE.into(),
        ];
        args.extend_from_slice(values);
        self.helm(&args)
    }

    /// Lints and renders; panics with helm's words if either fails.
    fn render(&self, values: &[String]) -> String {
        self.render_of(CHART, values)
    }

    fn render_of(&self, chart: &str, values: &[String]) -> String {
        let lint = self.lint_of(chart, values);
        assert!(
            lint.status.success(),
            "helm lint {values:?}:\n{}{}",
            text(&lint.stdout),
            text(&lint.stderr)
        );
        let out = self.template_of(chart, values);
        assert!(
            out.status.success(),
            "helm template {values:?}:\n{}",
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// `kubernetes-validate --strict` against each supported Kubernetes version.
    fn validate(&self, manifest: &str) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rendered.yaml");
        std::fs::write(&file, manifest).unwrap();
        for version in KUBE_VERSIONS {
            let out = Command::new(&self.validate)
                .args(["-k", version, "--strict", "--quiet"])
                .arg(&file)
                .output()
                .unwrap_or_else(|e| panic!("{} runs: {e}", self.validate.display()));
            assert!(
                out.status.success(),
                "kubernetes-validate -k {version} --strict:\n{}{}\n--- manifest ---\n{manifest}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
    }

    /// A supported combination: lint, render, validate; the objects by `Kind/name`.
    fn check(&self, values: &[String]) -> Objects {
        self.check_of(CHART, values)
    }

    fn check_of(&self, chart: &str, values: &[String]) -> Objects {
        let manifest = self.render_of(chart, values);
        self.validate(&manifest);
        Objects::parse(&manifest)
    }

    /// NOTES.txt as `helm install` prints it (a client-side dry run: no cluster).
    fn notes(&self, values: &[String]) -> String {
        let mut args = vec![
            "install".to_owned(),
            RELEASE.into(),
            CHART.into(),
            "--namespace".into(),
            NAMESPACE.into(),
            "--dry-run=client".into(),
        ];
        args.extend_from_slice(values);
        let out = self.helm(&args);
        assert!(
            out.status.success(),
            "helm install --dry-run=client {values:?}:\n{}",
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        let notes = stdout.split_once("NOTES:").map(|(_, n)| n.to_owned());
        notes.unwrap_or_else(|| panic!("no NOTES in:\n{stdout}"))
    }

    /// Values that `helm install` must refuse: template fails; helm's error text. (helm
    /// lint fails only on schema errors: in lint mode a template's `fail` is logged.)
    fn refused(&self, values: &[String]) -> String {
        self.refused_of(CHART, values)
    }

    fn refused_of(&self, chart: &str, values: &[String]) -> String {
        let out = self.template_of(chart, values);
        assert!(
            !out.status.success(),
            "helm template accepted {values:?}:\n{}",
            text(&out.stdout)
        );
        text(&out.stderr)
    }
}

/// The rendered objects by `Kind/name`.
struct Objects(BTreeMap<String, Value>);

impl Objects {
    fn parse(manifest: &str) -> Objects {
        let mut objects = BTreeMap::new();
        for document in serde_yaml::Deserializer::from_str(manifest) {
            let value = Value::deserialize(document).expect("helm renders YAML");
            if value.is_null() {
                continue;
            }
            let key = format!(
                "{}/{}",
                str_at(&value, "kind"),
                str_at(&value, "metadata.name")
            );
            assert!(objects.insert(key.clone(), value).is_none(), "{key} twice");
        }
        Objects(objects)
    }

    fn get(&self, key: &str) -> &Value {
        self.0
            .get(key)
            .unwrap_or_else(|| panic!("no {key}; rendered: {:?}", self.0.keys()))
    }

    fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = (&'a String, &'a Value)> {
        self.0
            .iter()
            .filter(move |(k, _)| k.split('/').next() == Some(kind))
    }

    /// A karpor config file of the ConfigMap (`server.yaml` or `syncer.yaml`).
    fn config(&self, role: &str) -> Option<String> {
        let map = self.get(&format!("ConfigMap/{RELEASE}-config"));
        at(map, "data")
            .and_then(|data| data.get(format!("{role}.yaml")))
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    fn deployment(&self, name: &str) -> &Value {
        self.get(&format!("Deployment/{name}"))
    }

    /// A Secret's value under `key`, base64-decoded as the kubelet mounts it.
    fn secret(&self, name: &str, key: &str) -> Vec<u8> {
        use base64::Engine as _;
        let secret = self.get(&format!("Secret/{name}"));
        let data = at(secret, "data")
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("Secret/{name} has no {key}"));
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64 in a Secret's data")
    }
}

/// A dotted path into YAML (`spec.template.spec`); list items by index.
fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |v, key| match key.parse::<usize>() {
            Ok(i) => v.get(i),
            Err(_) => v.get(key),
        })
}

fn str_at<'a>(value: &'a Value, path: &str) -> &'a str {
    at(value, path)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {path}"))
}

fn container(deployment: &Value) -> &Value {
    let containers = at(deployment, "spec.template.spec.containers")
        .and_then(Value::as_sequence)
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container per karpor pod");
    &containers[0]
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

/// The files of a Deployment's `secrets` volume: `(Secret, key, file)` each.
fn secret_files(deployment: &Value) -> Vec<(String, String, String)> {
    let volumes = at(deployment, "spec.template.spec.volumes")
        .and_then(Value::as_sequence)
        .expect("volumes");
    let Some(secrets) = volumes.iter().find(|v| str_at(v, "name") == "secrets") else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for source in at(secrets, "projected.sources")
        .and_then(Value::as_sequence)
        .expect("projected sources")
    {
        for item in at(source, "secret.items")
            .and_then(Value::as_sequence)
            .expect("items")
        {
            files.push((
                str_at(source, "secret.name").to_owned(),
                str_at(item, "key").to_owned(),
                str_at(item, "path").to_owned(),
            ));
        }
    }
    files
}

fn file(secret: &str, key: &str, path: &str) -> (String, String, String) {
    (secret.to_owned(), key.to_owned(), path.to_owned())
}

/// One entry of the map at `path` whose key has dots (labels, annotations), which `at`
/// would split.
fn entry<'a>(object: &'a Value, path: &str, key: &str) -> Option<&'a str> {
    at(object, path)
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// Whether a label selector (`matchLabels` and `matchExpressions`) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    let by_labels = at(selector, "matchLabels")
        .and_then(Value::as_mapping)
        .is_none_or(|m| {
            m.iter()
                .all(|(k, v)| label(k.as_str().unwrap()) == v.as_str())
        });
    let by_expressions = at(selector, "matchExpressions")
        .and_then(Value::as_sequence)
        .is_none_or(|expressions| {
            expressions.iter().all(|e| {
                let value = label(str_at(e, "key"));
                let values: Vec<&str> = at(e, "values")
                    .and_then(Value::as_sequence)
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match str_at(e, "operator") {
                    "In" => value.is_some_and(|v| values.contains(&v)),
                    "NotIn" => value.is_none_or(|v| !values.contains(&v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    other => panic!("operator {other}"),
                }
            })
        });
    by_labels && by_expressions
}

/// The labels of a workload's pods.
fn pod_labels(workload: &Value) -> &Value {
    at(workload, "spec.template.metadata.labels").expect("pod labels")
}

/// A NetworkPolicy's egress rules that allow `port` over `protocol`.
fn egress_to<'a>(policy: &'a Value, port: u64, protocol: &str) -> Vec<&'a Value> {
    at(policy, "spec.egress")
        .and_then(Value::as_sequence)
        .expect("egress rules")
        .iter()
        .filter(|rule| {
            at(rule, "ports")
                .and_then(Value::as_sequence)
                .is_some_and(|ports| {
                    ports.iter().any(|p| {
                        at(p, "port").and_then(Value::as_u64) == Some(port)
                            && at(p, "protocol").and_then(Value::as_str) == Some(protocol)
                    })
                })
        })
        .collect()
}

/// The one egress rule to `port` (TCP) of a policy.
fn one_egress_to(policy: &Value, port: u64) -> &Value {
    let rules = egress_to(policy, port, "TCP");
    assert_eq!(rules.len(), 1, "one egress rule to {port}: {policy:?}");
    rules[0]
}

#[test]
fn etcd_and_elasticsearch_bundled_render_and_validate() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(ETCD_ELASTICSEARCH));
    let etcd = objects.get(&format!("StatefulSet/{RELEASE}-etcd"));
    assert_eq!(at(etcd, "spec.replicas"), Some(&yaml("3")));
    assert_eq!(
        str_at(
            etcd,
            "spec.volumeClaimTemplates.0.spec.resources.requests.storage"
        ),
        "8Gi"
    );
    let es = objects.get(&format!("StatefulSet/{RELEASE}-elasticsearch"));
    assert_eq!(
        str_at(es, "spec.volumeClaimTemplates.0.metadata.name"),
        "data",
        "Elasticsearch keeps its data on a claim, not an emptyDir"
    );
    assert_eq!(
        at(objects.deployment(RELEASE), "spec.replicas"),
        Some(&yaml("2"))
    );
    let syncer = objects.deployment(&format!("{RELEASE}-syncer"));
    assert_eq!(at(syncer, "spec.replicas"), Some(&yaml("1")));
    assert_eq!(
        at(container(syncer), "args"),
        Some(&yaml("[syncer, --config, /etc/karpor/config/karpor.yaml]"))
    );
    let service = objects.get(&format!("Service/{RELEASE}-syncer"));
    assert_eq!(
        at(service, "spec.publishNotReadyAddresses"),
        Some(&Value::Bool(true)),
        "the upstream check reads the syncer's own answer, ready or not"
    );

    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(at(&server, "server.syncer"), Some(&Value::Bool(false)));
    let endpoints = at(&server, "metadata.etcd.endpoints").unwrap();
    assert_eq!(endpoints.as_sequence().unwrap().len(), 3);
    assert_eq!(
        str_at(&server, "storage.url"),
        format!("http://{RELEASE}-elasticsearch.{NAMESPACE}.svc:9200")
    );
    // readiness.includeSyncer: the server's /readyz follows the syncer's Service.
    assert_eq!(
        at(&server, "readiness.upstreams"),
        Some(&yaml(&format!(
            "[{{name: Syncer-remote, url: 'http://{RELEASE}-syncer.{NAMESPACE}.svc:7444/readyz', must_ready: true}}]"
        )))
    );
    let syncer_config: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(at(&syncer_config, "readiness.upstreams"), Some(&yaml("[]")));
    // Credentials from the operator's Secret, as files.
    assert_eq!(
        at(&server, "health.admin_token"),
        Some(&yaml("{file: /etc/karpor/secrets/admin-token}"))
    );
    assert!(
        !objects.has(&format!("Secret/{RELEASE}")),
        "no inline credential"
    );
}

#[test]
fn the_default_values_render_and_validate_without_upstreams() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&[]);
    assert!(objects.has(&format!("StatefulSet/{RELEASE}-etcd")));
    assert!(objects.has(&format!("StatefulSet/{RELEASE}-elasticsearch")));
    assert!(objects.has(&format!("Deployment/{RELEASE}-syncer")));
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "readiness.upstreams"),
        Some(&yaml("[]")),
        "upstreams are off by default"
    );
}

#[test]
fn external_etcd_renders_its_endpoints_and_no_statefulset() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&sets(&[
        "metadata.etcd.bundled=false",
        "metadata.etcd.endpoints={https://etcd-a:2379,https://etcd-b:2379}",
        "metadata.etcd.username=karpor",
        "metadata.etcd.password.value=etcd-secret",
        "metadata.etcd.tls.enabled=true",
        "metadata.etcd.tls.secretName=etcd-client",
    ]));
    assert!(!objects.has(&format!("StatefulSet/{RELEASE}-etcd")));
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "metadata.etcd"),
        Some(&yaml(
            "{endpoints: ['https://etcd-a:2379', 'https://etcd-b:2379'], prefix: /karpor, \
             username: karpor, password: {file: /etc/karpor/secrets/etcd-password}, \
             tls: {ca_file: /etc/karpor/etcd-tls/ca.crt, cert_file: /etc/karpor/etcd-tls/tls.crt, \
             key_file: /etc/karpor/etcd-tls/tls.key}}"
        ))
    );
    let secret = objects.get(&format!("Secret/{RELEASE}"));
    assert_eq!(
        str_at(secret, "data.etcd-password"),
        "ZXRjZC1zZWNyZXQ=",
        "base64 of the value"
    );
}

#[test]
fn mysql_and_external_elasticsearch_render_and_validate() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(MYSQL_ELASTICSEARCH));
    assert_eq!(objects.of_kind("StatefulSet").count(), 0, "nothing bundled");
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "metadata"),
        Some(&yaml(
            "{backend: mysql, url: {file: /etc/karpor/secrets/mysql-url}, \
             encryption_key_file: /etc/karpor/secrets/encryption-key}"
        ))
    );
    assert_eq!(
        at(&server, "storage"),
        Some(&yaml(
            "{backend: elasticsearch, url: 'https://elasticsearch.example.internal:9200', \
             username: karpor, password: {file: /etc/karpor/secrets/elasticsearch-password}, \
             index: karpor-prod, refresh: wait_for}"
        ))
    );
    assert_eq!(
        at(&server, "server.tls"),
        Some(&yaml(
            "{cert_file: /etc/karpor/tls/tls.crt, key_file: /etc/karpor/tls/tls.key}"
        ))
    );
    let syncer: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(
        at(&syncer, "server.tls"),
        None,
        "the syncer pod has no certificate mounted"
    );
    // The URL from the operator's Secret, the rest from the chart's, as files.
    let server_pod = at(objects.deployment(RELEASE), "spec.template.spec").unwrap();
    let sources = at(server_pod, "volumes")
        .and_then(Value::as_sequence)
        .unwrap()
        .iter()
        .find(|v| str_at(v, "name") == "secrets")
        .and_then(|v| at(v, "projected.sources"))
        .unwrap();
    assert_eq!(
        sources,
        &yaml(&format!(
            "[{{secret: {{name: {RELEASE}, items: [{{key: encryption-key, path: encryption-key}}]}}}},\
              {{secret: {{name: karpor-mysql, items: [{{key: url, path: mysql-url}}]}}}},\
              {{secret: {{name: {RELEASE}, items: [{{key: elasticsearch-password, path: elasticsearch-password}}]}}}},\
              {{secret: {{name: {RELEASE}-token, items: [{{key: token, path: auth-token-0}}]}}}}]"
        ))
    );
    let secret = objects.get(&format!("Secret/{RELEASE}"));
    let keys: Vec<&str> = at(secret, "data")
        .and_then(Value::as_mapping)
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(keys, ["encryption-key", "elasticsearch-password"]);
}

#[test]
fn sqlite_and_sqlite_render_one_server_on_a_claim() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(SQLITE_SQLITE));
    assert_eq!(objects.of_kind("StatefulSet").count(), 0);
    assert!(!objects.has(&format!("Deployment/{RELEASE}-syncer")));
    assert_eq!(objects.config("syncer"), None);
    let server = objects.deployment(RELEASE);
    assert_eq!(at(server, "spec.replicas"), Some(&yaml("1")));
    assert_eq!(str_at(server, "spec.strategy.type"), "Recreate");
    let claim = objects.get(&format!("PersistentVolumeClaim/{RELEASE}-data"));
    assert_eq!(str_at(claim, "spec.resources.requests.storage"), "20Gi");
    let config: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(at(&config, "server.syncer"), Some(&Value::Bool(true)));
    assert_eq!(
        at(&config, "metadata"),
        Some(&yaml(
            "{backend: sqlite, path: /var/lib/karpor/metadata.db}"
        ))
    );
    assert_eq!(
        at(&config, "storage"),
        Some(&yaml(
            "{backend: sqlite, path: /var/lib/karpor/resources.db}"
        ))
    );
    let mounts = at(container(server), "volumeMounts").unwrap();
    assert!(
        mounts
            .as_sequence()
            .unwrap()
            .contains(&yaml("{name: data, mountPath: /var/lib/karpor}")),
        "{mounts:?}"
    );
}

#[test]
fn invalid_combinations_fail_with_a_clear_message() {
    let Some(tools) = tools() else { return };
    let cases: &[(&[&str], &str)] = &[
        (
            &["metadata.backend=sqlite", "syncer.separate=false", "server.replicaCount=2"],
            "karpor: metadata.backend=sqlite keeps its data in a file on one PersistentVolumeClaim that only one pod can open: set server.replicaCount=1 (it is 2)",
        ),
        (
            &["storage.backend=sqlite"],
            "karpor: storage.backend=sqlite keeps its data in a file only the server pod can open, so a separate syncer pod cannot reach it: set syncer.separate=false",
        ),
        (
            &["syncer.separate=false", "server.replicaCount=3"],
            "karpor: syncer.separate=false runs a syncer inside every server replica; with server.replicaCount=3",
        ),
        (
            &["metadata.backend=mysql"],
            "karpor: metadata.backend=mysql needs the URL from a Secret",
        ),
        (
            &["metadata.etcd.bundled=false"],
            "karpor: metadata.backend=etcd with metadata.etcd.bundled=false needs metadata.etcd.endpoints",
        ),
        (
            &["syncer.separate=false", "syncer.replicas=2"],
            "karpor: syncer.replicas=2 counts pods of the separate syncer; syncer.separate=false runs the syncer inside the one server",
        ),
        (
            &["shutdown.terminationGracePeriodSeconds=5"],
            "karpor: shutdown.terminationGracePeriodSeconds=5 is below shutdown.preStopSleepSeconds + drainDelay + gracePeriod + 5 s = 13",
        ),
    ];
    for (values, message) in cases {
        let stderr = tools.refused(&sets(values));
        assert!(stderr.contains(message), "{values:?}:\n{stderr}");
    }
}

#[test]
fn wrong_values_fail_the_schema() {
    let Some(tools) = tools() else { return };
    let cases: &[(&str, &str)] = &[
        ("metadata.backend=postgres", "/metadata/backend"),
        ("storage.backend=opensearch", "/storage/backend"),
        ("metadata.etcd.replicas=2", "/metadata/etcd/replicas"),
        ("server.replicaCount=0", "/server/replicaCount"),
        ("syncer.replicas=0", "/syncer/replicas"),
        ("shutdown.drainDelay=five", "/shutdown/drainDelay"),
        ("health.checkTimeout=1", "/health/checkTimeout"),
        ("readiness.upstreams[0].name=x", "/readiness/upstreams/0"),
        ("server.bogus=1", "bogus"),
        // karpor refuses an anonymous admin; in a cluster `auto` means `none`.
        ("auth.anonymous=admin", "/auth/anonymous"),
        ("auth.anonymous=auto", "/auth/anonymous"),
        ("auth.tokens[0].role=root", "/auth/tokens/0"),
        ("auth.podLogs=everyone", "/auth/podLogs"),
        ("auth.policies[0].role=owner", "/auth/policies/0"),
        (
            "auth.policies[0].scope.secrets=maybe",
            "/auth/policies/0/scope/secrets",
        ),
        (
            "auth.tokenReview.cacheFor=soon",
            "/auth/tokenReview/cacheFor",
        ),
        (
            "auth.tokenReview.concurrency=0",
            "/auth/tokenReview/concurrency",
        ),
        // Asymmetric only: a shared secret would let anyone holding it mint tokens.
        ("auth.oidc.algorithms={HS256}", "/auth/oidc/algorithms/0"),
        ("auth.oidc.ca.bogus=1", "bogus"),
        ("auth.policiesConfigMap.key=", "/auth/policiesConfigMap/key"),
        (
            "auth.policiesConfigMap.name=Team_Policies",
            "/auth/policiesConfigMap/name",
        ),
        // One level, not a filter (RUST_LOG takes a filter).
        ("log.level=karpor=debug", "/log/level"),
        ("kubernetes.exec.timeout=soon", "/kubernetes/exec/timeout"),
        ("server.connections.max=0", "/server/connections/max"),
        ("ingress.hosts[0].paths[0].path=api", "/ingress/hosts/0"),
        ("serviceMonitor.interval=often", "/serviceMonitor/interval"),
        (
            "podDisruptionBudget.maxUnavailable=half",
            "/podDisruptionBudget/maxUnavailable",
        ),
        (
            "networkPolicy.egress.clusters.cidrs={10.0.0.1}",
            "/networkPolicy/egress/clusters/cidrs/0",
        ),
        ("networkPolicy.bogus=1", "bogus"),
        (
            "networkPolicy.egress.ai.cidrs={10.0.0.1}",
            "/networkPolicy/egress/ai/cidrs/0",
        ),
        ("ai.keyHeader=basic", "/ai/keyHeader"),
        ("ai.baseUrl=api.openai.com/v1", "/ai/baseUrl"),
        ("ai.temperature=3", "/ai/temperature"),
        // `--set` keeps a fraction as text: taken when it is a number from 0 to 2.
        ("ai.temperature=2.5", "/ai/temperature"),
        ("ai.maxTokens=40000", "/ai/maxTokens"),
        ("ai.perCaller=0", "/ai/perCaller"),
        ("ai.maxInputBytes=10", "/ai/maxInputBytes"),
        ("ai.timeout=soon", "/ai/timeout"),
        ("ai.apiKey.bogus=1", "bogus"),
        ("ai.bogus=1", "bogus"),
        ("syncer.history.keep=soon", "/syncer/history/keep"),
        (
            "syncer.history.maxPerCluster=0",
            "/syncer/history/maxPerCluster",
        ),
        (
            "syncer.history.maxBytesPerCluster=1000",
            "/syncer/history/maxBytesPerCluster",
        ),
        ("syncer.history.bogus=1", "bogus"),
        (
            "server.extraVolumeMounts[0].name=x",
            "/server/extraVolumeMounts/0",
        ),
    ];
    for (value, path) in cases {
        let lint = tools.lint(&sets(&[value]));
        assert!(!lint.status.success(), "helm lint accepted {value}");
        let stderr = tools.refused(&sets(&[value]));
        assert!(stderr.contains(path), "{value}:\n{stderr}");
    }
}

/// The probes of `shared/health-spec.md`: path, port, and each timing field.
fn assert_probe(probe: &Value, path: &str, success_threshold: u64, scheme: &str, what: &str) {
    let expect = |field: &str, value: u64| {
        assert_eq!(
            at(probe, field).and_then(Value::as_u64),
            Some(value),
            "{what}.{field}"
        );
    };
    assert_eq!(str_at(probe, "httpGet.path"), path, "{what}.httpGet.path");
    assert_eq!(str_at(probe, "httpGet.port"), "http", "{what}.httpGet.port");
    assert_eq!(
        str_at(probe, "httpGet.scheme"),
        scheme,
        "{what}.httpGet.scheme"
    );
    expect("initialDelaySeconds", 10);
    expect("periodSeconds", 5);
    expect("timeoutSeconds", 10);
    expect("failureThreshold", 3);
    expect("successThreshold", success_threshold);
    let fields: Vec<&str> = probe
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "httpGet",
            "initialDelaySeconds",
            "periodSeconds",
            "timeoutSeconds",
            "failureThreshold",
            "successThreshold"
        ],
        "{what}: no other field"
    );
}

/// The port of `host:port`.
fn port_of(listen: &str) -> u64 {
    listen.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn every_karpor_deployment_has_the_spec_probes_on_the_port_karpor_listens_on() {
    let Some(tools) = tools() else { return };
    let mut seen = 0;
    for (values, tls) in [
        (values_file(ETCD_ELASTICSEARCH), false),
        (values_file(MYSQL_ELASTICSEARCH), true),
        (values_file(SQLITE_SQLITE), false),
    ] {
        let objects = Objects::parse(&tools.render(&values));
        for (key, deployment) in objects.of_kind("Deployment") {
            let c = container(deployment);
            let is_syncer = key.ends_with("-syncer");
            let scheme = if tls && !is_syncer { "HTTPS" } else { "HTTP" };
            assert_probe(
                at(c, "livenessProbe").expect("livenessProbe"),
                "/livez",
                1,
                scheme,
                &format!("{key} livenessProbe"),
            );
            assert_probe(
                at(c, "readinessProbe").expect("readinessProbe"),
                "/readyz",
                2,
                scheme,
                &format!("{key} readinessProbe"),
            );
            // The port named http is the one karpor's config makes it listen on.
            let ports = at(c, "ports").and_then(Value::as_sequence).unwrap();
            let http: Vec<&Value> = ports
                .iter()
                .filter(|p| str_at(p, "name") == "http")
                .collect();
            assert_eq!(http.len(), 1, "{key}: one port named http");
            let config: Value = yaml(
                &objects
                    .config(if is_syncer { "syncer" } else { "server" })
                    .unwrap(),
            );
            let listen = if is_syncer {
                str_at(&config, "syncer.probe_listen")
            } else {
                str_at(&config, "server.listen")
            };
            assert_eq!(
                at(http[0], "containerPort").and_then(Value::as_u64),
                Some(port_of(listen)),
                "{key}: probe port vs {listen}"
            );
            assert!(
                listen.starts_with("0.0.0.0:"),
                "{key}: kubelet reaches {listen}"
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 5, "server + syncer, server + syncer, server");
}

#[test]
fn karpor_pods_are_hardened_and_stop_within_their_grace_period() {
    let Some(tools) = tools() else { return };
    for values in [
        values_file(ETCD_ELASTICSEARCH),
        values_file(MYSQL_ELASTICSEARCH),
        values_file(SQLITE_SQLITE),
    ] {
        let objects = Objects::parse(&tools.render(&values));
        let account = objects.get(&format!("ServiceAccount/{RELEASE}"));
        assert_eq!(
            at(account, "automountServiceAccountToken"),
            Some(&Value::Bool(false))
        );
        for (key, deployment) in objects.of_kind("Deployment") {
            let pod = at(deployment, "spec.template.spec").unwrap();
            assert_eq!(str_at(pod, "serviceAccountName"), RELEASE, "{key}");
            assert_eq!(
                at(pod, "automountServiceAccountToken"),
                Some(&Value::Bool(false)),
                "{key}"
            );
            assert_eq!(
                at(pod, "securityContext.runAsNonRoot"),
                Some(&Value::Bool(true))
            );
            let c = container(deployment);
            assert_eq!(
                at(c, "securityContext"),
                Some(&yaml(
                    "{runAsNonRoot: true, allowPrivilegeEscalation: false, \
                     readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}"
                )),
                "{key}"
            );
            for field in [
                "resources.requests.cpu",
                "resources.requests.memory",
                "resources.limits.cpu",
                "resources.limits.memory",
            ] {
                assert!(at(c, field).is_some(), "{key}: {field}");
            }
            // preStop sleep, then karpor's drain delay and grace period, then 5 s to
            // close the stores: the kubelet's SIGKILL must come after all of them.
            let config: Value = yaml(&objects.config("server").unwrap());
            let seconds = |d: &str| -> u64 {
                if let Some(ms) = d.strip_suffix("ms") {
                    ms.parse::<u64>().unwrap().div_ceil(1000)
                } else {
                    d.strip_suffix('s').unwrap().parse().unwrap()
                }
            };
            let sleep = at(c, "lifecycle.preStop.sleep.seconds")
                .and_then(Value::as_u64)
                .expect("a preStop sleep");
            let needed = sleep
                + seconds(str_at(&config, "shutdown.drain_delay"))
                + seconds(str_at(&config, "shutdown.grace_period"))
                + 5;
            assert_eq!(
                at(pod, "terminationGracePeriodSeconds").and_then(Value::as_u64),
                Some(needed),
                "{key}"
            );
        }
    }
}

/// Runs `karpor ROLE --config FILE` until it has loaded its config: Ok, or the binary's
/// config error. `dir` is the config's working directory.
fn config_verdict(role: &str, config: &str, dir: &Path) -> Result<(), String> {
    let file = dir.join(format!("{role}.yaml"));
    std::fs::write(&file, config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpor"))
        .arg(role)
        .arg("--config")
        .arg(&file)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("KARPOR_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("karpor starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let verdict = loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => {
                let loaded = line.contains("config loaded");
                lines.push(line);
                if loaded {
                    break Ok(());
                }
            }
            // stderr closed: the process ended before loading its config.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().unwrap();
                break Err(format!("exit {status}: {}", lines.join("\n")));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                break Err(format!("no `config loaded` in 30 s: {}", lines.join("\n")));
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    verdict
}

/// Where the server's pods mount `auth.policiesConfigMap`'s key.
const POLICIES_FILE: &str = "/etc/karpor/policies/policies.yaml";
/// A ConfigMap's policies, as an operator writes them (either spelling of cluster labels).
const MOUNTED_POLICIES: &str = "\
- name: team-c
  subjects: {groups: [team-c]}
  role: viewer
  scope: {cluster_labels: \"team=c\", namespaces: [shop]}
- name: auditors
  subjects: {users: [audit@example.com]}
  role: viewer
  scope: {clusterLabels: \"env=prod\", secrets: true}
";

/// The rendered config with the pod's mount points moved under `root`, where the
/// secret files, certificate and data directory the pod would have are created.
fn relocate(config: &str, root: &Path) -> String {
    let secrets = root.join("etc/karpor/secrets");
    let tls = root.join("etc/karpor/tls");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::create_dir_all(&tls).unwrap();
    std::fs::create_dir_all(root.join("var/lib/karpor")).unwrap();
    for (name, value) in [
        // 32 bytes, base64.
        (
            "encryption-key",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n",
        ),
        ("mysql-url", "mysql://karpor:secret@127.0.0.1:9/karpor\n"),
        ("etcd-password", "etcd-secret\n"),
        ("elasticsearch-password", "es-secret\n"),
        ("admin-token", "admin-token\n"),
    ] {
        std::fs::write(secrets.join(name), value).unwrap();
    }
    // Every other secret file the config names (API tokens): a value of its own each,
    // since karpor refuses two tokens alike.
    for name in config.split("/etc/karpor/secrets/").skip(1) {
        let name: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let path = secrets.join(&name);
        if !path.exists() {
            std::fs::write(path, format!("{name}-value\n")).unwrap();
        }
    }
    for name in ["tls.crt", "tls.key"] {
        std::fs::write(tls.join(name), "not read before the listener starts\n").unwrap();
    }
    // auth.policiesConfigMap's file, read at start: as the kubelet mounts it, read-only
    // (karpor refuses a group- or world-writable one).
    if config.contains(POLICIES_FILE) {
        use std::os::unix::fs::PermissionsExt;
        let file = root.join(POLICIES_FILE.trim_start_matches('/'));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, MOUNTED_POLICIES).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    let root = root.display().to_string();
    config
        .replace("/etc/karpor/", &format!("{root}/etc/karpor/"))
        .replace("/var/lib/karpor/", &format!("{root}/var/lib/karpor/"))
}

#[test]
fn the_real_binary_accepts_every_rendered_config() {
    let Some(tools) = tools() else { return };
    // The check itself can fail: an unknown key is refused with the binary's message.
    let scratch = tempfile::tempdir().unwrap();
    let refused = config_verdict("serve", "server: {bogus: 1}\n", scratch.path()).unwrap_err();
    assert!(refused.contains("unknown key"), "{refused}");

    let mut checked = 0;
    for values in [
        Vec::new(),
        values_file(ETCD_ELASTICSEARCH),
        values_file(MYSQL_ELASTICSEARCH),
        values_file(SQLITE_SQLITE),
        values_file(EXPOSED),
        // Agent mode's listener on replicas sharing etcd.
        [
            values_file(ETCD_ELASTICSEARCH),
            sets(&["agents.enabled=true", "agents.approveJoins=true"]),
        ]
        .concat(),
        sets(&[
            "metadata.etcd.bundled=false",
            "metadata.etcd.endpoints={https://etcd-a:2379}",
            "metadata.etcd.password.value=x",
            "health.adminToken.value=y",
            "readiness.upstreams[0].name=Other",
            "readiness.upstreams[0].url=http://other:7443/readyz",
            "readiness.upstreams[0].must_ready=false",
            "health.checks.Other.must_ready=false",
        ]),
        // Policies over a token without a role and from a ConfigMap, TokenReview, OIDC,
        // viewer reads.
        [
            sets(&[
                "auth.oidc.issuer=https://sso.example.com/realms/ops",
                "auth.oidc.audiences={karpor}",
                "auth.oidc.usernameClaim=email",
                "auth.anonymous=viewer",
                "auth.podLogs=viewer",
                "auth.tokens[0].name=ci",
                "auth.tokens[0].value=ci-token",
                "auth.tokenReview.cluster=hub",
                "auth.tokenReview.cacheFor=1m",
                // The file is made by `relocate`, as the ConfigMap's volume would be.
                "auth.policiesConfigMap.name=team-policies",
            ]),
            set_json(&[
                r#"auth.policies=[{"name":"ci","subjects":{"tokens":["ci"],"groups":["team-a"]},"role":"editor","scope":{"clusterLabels":"team=a","namespaces":["web"],"secrets":true}}]"#,
            ]),
        ]
        .concat(),
        // AI on, every setting given, its key as a file; a temperature with a fraction
        // (text from `--set`, a number in the file).
        [sets(AI_ON), sets(&["ai.temperature=0.7"])].concat(),
        // History's defaults, every key given.
        sets(HISTORY_SET),
    ] {
        let objects = Objects::parse(&tools.render(&values));
        for (role, command) in [("server", "serve"), ("syncer", "syncer")] {
            let Some(config) = objects.config(role) else {
                continue;
            };
            let root = tempfile::tempdir().unwrap();
            let relocated = relocate(&config, root.path());
            if let Err(e) = config_verdict(command, &relocated, root.path()) {
                panic!("karpor {command} refused the {role} config of {values:?}: {e}\n{config}");
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked, 19,
        "9 split deployments (server + syncer) and sqlite"
    );
}

/// `syncer.history`, every key given.
const HISTORY_SET: &[&str] = &[
    "syncer.history.enabled=false",
    "syncer.history.keep=30d",
    "syncer.history.maxPerCluster=2000000",
    "syncer.history.maxBytesPerCluster=5368709120",
    "syncer.history.expireEvery=10m",
];

#[test]
fn history_settings_reach_both_configs_in_karpors_spelling_and_only_when_set() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&sets(HISTORY_SET));
    for role in ["server", "syncer"] {
        let config: Value = yaml(&objects.config(role).unwrap());
        assert_eq!(
            at(&config, "syncer.history"),
            Some(&yaml(
                "{enabled: false, keep: 30d, max_per_cluster: 2000000, \
                 max_bytes_per_cluster: 5368709120, expire_every: 10m}"
            )),
            "{role}"
        );
    }
    // One key: that key alone; none: no section, karpor's defaults.
    let objects = tools.check(&sets(&["syncer.history.keep=1h"]));
    let syncer: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(at(&syncer, "syncer.history"), Some(&yaml("{keep: 1h}")));
    let objects = tools.check(&[]);
    let syncer: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(at(&syncer, "syncer.history"), None);
}

#[test]
fn the_default_install_makes_an_admin_token_and_answers_no_anonymous_request() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&[]);
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "auth"),
        Some(&yaml(
            "{anonymous: none, tokens: [{name: admin, role: admin, \
             token: {file: /etc/karpor/secrets/auth-token-0}}]}"
        ))
    );
    let token_secret = format!("{RELEASE}-token");
    let token = objects.secret(&token_secret, "token");
    assert_eq!(token.len(), 48, "{}", text(&token));
    assert!(token.iter().all(u8::is_ascii_alphanumeric));
    let server_pod = objects.deployment(RELEASE);
    assert!(
        secret_files(server_pod).contains(&file(&token_secret, "token", "auth-token-0")),
        "{:?}",
        secret_files(server_pod)
    );
    // The syncer answers no API: no token mounted, karpor's auth defaults untouched.
    let syncer_pod = objects.deployment(&format!("{RELEASE}-syncer"));
    assert!(
        secret_files(syncer_pod)
            .iter()
            .all(|(secret, _, _)| *secret != token_secret),
        "{:?}",
        secret_files(syncer_pod)
    );
    let syncer: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(at(&syncer, "auth"), None);
    // Random, not a constant: without a live Secret to look up, each render makes one.
    let again = Objects::parse(&tools.render(&[])).secret(&token_secret, "token");
    assert_ne!(token, again, "two renders, two tokens");
    // Made once per render: both pods hash the same generated Secrets.
    let checksum = |d: &Value| {
        entry(
            d,
            "spec.template.metadata.annotations",
            "checksum/secret-generated",
        )
        .map(str::to_owned)
    };
    assert!(checksum(server_pod).is_some());
    assert_eq!(checksum(server_pod), checksum(syncer_pod));
}

#[test]
fn given_api_tokens_reach_karpor_as_files_and_never_the_config_map() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(EXPOSED));
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "auth"),
        Some(&yaml(
            "{anonymous: guest, tokens: [\
             {name: ops, role: admin, token: {file: /etc/karpor/secrets/auth-token-0}}, \
             {name: dashboards, role: guest, token: {file: /etc/karpor/secrets/auth-token-1}}]}"
        ))
    );
    let config_map =
        serde_yaml::to_string(objects.get(&format!("ConfigMap/{RELEASE}-config"))).unwrap();
    assert!(
        !config_map.contains("dashboards-token"),
        "a token value in the ConfigMap"
    );
    assert_eq!(
        objects.secret(RELEASE, "auth-token-1"),
        b"dashboards-token-0123456789"
    );
    assert!(
        !objects.has(&format!("Secret/{RELEASE}-token")),
        "no generated token beside the operator's"
    );
    let files = secret_files(objects.deployment(RELEASE));
    for expected in [
        file("karpor-tokens", "ops", "auth-token-0"),
        file(RELEASE, "auth-token-1", "auth-token-1"),
    ] {
        assert!(files.contains(&expected), "{expected:?} in {files:?}");
    }
}

/// Values written to a file of `dir`, as `-f FILE` (for values too nested for `--set`).
fn values_text(dir: &Path, text: &str) -> Vec<String> {
    let file = dir.join("values.yaml");
    std::fs::write(&file, text).unwrap();
    vec!["-f".into(), file.display().to_string()]
}

/// The file a pod's volume `name` puts at its mount: the mount path and the volume's
/// one item; `None` when the pod has no such volume or its container no such mount.
fn mounted_file(deployment: &Value, name: &str) -> Option<(Value, String)> {
    let volume = at(deployment, "spec.template.spec.volumes")
        .and_then(Value::as_sequence)
        .expect("volumes")
        .iter()
        .find(|v| str_at(v, "name") == name)?;
    let mount = at(container(deployment), "volumeMounts")
        .and_then(Value::as_sequence)
        .expect("volume mounts")
        .iter()
        .find(|m| str_at(m, "name") == name)?;
    assert_eq!(at(mount, "readOnly").and_then(Value::as_bool), Some(true));
    let source = volume
        .get("configMap")
        .or_else(|| volume.get("secret"))
        .expect("a ConfigMap or Secret volume");
    let items = at(source, "items").and_then(Value::as_sequence).unwrap();
    assert_eq!(items.len(), 1, "{volume:?}");
    let file = format!(
        "{}/{}",
        str_at(mount, "mountPath"),
        str_at(&items[0], "path")
    );
    Some((volume.clone(), file))
}

const ISSUER_CA: &str =
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUKarpor\n-----END CERTIFICATE-----\n";

/// Policies, OIDC with a CA given as a value, TokenReview: every access setting at once.
fn access_values() -> String {
    let ca = ISSUER_CA.replace('\n', "\n        ");
    format!(
        r#"
auth:
  anonymous: viewer
  podLogs: editor
  tokens:
    - {{name: ops, role: admin, value: ops-token-0123456789}}
    - {{name: ci, value: ci-token-0123456789}}
  policies:
    - name: platform
      subjects: {{groups: [platform]}}
      role: admin
    - name: team-a
      subjects: {{users: [alice@example.com], groups: [team-a], tokens: [ci], anonymous: false}}
      role: viewer
      scope:
        clusters: [prod-eu, prod-us]
        clusterLabels: "team=a,env=prod"
        namespaces: [web, api]
        kinds: [Deployment, Pod]
        secrets: false
  tokenReview:
    cluster: hub
    audiences: []
    cacheFor: 30s
    concurrency: 16
  oidc:
    issuer: https://dex.example.com:5556/dex
    audiences: [karpor]
    usernameClaim: sub
    usernamePrefix: ""
    groupsClaim: groups
    groupsPrefix: ""
    algorithms: [RS256, ES256]
    clockSkew: 30s
    keysRefresh: 1h
    ca:
      value: |
        {ca}
networkPolicy:
  enabled: true
"#
    )
}

#[test]
fn policies_oidc_and_token_review_reach_the_server_config_only() {
    let Some(tools) = tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let objects = tools.check(&values_text(dir.path(), &access_values()));
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "auth"),
        Some(&yaml(
            r#"
anonymous: viewer
pod_logs: editor
tokens:
  - {name: ops, role: admin, token: {file: /etc/karpor/secrets/auth-token-0}}
  - {name: ci, token: {file: /etc/karpor/secrets/auth-token-1}}
policies:
  - name: platform
    subjects: {groups: [platform]}
    role: admin
  - name: team-a
    subjects: {users: [alice@example.com], groups: [team-a], tokens: [ci], anonymous: false}
    role: viewer
    scope:
      clusters: [prod-eu, prod-us]
      cluster_labels: "team=a,env=prod"
      namespaces: [web, api]
      kinds: [Deployment, Pod]
      secrets: false
token_review:
  cluster: hub
  cache_for: 30s
  concurrency: 16
oidc:
  issuer: https://dex.example.com:5556/dex
  audiences: [karpor]
  username_claim: sub
  username_prefix: ""
  groups_claim: groups
  groups_prefix: ""
  ca_file: /etc/karpor/oidc/ca.crt
  algorithms: [RS256, ES256]
  clock_skew: 30s
  keys_refresh: 1h
"#
        ))
    );
    // The CA: in a ConfigMap of the chart, mounted in the server's pods where ca_file
    // says.
    let ca_map = objects.get(&format!("ConfigMap/{RELEASE}-oidc-ca"));
    assert_eq!(entry(ca_map, "data", "ca.crt"), Some(ISSUER_CA));
    let (volume, file) = mounted_file(objects.deployment(RELEASE), "oidc-ca").expect("CA");
    assert_eq!(file, str_at(&server, "auth.oidc.ca_file"));
    assert_eq!(
        at(&volume, "configMap.name").and_then(Value::as_str),
        Some(format!("{RELEASE}-oidc-ca").as_str())
    );
    assert_eq!(
        at(&volume, "configMap.items"),
        Some(&yaml("[{key: ca.crt, path: ca.crt}]"))
    );
    // The syncer answers no API: none of it in its file or its pods.
    let syncer_pod = objects.deployment(&format!("{RELEASE}-syncer"));
    assert_eq!(mounted_file(syncer_pod, "oidc-ca"), None);
    let syncer_config = objects.config("syncer").unwrap();
    assert_eq!(at(&yaml(&syncer_config), "auth"), None);
    for word in [
        "oidc",
        "policies",
        "token_review",
        "dex.example.com",
        "team-a",
    ] {
        assert!(!syncer_config.contains(word), "{word} in:\n{syncer_config}");
    }
    // The server reaches the issuer on its URL's port; the syncer has no such rule.
    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    assert_eq!(
        at(one_egress_to(policy, 5556), "to"),
        Some(&yaml("[{ipBlock: {cidr: 0.0.0.0/0}}]"))
    );
    let syncer_policy = objects.get(&format!("NetworkPolicy/{RELEASE}-syncer"));
    assert!(egress_to(syncer_policy, 5556, "TCP").is_empty());
    // NOTES name the ways in.
    let notes = tools.notes(&values_text(dir.path(), &access_values()));
    assert!(
        notes.contains("OIDC ID tokens from https://dex.example.com:5556/dex"),
        "{notes}"
    );
}

#[test]
fn the_oidc_ca_comes_from_a_secret_or_config_map_of_yours_and_unset_values_stay_out() {
    let Some(tools) = tools() else { return };
    let oidc = [
        "auth.oidc.issuer=https://sso.example.com/realms/ops",
        "auth.oidc.audiences={karpor}",
    ];
    for (source, kind, name_key) in [
        ("existingSecret", "secret", "secretName"),
        ("existingConfigMap", "configMap", "name"),
    ] {
        let ca = [
            format!("auth.oidc.ca.{source}=sso-ca"),
            "auth.oidc.ca.key=root.pem".to_owned(),
        ];
        let values: Vec<&str> = oidc
            .iter()
            .copied()
            .chain(ca.iter().map(String::as_str))
            .collect();
        let objects = tools.check(&sets(&values));
        let server: Value = yaml(&objects.config("server").unwrap());
        // Only what was set: karpor's defaults apply to the rest.
        assert_eq!(
            at(&server, "auth.oidc"),
            Some(&yaml(
                "{issuer: https://sso.example.com/realms/ops, audiences: [karpor], \
                 ca_file: /etc/karpor/oidc/ca.crt}"
            )),
            "{source}"
        );
        assert_eq!(at(&server, "auth.token_review"), None);
        assert_eq!(at(&server, "auth.policies"), None);
        assert_eq!(at(&server, "auth.pod_logs"), None);
        let (volume, file) = mounted_file(objects.deployment(RELEASE), "oidc-ca").expect(source);
        assert_eq!(file, "/etc/karpor/oidc/ca.crt");
        assert_eq!(
            at(&volume, &format!("{kind}.{name_key}")).and_then(Value::as_str),
            Some("sso-ca"),
            "{source}"
        );
        assert_eq!(
            at(&volume, &format!("{kind}.items")),
            Some(&yaml("[{key: root.pem, path: ca.crt}]"))
        );
        assert!(!objects.has(&format!("ConfigMap/{RELEASE}-oidc-ca")));
        let syncer = objects.deployment(&format!("{RELEASE}-syncer"));
        assert_eq!(mounted_file(syncer, "oidc-ca"), None);
    }
    // A public issuer: no CA, no ca_file, no volume; its egress on 443 beside the
    // clusters'.
    let objects = tools.check(&[sets(&oidc), sets(&["networkPolicy.enabled=true"])].concat());
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(at(&server, "auth.oidc.ca_file"), None);
    assert_eq!(mounted_file(objects.deployment(RELEASE), "oidc-ca"), None);
    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    assert_eq!(
        egress_to(policy, 443, "TCP").len(),
        2,
        "clusters and issuer"
    );
    // Off by default: no oidc, token_review or policies in the config, no rule.
    let plain = tools.check(&sets(&["networkPolicy.enabled=true"]));
    let server: Value = yaml(&plain.config("server").unwrap());
    assert_eq!(
        at(&server, "auth")
            .and_then(Value::as_mapping)
            .map(|m| m.keys().filter_map(Value::as_str).collect::<BTreeSet<_>>()),
        Some(BTreeSet::from(["anonymous", "tokens"]))
    );
    let policy = plain.get(&format!("NetworkPolicy/{RELEASE}"));
    assert_eq!(egress_to(policy, 443, "TCP").len(), 1, "the clusters' only");
}

/// A volume's `defaultMode` as the kubelet reads it: `0444` is octal in Kubernetes' YAML
/// 1.1 (serde_yaml, YAML 1.2, keeps a leading-zero number as a string).
fn default_mode(source: &Value) -> Option<u32> {
    match source.get("defaultMode")? {
        Value::String(octal) => u32::from_str_radix(octal, 8).ok(),
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        _ => None,
    }
}

#[test]
fn policies_from_a_config_map_reach_the_server_only_as_a_read_only_file() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&sets(&[
        "auth.policiesConfigMap.name=team-policies",
        "auth.policiesConfigMap.key=access.yaml",
    ]));
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "auth.policies_file").and_then(Value::as_str),
        Some(POLICIES_FILE)
    );
    // Only the file: no inline policies appear from it.
    assert_eq!(at(&server, "auth.policies"), None);
    // Mounted read-only from the operator's ConfigMap, its key as the file the config
    // names; the chart makes no ConfigMap of its own for it.
    let (volume, file) =
        mounted_file(objects.deployment(RELEASE), "policies").expect("policies volume");
    assert_eq!(file, POLICIES_FILE);
    assert_eq!(
        at(&volume, "configMap.name").and_then(Value::as_str),
        Some("team-policies")
    );
    assert_eq!(
        at(&volume, "configMap.items"),
        Some(&yaml("[{key: access.yaml, path: policies.yaml}]"))
    );
    // karpor refuses a policies file its group or the world could write.
    let mode = default_mode(at(&volume, "configMap").unwrap());
    assert_eq!(mode, Some(0o444), "{volume:?}");
    assert!(!objects.has("ConfigMap/team-policies"));
    // The syncer answers no API: no volume, no key in its file.
    let syncer_pod = objects.deployment(&format!("{RELEASE}-syncer"));
    assert_eq!(mounted_file(syncer_pod, "policies"), None);
    let syncer_config = objects.config("syncer").unwrap();
    assert_eq!(at(&yaml(&syncer_config), "auth"), None);
    for word in ["policies", "team-policies"] {
        assert!(!syncer_config.contains(word), "{word} in:\n{syncer_config}");
    }
    // The key defaults to policies.yaml; the file joins the values' policies, which
    // stay as they are.
    let objects = tools.check(
        &[
            sets(&["auth.policiesConfigMap.name=team-policies"]),
            set_json(&[
                r#"auth.policies=[{"name":"platform","subjects":{"groups":["platform"]},"role":"admin"}]"#,
            ]),
        ]
        .concat(),
    );
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "auth.policies_file").and_then(Value::as_str),
        Some(POLICIES_FILE)
    );
    assert_eq!(
        at(&server, "auth.policies"),
        Some(&yaml(
            "[{name: platform, subjects: {groups: [platform]}, role: admin}]"
        ))
    );
    let (volume, _) = mounted_file(objects.deployment(RELEASE), "policies").expect("volume");
    assert_eq!(
        at(&volume, "configMap.items"),
        Some(&yaml("[{key: policies.yaml, path: policies.yaml}]"))
    );
    // With the syncer inside the server (SQLite), the one pod mounts it.
    let objects = tools.check(
        &[
            values_file(SQLITE_SQLITE),
            sets(&["auth.policiesConfigMap.name=team-policies"]),
        ]
        .concat(),
    );
    let (_, file) = mounted_file(objects.deployment(RELEASE), "policies").expect("volume");
    assert_eq!(file, POLICIES_FILE);
    // Unset (the default): neither the key nor the volume.
    let plain = tools.check(&[]);
    let server = plain.config("server").unwrap();
    assert_eq!(at(&yaml(&server), "auth.policies_file"), None);
    assert!(!server.contains("/etc/karpor/policies"), "{server}");
    for name in [RELEASE.to_owned(), format!("{RELEASE}-syncer")] {
        assert_eq!(
            mounted_file(plain.deployment(&name), "policies"),
            None,
            "{name}"
        );
    }
    // NOTES know an admin may sign in through such policies.
    let notes = tools.notes(
        &[
            set_json(&[
                r#"auth.tokens=[{"name":"ci","role":"viewer","value":"ci-token-0123456789"}]"#,
            ]),
            sets(&["auth.policiesConfigMap.name=team-policies"]),
        ]
        .concat(),
    );
    assert!(
        notes.contains("or sign in as a subject of an admin policy"),
        "{notes}"
    );
}

#[test]
fn access_settings_that_cannot_work_fail_with_a_clear_message() {
    let Some(tools) = tools() else { return };
    let cases: &[(&[&str], &[&str], &str)] = &[
        (
            &["auth.oidc.issuer=https://dex.example.com"],
            &[],
            "karpor: auth.oidc.issuer=https://dex.example.com needs auth.oidc.audiences: the client id(s) its ID tokens are issued for",
        ),
        (
            &["auth.oidc.issuer=http://dex.example.com", "auth.oidc.audiences={karpor}"],
            &[],
            "karpor: auth.oidc.issuer=http://dex.example.com must be an https:// URL",
        ),
        (
            &[
                "auth.oidc.issuer=https://dex.example.com",
                "auth.oidc.audiences={karpor}",
                "auth.oidc.ca.value=PEM",
                "auth.oidc.ca.existingSecret=dex-ca",
            ],
            &[],
            "karpor: auth.oidc.ca.value and auth.oidc.ca.existingSecret are given: the issuer's CA comes from one of them",
        ),
        (
            &["auth.tokenReview.cluster=hub", "auth.tokenReview.cacheFor=1h"],
            &[],
            "karpor: auth.tokenReview.cacheFor=1h is above 10m",
        ),
        (
            &[],
            &[r#"auth.policies=[{"name":"ops","subjects":{"groups":["ops"]},"role":"admin","scope":{"clusters":["prod"]}}]"#],
            "karpor: auth.policies[0] (ops) gives admin with a scope, but an admin's changes are global",
        ),
        (
            &[],
            &[r#"auth.policies=[{"name":"ci","subjects":{"tokens":["ci"]},"role":"viewer"}]"#],
            "karpor: auth.policies[0] (ci) names the token ci, which is no entry of auth.tokens (admin)",
        ),
        (
            &[],
            &[r#"auth.policies=[{"name":"a","subjects":{"groups":["a"]},"role":"viewer"},{"name":"a","subjects":{"groups":["b"]},"role":"viewer"}]"#],
            "karpor: auth.policies[1]: the name a is already another policy's",
        ),
        // The schema's: an empty list would grant nothing, and a policy names someone.
        (
            &[],
            &[r#"auth.policies=[{"name":"a","subjects":{"groups":["a"]},"role":"viewer","scope":{"namespaces":[]}}]"#],
            "/auth/policies/0/scope/namespaces",
        ),
        (
            &[],
            &[r#"auth.policies=[{"name":"a","subjects":{"anonymous":false},"role":"viewer"}]"#],
            "/auth/policies/0/subjects",
        ),
    ];
    for (set, json, message) in cases {
        let stderr = tools.refused(&[sets(set), set_json(json)].concat());
        assert!(stderr.contains(message), "{set:?} {json:?}:\n{stderr}");
    }
}

/// AI on: a model service on a port of its own, every setting given, the key as a value.
const AI_ON: &[&str] = &[
    "ai.baseUrl=http://llm.example.com:8000/v1",
    "ai.model=qwen2.5-7b-instruct",
    "ai.apiKey.value=sk-test-0123456789",
    "ai.keyHeader=api-key",
    "ai.connectTimeout=3s",
    "ai.firstTokenTimeout=90s",
    "ai.timeout=5m",
    "ai.maxTokens=512",
    // Zero is a setting, not an absent value.
    "ai.temperature=0",
    "ai.concurrency=4",
    "ai.perCaller=1",
    "ai.perCallerPerMinute=10",
    "ai.maxInputBytes=65536",
];

/// Whether a pod mounts the model service's key.
fn mounts_ai_key(deployment: &Value) -> bool {
    secret_files(deployment)
        .iter()
        .any(|(_, _, path)| path == "ai-api-key")
}

#[test]
fn the_model_service_reaches_the_server_config_only_with_its_key_as_a_file() {
    let Some(tools) = tools() else { return };
    let network = sets(&[
        "networkPolicy.enabled=true",
        "networkPolicy.egress.ai.ports={11434}",
    ]);
    let on = [sets(AI_ON), network.clone()].concat();
    let objects = tools.check(&on);
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "ai"),
        Some(&yaml(
            r#"
base_url: http://llm.example.com:8000/v1
model: qwen2.5-7b-instruct
api_key: {file: /etc/karpor/secrets/ai-api-key}
key_header: api-key
connect_timeout: 3s
first_token_timeout: 90s
timeout: 5m
max_tokens: 512
temperature: 0
concurrency: 4
per_caller: 1
per_caller_per_minute: 10
max_input_bytes: 65536
"#
        ))
    );
    // The key: in the chart's Secret, mounted in the server's pods as the file api_key
    // names; never in the ConfigMap.
    assert_eq!(objects.secret(RELEASE, "ai-api-key"), b"sk-test-0123456789");
    let files = secret_files(objects.deployment(RELEASE));
    assert!(
        files.contains(&file(RELEASE, "ai-api-key", "ai-api-key")),
        "{files:?}"
    );
    let config_map =
        serde_yaml::to_string(objects.get(&format!("ConfigMap/{RELEASE}-config"))).unwrap();
    assert!(
        !config_map.contains("sk-test"),
        "the key in the ConfigMap:\n{config_map}"
    );
    // The syncer asks no model: no section, no key.
    let syncer_pod = objects.deployment(&format!("{RELEASE}-syncer"));
    assert!(!mounts_ai_key(syncer_pod), "{:?}", secret_files(syncer_pod));
    let syncer_config = objects.config("syncer").unwrap();
    assert_eq!(at(&yaml(&syncer_config), "ai"), None);
    for word in ["llm.example.com", "qwen", "ai-api-key"] {
        assert!(!syncer_config.contains(word), "{word} in:\n{syncer_config}");
    }
    // The server reaches the service on its URL's port and the ports given; the syncer
    // has no such rule.
    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    assert_eq!(
        one_egress_to(policy, 8000),
        &yaml(
            "{to: [{ipBlock: {cidr: 0.0.0.0/0}}], \
             ports: [{port: 8000, protocol: TCP}, {port: 11434, protocol: TCP}]}"
        )
    );
    let syncer_policy = objects.get(&format!("NetworkPolicy/{RELEASE}-syncer"));
    assert!(egress_to(syncer_policy, 8000, "TCP").is_empty());
    assert!(egress_to(syncer_policy, 11434, "TCP").is_empty());
    let notes = tools.notes(&on);
    assert!(
        notes.contains(
            "  AI:       the model qwen2.5-7b-instruct at http://llm.example.com:8000/v1"
        ),
        "{notes}"
    );

    // Off without a base URL, whatever else is given: no section, no key stored or
    // mounted, no rule, nothing in the notes.
    let without_url: Vec<&str> = AI_ON
        .iter()
        .copied()
        .filter(|v| !v.starts_with("ai.baseUrl="))
        .collect();
    let off = [sets(&without_url), network].concat();
    let objects = tools.check(&off);
    for role in ["server", "syncer"] {
        let config = objects.config(role).unwrap();
        assert_eq!(at(&yaml(&config), "ai"), None, "{role}");
        assert!(!config.contains("ai-api-key"), "{role}:\n{config}");
    }
    assert!(!objects.has(&format!("Secret/{RELEASE}")), "a key stored");
    assert!(!mounts_ai_key(objects.deployment(RELEASE)));
    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    assert!(egress_to(policy, 8000, "TCP").is_empty());
    assert!(egress_to(policy, 11434, "TCP").is_empty());
    let notes = tools.notes(&off);
    assert!(!notes.contains("  AI:"), "{notes}");
    // The defaults: off.
    let plain = tools.check(&[]);
    assert_eq!(at(&yaml(&plain.config("server").unwrap()), "ai"), None);
}

#[test]
fn the_model_key_can_come_from_a_secret_of_yours_or_not_at_all() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&sets(&[
        "ai.baseUrl=https://api.openai.com/v1",
        "ai.model=gpt-4o-mini",
        "ai.apiKey.existingSecret=openai",
        "ai.apiKey.key=api-key",
        "networkPolicy.enabled=true",
        "networkPolicy.egress.ai.cidrs={203.0.113.0/24}",
    ]));
    // Only what was set: karpor's defaults apply to the rest.
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "ai"),
        Some(&yaml(
            "{base_url: https://api.openai.com/v1, model: gpt-4o-mini, \
             api_key: {file: /etc/karpor/secrets/ai-api-key}}"
        ))
    );
    let files = secret_files(objects.deployment(RELEASE));
    assert!(
        files.contains(&file("openai", "api-key", "ai-api-key")),
        "{files:?}"
    );
    assert!(
        !objects.has(&format!("Secret/{RELEASE}")),
        "the chart stores no copy of your key"
    );
    let syncer_pod = objects.deployment(&format!("{RELEASE}-syncer"));
    assert!(!mounts_ai_key(syncer_pod), "{:?}", secret_files(syncer_pod));
    // https without a port: 443, narrowed to the given block, beside the clusters' rule.
    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    let rules = egress_to(policy, 443, "TCP");
    assert_eq!(rules.len(), 2, "clusters and model service: {rules:?}");
    assert!(
        rules.contains(&&yaml(
            "{to: [{ipBlock: {cidr: 203.0.113.0/24}}], ports: [{port: 443, protocol: TCP}]}"
        )),
        "{rules:?}"
    );

    // No key (Ollama): no api_key, nothing mounted; http without a port: 80.
    let ollama = sets(&[
        "ai.baseUrl=http://ollama.ai.svc/v1",
        "ai.model=llama3.2",
        "networkPolicy.enabled=true",
    ]);
    let objects = tools.check(&ollama);
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "ai"),
        Some(&yaml(
            "{base_url: http://ollama.ai.svc/v1, model: llama3.2}"
        ))
    );
    assert!(!mounts_ai_key(objects.deployment(RELEASE)));
    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    assert_eq!(
        one_egress_to(policy, 80),
        &yaml("{to: [{ipBlock: {cidr: 0.0.0.0/0}}], ports: [{port: 80, protocol: TCP}]}")
    );
    // Empty cidrs: no rule of the chart's (the operator's own goes in egress.extra).
    let objects = tools.check(&[ollama, set_json(&["networkPolicy.egress.ai.cidrs=[]"])].concat());
    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    assert!(egress_to(policy, 80, "TCP").is_empty());
    // With the syncer inside the server (SQLite), the one pod has both.
    let objects = tools.check(
        &[
            values_file(SQLITE_SQLITE),
            sets(&[
                "ai.baseUrl=https://api.openai.com/v1",
                "ai.model=gpt-4o-mini",
                "ai.apiKey.value=sk-test-0123456789",
            ]),
        ]
        .concat(),
    );
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "ai.api_key"),
        Some(&yaml("{file: /etc/karpor/secrets/ai-api-key}"))
    );
    assert!(mounts_ai_key(objects.deployment(RELEASE)));
}

#[test]
fn ai_settings_that_cannot_work_fail_with_a_clear_message() {
    let Some(tools) = tools() else { return };
    let cases: &[(&[&str], &str)] = &[
        (
            &["ai.baseUrl=https://api.openai.com/v1"],
            "karpor: ai.baseUrl=https://api.openai.com/v1 needs ai.model: the model's name as the service knows it",
        ),
        (
            &["ai.baseUrl=https://api.openai.com/v1", "ai.model= "],
            "karpor: ai.baseUrl=https://api.openai.com/v1 needs ai.model",
        ),
        (
            &["ai.baseUrl=https://api.example.com/v1?api-version", "ai.model=m"],
            "karpor: ai.baseUrl=https://api.example.com/v1?api-version must have no query or fragment",
        ),
        (
            &["ai.baseUrl=https://api.example.com/v1", "ai.model=m", "ai.timeout=1h"],
            "karpor: ai.timeout=1h must be between 1ms and 30m",
        ),
        (
            &["ai.baseUrl=https://api.example.com/v1", "ai.model=m", "ai.connectTimeout=0s"],
            "karpor: ai.connectTimeout=0s must be between 1ms and 30m",
        ),
        // The schema's.
        (
            &["ai.baseUrl=https://api.example.com/v1", "ai.model=m", "ai.keyHeader=basic"],
            "/ai/keyHeader",
        ),
        (&["ai.baseUrl=ftp://models.example.com/v1"], "/ai/baseUrl"),
    ];
    for (values, message) in cases {
        let stderr = tools.refused(&sets(values));
        assert!(stderr.contains(message), "{values:?}:\n{stderr}");
    }
    // A credential in the URL is refused without being echoed.
    let stderr = tools.refused(&sets(&[
        "ai.baseUrl=https://user:sk-leak-0123@api.example.com/v1",
        "ai.model=m",
    ]));
    assert!(
        stderr.contains("karpor: ai.baseUrl must not hold credentials (user:password@): put the key in ai.apiKey"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-leak"), "{stderr}");
}

#[test]
fn etcd_and_mysql_get_a_generated_encryption_key_that_outlives_the_release() {
    use base64::Engine as _;
    let Some(tools) = tools() else { return };
    let key_secret = format!("{RELEASE}-encryption-key");
    let mount = file(&key_secret, "encryption-key", "encryption-key");
    let objects = tools.check(&[]);
    let secret = objects.get(&format!("Secret/{key_secret}"));
    assert_eq!(
        entry(secret, "metadata.annotations", "helm.sh/resource-policy"),
        Some("keep"),
        "an uninstall must not take the key of the data it leaves behind"
    );
    // The file is 32 random bytes in base64, which karpor reads as a key.
    let key = objects.secret(&key_secret, "encryption-key");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&key)
        .expect("a base64 key");
    assert_eq!(raw.len(), 32);
    for (role, deployment) in [
        ("server", RELEASE.to_owned()),
        ("syncer", format!("{RELEASE}-syncer")),
    ] {
        let config: Value = yaml(&objects.config(role).unwrap());
        assert_eq!(
            str_at(&config, "metadata.encryption_key_file"),
            "/etc/karpor/secrets/encryption-key",
            "{role}"
        );
        assert!(
            secret_files(objects.deployment(&deployment)).contains(&mount),
            "{deployment}"
        );
    }
    // MySQL too, when no key is given.
    let mysql = tools.check(
        &[
            values_file(MYSQL_ELASTICSEARCH),
            sets(&["metadata.encryptionKey.value="]),
        ]
        .concat(),
    );
    assert!(secret_files(mysql.deployment(RELEASE)).contains(&mount));
    // A given key (value or existingSecret) is used as it is.
    for values in [
        values_file(MYSQL_ELASTICSEARCH),
        values_file(ETCD_ELASTICSEARCH),
    ] {
        let objects = tools.check(&values);
        assert!(!objects.has(&format!("Secret/{key_secret}")), "{values:?}");
        let config: Value = yaml(&objects.config("server").unwrap());
        assert_eq!(
            str_at(&config, "metadata.encryption_key_file"),
            "/etc/karpor/secrets/encryption-key"
        );
    }
    // SQLite keeps the key karpor makes beside the database, as before.
    let sqlite = tools.check(&values_file(SQLITE_SQLITE));
    assert!(!sqlite.has(&format!("Secret/{key_secret}")));
    let config: Value = yaml(&sqlite.config("server").unwrap());
    assert_eq!(at(&config, "metadata.encryption_key_file"), None);
}

#[test]
fn an_ingress_routes_to_the_server_and_names_the_hosts_karpor_allows() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(EXPOSED));
    let ingress = objects.get(&format!("Ingress/{RELEASE}"));
    assert_eq!(str_at(ingress, "spec.ingressClassName"), "nginx");
    assert_eq!(
        at(ingress, "spec.tls"),
        Some(&yaml(
            "[{secretName: karpor-example-tls, hosts: [karpor.example.com]}]"
        ))
    );
    assert_eq!(str_at(ingress, "spec.rules.0.host"), "karpor.example.com");
    let path = at(ingress, "spec.rules.0.http.paths.0").unwrap();
    assert_eq!(str_at(path, "path"), "/");
    assert_eq!(str_at(path, "pathType"), "Prefix");
    // The backend is the server's Service, on a port it has.
    let service = objects.get(&format!("Service/{}", str_at(path, "backend.service.name")));
    assert_eq!(
        entry(service, "spec.selector", "app.kubernetes.io/component"),
        Some("server")
    );
    let port = str_at(path, "backend.service.port.name");
    assert!(
        at(service, "spec.ports")
            .and_then(Value::as_sequence)
            .unwrap()
            .iter()
            .any(|p| str_at(p, "name") == port),
        "{port}"
    );
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(
        at(&server, "server.allowed_hosts"),
        Some(&yaml(&format!(
            "[karpor.example.com, {RELEASE}, {RELEASE}.{NAMESPACE}, {RELEASE}.{NAMESPACE}.svc, \
             {RELEASE}.{NAMESPACE}.svc.cluster.local, localhost, 127.0.0.1, '[::1]']"
        )))
    );
    let syncer: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(at(&syncer, "server.allowed_hosts"), None);
    // Without an ingress: not set, so karpor on 0.0.0.0 answers any Host.
    let plain = tools.check(&[]);
    assert_eq!(plain.of_kind("Ingress").count(), 0);
    let config: Value = yaml(&plain.config("server").unwrap());
    assert_eq!(at(&config, "server.allowed_hosts"), None);
    // server.allowedHosts: exactly the operator's names.
    let own = tools.check(
        &[
            values_file(EXPOSED),
            sets(&["server.allowedHosts={karpor.internal}"]),
        ]
        .concat(),
    );
    let config: Value = yaml(&own.config("server").unwrap());
    assert_eq!(
        at(&config, "server.allowed_hosts"),
        Some(&yaml("[karpor.internal]"))
    );
}

/// The fields of a ServiceMonitor endpoint (monitoring.coreos.com/v1 `Endpoint`) the
/// chart writes. kubernetes-validate has no schema for this CRD: it warns and passes, so
/// `check` validates every other object and this test checks the ServiceMonitors' shape.
const SERVICE_MONITOR_ENDPOINT_FIELDS: &[&str] = &[
    "port",
    "path",
    "scheme",
    "interval",
    "scrapeTimeout",
    "tlsConfig",
];

#[test]
fn service_monitors_scrape_the_server_and_the_syncer() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&sets(&[
        "serviceMonitor.enabled=true",
        "serviceMonitor.labels.release=prometheus",
        "serviceMonitor.interval=1m",
        "serviceMonitor.scrapeTimeout=15s",
    ]));
    assert_eq!(objects.of_kind("ServiceMonitor").count(), 2);
    for name in [RELEASE.to_owned(), format!("{RELEASE}-syncer")] {
        let monitor = objects.get(&format!("ServiceMonitor/{name}"));
        assert_eq!(str_at(monitor, "apiVersion"), "monitoring.coreos.com/v1");
        assert_eq!(str_at(monitor, "metadata.labels.release"), "prometheus");
        assert_eq!(
            at(monitor, "spec.namespaceSelector"),
            Some(&yaml(&format!("{{matchNames: [{NAMESPACE}]}}")))
        );
        // It selects its Service, and no other.
        let selector = at(monitor, "spec.selector").unwrap();
        let selected: Vec<&String> = objects
            .of_kind("Service")
            .filter(|(_, s)| selects(selector, at(s, "metadata.labels").unwrap()))
            .map(|(k, _)| k)
            .collect();
        assert_eq!(selected, [&format!("Service/{name}")], "{name}");
        let service = objects.get(&format!("Service/{name}"));
        let endpoints = at(monitor, "spec.endpoints")
            .and_then(Value::as_sequence)
            .unwrap();
        assert_eq!(endpoints.len(), 1);
        let endpoint = &endpoints[0];
        for field in endpoint.as_mapping().unwrap().keys() {
            let field = field.as_str().unwrap();
            assert!(
                SERVICE_MONITOR_ENDPOINT_FIELDS.contains(&field),
                "{name}: endpoint field {field}"
            );
        }
        let port = str_at(endpoint, "port");
        assert!(
            at(service, "spec.ports")
                .and_then(Value::as_sequence)
                .unwrap()
                .iter()
                .any(|p| str_at(p, "name") == port),
            "{name}: port {port}"
        );
        assert_eq!(str_at(endpoint, "path"), "/metrics");
        assert_eq!(str_at(endpoint, "scheme"), "http");
        assert_eq!(str_at(endpoint, "interval"), "1m");
        assert_eq!(str_at(endpoint, "scrapeTimeout"), "15s");
    }
    // HTTPS on the server: its endpoint is https with the operator's tlsConfig; the
    // syncer's probe port stays http.
    let tls = tools.check(
        &[
            values_file(MYSQL_ELASTICSEARCH),
            sets(&["serviceMonitor.enabled=true"]),
            set_json(&[r#"serviceMonitor.tlsConfig={"serverName":"karpor"}"#]),
        ]
        .concat(),
    );
    let server = tls.get(&format!("ServiceMonitor/{RELEASE}"));
    assert_eq!(str_at(server, "spec.endpoints.0.scheme"), "https");
    assert_eq!(
        at(server, "spec.endpoints.0.tlsConfig"),
        Some(&yaml("{serverName: karpor}"))
    );
    let syncer = tls.get(&format!("ServiceMonitor/{RELEASE}-syncer"));
    assert_eq!(str_at(syncer, "spec.endpoints.0.scheme"), "http");
    assert_eq!(at(syncer, "spec.endpoints.0.tlsConfig"), None);
    // Off by default: the CRD may not exist.
    assert_eq!(tools.check(&[]).of_kind("ServiceMonitor").count(), 0);
}

#[test]
fn metrics_annotations_point_prometheus_at_the_port_karpor_listens_on() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&sets(&["metrics.annotations=true"]));
    let plain = tools.check(&[]);
    for name in [RELEASE.to_owned(), format!("{RELEASE}-syncer")] {
        let deployment = objects.deployment(&name);
        let get = |key: &str| entry(deployment, "spec.template.metadata.annotations", key);
        assert_eq!(get("prometheus.io/scrape"), Some("true"), "{name}");
        assert_eq!(get("prometheus.io/path"), Some("/metrics"), "{name}");
        let port = at(container(deployment), "ports")
            .and_then(Value::as_sequence)
            .unwrap()
            .iter()
            .find(|p| str_at(p, "name") == "http")
            .and_then(|p| at(p, "containerPort"))
            .and_then(Value::as_u64)
            .unwrap();
        assert_eq!(
            get("prometheus.io/port"),
            Some(port.to_string().as_str()),
            "{name}"
        );
        assert_eq!(
            entry(
                plain.deployment(&name),
                "spec.template.metadata.annotations",
                "prometheus.io/scrape"
            ),
            None,
            "{name}: off by default"
        );
    }
}

#[test]
fn disruption_budgets_cover_the_server_and_the_syncer_without_stalling_drains() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&sets(&[
        "podDisruptionBudget.enabled=true",
        "server.replicaCount=3",
        "podDisruptionBudget.minAvailable=2",
    ]));
    let server = objects.get(&format!("PodDisruptionBudget/{RELEASE}"));
    assert_eq!(str_at(server, "apiVersion"), "policy/v1");
    assert_eq!(at(server, "spec.minAvailable"), Some(&yaml("2")));
    assert_eq!(
        at(server, "spec.maxUnavailable"),
        None,
        "minAvailable, when set, is the budget"
    );
    assert_eq!(
        at(server, "spec.selector"),
        at(objects.deployment(RELEASE), "spec.selector")
    );
    let syncer = objects.get(&format!("PodDisruptionBudget/{RELEASE}-syncer"));
    assert_eq!(at(syncer, "spec.maxUnavailable"), Some(&yaml("1")));
    assert_eq!(
        at(syncer, "spec.selector"),
        at(
            objects.deployment(&format!("{RELEASE}-syncer")),
            "spec.selector"
        )
    );
    // A percentage stays one; the in-process syncer has no budget of its own.
    let sqlite = tools.check(
        &[
            values_file(SQLITE_SQLITE),
            sets(&[
                "podDisruptionBudget.enabled=true",
                "podDisruptionBudget.maxUnavailable=50%",
            ]),
        ]
        .concat(),
    );
    assert_eq!(sqlite.of_kind("PodDisruptionBudget").count(), 1);
    assert_eq!(
        str_at(
            sqlite.get(&format!("PodDisruptionBudget/{RELEASE}")),
            "spec.maxUnavailable"
        ),
        "50%"
    );
    assert_eq!(tools.check(&[]).of_kind("PodDisruptionBudget").count(), 0);
}

#[test]
fn a_scaled_out_syncer_rolls_has_a_budget_and_names_each_member_after_its_pod() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(
        &[
            values_file(ETCD_ELASTICSEARCH),
            sets(&["syncer.replicas=3"]),
        ]
        .concat(),
    );
    let syncer = objects.deployment(&format!("{RELEASE}-syncer"));
    assert_eq!(at(syncer, "spec.replicas"), Some(&yaml("3")));
    assert_eq!(
        at(syncer, "spec.strategy"),
        Some(&yaml(
            "{type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}"
        )),
        "a new syncer joins before an old one leaves"
    );
    let member = at(container(syncer), "env")
        .and_then(Value::as_sequence)
        .and_then(|env| {
            env.iter()
                .find(|e| str_at(e, "name") == "KARPOR_SYNCER_MEMBER")
        })
        .expect("KARPOR_SYNCER_MEMBER");
    assert_eq!(
        str_at(member, "valueFrom.fieldRef.fieldPath"),
        "metadata.name"
    );
    // Several syncers get a budget without podDisruptionBudget.enabled; the server none.
    assert_eq!(objects.of_kind("PodDisruptionBudget").count(), 1);
    let budget = objects.get(&format!("PodDisruptionBudget/{RELEASE}-syncer"));
    assert_eq!(at(budget, "spec.maxUnavailable"), Some(&yaml("1")));
    assert!(selects(
        at(budget, "spec.selector").unwrap(),
        pod_labels(syncer)
    ));
    assert!(!selects(
        at(budget, "spec.selector").unwrap(),
        pod_labels(objects.deployment(RELEASE))
    ));

    // The bundled etcd: three members, each a peer at its headless-service name.
    let etcd = objects.get(&format!("StatefulSet/{RELEASE}-etcd"));
    assert_eq!(at(etcd, "spec.replicas"), Some(&yaml("3")));
    let headless = format!("{RELEASE}-etcd-headless");
    assert_eq!(str_at(etcd, "spec.serviceName"), headless);
    let args: Vec<&str> = at(container(etcd), "args")
        .and_then(Value::as_sequence)
        .expect("etcd args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let peers: Vec<String> = (0..3)
        .map(|i| {
            format!("{RELEASE}-etcd-{i}=http://{RELEASE}-etcd-{i}.{headless}.{NAMESPACE}.svc:2380")
        })
        .collect();
    assert!(
        args.contains(&format!("--initial-cluster={}", peers.join(",")).as_str()),
        "{args:?}"
    );
    assert!(
        args.contains(
            &format!(
                "--initial-advertise-peer-urls=http://$(POD_NAME).{headless}.{NAMESPACE}.svc:2380"
            )
            .as_str()
        ),
        "{args:?}"
    );
    let service = objects.get(&format!("Service/{headless}"));
    assert_eq!(str_at(service, "spec.clusterIP"), "None");
    assert_eq!(
        at(service, "spec.publishNotReadyAddresses"),
        Some(&Value::Bool(true)),
        "members find each other before they are ready"
    );
    // karpor is given every member.
    let config: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(
        at(&config, "metadata.etcd.endpoints"),
        Some(&Value::Sequence(
            (0..3)
                .map(|i| Value::String(format!(
                    "http://{RELEASE}-etcd-{i}.{headless}.{NAMESPACE}.svc:2379"
                )))
                .collect()
        ))
    );

    // One syncer: no budget unless asked for, and the same rolling update.
    let single = tools.check(&values_file(ETCD_ELASTICSEARCH));
    assert_eq!(single.of_kind("PodDisruptionBudget").count(), 0);
    assert_eq!(
        str_at(
            single.deployment(&format!("{RELEASE}-syncer")),
            "spec.strategy.type"
        ),
        "RollingUpdate"
    );
}

#[test]
fn network_policies_let_karpor_reach_only_dns_its_stores_and_the_clusters() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(EXPOSED));
    let etcd_pods = pod_labels(objects.get(&format!("StatefulSet/{RELEASE}-etcd")));
    let es_pods = pod_labels(objects.get(&format!("StatefulSet/{RELEASE}-elasticsearch")));
    let server_pods = pod_labels(objects.deployment(RELEASE));
    let syncer_pods = pod_labels(objects.deployment(&format!("{RELEASE}-syncer")));
    for (name, pods, port) in [
        (RELEASE.to_owned(), server_pods, 7443),
        (format!("{RELEASE}-syncer"), syncer_pods, 7444),
    ] {
        let policy = objects.get(&format!("NetworkPolicy/{name}"));
        assert!(
            selects(at(policy, "spec.podSelector").unwrap(), pods),
            "{name}"
        );
        for other in [etcd_pods, es_pods, server_pods, syncer_pods] {
            if other != pods {
                assert!(!selects(at(policy, "spec.podSelector").unwrap(), other));
            }
        }
        assert_eq!(
            at(policy, "spec.policyTypes"),
            Some(&yaml("[Ingress, Egress]"))
        );
        // In: its port, from the operator's peers (the syncer also from the servers).
        let ingress = at(policy, "spec.ingress")
            .and_then(Value::as_sequence)
            .unwrap();
        assert_eq!(ingress.len(), 1, "{name}");
        assert_eq!(
            at(&ingress[0], "ports"),
            Some(&yaml(&format!("[{{port: {port}, protocol: TCP}}]"))),
            "{name}"
        );
        let from = at(&ingress[0], "from")
            .and_then(Value::as_sequence)
            .unwrap();
        assert!(from.contains(&yaml(
            "{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}"
        )));
        let from_servers = from.iter().any(|peer| {
            peer.get("namespaceSelector").is_none()
                && at(peer, "podSelector").is_some_and(|s| selects(s, server_pods))
        });
        assert_eq!(from_servers, name.ends_with("-syncer"), "{name}");
        // Out: DNS anywhere, the bundled stores by their pods' labels, the clusters.
        for protocol in ["UDP", "TCP"] {
            let dns = egress_to(policy, 53, protocol);
            assert_eq!(dns.len(), 1, "{name}: DNS over {protocol}");
            assert_eq!(at(dns[0], "to"), None, "{name}: any resolver");
        }
        let etcd = one_egress_to(policy, 2379);
        assert!(selects(at(etcd, "to.0.podSelector").unwrap(), etcd_pods));
        let es = one_egress_to(policy, 9200);
        assert!(selects(at(es, "to.0.podSelector").unwrap(), es_pods));
        let clusters = one_egress_to(policy, 443);
        assert_eq!(clusters, one_egress_to(policy, 6443));
        assert_eq!(
            at(clusters, "to"),
            Some(&yaml(
                "[{ipBlock: {cidr: 10.20.0.0/16}}, {ipBlock: {cidr: 192.168.10.0/24}}]"
            ))
        );
        assert_eq!(
            at(policy, "spec.egress")
                .and_then(Value::as_sequence)
                .unwrap()
                .len(),
            4,
            "{name}: DNS, etcd, Elasticsearch, clusters and nothing else"
        );
    }
    // The bundled stores accept karpor's pods only (Elasticsearch runs without security),
    // and etcd its peers.
    let es = objects.get(&format!("NetworkPolicy/{RELEASE}-elasticsearch"));
    assert!(selects(at(es, "spec.podSelector").unwrap(), es_pods));
    assert_eq!(at(es, "spec.policyTypes"), Some(&yaml("[Ingress]")));
    let rule = at(es, "spec.ingress.0").unwrap();
    assert_eq!(at(es, "spec.ingress.1"), None);
    assert_eq!(
        at(rule, "ports"),
        Some(&yaml("[{port: 9200, protocol: TCP}]"))
    );
    let peer = at(rule, "from.0.podSelector").unwrap();
    assert!(selects(peer, server_pods) && selects(peer, syncer_pods));
    assert!(!selects(peer, etcd_pods) && !selects(peer, es_pods));
    let etcd = objects.get(&format!("NetworkPolicy/{RELEASE}-etcd"));
    assert!(selects(at(etcd, "spec.podSelector").unwrap(), etcd_pods));
    let peers = at(etcd, "spec.ingress.1").unwrap();
    assert!(selects(at(peers, "from.0.podSelector").unwrap(), etcd_pods));
    assert_eq!(
        at(peers, "ports"),
        Some(&yaml(
            "[{port: 2379, protocol: TCP}, {port: 2380, protocol: TCP}]"
        ))
    );

    // External stores: the operator's addresses, and no bundled pods.
    let external = tools.check(
        &[
            values_file(MYSQL_ELASTICSEARCH),
            sets(&["networkPolicy.enabled=true"]),
            set_json(&[
                r#"networkPolicy.egress.stores=[{"cidr":"10.0.12.0/24","ports":[3306]},{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"search"}},"ports":[9200]}]"#,
            ]),
        ]
        .concat(),
    );
    let policy = external.get(&format!("NetworkPolicy/{RELEASE}"));
    assert_eq!(
        at(one_egress_to(policy, 3306), "to"),
        Some(&yaml("[{ipBlock: {cidr: 10.0.12.0/24}}]"))
    );
    assert_eq!(
        at(one_egress_to(policy, 9200), "to"),
        Some(&yaml(
            "[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: search}}}]"
        ))
    );
    assert!(egress_to(policy, 2379, "TCP").is_empty());
    assert_eq!(
        external.of_kind("NetworkPolicy").count(),
        2,
        "no store policies"
    );
    // Without peers anyone may connect; readiness.includeSyncer lets the servers reach
    // the syncer's probe port.
    let bundled = tools.check(
        &[
            values_file(ETCD_ELASTICSEARCH),
            sets(&["networkPolicy.enabled=true"]),
        ]
        .concat(),
    );
    let policy = bundled.get(&format!("NetworkPolicy/{RELEASE}"));
    assert_eq!(at(policy, "spec.ingress.0.from"), None);
    let upstream = one_egress_to(policy, 7444);
    assert!(selects(
        at(upstream, "to.0.podSelector").unwrap(),
        pod_labels(bundled.deployment(&format!("{RELEASE}-syncer")))
    ));
    assert_eq!(tools.check(&[]).of_kind("NetworkPolicy").count(), 0);
}

#[test]
fn extra_env_volumes_and_exec_settings_reach_the_server_and_the_syncer() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(EXPOSED));
    let plain = tools.check(&[]);
    for (role, name) in [
        ("server", RELEASE.to_owned()),
        ("syncer", format!("{RELEASE}-syncer")),
    ] {
        let deployment = objects.deployment(&name);
        let c = container(deployment);
        // The syncer's member name comes first; extraEnv follows.
        let member =
            "{name: KARPOR_SYNCER_MEMBER, valueFrom: {fieldRef: {fieldPath: metadata.name}}}";
        let (env, plain_env) = match role {
            "syncer" => (
                format!("[{member}, {{name: AWS_REGION, value: eu-west-1}}]"),
                Some(yaml(&format!("[{member}]"))),
            ),
            _ => ("[{name: AWS_REGION, value: eu-west-1}]".to_owned(), None),
        };
        assert_eq!(at(c, "env"), Some(&yaml(&env)), "{name}");
        let volumes = at(deployment, "spec.template.spec.volumes")
            .and_then(Value::as_sequence)
            .unwrap();
        assert!(
            volumes.contains(&yaml("{name: plugins, emptyDir: {}}")),
            "{name}"
        );
        let mounts = at(c, "volumeMounts").and_then(Value::as_sequence).unwrap();
        assert!(
            mounts.contains(&yaml(
                "{name: plugins, mountPath: /opt/plugins, readOnly: true}"
            )),
            "{name}"
        );
        assert!(
            mounts.contains(&yaml(
                "{name: config, mountPath: /etc/karpor/config, readOnly: true}"
            )),
            "{name}: the chart's own mounts stay"
        );
        // The exec plugin the volume brings is allowed, with its variable passed on.
        let config: Value = yaml(&objects.config(role).unwrap());
        assert_eq!(
            at(&config, "kubernetes.exec"),
            Some(&yaml(
                "{allowed_commands: [/opt/plugins/aws], timeout: 20s, pass_env: [AWS_REGION], allowed_env: {/opt/plugins/aws: [AWS_PROFILE]}}"
            )),
            "{role}"
        );
        assert_eq!(
            at(container(plain.deployment(&name)), "env"),
            plain_env.as_ref()
        );
    }
}

#[test]
fn every_container_has_requests_and_limits() {
    let Some(tools) = tools() else { return };
    let mut seen = BTreeSet::new();
    for values in [
        Vec::new(),
        values_file(ETCD_ELASTICSEARCH),
        values_file(MYSQL_ELASTICSEARCH),
        values_file(SQLITE_SQLITE),
        values_file(EXPOSED),
    ] {
        let objects = Objects::parse(&tools.render(&values));
        for (key, workload) in objects
            .of_kind("Deployment")
            .chain(objects.of_kind("StatefulSet"))
        {
            let pod = at(workload, "spec.template.spec").unwrap();
            for list in ["containers", "initContainers"] {
                for c in at(pod, list)
                    .and_then(Value::as_sequence)
                    .into_iter()
                    .flatten()
                {
                    let name = format!("{key}/{}", str_at(c, "name"));
                    for field in [
                        "resources.requests.cpu",
                        "resources.requests.memory",
                        "resources.limits.cpu",
                        "resources.limits.memory",
                    ] {
                        assert!(at(c, field).is_some(), "{name}: {field} ({values:?})");
                    }
                    seen.insert(name);
                }
            }
        }
    }
    for name in [
        format!("Deployment/{RELEASE}/server"),
        format!("Deployment/{RELEASE}-syncer/syncer"),
        format!("StatefulSet/{RELEASE}-etcd/etcd"),
        format!("StatefulSet/{RELEASE}-elasticsearch/elasticsearch"),
    ] {
        assert!(seen.contains(&name), "{name} in {seen:?}");
    }
}

#[test]
fn exposure_settings_that_cannot_work_fail_with_a_clear_message() {
    let Some(tools) = tools() else { return };
    let ingress_host = |host: &str| {
        vec![
            "ingress.enabled=true".to_owned(),
            format!("ingress.hosts[0].host={host}"),
            "ingress.hosts[0].paths[0].path=/".to_owned(),
            "ingress.hosts[0].paths[0].pathType=Prefix".to_owned(),
        ]
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["ingress.enabled=true".into()],
            "karpor: ingress.enabled=true needs ingress.hosts",
        ),
        (
            ingress_host("*.example.com"),
            "karpor: ingress host *.example.com is a wildcard, and karpor's server.allowed_hosts matches exact names",
        ),
        (
            vec!["auth.tokens[0].name=ops".into(), "auth.tokens[0].role=admin".into()],
            "karpor: auth.tokens[0] (ops) needs its token: value, or existingSecret and key",
        ),
        (
            vec![
                "auth.tokens[0].name=ops".into(),
                "auth.tokens[0].role=admin".into(),
                "auth.tokens[0].existingSecret=tokens".into(),
            ],
            "karpor: auth.tokens[0] (ops) names existingSecret tokens but no key in it",
        ),
        (
            vec![
                "auth.tokens[0].name=ops".into(),
                "auth.tokens[0].role=admin".into(),
                "auth.tokens[0].value=a".into(),
                "auth.tokens[1].name=ops".into(),
                "auth.tokens[1].role=guest".into(),
                "auth.tokens[1].value=b".into(),
            ],
            "karpor: auth.tokens[1]: the name ops is already another token's",
        ),
        (
            vec![
                "podDisruptionBudget.enabled=true".into(),
                "podDisruptionBudget.minAvailable=2".into(),
                "server.replicaCount=2".into(),
            ],
            "karpor: podDisruptionBudget minAvailable=2 with server.replicaCount=2 never allows an eviction",
        ),
        (
            vec![
                "podDisruptionBudget.enabled=true".into(),
                "podDisruptionBudget.maxUnavailable=0".into(),
            ],
            "karpor: podDisruptionBudget maxUnavailable=0 with server.replicaCount=1 never allows an eviction",
        ),
        (
            vec![
                "serviceMonitor.enabled=true".into(),
                "serviceMonitor.scrapeTimeout=1m".into(),
            ],
            "karpor: serviceMonitor.scrapeTimeout=1m is longer than serviceMonitor.interval=30s",
        ),
        (
            vec![
                "networkPolicy.enabled=true".into(),
                "metadata.backend=mysql".into(),
                "metadata.mysql.url.existingSecret=karpor-mysql".into(),
            ],
            "karpor: networkPolicy.enabled=true with metadata.backend=mysql needs networkPolicy.egress.stores",
        ),
    ];
    for (values, message) in &cases {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let stderr = tools.refused(&sets(&values));
        assert!(stderr.contains(message), "{values:?}:\n{stderr}");
    }
}

#[test]
fn the_notes_show_how_to_get_the_token_reach_the_server_and_add_a_cluster() {
    let Some(tools) = tools() else { return };
    let notes = tools.notes(&[]);
    for line in [
        format!(
            "export KARPOR_TOKEN=$(kubectl -n {NAMESPACE} get secret {RELEASE}-token \
             -o jsonpath='{{.data.token}}' | base64 -d)"
        ),
        format!("kubectl -n {NAMESPACE} port-forward svc/{RELEASE} 7443"),
        "karpor cluster add NAME --kubeconfig FILE --server http://127.0.0.1:7443 \
         --token \"$KARPOR_TOKEN\""
            .to_owned(),
        format!("Secret {RELEASE}-encryption-key"),
    ] {
        assert!(notes.contains(&line), "{line}\nnot in:\n{notes}");
    }
    // Given tokens: the first admin one, from its Secret; the Ingress's address.
    let notes = tools.notes(&values_file(EXPOSED));
    for line in [
        "get secret karpor-tokens -o jsonpath='{.data.ops}' | base64 -d",
        "https://karpor.example.com",
    ] {
        assert!(notes.contains(line), "{line}\nnot in:\n{notes}");
    }
    assert!(
        !notes.contains(&format!("secret {RELEASE}-token ")),
        "{notes}"
    );
}

mod agent;
mod hub_agents;
