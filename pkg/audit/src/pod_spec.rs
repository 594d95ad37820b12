//! A pod spec with what the rules need from around it: what the pod-wide rules and the
//! per-container rules share.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;

/// A pod's default restart policy, the only one a long-running workload allows; on an
/// init container it makes a sidecar, which runs as long as the pod.
pub(crate) const RESTART_ALWAYS: &str = "Always";

/// A pod spec with what the rules need from around it.
pub(crate) struct Pod<'a> {
    pub(crate) spec: &'a PodSpec,
    /// The pod's own (or its template's) annotations: the legacy profile annotations.
    pub(crate) annotations: &'a BTreeMap<String, String>,
    /// Its containers run until stopped, so the probe rules apply.
    pub(crate) long_running: bool,
    /// How messages name it: `pod` or `pod template`.
    pub(crate) subject: &'static str,
}

impl Pod<'_> {
    pub(crate) fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }
}
