//! What an object is, and its parts read as typed k8s-openapi values. Parts rather than
//! whole objects: k8s-openapi's top-level types accept only their current apiVersion,
//! while an `extensions/v1beta1` Deployment's pod template reads like an `apps/v1` one's.
//! Reading is bounded by the types' fixed depth; fields they do not know are skipped
//! without being walked.

use serde::Deserialize;
use serde_json::Value;

use crate::finding::quoted;

/// `apiVersion` and `kind`.
pub(crate) struct TypeRef<'a> {
    pub(crate) api_version: &'a str,
    pub(crate) kind: &'a str,
}

impl<'a> TypeRef<'a> {
    pub(crate) fn of(object: &'a Value) -> Option<Self> {
        Some(TypeRef {
            api_version: object.get("apiVersion")?.as_str()?,
            kind: object.get("kind")?.as_str()?,
        })
    }

    /// The API group: empty for the core group's `v1`.
    pub(crate) fn group(&self) -> &'a str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// What the rules know of this type, if anything.
    pub(crate) fn kind(&self) -> Option<Kind> {
        use Workload::*;
        let workload = match (self.group(), self.kind) {
            ("", "Pod") => return Some(Kind::Pod),
            ("", "Service") => return Some(Kind::Service),
            ("", "ReplicationController") => ReplicationController,
            ("apps" | "extensions", "Deployment") => Deployment,
            ("apps", "StatefulSet") => StatefulSet,
            ("apps" | "extensions", "DaemonSet") => DaemonSet,
            ("apps" | "extensions", "ReplicaSet") => ReplicaSet,
            ("batch", "Job") => Job,
            ("batch", "CronJob") => CronJob,
            _ => return None,
        };
        Some(Kind::Workload(workload))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Pod,
    Service,
    Workload(Workload),
}

/// A kind with a pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    Deployment,
    StatefulSet,
    DaemonSet,
    ReplicaSet,
    ReplicationController,
    Job,
    CronJob,
}

impl Workload {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Deployment => "Deployment",
            Workload::StatefulSet => "StatefulSet",
            Workload::DaemonSet => "DaemonSet",
            Workload::ReplicaSet => "ReplicaSet",
            Workload::ReplicationController => "ReplicationController",
            Workload::Job => "Job",
            Workload::CronJob => "CronJob",
        }
    }

    /// Where its pod template sits.
    pub(crate) fn template(self) -> &'static [&'static str] {
        match self {
            Workload::CronJob => &["spec", "jobTemplate", "spec", "template"],
            _ => &["spec", "template"],
        }
    }

    /// Its pods run until stopped, so the probe rules apply (not to a Job's).
    pub(crate) fn long_running(self) -> bool {
        !matches!(self, Workload::Job | Workload::CronJob)
    }

    /// Its replica count is the user's to choose (a ReplicaSet's is its Deployment's, a
    /// DaemonSet's the nodes'), so the replica rules apply.
    pub(crate) fn replicated(self) -> bool {
        matches!(self, Workload::Deployment | Workload::StatefulSet)
    }
}

/// The value at `path`: `Ok(None)` when it or a parent is absent or null, `Err` when a
/// parent is not an object.
pub(crate) fn at<'v>(object: &'v Value, path: &[&str]) -> Result<Option<&'v Value>, String> {
    let mut value = object;
    for (depth, key) in path.iter().enumerate() {
        value = match value {
            Value::Null => return Ok(None),
            Value::Object(map) => match map.get(*key) {
                Some(child) => child,
                None => return Ok(None),
            },
            _ => return Err(format!("{} is not an object", path[..depth].join("."))),
        };
    }
    Ok((!value.is_null()).then_some(value))
}

/// The part at `path` read as `T` (`what` names it): `Ok(None)` when absent, `Err` with
/// the `unparseable` finding's message when it does not fit.
pub(crate) fn part<'v, T: Deserialize<'v>>(
    object: &'v Value,
    path: &[&str],
    what: &str,
) -> Result<Option<T>, String> {
    let Some(value) = at(object, path)? else {
        return Ok(None);
    };
    T::deserialize(value).map(Some).map_err(|e| {
        format!(
            "{} is not a valid {what}: {}",
            path.join("."),
            quoted(&e.to_string())
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kinds_by_group() {
        let kind = |api_version: &str, kind: &str| TypeRef { api_version, kind }.kind();
        assert_eq!(kind("v1", "Pod"), Some(Kind::Pod));
        assert_eq!(
            kind("extensions/v1beta1", "Deployment"),
            Some(Kind::Workload(Workload::Deployment))
        );
        assert_eq!(
            kind("batch/v1beta1", "CronJob"),
            Some(Kind::Workload(Workload::CronJob))
        );
        // A custom resource that reuses a built-in kind's name is not read as one.
        assert_eq!(kind("example.com/v1", "Deployment"), None);
        assert_eq!(kind("example.com/v1", "Pod"), None);
        assert_eq!(kind("v1", "ConfigMap"), None);
    }

    #[test]
    fn parts() {
        let object = json!({"spec": {"replicas": 3, "bad": "x", "none": null}});
        assert_eq!(
            part::<i32>(&object, &["spec", "replicas"], "count"),
            Ok(Some(3))
        );
        assert_eq!(
            part::<i32>(&object, &["spec", "missing"], "count"),
            Ok(None)
        );
        assert_eq!(part::<i32>(&object, &["spec", "none"], "count"), Ok(None));
        assert_eq!(part::<i32>(&object, &["none", "x"], "count"), Ok(None));
        let err = part::<i32>(&object, &["spec", "bad"], "count").unwrap_err();
        assert!(err.starts_with("spec.bad is not a valid count: "), "{err}");
        let err = part::<i32>(&object, &["spec", "bad", "deeper"], "count").unwrap_err();
        assert_eq!(err, "spec.bad is not an object");
    }
}
