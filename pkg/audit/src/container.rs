//! The per-container rules. Init, regular and ephemeral containers are read alike; a
//! container's securityContext overrides the pod's field by field, as the kubelet does.

use k8s_openapi::api::core::v1::{
    Container, EphemeralContainer, PodSpec, ResourceRequirements, SecurityContext,
};

use crate::finding::{quoted, quoted_list, Report};
use crate::image::{pin, Pin, LATEST};
use crate::pod_spec::{Pod, RESTART_ALWAYS};
use crate::rules::{
    ALLOW_PRIVILEGE_ESCALATION, APPARMOR_UNCONFINED, CAPABILITIES_ADDED, CAPABILITIES_NOT_DROPPED,
    IMAGE_TAG, LIVENESS_PROBE_MISSING, PRIVILEGED, READINESS_PROBE_MISSING,
    READ_ONLY_ROOT_FILESYSTEM, RESOURCES_MISSING, RUN_AS_NON_ROOT, RUN_AS_ROOT,
    SECCOMP_PROFILE_MISSING, SECCOMP_UNCONFINED,
};

/// Legacy per-container seccomp annotation, followed by the container's name; ignored
/// by Kubernetes since 1.27.
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";
/// Legacy pod-wide seccomp annotation.
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
/// Legacy per-container AppArmor annotation, followed by the container's name.
const APPARMOR_CONTAINER_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";
/// The value both legacy annotations use to turn confinement off.
const UNCONFINED_ANNOTATION: &str = "unconfined";
/// The profile type both securityContext fields use to turn confinement off.
const UNCONFINED_TYPE: &str = "Unconfined";
/// The one capability entry that drops them all.
const ALL_CAPABILITIES: &str = "ALL";
/// Resources every container should request and be limited to.
const RESOURCES: [&str; 2] = ["cpu", "memory"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Init,
    Regular,
    Ephemeral,
}

/// What the rules read of a container, whichever list it is in.
pub(crate) struct ContainerRef<'a> {
    role: Role,
    name: &'a str,
    image: Option<&'a str>,
    security: Option<&'a SecurityContext>,
    resources: Option<&'a ResourceRequirements>,
    readiness_probe: bool,
    liveness_probe: bool,
    restart_policy: Option<&'a str>,
}

impl ContainerRef<'_> {
    /// How messages name it: `init container "migrate"`.
    fn label(&self) -> String {
        let role = match self.role {
            Role::Init => "init container",
            Role::Regular => "container",
            Role::Ephemeral => "ephemeral container",
        };
        format!("{role} {}", quoted(self.name))
    }

    /// Runs as long as the pod: a regular container or a sidecar.
    fn long_running(&self) -> bool {
        match self.role {
            Role::Regular => true,
            Role::Init => self.restart_policy == Some(RESTART_ALWAYS),
            Role::Ephemeral => false,
        }
    }
}

/// Init containers, then containers, then ephemeral containers, each in its list's order.
pub(crate) fn containers(spec: &PodSpec) -> Vec<ContainerRef<'_>> {
    let init = spec.init_containers.iter().flatten();
    let mut all: Vec<ContainerRef<'_>> = init.map(|c| ContainerRef::of(Role::Init, c)).collect();
    all.extend(
        spec.containers
            .iter()
            .map(|c| ContainerRef::of(Role::Regular, c)),
    );
    let ephemeral = spec.ephemeral_containers.iter().flatten();
    all.extend(ephemeral.map(ContainerRef::ephemeral));
    all
}

impl<'a> ContainerRef<'a> {
    fn of(role: Role, c: &'a Container) -> Self {
        ContainerRef {
            role,
            name: &c.name,
            image: c.image.as_deref(),
            security: c.security_context.as_ref(),
            resources: c.resources.as_ref(),
            readiness_probe: c.readiness_probe.is_some(),
            liveness_probe: c.liveness_probe.is_some(),
            restart_policy: c.restart_policy.as_deref(),
        }
    }

    fn ephemeral(c: &'a EphemeralContainer) -> Self {
        ContainerRef {
            role: Role::Ephemeral,
            name: &c.name,
            image: c.image.as_deref(),
            security: c.security_context.as_ref(),
            resources: c.resources.as_ref(),
            readiness_probe: c.readiness_probe.is_some(),
            liveness_probe: c.liveness_probe.is_some(),
            restart_policy: c.restart_policy.as_deref(),
        }
    }
}

pub(crate) fn check(pod: &Pod<'_>, c: &ContainerRef<'_>, report: &mut Report<'_>) {
    let label = c.label();
    let security = c.security;
    if security.and_then(|s| s.privileged) == Some(true) {
        report.add(&PRIVILEGED, format!("{label} runs privileged"));
    }
    capabilities(&label, security, report);
    match security.and_then(|s| s.allow_privilege_escalation) {
        Some(false) => {}
        Some(true) => report.add(
            &ALLOW_PRIVILEGE_ESCALATION,
            format!("{label} sets allowPrivilegeEscalation: true"),
        ),
        None => report.add(
            &ALLOW_PRIVILEGE_ESCALATION,
            format!("{label} does not set allowPrivilegeEscalation: false"),
        ),
    }
    user(pod, &label, security, report);
    if security.and_then(|s| s.read_only_root_filesystem) != Some(true) {
        report.add(
            &READ_ONLY_ROOT_FILESYSTEM,
            format!("{label} does not set readOnlyRootFilesystem: true"),
        );
    }
    if let Some(image) = c.image.filter(|i| !i.is_empty()) {
        match pin(image) {
            Pin::Digest | Pin::Tag => {}
            Pin::Latest => report.add(
                &IMAGE_TAG,
                format!(
                    "{label} uses image {} with the {LATEST:?} tag",
                    quoted(image)
                ),
            ),
            Pin::Untagged => report.add(
                &IMAGE_TAG,
                format!("{label} uses image {} without a tag", quoted(image)),
            ),
        }
    }
    seccomp(pod, c, &label, report);
    apparmor(pod, c, &label, report);
    // The API refuses resources and probes on ephemeral containers.
    if c.role != Role::Ephemeral {
        resources(pod, &label, c.resources, report);
    }
    if pod.long_running && c.long_running() {
        if !c.readiness_probe {
            report.add(
                &READINESS_PROBE_MISSING,
                format!("{label} has no readinessProbe"),
            );
        }
        if !c.liveness_probe {
            report.add(
                &LIVENESS_PROBE_MISSING,
                format!("{label} has no livenessProbe"),
            );
        }
    }
}

fn capabilities(label: &str, security: Option<&SecurityContext>, report: &mut Report<'_>) {
    let caps = security.and_then(|s| s.capabilities.as_ref());
    let added = caps.and_then(|c| c.add.as_deref()).unwrap_or_default();
    if !added.is_empty() {
        report.add(
            &CAPABILITIES_ADDED,
            format!(
                "{label} adds capabilities {}",
                quoted_list(added.iter().map(String::as_str))
            ),
        );
    }
    let dropped = caps.and_then(|c| c.drop.as_deref()).unwrap_or_default();
    if !dropped.iter().any(|d| d == ALL_CAPABILITIES) {
        report.add(
            &CAPABILITIES_NOT_DROPPED,
            format!("{label} does not drop {ALL_CAPABILITIES} capabilities"),
        );
    }
}

/// Where an effective setting came from, for the message.
fn from_container(container: bool) -> &'static str {
    if container {
        "its securityContext"
    } else {
        "the pod's securityContext"
    }
}

/// `run-as-root` for an effective UID 0; otherwise `run-as-non-root` unless a non-zero
/// UID or `runAsNonRoot: true` is in force.
fn user(pod: &Pod<'_>, label: &str, security: Option<&SecurityContext>, report: &mut Report<'_>) {
    let pod_security = pod.spec.security_context.as_ref();
    let uid = match security.and_then(|s| s.run_as_user) {
        Some(uid) => Some((uid, true)),
        None => pod_security
            .and_then(|s| s.run_as_user)
            .map(|uid| (uid, false)),
    };
    match uid {
        Some((0, container)) => {
            report.add(
                &RUN_AS_ROOT,
                format!(
                    "{label} runs as UID 0 (runAsUser in {})",
                    from_container(container)
                ),
            );
            return;
        }
        Some(_) => return,
        None => {}
    }
    let non_root = match security.and_then(|s| s.run_as_non_root) {
        Some(value) => Some((value, true)),
        None => pod_security
            .and_then(|s| s.run_as_non_root)
            .map(|v| (v, false)),
    };
    match non_root {
        Some((true, _)) => {}
        Some((false, container)) => report.add(
            &RUN_AS_NON_ROOT,
            format!(
                "{label} sets runAsNonRoot: false (in {}) and no non-zero runAsUser",
                from_container(container)
            ),
        ),
        None => report.add(
            &RUN_AS_NON_ROOT,
            format!("{label} sets neither runAsNonRoot: true nor a non-zero runAsUser"),
        ),
    }
}

/// A confinement profile in force, and where it was set.
struct Profile {
    unconfined: bool,
    source: String,
}

impl Profile {
    fn field(type_: &str, container: bool) -> Self {
        Profile {
            unconfined: type_ == UNCONFINED_TYPE,
            source: from_container(container).to_owned(),
        }
    }

    fn annotation(key: &str, value: &str) -> Self {
        Profile {
            unconfined: value == UNCONFINED_ANNOTATION,
            source: format!("annotation {}", quoted(key)),
        }
    }
}

/// The container's field, then the pod's. Kubernetes has ignored the legacy annotations
/// since 1.27 (kubelets since 1.25), so they only speak when no field is set: an
/// `unconfined` one is reported as the intent it states (and what an old cluster runs),
/// any other value as a missing profile.
fn seccomp(pod: &Pod<'_>, c: &ContainerRef<'_>, label: &str, report: &mut Report<'_>) {
    let container_field = c.security.and_then(|s| s.seccomp_profile.as_ref());
    let pod_field = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref());
    let field = container_field
        .map(|p| Profile::field(&p.type_, true))
        .or_else(|| pod_field.map(|p| Profile::field(&p.type_, false)));
    let container_key = format!("{SECCOMP_CONTAINER_ANNOTATION}{}", c.name);
    let annotation = [container_key.as_str(), SECCOMP_POD_ANNOTATION]
        .into_iter()
        .find_map(|key| {
            pod.annotation(key)
                .map(|value| Profile::annotation(key, value))
        });
    match (field, annotation) {
        (Some(field), _) if field.unconfined => report.add(
            &SECCOMP_UNCONFINED,
            format!("{label} runs seccomp Unconfined (set in {})", field.source),
        ),
        (Some(_), _) => {}
        (None, Some(annotation)) if annotation.unconfined => report.add(
            &SECCOMP_UNCONFINED,
            format!(
                "{label} asks for seccomp unconfined (in the deprecated {})",
                annotation.source
            ),
        ),
        (None, Some(annotation)) => report.add(
            &SECCOMP_PROFILE_MISSING,
            format!(
                "{label} has no seccomp profile in its or the pod's securityContext, only \
                 the deprecated {}, which Kubernetes no longer applies",
                annotation.source
            ),
        ),
        (None, None) => report.add(
            &SECCOMP_PROFILE_MISSING,
            format!("{label} has no seccomp profile in its or the pod's securityContext"),
        ),
    }
}

/// The container's field, its annotation, then the pod's field. No profile is not a
/// finding: the runtime's default profile applies where AppArmor is on.
fn apparmor(pod: &Pod<'_>, c: &ContainerRef<'_>, label: &str, report: &mut Report<'_>) {
    let container_key = format!("{APPARMOR_CONTAINER_ANNOTATION}{}", c.name);
    let container_field = c.security.and_then(|s| s.app_armor_profile.as_ref());
    let pod_field = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref());
    let profile = container_field
        .map(|p| Profile::field(&p.type_, true))
        .or_else(|| {
            pod.annotation(&container_key)
                .map(|v| Profile::annotation(&container_key, v))
        })
        .or_else(|| pod_field.map(|p| Profile::field(&p.type_, false)));
    if let Some(Profile {
        unconfined: true,
        source,
    }) = profile
    {
        report.add(
            &APPARMOR_UNCONFINED,
            format!("{label} runs AppArmor unconfined (set in {source})"),
        );
    }
}

/// cpu and memory requests and limits; a limit stands for a missing request (the API
/// server defaults one to the other), and pod-level resources cover every container.
fn resources(
    pod: &Pod<'_>,
    label: &str,
    own: Option<&ResourceRequirements>,
    report: &mut Report<'_>,
) {
    let sources = [own, pod.spec.resources.as_ref()];
    let has = |limits: bool, resource: &str| {
        sources.iter().flatten().any(|r| {
            let set = if limits { &r.limits } else { &r.requests };
            set.as_ref().is_some_and(|set| set.contains_key(resource))
        })
    };
    let mut missing = Vec::new();
    for resource in RESOURCES {
        let limited = has(true, resource);
        if !limited && !has(false, resource) {
            missing.push(format!("requests.{resource}"));
        }
        if !limited {
            missing.push(format!("limits.{resource}"));
        }
    }
    if !missing.is_empty() {
        report.add(
            &RESOURCES_MISSING,
            format!("{label} sets no {}", missing.join(", ")),
        );
    }
}
