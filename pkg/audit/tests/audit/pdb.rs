//! `missing_pdb`: a multi-replica workload no PodDisruptionBudget of its namespace selects.

use karpor_audit::{missing_pdb, AuditConfig, Severity};
use serde_json::{json, Value};

use crate::fixtures::{clean_pod_spec, with, workload};

pub(crate) fn deployment(replicas: i32, labels: Value) -> Value {
    let object = with(
        workload("apps/v1", "Deployment", clean_pod_spec()),
        "/spec/replicas",
        json!(replicas),
    );
    with(object, "/spec/template/metadata/labels", labels)
}

fn pdb(api_version: &str, namespace: &str, selector: Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"maxUnavailable": 1, "selector": selector}
    })
}

fn missing(workload: &Value, pdbs: &[Value]) -> bool {
    missing_pdb(workload, pdbs, &AuditConfig::default()).is_some()
}

#[test]
fn reported_without_a_matching_pdb() {
    let web = deployment(3, json!({"app": "web", "tier": "front"}));
    let finding = missing_pdb(&web, &[], &AuditConfig::default()).unwrap();
    assert_eq!(finding.rule, "pdb-missing");
    assert_eq!(finding.severity, Severity::Medium);
    assert_eq!(
        finding.message,
        "Deployment with 3 replicas has no PodDisruptionBudget selecting its pods in namespace \"shop\""
    );
    let other_app = pdb("policy/v1", "shop", json!({"matchLabels": {"app": "api"}}));
    let other_namespace = pdb(
        "policy/v1",
        "default",
        json!({"matchLabels": {"app": "web"}}),
    );
    assert!(missing(&web, &[other_app, other_namespace]));
}

#[test]
fn a_matching_pdb_protects() {
    let web = deployment(3, json!({"app": "web", "tier": "front"}));
    let selectors = [
        json!({"matchLabels": {"app": "web"}}),
        json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
        json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
        json!({"matchExpressions": [{"key": "canary", "operator": "DoesNotExist"}]}),
        json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["back"]}]}),
        // policy/v1: an empty selector selects every pod of the namespace.
        json!({}),
    ];
    for selector in selectors {
        let protecting = pdb("policy/v1", "shop", selector.clone());
        assert!(!missing(&web, &[protecting]), "{selector}");
    }
    let not_matching = [
        json!({"matchLabels": {"app": "web", "tier": "back"}}),
        json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
        json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
        json!({"matchExpressions": [{"key": "app", "operator": "Like", "values": ["web"]}]}),
    ];
    for selector in not_matching {
        let other = pdb("policy/v1", "shop", selector.clone());
        assert!(missing(&web, &[other]), "{selector}");
    }
}

#[test]
fn pdb_versions_and_shapes() {
    let web = deployment(2, json!({"app": "web"}));
    // policy/v1beta1: an empty selector selected nothing.
    assert!(missing(&web, &[pdb("policy/v1beta1", "shop", json!({}))]));
    let v1beta1 = pdb(
        "policy/v1beta1",
        "shop",
        json!({"matchLabels": {"app": "web"}}),
    );
    assert!(!missing(&web, &[v1beta1]));
    // No selector at all selects nothing; a malformed one protects nothing.
    assert!(missing(&web, &[pdb("policy/v1", "shop", Value::Null)]));
    assert!(missing(&web, &[pdb("policy/v1", "shop", json!("app=web"))]));
    // Only PodDisruptionBudgets count.
    let mut impostor = pdb("policy/v1", "shop", json!({}));
    impostor["kind"] = json!("NetworkPolicy");
    assert!(missing(&web, &[impostor, json!(null), json!({"kind": 1})]));
}

#[test]
fn only_replicated_workloads() {
    assert!(!missing(&deployment(1, json!({"app": "web"})), &[]));
    assert!(!missing(&deployment(0, json!({"app": "web"})), &[]));
    let unset = with(
        deployment(1, json!({"app": "web"})),
        "/spec/replicas",
        Value::Null,
    );
    assert!(!missing(&unset, &[]));
    let statefulset = with(
        workload("apps/v1", "StatefulSet", clean_pod_spec()),
        "/spec/replicas",
        json!(3),
    );
    assert!(missing(&statefulset, &[]));
    for kind in ["DaemonSet", "ReplicaSet"] {
        assert!(
            !missing(&workload("apps/v1", kind, clean_pod_spec()), &[]),
            "{kind}"
        );
    }
    assert!(!missing(&crate::fixtures::clean_pod(), &[]));
    assert!(!missing(&json!("garbage"), &[]));
    assert!(!missing(
        &with(deployment(3, json!({})), "/spec/replicas", json!("3")),
        &[]
    ));
}
