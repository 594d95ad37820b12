//! Workloads: their pod template audited like a Pod, and the replica rules, including
//! the one that needs other objects (`pdb-missing`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use crate::finding::{quoted, Report};
use crate::object::{at, part, Kind, TypeRef, Workload};
use crate::rules::{PDB_MISSING, SINGLE_REPLICA, UNPARSEABLE};
use crate::selector::{is_empty, selects};
use crate::{pod, AuditConfig, Finding};

/// The namespace of an object that names none (as the API server would place it).
const DEFAULT_NAMESPACE: &str = "default";
/// The PodDisruptionBudget's API group.
const POLICY_GROUP: &str = "policy";
/// The version where an empty PDB selector selected nothing; in `policy/v1` it selects
/// every pod of the namespace.
const POLICY_V1BETA1: &str = "policy/v1beta1";
const PDB_KIND: &str = "PodDisruptionBudget";

pub(crate) fn check(object: &Value, workload: Workload, report: &mut Report<'_>) {
    let template = workload.template();
    pod::check_at(
        object,
        &[template, &["metadata", "annotations"]].concat(),
        &[template, &["spec"]].concat(),
        workload.long_running(),
        "pod template",
        report,
    );
    if !workload.replicated() {
        return;
    }
    match replicas(object) {
        Ok(Some((1, explicit))) => {
            let count = if explicit {
                "spec.replicas: 1"
            } else {
                "spec.replicas unset, so 1"
            };
            report.add(
                &SINGLE_REPLICA,
                format!("{} runs a single replica ({count})", workload.name()),
            );
        }
        Ok(_) => {}
        Err(problem) => report.add(&UNPARSEABLE, problem),
    }
}

/// The replica count and whether it is set; `None` without a spec (trimmed away).
fn replicas(object: &Value) -> Result<Option<(i32, bool)>, String> {
    if at(object, &["spec"])?.is_none() {
        return Ok(None);
    }
    let set = part::<i32>(object, &["spec", "replicas"], "replica count")?;
    Ok(Some(set.map_or((1, false), |n| (n, true))))
}

/// `pdb-missing` for a Deployment or StatefulSet of more than one replica whose pods no
/// PodDisruptionBudget among `pdbs` (any namespace: the workload's is matched) selects.
/// `None` for anything else, for an object that cannot be read (`audit` reports that),
/// and when the config turns the rule off.
pub fn missing_pdb(workload: &Value, pdbs: &[Value], config: &AuditConfig) -> Option<Finding> {
    if !config.enabled {
        return None;
    }
    let Some(Kind::Workload(kind)) = TypeRef::of(workload)?.kind() else {
        return None;
    };
    if !kind.replicated() {
        return None;
    }
    let (count, _) = replicas(workload).ok()??;
    if count <= 1 {
        return None;
    }
    let labels = part::<BTreeMap<String, String>>(
        workload,
        &["spec", "template", "metadata", "labels"],
        "label map",
    )
    .ok()?
    .unwrap_or_default();
    let namespace = namespace(workload);
    if pdbs.iter().any(|pdb| protects(pdb, namespace, &labels)) {
        return None;
    }
    let mut report = Report::new(config);
    report.add(
        &PDB_MISSING,
        format!(
            "{} with {count} replicas has no PodDisruptionBudget selecting its pods in \
             namespace {}",
            kind.name(),
            quoted(namespace)
        ),
    );
    report.finish().pop()
}

/// Whether `pdb` is a PodDisruptionBudget of `namespace` whose selector selects `labels`.
fn protects(pdb: &Value, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
    let Some(type_) = TypeRef::of(pdb) else {
        return false;
    };
    if type_.kind != PDB_KIND || type_.group() != POLICY_GROUP {
        return false;
    }
    if self::namespace(pdb) != namespace {
        return false;
    }
    // No selector selects nothing; a selector that cannot be read protects nothing.
    let Ok(Some(selector)) = part::<LabelSelector>(pdb, &["spec", "selector"], "selector") else {
        return false;
    };
    if is_empty(&selector) && type_.api_version == POLICY_V1BETA1 {
        return false;
    }
    selects(&selector, labels)
}

fn namespace(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(DEFAULT_NAMESPACE)
}
