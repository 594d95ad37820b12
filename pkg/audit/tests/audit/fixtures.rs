//! A hardened Pod that no rule reports, and ways to break it one field at a time.

use karpor_audit::{audit, AuditConfig, Finding};
use serde_json::{json, Value};

pub(crate) fn clean_container(name: &str) -> Value {
    json!({
        "name": name,
        "image": "registry.example.com:5000/shop/web:1.4.2",
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]}
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "256Mi"}
        },
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
        "livenessProbe": {"httpGet": {"path": "/live", "port": 8080}}
    })
}

pub(crate) fn clean_pod_spec() -> Value {
    json!({
        "serviceAccountName": "web",
        "securityContext": {
            "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"}
        },
        "containers": [clean_container("app")]
    })
}

pub(crate) fn clean_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "shop", "labels": {"app": "web"}},
        "spec": clean_pod_spec()
    })
}

/// `value` with `pointer` (JSON pointer) set to `to`, creating objects on the way.
pub(crate) fn with(mut value: Value, pointer: &str, to: Value) -> Value {
    set(&mut value, pointer, to);
    value
}

pub(crate) fn set(value: &mut Value, pointer: &str, to: Value) {
    let mut at = value;
    for key in pointer.trim_start_matches('/').split('/') {
        at = match at {
            Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
            other => {
                if !other.is_object() {
                    *other = json!({});
                }
                other
                    .as_object_mut()
                    .unwrap()
                    .entry(key.to_owned())
                    .or_insert(Value::Null)
            }
        };
    }
    *at = to;
}

pub(crate) fn findings(object: &Value) -> Vec<Finding> {
    audit(object, &AuditConfig::default())
}

pub(crate) fn ids(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.rule.as_str()).collect()
}

/// The ids of `object`'s findings with the default config.
pub(crate) fn rule_ids(object: &Value) -> Vec<String> {
    findings(object).into_iter().map(|f| f.rule).collect()
}

/// A workload of `kind` around `pod_spec`, its template at the kind's place.
pub(crate) fn workload(api_version: &str, kind: &str, pod_spec: Value) -> Value {
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec});
    let spec = if kind == "CronJob" {
        json!({"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}})
    } else {
        json!({"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template})
    };
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": spec
    })
}
