//! Services that expose their pods outside the cluster network.

use k8s_openapi::api::core::v1::ServiceSpec;
use serde_json::Value;

use crate::finding::Report;
use crate::object::part;
use crate::rules::{SERVICE_LOAD_BALANCER, SERVICE_NODE_PORT, UNPARSEABLE};

const NODE_PORT: &str = "NodePort";
const LOAD_BALANCER: &str = "LoadBalancer";

pub(crate) fn check(object: &Value, report: &mut Report<'_>) {
    let spec = match part::<ServiceSpec>(object, &["spec"], "ServiceSpec") {
        Ok(Some(spec)) => spec,
        Ok(None) => return,
        Err(problem) => return report.add(&UNPARSEABLE, problem),
    };
    match spec.type_.as_deref() {
        Some(NODE_PORT) => {
            let ports: Vec<String> = spec
                .ports
                .iter()
                .flatten()
                .filter_map(|p| p.node_port)
                .map(|p| p.to_string())
                .collect();
            let opens = if ports.is_empty() {
                "a port".to_owned()
            } else {
                format!("port {}", ports.join(", "))
            };
            report.add(
                &SERVICE_NODE_PORT,
                format!("Service of type {NODE_PORT} opens {opens} on every node"),
            );
        }
        // Source ranges are what the rule asks for: restricted, it is not reported.
        Some(LOAD_BALANCER)
            if spec
                .load_balancer_source_ranges
                .as_ref()
                .is_none_or(Vec::is_empty) =>
        {
            report.add(
                &SERVICE_LOAD_BALANCER,
                format!(
                    "Service of type {LOAD_BALANCER} accepts any source \
                     (no loadBalancerSourceRanges)"
                ),
            );
        }
        _ => {}
    }
}
