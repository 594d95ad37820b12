//! Each rule against the hardened Pod: it reports nothing, and breaking one field
//! reports exactly that field's rule, naming the container or volume.

use karpor_audit::{rule, rules, Severity};
use serde_json::{json, Value};

use crate::fixtures::{clean_pod, findings, ids, rule_ids, with};

const CONTAINER: &str = "/spec/containers/0";
const SECURITY: &str = "/spec/containers/0/securityContext";

#[test]
fn the_hardened_pod_is_clean() {
    assert_eq!(rule_ids(&clean_pod()), Vec::<String>::new());
}

/// One broken field, the one rule it must trigger, and words the message must carry.
fn case(pointer: &str, value: Value, rule_id: &str, words: &[&str]) {
    let object = with(clean_pod(), pointer, value.clone());
    let found = findings(&object);
    let ids = ids(&found);
    assert_eq!(ids, [rule_id], "{pointer} = {value}");
    let info = rule(rule_id).unwrap();
    let finding = &found[0];
    assert_eq!(finding.severity, info.severity);
    assert_eq!(finding.title, info.title);
    assert_eq!(finding.remediation, info.remediation);
    for word in words {
        assert!(
            finding.message.contains(word),
            "{:?} lacks {word:?}",
            finding.message
        );
    }
}

#[test]
fn privileged() {
    let path = format!("{SECURITY}/privileged");
    case(
        &path,
        json!(true),
        "privileged",
        &["container \"app\"", "privileged"],
    );
    assert!(rule_ids(&with(clean_pod(), &path, json!(false))).is_empty());
}

#[test]
fn capabilities() {
    case(
        &format!("{SECURITY}/capabilities/add"),
        json!(["NET_ADMIN", "SYS_TIME"]),
        "capabilities-added",
        &["container \"app\"", "\"NET_ADMIN\", \"SYS_TIME\""],
    );
    case(
        &format!("{SECURITY}/capabilities/drop"),
        json!(["NET_RAW"]),
        "capabilities-not-dropped",
        &["container \"app\"", "ALL"],
    );
    case(
        &format!("{SECURITY}/capabilities"),
        Value::Null,
        "capabilities-not-dropped",
        &["\"app\""],
    );
}

#[test]
fn privilege_escalation() {
    let path = format!("{SECURITY}/allowPrivilegeEscalation");
    case(
        &path,
        json!(true),
        "allow-privilege-escalation",
        &["\"app\"", ": true"],
    );
    case(
        &path,
        Value::Null,
        "allow-privilege-escalation",
        &["does not set"],
    );
}

#[test]
fn user() {
    case(
        "/spec/securityContext/runAsUser",
        json!(0),
        "run-as-root",
        &["\"app\"", "UID 0", "the pod's securityContext"],
    );
    case(
        &format!("{SECURITY}/runAsUser"),
        json!(0),
        "run-as-root",
        &["UID 0", "its securityContext"],
    );
    case(
        "/spec/securityContext/runAsNonRoot",
        Value::Null,
        "run-as-non-root",
        &["\"app\""],
    );
    case(
        "/spec/securityContext/runAsNonRoot",
        json!(false),
        "run-as-non-root",
        &["runAsNonRoot: false"],
    );
    // A non-zero UID is enough without runAsNonRoot.
    let uid = with(
        clean_pod(),
        "/spec/securityContext/runAsNonRoot",
        Value::Null,
    );
    assert!(rule_ids(&with(uid, "/spec/securityContext/runAsUser", json!(1000))).is_empty());
}

#[test]
fn read_only_root_filesystem() {
    let path = format!("{SECURITY}/readOnlyRootFilesystem");
    case(
        &path,
        json!(false),
        "read-only-root-filesystem",
        &["\"app\""],
    );
    case(
        &path,
        Value::Null,
        "read-only-root-filesystem",
        &["\"app\""],
    );
}

#[test]
fn host_namespaces() {
    case(
        "/spec/hostNetwork",
        json!(true),
        "host-network",
        &["pod", "hostNetwork"],
    );
    case("/spec/hostPID", json!(true), "host-pid", &["hostPID"]);
    case("/spec/hostIPC", json!(true), "host-ipc", &["hostIPC"]);
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        let off = with(clean_pod(), &format!("/spec/{field}"), json!(false));
        assert!(rule_ids(&off).is_empty(), "{field}");
    }
}

#[test]
fn host_paths() {
    let volume = |path: &str| json!([{"name": "host", "hostPath": {"path": path}}]);
    case(
        "/spec/volumes",
        volume("/var/log"),
        "host-path",
        &["\"host\"", "\"/var/log\""],
    );
    for socket in [
        "/var/run/docker.sock",
        "/run/containerd/containerd.sock",
        "/var/run/crio/crio.sock",
        "/var/run",
    ] {
        case(
            "/spec/volumes",
            volume(socket),
            "host-path-runtime-socket",
            &["\"host\"", socket, "runtime socket"],
        );
    }
    let other = json!([{"name": "cache", "emptyDir": {}}]);
    assert!(rule_ids(&with(clean_pod(), "/spec/volumes", other)).is_empty());
}

#[test]
fn image_tag() {
    let path = format!("{CONTAINER}/image");
    case(
        &path,
        json!("nginx"),
        "image-tag",
        &["\"app\"", "\"nginx\"", "without a tag"],
    );
    case(&path, json!("nginx:latest"), "image-tag", &["latest"]);
    case(
        &path,
        json!("registry:5000/nginx"),
        "image-tag",
        &["without a tag"],
    );
    for pinned in [
        "nginx:1.27.3",
        "nginx@sha256:0f1e2d3c",
        "nginx:latest@sha256:0f1e2d3c",
    ] {
        assert!(
            rule_ids(&with(clean_pod(), &path, json!(pinned))).is_empty(),
            "{pinned}"
        );
    }
}

#[test]
fn seccomp() {
    case(
        "/spec/securityContext/seccompProfile/type",
        json!("Unconfined"),
        "seccomp-unconfined",
        &["\"app\"", "the pod's securityContext"],
    );
    case(
        "/spec/securityContext/seccompProfile",
        Value::Null,
        "seccomp-profile-missing",
        &["\"app\""],
    );
    let localhost = json!({"type": "Localhost", "localhostProfile": "profiles/web.json"});
    assert!(rule_ids(&with(
        clean_pod(),
        "/spec/securityContext/seccompProfile",
        localhost
    ))
    .is_empty());
}

fn annotated(mut object: Value, key: &str, value: &str) -> Value {
    object["metadata"]["annotations"][key] = json!(value);
    object
}

#[test]
fn seccomp_legacy_annotations() {
    const POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const APP: &str = "container.seccomp.security.alpha.kubernetes.io/app";
    let no_field = with(
        clean_pod(),
        "/spec/securityContext/seccompProfile",
        Value::Null,
    );
    // Kubernetes no longer applies them: a confining annotation alone is no profile.
    for (key, value) in [(POD, "runtime/default"), (APP, "localhost/web.json")] {
        let found = findings(&annotated(no_field.clone(), key, value));
        assert_eq!(ids(&found), ["seccomp-profile-missing"], "{key}");
        assert!(found[0].message.contains(key), "{}", found[0].message);
        assert!(
            found[0].message.contains("deprecated"),
            "{}",
            found[0].message
        );
    }
    // An unconfined one states the intent, and is what an old cluster runs.
    let found = findings(&annotated(no_field.clone(), POD, "unconfined"));
    assert_eq!(ids(&found), ["seccomp-unconfined"]);
    assert!(found[0].message.contains(POD), "{}", found[0].message);
    assert_eq!(
        rule_ids(&annotated(no_field.clone(), APP, "unconfined")),
        ["seccomp-unconfined"]
    );
    // The container's annotation before the pod's.
    let both = annotated(
        annotated(no_field.clone(), POD, "runtime/default"),
        APP,
        "unconfined",
    );
    assert_eq!(rule_ids(&both), ["seccomp-unconfined"]);
    // Another container's annotation is not this one's.
    let other = "container.seccomp.security.alpha.kubernetes.io/other";
    let found = findings(&annotated(no_field, other, "unconfined"));
    assert_eq!(ids(&found), ["seccomp-profile-missing"]);
    assert!(
        !found[0].message.contains("deprecated"),
        "{}",
        found[0].message
    );
    // A field, the pod's included, wins over any annotation.
    assert!(rule_ids(&annotated(clean_pod(), APP, "unconfined")).is_empty());
    assert!(rule_ids(&annotated(clean_pod(), POD, "unconfined")).is_empty());
}

#[test]
fn apparmor() {
    case(
        &format!("{SECURITY}/appArmorProfile"),
        json!({"type": "Unconfined"}),
        "apparmor-unconfined",
        &["\"app\"", "its securityContext"],
    );
    case(
        "/spec/securityContext/appArmorProfile",
        json!({"type": "Unconfined"}),
        "apparmor-unconfined",
        &["the pod's securityContext"],
    );
    const APP: &str = "container.apparmor.security.beta.kubernetes.io/app";
    let found = findings(&annotated(clean_pod(), APP, "unconfined"));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "apparmor-unconfined");
    assert!(found[0].message.contains(APP), "{}", found[0].message);
    // Another container's annotation is not this one's.
    let other = "container.apparmor.security.beta.kubernetes.io/other";
    assert!(rule_ids(&annotated(clean_pod(), other, "unconfined")).is_empty());
    assert!(rule_ids(&annotated(clean_pod(), APP, "runtime/default")).is_empty());
    let runtime = json!({"type": "RuntimeDefault"});
    assert!(rule_ids(&with(
        clean_pod(),
        "/spec/securityContext/appArmorProfile",
        runtime
    ))
    .is_empty());
}

#[test]
fn automount_service_account_token() {
    case(
        "/spec/serviceAccountName",
        Value::Null,
        "automount-service-account-token",
        &["default service account", "does not set"],
    );
    case(
        "/spec/serviceAccountName",
        json!("default"),
        "automount-service-account-token",
        &["default service account"],
    );
    let default = with(clean_pod(), "/spec/serviceAccountName", json!("default"));
    assert!(rule_ids(&with(
        default.clone(),
        "/spec/automountServiceAccountToken",
        json!(false)
    ))
    .is_empty());
    assert_eq!(
        rule_ids(&with(
            default,
            "/spec/automountServiceAccountToken",
            json!(true)
        )),
        ["automount-service-account-token"]
    );
    // The deprecated spelling names an account too.
    let legacy = with(clean_pod(), "/spec/serviceAccountName", Value::Null);
    assert!(rule_ids(&with(legacy, "/spec/serviceAccount", json!("web"))).is_empty());
    // A named account's token is presumed needed, even mounted explicitly.
    assert!(rule_ids(&with(
        clean_pod(),
        "/spec/automountServiceAccountToken",
        json!(true)
    ))
    .is_empty());
}

#[test]
fn resources() {
    let path = format!("{CONTAINER}/resources");
    case(
        &path,
        Value::Null,
        "resources-missing",
        &[
            "\"app\"",
            "requests.cpu",
            "limits.cpu",
            "requests.memory",
            "limits.memory",
        ],
    );
    let cpu_limit_only = json!({"cpu": "1"});
    let found = findings(&with(
        clean_pod(),
        &format!("{path}/limits"),
        cpu_limit_only,
    ));
    assert_eq!(found.len(), 1);
    assert!(
        found[0].message.ends_with("sets no limits.memory"),
        "{}",
        found[0].message
    );
    // Limits alone: the requests default to them.
    let limits = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
    assert!(rule_ids(&with(clean_pod(), &path, limits)).is_empty());
    // Requests alone are not limits.
    let requests = json!({"requests": {"cpu": "1", "memory": "1Gi"}});
    let found = findings(&with(clean_pod(), &path, requests));
    assert!(
        found[0]
            .message
            .ends_with("sets no limits.cpu, limits.memory"),
        "{}",
        found[0].message
    );
    // Pod-level resources cover the containers.
    let pod_level = with(clean_pod(), &path, Value::Null);
    let pod_level = with(
        pod_level,
        "/spec/resources",
        json!({"limits": {"cpu": "2", "memory": "2Gi"}}),
    );
    assert!(rule_ids(&pod_level).is_empty());
}

#[test]
fn probes() {
    case(
        &format!("{CONTAINER}/readinessProbe"),
        Value::Null,
        "readiness-probe-missing",
        &["\"app\""],
    );
    case(
        &format!("{CONTAINER}/livenessProbe"),
        Value::Null,
        "liveness-probe-missing",
        &["\"app\""],
    );
    // A pod that runs to completion is not expected to have probes.
    let bare = with(
        clean_pod(),
        &format!("{CONTAINER}/readinessProbe"),
        Value::Null,
    );
    let bare = with(bare, &format!("{CONTAINER}/livenessProbe"), Value::Null);
    for policy in ["Never", "OnFailure"] {
        assert!(rule_ids(&with(bare.clone(), "/spec/restartPolicy", json!(policy))).is_empty());
    }
    assert_eq!(
        rule_ids(&with(bare, "/spec/restartPolicy", json!("Always"))),
        ["readiness-probe-missing", "liveness-probe-missing"]
    );
}

#[test]
fn a_controlled_pod_is_audited_like_any_other() {
    let owned = with(
        clean_pod(),
        "/metadata/ownerReferences",
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4", "uid": "u", "controller": true}]),
    );
    let owned = with(owned, &format!("{SECURITY}/privileged"), json!(true));
    assert_eq!(rule_ids(&owned), ["privileged"]);
}

#[test]
fn everything_wrong_at_once_in_catalogue_order() {
    let worst = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worst"},
        "spec": {
            "hostNetwork": true,
            "hostPID": true,
            "hostIPC": true,
            "securityContext": {"runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
            "volumes": [
                {"name": "sock", "hostPath": {"path": "/var/run/docker.sock"}},
                {"name": "logs", "hostPath": {"path": "/var/log"}}
            ],
            "containers": [{
                "name": "app",
                "image": "nginx",
                "securityContext": {
                    "privileged": true,
                    "allowPrivilegeEscalation": true,
                    "capabilities": {"add": ["SYS_ADMIN"]},
                    "appArmorProfile": {"type": "Unconfined"}
                }
            }]
        }
    });
    let found = findings(&worst);
    let ids = ids(&found);
    assert_eq!(
        ids,
        [
            "privileged",
            "capabilities-added",
            "capabilities-not-dropped",
            "allow-privilege-escalation",
            "run-as-root",
            "read-only-root-filesystem",
            "host-network",
            "host-pid",
            "host-ipc",
            "host-path-runtime-socket",
            "host-path",
            "image-tag",
            "seccomp-unconfined",
            "apparmor-unconfined",
            "automount-service-account-token",
            "resources-missing",
            "readiness-probe-missing",
            "liveness-probe-missing",
        ]
    );
    // The same object gives the same findings, in the same order.
    assert_eq!(findings(&worst), found);
    // Every finding's rule is in the catalogue, and ordered as the catalogue is.
    let positions: Vec<usize> = ids
        .iter()
        .map(|id| rules().iter().position(|r| r.id == *id).unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] <= w[1]));
    assert!(found.iter().any(|f| f.severity == Severity::High));
}
