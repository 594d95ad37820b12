//! The agent's chart (`charts/karpor-agent`): it renders and validates, its ClusterRole
//! only reads (get, list, watch; no wildcard, no subresource but `pods/log`), the join
//! token reaches the agent as a file from a Secret, the probes are the health spec's on
//! the agent's probe port, values that cannot work are refused with what to set, and the
//! real binary accepts the config file it renders.

use std::collections::BTreeSet;

use serde_yaml::Value;

use super::{at, config_verdict, container, sets, str_at, tools, RELEASE};

pub(super) const AGENT_CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/karpor-agent");
const PIN: &str = "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

fn installed(extra: &[&str]) -> Vec<String> {
    let hub = format!("hub.pin={PIN}");
    let mut values = vec![
        "hub.address=https://hub.example:7446",
        &hub,
        "joinToken.value=karpor-join.edge.s3cret",
    ];
    values.extend_from_slice(extra);
    sets(&values)
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_sequence)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_agent_chart_renders_a_read_only_agent() {
    let Some(tools) = tools() else { return };
    let objects = tools.check_of(AGENT_CHART, &installed(&[]));
    let name = format!("{RELEASE}-karpor-agent");

    let role = objects.get(&format!("ClusterRole/{name}-read"));
    let rules = at(role, "rules").and_then(Value::as_sequence).unwrap();
    let mut resources = BTreeSet::new();
    for rule in rules {
        for verb in strings(rule.get("verbs")) {
            assert!(
                ["get", "list", "watch"].contains(&verb.as_str()),
                "{verb} in {rule:?}"
            );
        }
        for resource in strings(rule.get("resources")) {
            assert!(resource != "*", "a wildcard in {rule:?}");
            assert!(
                !resource.contains('/') || resource == "pods/log",
                "{resource}"
            );
            resources.insert(resource);
        }
        assert!(
            !strings(rule.get("apiGroups")).contains(&"*".to_owned()),
            "{rule:?}"
        );
    }
    for needed in ["pods", "pods/log", "events", "configmaps", "deployments"] {
        assert!(
            resources.contains(needed),
            "{needed} not readable: {resources:?}"
        );
    }
    let binding = objects.get(&format!("ClusterRoleBinding/{name}-read"));
    assert_eq!(str_at(binding, "subjects.0.name"), name);

    let deployment = objects.get(&format!("Deployment/{name}"));
    assert_eq!(
        at(deployment, "spec.replicas").and_then(Value::as_u64),
        Some(1)
    );
    let agent = container(deployment);
    assert_eq!(
        strings(agent.get("args")),
        ["agent", "--config", "/etc/karpor-agent/config/agent.yaml"]
    );
    assert_eq!(str_at(agent, "livenessProbe.httpGet.path"), "/livez");
    assert_eq!(str_at(agent, "readinessProbe.httpGet.path"), "/readyz");
    assert_eq!(
        at(agent, "ports.0.containerPort").and_then(Value::as_u64),
        Some(7445)
    );
    assert_eq!(
        at(agent, "securityContext.readOnlyRootFilesystem").and_then(Value::as_bool),
        Some(true)
    );

    // The token: a Secret's file, never in the config or the pod's environment.
    assert_eq!(
        objects.secret(&format!("{name}-join"), "token"),
        b"karpor-join.edge.s3cret"
    );
    let config = objects.get(&format!("ConfigMap/{name}-config"));
    let file = at(config, "data")
        .and_then(|d| d.get("agent.yaml"))
        .and_then(Value::as_str)
        .unwrap();
    assert!(!file.contains("s3cret"), "{file}");
    assert!(
        file.contains("token: {file: /etc/karpor-agent/join/token}"),
        "{file}"
    );
    assert!(!format!("{agent:?}").contains("s3cret"));

    // The rendered config is one the real binary takes.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "karpor-join.edge.s3cret\n").unwrap();
    let relocated = file
        .replace(
            "/etc/karpor-agent/join/token",
            &dir.path().join("token").display().to_string(),
        )
        .replace(
            "/var/lib/karpor-agent/",
            &format!("{}/", dir.path().display()),
        )
        .replace("0.0.0.0:7445", "127.0.0.1:0");
    let verdict = config_verdict("agent", &relocated, dir.path());
    assert_eq!(verdict, Ok(()), "{relocated}");
}

#[test]
fn agent_values_that_cannot_work_are_refused_naming_what_to_set() {
    let Some(tools) = tools() else { return };
    let pin = format!("hub.pin={PIN}");
    for (values, expected) in [
        (
            sets(&[&pin, "joinToken.value=t"]),
            "hub.address is required",
        ),
        (
            sets(&["hub.address=http://hub:7446", &pin, "joinToken.value=t"]),
            "https:// only",
        ),
        (
            sets(&[
                "hub.address=https://hub:7446",
                "hub.pin=abc",
                "joinToken.value=t",
            ]),
            "hub.pin is required",
        ),
        (
            sets(&["hub.address=https://hub:7446", &pin]),
            "joinToken.value or joinToken.existingSecret",
        ),
    ] {
        let refused = tools.refused_of(AGENT_CHART, &values);
        assert!(refused.contains(expected), "{values:?}: {refused}");
    }
    for (rule, expected) in [
        (
            r#"[{"apiGroups":[""],"resources":["nodes/proxy"],"verbs":["get"]}]"#,
            "subresource",
        ),
        (
            r#"[{"apiGroups":[""],"resources":["pods/exec"],"verbs":["get"]}]"#,
            "subresource",
        ),
        (
            r#"[{"apiGroups":["*"],"resources":["*"],"verbs":["get"]}]"#,
            "wildcard",
        ),
        (
            r#"[{"apiGroups":[""],"resources":["pods"],"verbs":["delete"]}]"#,
            "get",
        ),
    ] {
        let mut values = installed(&[]);
        values.extend(["--set-json".to_owned(), format!("rbac.extraRules={rule}")]);
        let refused = tools.refused_of(AGENT_CHART, &values);
        assert!(refused.contains(expected), "{rule}: {refused}");
    }
}
