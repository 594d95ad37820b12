//! API versions Kubernetes has stopped serving, from its deprecation guide.

use crate::finding::{plain_or_quoted, Report};
use crate::object::TypeRef;
use crate::rules::DEPRECATED_API_VERSION;

struct Removed {
    api_version: &'static str,
    /// `None`: every kind of that version.
    kind: Option<&'static str>,
    /// The first Kubernetes release that no longer serves it.
    removed_in: &'static str,
    replacement: &'static str,
}

const fn kind(
    api_version: &'static str,
    kind: &'static str,
    removed_in: &'static str,
    replacement: &'static str,
) -> Removed {
    Removed {
        api_version,
        kind: Some(kind),
        removed_in,
        replacement,
    }
}

const fn version(
    api_version: &'static str,
    removed_in: &'static str,
    replacement: &'static str,
) -> Removed {
    Removed {
        api_version,
        kind: None,
        removed_in,
        replacement,
    }
}

const PSA: &str = "Pod Security Admission (no API replaces it)";

const REMOVED: &[Removed] = &[
    kind("extensions/v1beta1", "Deployment", "1.16", "apps/v1"),
    kind("extensions/v1beta1", "DaemonSet", "1.16", "apps/v1"),
    kind("extensions/v1beta1", "ReplicaSet", "1.16", "apps/v1"),
    kind(
        "extensions/v1beta1",
        "NetworkPolicy",
        "1.16",
        "networking.k8s.io/v1",
    ),
    kind("extensions/v1beta1", "PodSecurityPolicy", "1.16", PSA),
    kind(
        "extensions/v1beta1",
        "Ingress",
        "1.22",
        "networking.k8s.io/v1",
    ),
    version("apps/v1beta1", "1.16", "apps/v1"),
    version("apps/v1beta2", "1.16", "apps/v1"),
    version("networking.k8s.io/v1beta1", "1.22", "networking.k8s.io/v1"),
    version(
        "admissionregistration.k8s.io/v1beta1",
        "1.22",
        "admissionregistration.k8s.io/v1",
    ),
    version(
        "apiextensions.k8s.io/v1beta1",
        "1.22",
        "apiextensions.k8s.io/v1",
    ),
    version(
        "apiregistration.k8s.io/v1beta1",
        "1.22",
        "apiregistration.k8s.io/v1",
    ),
    version(
        "authentication.k8s.io/v1beta1",
        "1.22",
        "authentication.k8s.io/v1",
    ),
    version(
        "authorization.k8s.io/v1beta1",
        "1.22",
        "authorization.k8s.io/v1",
    ),
    version(
        "certificates.k8s.io/v1beta1",
        "1.22",
        "certificates.k8s.io/v1",
    ),
    version(
        "coordination.k8s.io/v1beta1",
        "1.22",
        "coordination.k8s.io/v1",
    ),
    version(
        "rbac.authorization.k8s.io/v1alpha1",
        "1.22",
        "rbac.authorization.k8s.io/v1",
    ),
    version(
        "rbac.authorization.k8s.io/v1beta1",
        "1.22",
        "rbac.authorization.k8s.io/v1",
    ),
    version("scheduling.k8s.io/v1beta1", "1.22", "scheduling.k8s.io/v1"),
    kind(
        "storage.k8s.io/v1beta1",
        "CSIDriver",
        "1.22",
        "storage.k8s.io/v1",
    ),
    kind(
        "storage.k8s.io/v1beta1",
        "CSINode",
        "1.22",
        "storage.k8s.io/v1",
    ),
    kind(
        "storage.k8s.io/v1beta1",
        "StorageClass",
        "1.22",
        "storage.k8s.io/v1",
    ),
    kind(
        "storage.k8s.io/v1beta1",
        "VolumeAttachment",
        "1.22",
        "storage.k8s.io/v1",
    ),
    kind(
        "storage.k8s.io/v1beta1",
        "CSIStorageCapacity",
        "1.27",
        "storage.k8s.io/v1",
    ),
    kind("batch/v1beta1", "CronJob", "1.25", "batch/v1"),
    kind(
        "discovery.k8s.io/v1beta1",
        "EndpointSlice",
        "1.25",
        "discovery.k8s.io/v1",
    ),
    kind("events.k8s.io/v1beta1", "Event", "1.25", "events.k8s.io/v1"),
    kind(
        "autoscaling/v2beta1",
        "HorizontalPodAutoscaler",
        "1.25",
        "autoscaling/v2",
    ),
    kind("policy/v1beta1", "PodDisruptionBudget", "1.25", "policy/v1"),
    kind("policy/v1beta1", "PodSecurityPolicy", "1.25", PSA),
    kind(
        "node.k8s.io/v1beta1",
        "RuntimeClass",
        "1.25",
        "node.k8s.io/v1",
    ),
    kind(
        "autoscaling/v2beta2",
        "HorizontalPodAutoscaler",
        "1.26",
        "autoscaling/v2",
    ),
    version(
        "flowcontrol.apiserver.k8s.io/v1beta1",
        "1.26",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    version(
        "flowcontrol.apiserver.k8s.io/v1beta2",
        "1.29",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    version(
        "flowcontrol.apiserver.k8s.io/v1beta3",
        "1.32",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
];

pub(crate) fn check(type_: &TypeRef<'_>, report: &mut Report<'_>) {
    let found = REMOVED.iter().find(|r| {
        r.api_version == type_.api_version && r.kind.is_none_or(|kind| kind == type_.kind)
    });
    if let Some(removed) = found {
        report.add(
            &DEPRECATED_API_VERSION,
            format!(
                "{} {} is not served since Kubernetes {}; use {}",
                removed.api_version,
                plain_or_quoted(type_.kind),
                removed.removed_in,
                removed.replacement
            ),
        );
    }
}
