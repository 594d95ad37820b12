//! Which containers the rules read, and how a container's securityContext overrides
//! the pod's.

use serde_json::{json, Value};

use crate::fixtures::{clean_container, clean_pod, findings, ids, rule_ids, with};

#[test]
fn the_container_overrides_the_pod() {
    // Pod says root, container says 1000: not root.
    let pod_root = with(clean_pod(), "/spec/securityContext/runAsUser", json!(0));
    assert_eq!(rule_ids(&pod_root), ["run-as-root"]);
    let overridden = with(
        pod_root,
        "/spec/containers/0/securityContext/runAsUser",
        json!(1000),
    );
    assert!(rule_ids(&overridden).is_empty());

    // Pod says non-root, container says false.
    let container_false = with(
        clean_pod(),
        "/spec/containers/0/securityContext/runAsNonRoot",
        json!(false),
    );
    let found = findings(&container_false);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "run-as-non-root");
    assert!(
        found[0].message.contains("its securityContext"),
        "{}",
        found[0].message
    );

    // Pod has no runAsNonRoot, the container sets it.
    let pod_unset = with(
        clean_pod(),
        "/spec/securityContext/runAsNonRoot",
        Value::Null,
    );
    assert_eq!(rule_ids(&pod_unset), ["run-as-non-root"]);
    let container_sets = with(
        pod_unset,
        "/spec/containers/0/securityContext/runAsNonRoot",
        json!(true),
    );
    assert!(rule_ids(&container_sets).is_empty());

    // Pod Unconfined, container RuntimeDefault; and the reverse.
    let pod_unconfined = with(
        clean_pod(),
        "/spec/securityContext/seccompProfile/type",
        json!("Unconfined"),
    );
    let container_confined = with(
        pod_unconfined,
        "/spec/containers/0/securityContext/seccompProfile",
        json!({"type": "RuntimeDefault"}),
    );
    assert!(rule_ids(&container_confined).is_empty());
    let container_unconfined = with(
        clean_pod(),
        "/spec/containers/0/securityContext/seccompProfile",
        json!({"type": "Unconfined"}),
    );
    assert_eq!(rule_ids(&container_unconfined), ["seccomp-unconfined"]);

    // Pod AppArmor unconfined, container RuntimeDefault.
    let apparmor = with(
        clean_pod(),
        "/spec/securityContext/appArmorProfile",
        json!({"type": "Unconfined"}),
    );
    let apparmor = with(
        apparmor,
        "/spec/containers/0/securityContext/appArmorProfile",
        json!({"type": "RuntimeDefault"}),
    );
    assert!(rule_ids(&apparmor).is_empty());
}

#[test]
fn each_container_is_reported_by_name() {
    let mut second = clean_container("sidecar");
    second["securityContext"]["privileged"] = json!(true);
    let mut first = clean_container("app");
    first["securityContext"]["privileged"] = json!(true);
    let pod = with(clean_pod(), "/spec/containers", json!([first, second]));
    let messages: Vec<String> = findings(&pod).into_iter().map(|f| f.message).collect();
    assert_eq!(
        messages,
        [
            "container \"app\" runs privileged",
            "container \"sidecar\" runs privileged"
        ]
    );
}

#[test]
fn init_containers_are_audited_without_probes() {
    let mut init = clean_container("migrate");
    init["securityContext"]["privileged"] = json!(true);
    init["readinessProbe"] = Value::Null;
    init["livenessProbe"] = Value::Null;
    init["resources"] = Value::Null;
    let pod = with(clean_pod(), "/spec/initContainers", json!([init]));
    let found = findings(&pod);
    let rules = ids(&found);
    assert_eq!(rules, ["privileged", "resources-missing"]);
    assert!(found
        .iter()
        .all(|f| f.message.starts_with("init container \"migrate\"")));
}

#[test]
fn sidecars_need_probes() {
    let mut sidecar = clean_container("proxy");
    sidecar["restartPolicy"] = json!("Always");
    sidecar["readinessProbe"] = Value::Null;
    let pod = with(clean_pod(), "/spec/initContainers", json!([sidecar]));
    let found = findings(&pod);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "readiness-probe-missing");
    assert_eq!(
        found[0].message,
        "init container \"proxy\" has no readinessProbe"
    );
}

#[test]
fn ephemeral_containers_are_audited_without_resources_or_probes() {
    let debug = json!({
        "name": "debugger",
        "image": "busybox",
        "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}
    });
    let pod = with(clean_pod(), "/spec/ephemeralContainers", json!([debug]));
    let found = findings(&pod);
    let rules = ids(&found);
    assert_eq!(
        rules,
        [
            "capabilities-added",
            "capabilities-not-dropped",
            "allow-privilege-escalation",
            "read-only-root-filesystem",
            "image-tag",
        ]
    );
    assert!(found
        .iter()
        .all(|f| f.message.starts_with("ephemeral container \"debugger\"")));
}

#[test]
fn names_from_the_object_are_quoted_and_escaped() {
    let pod = with(
        clean_pod(),
        "/spec/containers/0/name",
        json!("app\"\nforged line"),
    );
    let pod = with(
        pod,
        "/spec/containers/0/securityContext/privileged",
        json!(true),
    );
    let found = findings(&pod);
    assert_eq!(
        found[0].message,
        r#"container "app\"\nforged line" runs privileged"#
    );
}
