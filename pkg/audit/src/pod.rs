//! The pod-wide rules, for a Pod and for every workload's pod template alike, and the
//! per-container rules run over its containers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::Value;

use crate::container::{self, containers};
use crate::finding::{quoted, Report};
use crate::host_path::exposes_runtime_socket;
use crate::object::part;
use crate::pod_spec::{Pod, RESTART_ALWAYS};
use crate::rules::{
    AUTOMOUNT_SERVICE_ACCOUNT_TOKEN, HOST_IPC, HOST_NETWORK, HOST_PATH, HOST_PATH_RUNTIME_SOCKET,
    HOST_PID, UNPARSEABLE,
};

/// The service account a pod naming none runs as.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The pod spec under `spec_path` and the annotations under `meta_path` of `object`,
/// checked; a part that does not parse is an `unparseable` finding and checks nothing.
pub(crate) fn check_at(
    object: &Value,
    meta_path: &[&str],
    spec_path: &[&str],
    long_running: bool,
    subject: &'static str,
    report: &mut Report<'_>,
) {
    let annotations = match part::<BTreeMap<String, String>>(object, meta_path, "annotation map") {
        Ok(annotations) => annotations.unwrap_or_default(),
        Err(problem) => return report.add(&UNPARSEABLE, problem),
    };
    match part::<PodSpec>(object, spec_path, "PodSpec") {
        Ok(Some(spec)) => {
            let restarts = spec.restart_policy.as_deref().unwrap_or(RESTART_ALWAYS);
            let pod = Pod {
                spec: &spec,
                annotations: &annotations,
                long_running: long_running && restarts == RESTART_ALWAYS,
                subject,
            };
            check(&pod, report);
        }
        // Nothing to check: a spec trimmed away, or a template the kind allows to omit.
        Ok(None) => {}
        Err(problem) => report.add(&UNPARSEABLE, problem),
    }
}

fn check(pod: &Pod<'_>, report: &mut Report<'_>) {
    let spec = pod.spec;
    let subject = pod.subject;
    let namespaces = [
        (spec.host_network, &HOST_NETWORK, "network", "hostNetwork"),
        (spec.host_pid, &HOST_PID, "PID", "hostPID"),
        (spec.host_ipc, &HOST_IPC, "IPC", "hostIPC"),
    ];
    for (set, rule, namespace, field) in namespaces {
        if set == Some(true) {
            report.add(
                rule,
                format!("{subject} shares the node's {namespace} namespace ({field}: true)"),
            );
        }
    }
    for volume in spec.volumes.iter().flatten() {
        let Some(host_path) = &volume.host_path else {
            continue;
        };
        let (rule, what) = if exposes_runtime_socket(&host_path.path) {
            (
                &HOST_PATH_RUNTIME_SOCKET,
                ", which exposes the container runtime socket",
            )
        } else {
            (&HOST_PATH, "")
        };
        report.add(
            rule,
            format!(
                "volume {} mounts the node's {}{what}",
                quoted(&volume.name),
                quoted(&host_path.path)
            ),
        );
    }
    automount(pod, report);
    for c in containers(spec) {
        container::check(pod, &c, report);
    }
}

/// Only for the default service account: a pod given its own account presumably needs
/// the token, and the account's permissions are chosen for it.
fn automount(pod: &Pod<'_>, report: &mut Report<'_>) {
    let spec = pod.spec;
    // `serviceAccount` is the deprecated spelling, read when the current one is unset.
    let account = [&spec.service_account_name, &spec.service_account]
        .into_iter()
        .flatten()
        .find(|name| !name.is_empty());
    if account.is_some_and(|name| name != DEFAULT_SERVICE_ACCOUNT) {
        return;
    }
    let subject = pod.subject;
    match spec.automount_service_account_token {
        Some(false) => {}
        Some(true) => report.add(
            &AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
            format!(
                "{subject} runs as the default service account with \
                 automountServiceAccountToken: true"
            ),
        ),
        None => report.add(
            &AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
            format!(
                "{subject} runs as the default service account and does not set \
                 automountServiceAccountToken: false"
            ),
        ),
    }
}
