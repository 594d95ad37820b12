//! `pdb-missing`, the one finding that needs other objects: a multi-replica Deployment or
//! StatefulSet whose pods no PodDisruptionBudget of its namespace selects. Decided when
//! the writer writes the workload (against the budgets in storage and in the same batch),
//! and again for a namespace's stored workloads when one of its budgets is written.

use std::collections::BTreeSet;

use karpor_audit::AuditConfig;
use karpor_search::{Expr, Field, Op, Query, Value};
use karpor_storage::{ResourceDocument, Storage, StorageError};

/// The rule's id.
const RULE: &str = "pdb-missing";
const PDB: &str = "PodDisruptionBudget";
const WORKLOADS: [&str; 2] = ["Deployment", "StatefulSet"];
/// Most budgets and workloads read for one namespace.
const PER_NAMESPACE: u64 = 1000;

fn is_workload(d: &ResourceDocument) -> bool {
    WORKLOADS.contains(&d.kind.as_str())
}

fn of_kinds(cluster: &str, namespace: &str, kinds: &[&str]) -> Query {
    let eq = |field, value: &str| Expr::Compare {
        field,
        op: Op::Eq,
        value: Value::Text(value.to_owned()),
    };
    Query {
        filter: Expr::And(vec![
            eq(Field::Cluster, cluster),
            eq(Field::Namespace, namespace),
            Expr::In {
                field: Field::Kind,
                values: kinds.iter().map(|k| Value::Text((*k).to_owned())).collect(),
                negated: false,
            },
            Expr::Compare {
                field: Field::Deleted,
                op: Op::Eq,
                value: Value::Bool(false),
            },
        ]),
        order_by: Vec::new(),
        limit: None,
        offset: None,
    }
}

/// Sets the finding on `doc` as `pdbs` decide; `true` when it changed.
fn decide(doc: &mut ResourceDocument, pdbs: &[serde_json::Value], config: &AuditConfig) -> bool {
    let before = doc.issues.iter().position(|f| f.rule == RULE);
    let now = karpor_audit::missing_pdb(&doc.object, pdbs, config);
    match (before, now) {
        (None, None) => false,
        (Some(i), None) => {
            doc.issues.remove(i);
            true
        }
        (None, Some(finding)) => {
            doc.issues.push(finding);
            true
        }
        (Some(i), Some(finding)) => {
            let changed = doc.issues[i] != finding;
            doc.issues[i] = finding;
            changed
        }
    }
}

/// Decides the finding for the batch's workloads, and adds to the batch the stored
/// workloads of namespaces whose budgets the batch writes, when their finding changes.
pub(crate) async fn apply(
    storage: &dyn Storage,
    cluster: &str,
    batch: &mut Vec<ResourceDocument>,
    config: &AuditConfig,
) -> Result<(), StorageError> {
    if !config.enabled {
        return Ok(());
    }
    let namespaces: BTreeSet<String> = batch
        .iter()
        .filter(|d| is_workload(d) || d.kind == PDB)
        .map(|d| d.namespace.clone())
        .collect();
    for namespace in namespaces {
        // The batch's budgets replace their stored copies.
        let mut pdbs: Vec<ResourceDocument> = storage
            .search(&of_kinds(cluster, &namespace, &[PDB]), 0, PER_NAMESPACE)
            .await?
            .items;
        let written: Vec<&ResourceDocument> = batch
            .iter()
            .filter(|d| d.kind == PDB && d.namespace == namespace)
            .collect();
        pdbs.retain(|p| !written.iter().any(|w| w.uid == p.uid));
        let budgets: Vec<serde_json::Value> = pdbs
            .iter()
            .chain(written.iter().copied())
            .filter(|p| !p.deleted)
            .map(|p| p.object.clone())
            .collect();
        let budgets_written = !written.is_empty();
        for doc in batch
            .iter_mut()
            .filter(|d| is_workload(d) && d.namespace == namespace)
        {
            decide(doc, &budgets, config);
        }
        if budgets_written {
            let stored = storage
                .search(&of_kinds(cluster, &namespace, &WORKLOADS), 0, PER_NAMESPACE)
                .await?
                .items;
            for mut doc in stored {
                if batch.iter().any(|d| d.uid == doc.uid) {
                    continue;
                }
                if decide(&mut doc, &budgets, config) {
                    batch.push(doc);
                }
            }
        }
    }
    Ok(())
}
