//! Every kind the rules know: workloads' templates, replicas, Services, removed
//! apiVersions; and objects that cannot be read.

use karpor_audit::{audit, AuditConfig, MAX_FINDINGS};
use serde_json::{json, Value};

use crate::fixtures::{
    clean_container, clean_pod, clean_pod_spec, findings, rule_ids, with, workload,
};

const WORKLOADS: [(&str, &str); 10] = [
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("v1", "ReplicationController"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("extensions/v1beta1", "Deployment"),
    ("apps/v1beta2", "StatefulSet"),
    ("batch/v1beta1", "CronJob"),
];

fn privileged_spec() -> Value {
    with(
        clean_pod_spec(),
        "/containers/0/securityContext/privileged",
        json!(true),
    )
}

#[test]
fn every_workload_template_is_audited() {
    for (api_version, kind) in WORKLOADS {
        let clean = workload(api_version, kind, clean_pod_spec());
        let removed = api_version.contains("beta");
        let expected: &[&str] = if removed {
            &["deprecated-api-version"]
        } else {
            &[]
        };
        assert_eq!(rule_ids(&clean), expected, "{api_version} {kind}");

        let dirty = workload(api_version, kind, privileged_spec());
        let found = findings(&dirty);
        let privileged: Vec<_> = found.iter().filter(|f| f.rule == "privileged").collect();
        assert_eq!(privileged.len(), 1, "{api_version} {kind}: {found:?}");
        assert_eq!(privileged[0].message, "container \"app\" runs privileged");
    }
}

#[test]
fn pod_level_messages_name_the_template() {
    let spec = with(clean_pod_spec(), "/hostPID", json!(true));
    let found = findings(&workload("apps/v1", "DaemonSet", spec));
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].message,
        "pod template shares the node's PID namespace (hostPID: true)"
    );
}

#[test]
fn template_annotations_are_the_pods() {
    let mut object = workload("apps/v1", "Deployment", clean_pod_spec());
    object["spec"]["template"]["metadata"]["annotations"] =
        json!({"container.apparmor.security.beta.kubernetes.io/app": "unconfined"});
    assert_eq!(rule_ids(&object), ["apparmor-unconfined"]);
    // The workload's own annotations are not its pods'.
    let mut object = workload("apps/v1", "Deployment", clean_pod_spec());
    object["metadata"]["annotations"] =
        json!({"container.apparmor.security.beta.kubernetes.io/app": "unconfined"});
    assert!(rule_ids(&object).is_empty());
}

#[test]
fn jobs_need_no_probes() {
    let spec = with(
        clean_pod_spec(),
        "/containers/0/readinessProbe",
        Value::Null,
    );
    let spec = with(spec, "/containers/0/livenessProbe", Value::Null);
    let spec = with(spec, "/restartPolicy", json!("OnFailure"));
    for kind in ["Job", "CronJob"] {
        assert!(
            rule_ids(&workload("batch/v1", kind, spec.clone())).is_empty(),
            "{kind}"
        );
    }
    // Even a Job template saying Always (which the API refuses) gets no probe findings.
    let always = with(spec.clone(), "/restartPolicy", json!("Always"));
    assert!(rule_ids(&workload("batch/v1", "Job", always)).is_empty());
    let deployment = workload(
        "apps/v1",
        "Deployment",
        with(spec, "/restartPolicy", Value::Null),
    );
    assert_eq!(
        rule_ids(&deployment),
        ["readiness-probe-missing", "liveness-probe-missing"]
    );
}

#[test]
fn single_replica() {
    for kind in ["Deployment", "StatefulSet"] {
        let one = with(
            workload("apps/v1", kind, clean_pod_spec()),
            "/spec/replicas",
            json!(1),
        );
        let found = findings(&one);
        assert_eq!(found.len(), 1, "{kind}");
        assert_eq!(found[0].rule, "single-replica");
        assert_eq!(
            found[0].message,
            format!("{kind} runs a single replica (spec.replicas: 1)")
        );

        let unset = with(
            workload("apps/v1", kind, clean_pod_spec()),
            "/spec/replicas",
            Value::Null,
        );
        let found = findings(&unset);
        assert_eq!(found.len(), 1, "{kind}");
        assert!(found[0].message.contains("unset"), "{}", found[0].message);

        for fine in [0, 2, 5] {
            let object = with(
                workload("apps/v1", kind, clean_pod_spec()),
                "/spec/replicas",
                json!(fine),
            );
            assert!(rule_ids(&object).is_empty(), "{kind} {fine}");
        }
    }
    // A ReplicaSet's count is its Deployment's; a DaemonSet's, the nodes'.
    for kind in ["ReplicaSet", "DaemonSet"] {
        let object = with(
            workload("apps/v1", kind, clean_pod_spec()),
            "/spec/replicas",
            json!(1),
        );
        assert!(rule_ids(&object).is_empty(), "{kind}");
    }
    // A document trimmed to its metadata has no spec to judge.
    let trimmed =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
    assert!(rule_ids(&trimmed).is_empty());
}

#[test]
fn services() {
    let service = |spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": spec});
    let node_port = service(
        json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}, {"port": 443, "nodePort": 30443}]}),
    );
    let found = findings(&node_port);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "service-node-port");
    assert_eq!(
        found[0].message,
        "Service of type NodePort opens port 30080, 30443 on every node"
    );

    let open = service(json!({"type": "LoadBalancer", "ports": [{"port": 443}]}));
    assert_eq!(rule_ids(&open), ["service-load-balancer"]);
    let restricted =
        service(json!({"type": "LoadBalancer", "loadBalancerSourceRanges": ["10.0.0.0/8"]}));
    assert!(rule_ids(&restricted).is_empty());
    for kind in ["ClusterIP", "ExternalName"] {
        assert!(
            rule_ids(&service(json!({"type": kind}))).is_empty(),
            "{kind}"
        );
    }
    assert!(rule_ids(&service(json!({}))).is_empty());
}

#[test]
fn removed_api_versions() {
    let object = |api_version: &str, kind: &str| json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
    let cases = [
        (
            "extensions/v1beta1",
            "Ingress",
            "1.22",
            "networking.k8s.io/v1",
        ),
        (
            "extensions/v1beta1",
            "NetworkPolicy",
            "1.16",
            "networking.k8s.io/v1",
        ),
        (
            "networking.k8s.io/v1beta1",
            "Ingress",
            "1.22",
            "networking.k8s.io/v1",
        ),
        (
            "rbac.authorization.k8s.io/v1beta1",
            "ClusterRoleBinding",
            "1.22",
            "rbac.authorization.k8s.io/v1",
        ),
        ("policy/v1beta1", "PodDisruptionBudget", "1.25", "policy/v1"),
        (
            "policy/v1beta1",
            "PodSecurityPolicy",
            "1.25",
            "Pod Security Admission",
        ),
        (
            "autoscaling/v2beta1",
            "HorizontalPodAutoscaler",
            "1.25",
            "autoscaling/v2",
        ),
        (
            "autoscaling/v2beta2",
            "HorizontalPodAutoscaler",
            "1.26",
            "autoscaling/v2",
        ),
        (
            "apiextensions.k8s.io/v1beta1",
            "CustomResourceDefinition",
            "1.22",
            "apiextensions.k8s.io/v1",
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1beta3",
            "FlowSchema",
            "1.32",
            "flowcontrol.apiserver.k8s.io/v1",
        ),
    ];
    for (api_version, kind, release, replacement) in cases {
        let found = findings(&object(api_version, kind));
        assert_eq!(found.len(), 1, "{api_version} {kind}");
        assert_eq!(found[0].rule, "deprecated-api-version");
        let message = &found[0].message;
        assert!(
            message.starts_with(&format!("{api_version} {kind} ")),
            "{message}"
        );
        assert!(
            message.contains(&format!("Kubernetes {release};")),
            "{message}"
        );
        assert!(message.contains(replacement), "{message}");
    }
    for (api_version, kind) in [
        ("networking.k8s.io/v1", "Ingress"),
        ("policy/v1", "PodDisruptionBudget"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("batch/v1", "CronJob"),
        ("storage.k8s.io/v1beta1", "SomethingElse"),
        ("example.com/v1beta1", "Widget"),
    ] {
        assert!(
            rule_ids(&object(api_version, kind)).is_empty(),
            "{api_version} {kind}"
        );
    }
}

#[test]
fn unknown_kinds_have_no_findings() {
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"hostNetwork": "true"}});
    assert!(rule_ids(&config_map).is_empty());
    // A custom resource reusing a built-in kind's name is not read as one.
    let custom = with(clean_pod(), "/apiVersion", json!("example.com/v1"));
    let custom = with(custom, "/spec/hostPID", json!(true));
    assert!(rule_ids(&custom).is_empty());
}

#[test]
fn what_cannot_be_read_never_panics() {
    let malformed = [
        Value::Null,
        json!(42),
        json!("Pod"),
        json!([clean_pod()]),
        json!({}),
        json!({"apiVersion": 1, "kind": "Pod"}),
        json!({"apiVersion": "v1", "kind": ["Pod"]}),
        json!({"apiVersion": "v1", "kind": "Pod"}),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": null}),
    ];
    for object in malformed {
        assert!(rule_ids(&object).is_empty(), "{object}");
    }
    let unparseable = [
        with(clean_pod(), "/spec", json!("not a spec")),
        with(clean_pod(), "/spec/containers", json!({"name": "app"})),
        with(clean_pod(), "/spec/containers/0/name", json!(7)),
        with(
            clean_pod(),
            "/spec/containers/0/securityContext/privileged",
            json!("yes"),
        ),
        with(clean_pod(), "/metadata/annotations", json!({"a": 1})),
        with(clean_pod(), "/metadata", json!([])),
        with(
            workload("apps/v1", "Deployment", clean_pod_spec()),
            "/spec/template",
            json!([]),
        ),
        with(
            workload("apps/v1", "Deployment", clean_pod_spec()),
            "/spec/replicas",
            json!("three"),
        ),
        with(
            workload("batch/v1", "CronJob", clean_pod_spec()),
            "/spec/jobTemplate",
            json!(1),
        ),
        json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": "80"}}),
    ];
    for object in unparseable {
        let found = findings(&object);
        assert_eq!(found.len(), 1, "{object}: {found:?}");
        assert_eq!(found[0].rule, "unparseable");
    }
    let found = findings(&with(
        clean_pod(),
        "/spec/containers/0/securityContext/privileged",
        json!("yes"),
    ));
    assert!(
        found[0]
            .message
            .starts_with("spec is not a valid PodSpec: \"invalid type"),
        "{}",
        found[0].message
    );
    // A removed apiVersion is still reported when the rest cannot be read.
    let old = with(
        workload("extensions/v1beta1", "Deployment", clean_pod_spec()),
        "/spec/template/spec",
        json!(1),
    );
    assert_eq!(rule_ids(&old), ["deprecated-api-version", "unparseable"]);
}

#[test]
fn deep_unknown_fields_are_not_walked() {
    // Built and dropped on a large stack (dropping a deep value recurses); audited on a
    // small one, which walking 10,000 levels would overflow.
    let big = std::thread::Builder::new().stack_size(256 << 20);
    let outer = big.spawn(|| {
        let mut deep = json!("bottom");
        for _ in 0..10_000 {
            // Not `json!`, which would copy the whole value each time.
            deep = Value::Object([("x".to_owned(), deep)].into_iter().collect());
        }
        let pod = with(clean_pod(), "/spec/containers/0/unknownField", deep.clone());
        let pod = with(pod, "/metadata/unknownField", deep);
        std::thread::scope(|scope| {
            let small = std::thread::Builder::new().stack_size(1 << 20);
            small
                .spawn_scoped(scope, || rule_ids(&pod))
                .unwrap()
                .join()
                .unwrap()
        })
    });
    assert!(outer.unwrap().join().unwrap().is_empty());
}

#[test]
fn findings_are_bounded() {
    let mut containers = Vec::new();
    for i in 0..300 {
        let mut c = clean_container(&format!("c{i}"));
        c["securityContext"]["privileged"] = json!(true);
        c["image"] = json!("nginx");
        containers.push(c);
    }
    let pod = with(clean_pod(), "/spec/containers", json!(containers));
    let found = audit(&pod, &AuditConfig::default());
    assert_eq!(found.len(), MAX_FINDINGS);
    // The first rule's findings, in container order, are the ones kept.
    assert!(found.iter().all(|f| f.rule == "privileged"));
    assert_eq!(found[0].message, "container \"c0\" runs privileged");
}
