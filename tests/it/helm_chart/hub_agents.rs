//! The hub chart with agent mode on (`agents.enabled`): the server's config has the
//! listener with the agents Service's names, its own Service, every replica its pod's
//! address for the others (`KARPOR_AGENTS_PEER_URL`), the syncer's config none of it, and
//! the network policy lets agents in and replicas reach each other on the port.

use serde_yaml::Value;

use super::{
    at, container, sets, str_at, tools, values_file, yaml, ETCD_ELASTICSEARCH, NAMESPACE, RELEASE,
};

#[test]
fn agent_mode_renders_a_listener_on_every_server_replica() {
    let Some(tools) = tools() else { return };
    let values = [
        values_file(ETCD_ELASTICSEARCH),
        sets(&[
            "agents.enabled=true",
            "agents.service.type=LoadBalancer",
            "networkPolicy.enabled=true",
        ]),
    ]
    .concat();
    let objects = tools.check(&values);
    let server: Value = yaml(&objects.config("server").unwrap());
    let service_name = format!("{RELEASE}-agents");
    assert_eq!(str_at(&server, "agents.listen"), "0.0.0.0:7446");
    assert_eq!(
        at(&server, "agents.names"),
        Some(&yaml(&format!(
            "[{service_name}, {service_name}.{NAMESPACE}, {service_name}.{NAMESPACE}.svc, {service_name}.{NAMESPACE}.svc.cluster.local]"
        )))
    );
    assert_eq!(
        str_at(&server, "agents.advertise"),
        format!("https://{service_name}:7446")
    );
    assert_eq!(
        at(&server, "agents.peer_url"),
        None,
        "each pod's own, from its env"
    );
    let syncer: Value = yaml(&objects.config("syncer").unwrap());
    assert_eq!(at(&syncer, "agents"), None, "the listener is the server's");

    let service = objects.get(&format!("Service/{service_name}"));
    assert_eq!(str_at(service, "spec.type"), "LoadBalancer");
    assert_eq!(str_at(service, "spec.ports.0.targetPort"), "agents");
    let deployment = objects.deployment(RELEASE);
    let server_container = container(deployment);
    let ports = at(server_container, "ports")
        .and_then(Value::as_sequence)
        .unwrap();
    assert!(
        ports.iter().any(|p| p.get("name") == Some(&yaml("agents"))
            && p.get("containerPort") == Some(&yaml("7446"))),
        "{ports:?}"
    );
    let env = at(server_container, "env")
        .and_then(Value::as_sequence)
        .unwrap();
    let named = |name: &str| env.iter().find(|e| e.get("name") == Some(&yaml(name)));
    assert_eq!(
        named("POD_IP").and_then(|e| at(e, "valueFrom.fieldRef.fieldPath")),
        Some(&yaml("status.podIP"))
    );
    assert_eq!(
        named("KARPOR_AGENTS_PEER_URL").and_then(|e| e.get("value")),
        Some(&yaml("'https://$(POD_IP):7446'"))
    );
    let syncer_env = at(
        container(objects.deployment(&format!("{RELEASE}-syncer"))),
        "env",
    )
    .and_then(Value::as_sequence)
    .cloned()
    .unwrap_or_default();
    assert!(
        !syncer_env
            .iter()
            .any(|e| e.get("name") == Some(&yaml("KARPOR_AGENTS_PEER_URL"))),
        "{syncer_env:?}"
    );

    let policy = objects.get(&format!("NetworkPolicy/{RELEASE}"));
    let ingress = at(policy, "spec.ingress")
        .and_then(Value::as_sequence)
        .unwrap();
    assert!(
        ingress
            .iter()
            .any(|rule| at(rule, "ports.0.port") == Some(&yaml("7446"))
                && rule.get("from").is_none()),
        "agents come from anywhere: {ingress:?}"
    );
    let egress = super::egress_to(policy, 7446, "TCP");
    assert_eq!(egress.len(), 1, "the other replicas' listeners: {egress:?}");
}

#[test]
fn agent_mode_is_off_by_default() {
    let Some(tools) = tools() else { return };
    let objects = tools.check(&values_file(ETCD_ELASTICSEARCH));
    let server: Value = yaml(&objects.config("server").unwrap());
    assert_eq!(at(&server, "agents"), None);
    assert!(!objects.has(&format!("Service/{RELEASE}-agents")));
}
