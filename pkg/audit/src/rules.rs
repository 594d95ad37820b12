//! The rule catalogue: every rule's id, default severity and the text shown with its
//! findings. The checks themselves live beside what they read (`container`, `pod`,
//! `workload`, `service`, `deprecated`); they name their rule by one of these statics, so
//! a finding's title and remediation are always the catalogue's.

use serde::Serialize;

use crate::Severity;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Category {
    Security,
    Reliability,
}

/// One rule as REST, the CLI and the docs list it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleInfo {
    /// The name in findings and in `disabled` / `severities`.
    pub id: &'static str,
    pub category: Category,
    /// Before any `severities` override.
    pub severity: Severity,
    pub title: &'static str,
    /// Why it matters.
    pub rationale: &'static str,
    pub remediation: &'static str,
}

/// Every rule, in the order findings are listed.
pub fn rules() -> &'static [&'static RuleInfo] {
    &RULES
}

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static RuleInfo> {
    RULES.iter().copied().find(|r| r.id == id)
}

/// Where a rule sits in [`rules`]: findings are sorted by it.
pub(crate) fn position(id: &str) -> usize {
    RULES.iter().position(|r| r.id == id).unwrap_or(usize::MAX)
}

static RULES: [&RuleInfo; 26] = [
    &PRIVILEGED,
    &CAPABILITIES_ADDED,
    &CAPABILITIES_NOT_DROPPED,
    &ALLOW_PRIVILEGE_ESCALATION,
    &RUN_AS_ROOT,
    &RUN_AS_NON_ROOT,
    &READ_ONLY_ROOT_FILESYSTEM,
    &HOST_NETWORK,
    &HOST_PID,
    &HOST_IPC,
    &HOST_PATH_RUNTIME_SOCKET,
    &HOST_PATH,
    &IMAGE_TAG,
    &SECCOMP_UNCONFINED,
    &SECCOMP_PROFILE_MISSING,
    &APPARMOR_UNCONFINED,
    &AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
    &SERVICE_LOAD_BALANCER,
    &SERVICE_NODE_PORT,
    &RESOURCES_MISSING,
    &READINESS_PROBE_MISSING,
    &LIVENESS_PROBE_MISSING,
    &SINGLE_REPLICA,
    &PDB_MISSING,
    &DEPRECATED_API_VERSION,
    &UNPARSEABLE,
];

const fn security(
    id: &'static str,
    severity: Severity,
    title: &'static str,
    rationale: &'static str,
    remediation: &'static str,
) -> RuleInfo {
    RuleInfo {
        id,
        category: Category::Security,
        severity,
        title,
        rationale,
        remediation,
    }
}

const fn reliability(
    id: &'static str,
    severity: Severity,
    title: &'static str,
    rationale: &'static str,
    remediation: &'static str,
) -> RuleInfo {
    RuleInfo {
        id,
        category: Category::Reliability,
        severity,
        title,
        rationale,
        remediation,
    }
}

pub(crate) static PRIVILEGED: RuleInfo = security(
    "privileged",
    Severity::High,
    "Privileged container",
    "A privileged container has every capability and the node's devices; a process that \
     escapes it is root on the node.",
    "Remove securityContext.privileged (or set it to false) and add only the capabilities \
     the process needs.",
);

pub(crate) static CAPABILITIES_ADDED: RuleInfo = security(
    "capabilities-added",
    Severity::Medium,
    "Capabilities added",
    "Each added Linux capability (SYS_ADMIN, NET_ADMIN, SYS_PTRACE, ...) widens what a \
     compromised process can do to the kernel, the node's network and other processes.",
    "Remove the entries of securityContext.capabilities.add the process does not need; a \
     server usually needs at most NET_BIND_SERVICE.",
);

pub(crate) static CAPABILITIES_NOT_DROPPED: RuleInfo = security(
    "capabilities-not-dropped",
    Severity::Low,
    "Capabilities not dropped",
    "Unless dropped, the runtime's default capabilities (CHOWN, SETUID, NET_RAW, ...) stay \
     with the container; NET_RAW alone allows spoofing on the pod network.",
    "Set securityContext.capabilities.drop: [ALL] and add back only what is needed.",
);

pub(crate) static ALLOW_PRIVILEGE_ESCALATION: RuleInfo = security(
    "allow-privilege-escalation",
    Severity::Medium,
    "Privilege escalation allowed",
    "Unless allowPrivilegeEscalation is false, no_new_privs is not set: a setuid binary or \
     a file capability can give a process more privileges than its parent.",
    "Set securityContext.allowPrivilegeEscalation: false.",
);

pub(crate) static RUN_AS_ROOT: RuleInfo = security(
    "run-as-root",
    Severity::High,
    "Runs as root",
    "runAsUser: 0 runs the container's processes as root; an escape, or a writable host \
     mount, then acts as root on the node.",
    "Set runAsUser to a non-zero UID and runAsNonRoot: true, in the container's or the \
     pod's securityContext.",
);

pub(crate) static RUN_AS_NON_ROOT: RuleInfo = security(
    "run-as-non-root",
    Severity::Medium,
    "May run as root",
    "Without runAsNonRoot: true or a non-zero runAsUser, the image's USER decides, and \
     many images run as root.",
    "Set securityContext.runAsNonRoot: true (pod or container), or runAsUser to a non-zero \
     UID.",
);

pub(crate) static READ_ONLY_ROOT_FILESYSTEM: RuleInfo = security(
    "read-only-root-filesystem",
    Severity::Low,
    "Writable root filesystem",
    "A writable root filesystem lets an intruder drop tools into the container and alter \
     its binaries.",
    "Set securityContext.readOnlyRootFilesystem: true and mount emptyDir volumes where the \
     process must write.",
);

pub(crate) static HOST_NETWORK: RuleInfo = security(
    "host-network",
    Severity::High,
    "Host network namespace",
    "hostNetwork: true puts the pod on the node's network stack: it can bind the node's \
     ports, reach node-local services and see the node's traffic.",
    "Remove hostNetwork unless the pod is a node agent that needs it (a CNI plugin, a node \
     exporter); disable this rule for those.",
);

pub(crate) static HOST_PID: RuleInfo = security(
    "host-pid",
    Severity::High,
    "Host PID namespace",
    "hostPID: true lets the pod see and signal every process on the node and read their \
     environments and memory maps through /proc.",
    "Remove hostPID.",
);

pub(crate) static HOST_IPC: RuleInfo = security(
    "host-ipc",
    Severity::High,
    "Host IPC namespace",
    "hostIPC: true shares the node's System V IPC and POSIX shared memory with the pod.",
    "Remove hostIPC.",
);

pub(crate) static HOST_PATH_RUNTIME_SOCKET: RuleInfo = security(
    "host-path-runtime-socket",
    Severity::High,
    "Container runtime socket mounted",
    "Whoever reaches the container runtime's socket (Docker, containerd, CRI-O, Podman) can \
     start a privileged container on the node, so is root on the node; mounting a directory \
     that holds the socket exposes it too.",
    "Do not mount the runtime socket or a directory containing it; use the Kubernetes API \
     or a dedicated agent with narrow privileges.",
);

pub(crate) static HOST_PATH: RuleInfo = security(
    "host-path",
    Severity::Medium,
    "hostPath volume",
    "A hostPath volume exposes part of the node's filesystem: written, it can alter the \
     node; read, it can leak other pods' data and the node's credentials.",
    "Use a persistentVolumeClaim, configMap, secret or emptyDir instead; if a host path is \
     unavoidable, keep it narrow and mount it readOnly.",
);

pub(crate) static IMAGE_TAG: RuleInfo = security(
    "image-tag",
    Severity::Medium,
    "Image tag missing or latest",
    "Without a tag, or with :latest, what runs changes with each pull: rollouts are not \
     reproducible, a rollback may not restore the old code, and a pushed image is picked \
     up unreviewed.",
    "Pin the image to a version tag, or better to a digest (name@sha256:...).",
);

pub(crate) static SECCOMP_UNCONFINED: RuleInfo = security(
    "seccomp-unconfined",
    Severity::Medium,
    "Seccomp unconfined",
    "An Unconfined seccomp profile turns syscall filtering off, even on nodes whose kubelet \
     defaults to RuntimeDefault.",
    "Use seccompProfile.type: RuntimeDefault, or a Localhost profile allowing what the \
     process needs.",
);

pub(crate) static SECCOMP_PROFILE_MISSING: RuleInfo = security(
    "seccomp-profile-missing",
    Severity::Low,
    "No seccomp profile",
    "With no profile the container runs Unconfined unless the kubelet's seccomp default is \
     on: every syscall stays open to an exploit.",
    "Set securityContext.seccompProfile.type: RuntimeDefault in the pod's securityContext \
     (or per container).",
);

pub(crate) static APPARMOR_UNCONFINED: RuleInfo = security(
    "apparmor-unconfined",
    Severity::Medium,
    "AppArmor unconfined",
    "An unconfined AppArmor profile removes the runtime's default restrictions on file, \
     mount and raw network access.",
    "Use appArmorProfile.type: RuntimeDefault or a Localhost profile, and remove an \
     `unconfined` container.apparmor.security.beta.kubernetes.io annotation.",
);

pub(crate) static AUTOMOUNT_SERVICE_ACCOUNT_TOKEN: RuleInfo = security(
    "automount-service-account-token",
    Severity::Low,
    "Default service account token mounted",
    "The pod runs as its namespace's default service account with the token mounted: \
     whatever that account is granted is available to anyone inside the pod, and most pods \
     never call the API.",
    "Set automountServiceAccountToken: false on the pod (or on the default ServiceAccount), \
     or run the pod as a dedicated service account.",
);

pub(crate) static SERVICE_LOAD_BALANCER: RuleInfo = security(
    "service-load-balancer",
    Severity::Medium,
    "LoadBalancer service",
    "A LoadBalancer service usually gets an address reachable from outside the cluster, \
     often from the internet.",
    "Set loadBalancerSourceRanges to the clients that need it, use an internal load \
     balancer, or serve through an Ingress or Gateway.",
);

pub(crate) static SERVICE_NODE_PORT: RuleInfo = security(
    "service-node-port",
    Severity::Low,
    "NodePort service",
    "A NodePort service opens its port on every node's addresses, around whatever fronts \
     the cluster.",
    "Use a ClusterIP service behind an Ingress or Gateway, or restrict access to the nodes' \
     port range.",
);

pub(crate) static RESOURCES_MISSING: RuleInfo = reliability(
    "resources-missing",
    Severity::Medium,
    "Resource requests or limits missing",
    "Without requests the scheduler places the pod blind and it is evicted first under \
     pressure; without limits one container can take its node's memory or CPU from every \
     other pod.",
    "Set resources.requests and resources.limits for cpu and memory (a limit alone also \
     sets the request).",
);

pub(crate) static READINESS_PROBE_MISSING: RuleInfo = reliability(
    "readiness-probe-missing",
    Severity::Medium,
    "No readiness probe",
    "Without a readiness probe a container gets traffic as soon as it starts, and keeps \
     getting it while it cannot serve.",
    "Add a readinessProbe that checks the container can serve.",
);

pub(crate) static LIVENESS_PROBE_MISSING: RuleInfo = reliability(
    "liveness-probe-missing",
    Severity::Low,
    "No liveness probe",
    "Without a liveness probe a hung process (a deadlock, an exhausted pool) is never \
     restarted.",
    "Add a livenessProbe that fails only when the process cannot recover by itself.",
);

pub(crate) static SINGLE_REPLICA: RuleInfo = reliability(
    "single-replica",
    Severity::Medium,
    "Single replica",
    "With one replica, every node drain, node loss or failed rollout is downtime.",
    "Run at least 2 replicas (spec.replicas, or an autoscaler's minReplicas), spread over \
     nodes.",
);

pub(crate) static PDB_MISSING: RuleInfo = reliability(
    "pdb-missing",
    Severity::Medium,
    "No PodDisruptionBudget",
    "Without a PodDisruptionBudget, a node drain or a cluster upgrade may evict every \
     replica at once.",
    "Create a PodDisruptionBudget (policy/v1) selecting the workload's pods, for example \
     with maxUnavailable: 1.",
);

pub(crate) static DEPRECATED_API_VERSION: RuleInfo = reliability(
    "deprecated-api-version",
    Severity::Medium,
    "Removed API version",
    "The object uses an apiVersion that Kubernetes no longer serves from the release named \
     in the finding: its manifests and the clients using them break on upgrade.",
    "Move the manifests and clients to the replacement named in the finding.",
);

pub(crate) static UNPARSEABLE: RuleInfo = reliability(
    "unparseable",
    Severity::Low,
    "Cannot be audited",
    "Part of the object does not match the Kubernetes schema of its kind, so the rules \
     that read that part were not checked; a clean result would be misleading.",
    "Check where the object comes from; the finding names the part and the parse error.",
);

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn ids_are_unique_kebab_case_and_found() {
        let ids: BTreeSet<&str> = rules().iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), rules().len());
        for r in rules() {
            assert!(
                r.id.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{}",
                r.id
            );
            assert_eq!(rule(r.id), Some(*r));
            assert!(!r.title.is_empty() && !r.rationale.is_empty() && !r.remediation.is_empty());
        }
        assert_eq!(rule("no-such-rule"), None);
        assert_eq!(position(PRIVILEGED.id), 0);
        assert_eq!(position("no-such-rule"), usize::MAX);
    }

    #[test]
    fn serialized_in_camel_case() {
        let json = serde_json::to_value(SINGLE_REPLICA).unwrap();
        assert_eq!(json["id"], "single-replica");
        assert_eq!(json["category"], "Reliability");
        assert_eq!(json["severity"], "Medium");
        assert!(json["remediation"].is_string());
    }
}
