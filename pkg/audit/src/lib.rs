//! Security and reliability rules over Kubernetes objects, and Karpor's score of their
//! findings. Pure logic, no I/O: the syncer calls [`audit`] on each object (as JSON,
//! before trimming it) and stores the findings with its document; REST, the CLI and the
//! docs list the rules from [`rules`]. See docs/audit.md for every rule and the choices
//! behind them.
//!
//! What is audited: Pods, the pod templates of Deployments, StatefulSets, DaemonSets,
//! ReplicaSets, ReplicationControllers, Jobs and CronJobs (in any apiVersion, removed
//! ones included), Services, and every object's apiVersion. Anything else has no findings.

mod config;
mod container;
mod deprecated;
mod finding;
mod host_path;
mod image;
mod object;
mod pod;
mod pod_spec;
mod rules;
mod score;
mod selector;
mod service;
mod severity;
mod workload;

use serde_json::Value;

pub use config::AuditConfig;
pub use finding::{Finding, MAX_FINDINGS};
pub use rules::{rule, rules, Category, RuleInfo};
pub use score::{mean_score, resource_score, score_from_counts, SeverityCounts, PERFECT_SCORE};
pub use severity::Severity;
pub use workload::missing_pdb;

use finding::Report;
use object::{Kind, TypeRef};

/// The findings of one object, in [`rules`] order (within a rule, in the object's order),
/// at most [`MAX_FINDINGS`], with `config` applied. Never panics: an object without
/// `apiVersion` and `kind` has none, and a part that does not match its kind's schema is
/// one `unparseable` finding instead of that part's checks. `pdb-missing` needs the
/// namespace's PodDisruptionBudgets: see [`missing_pdb`].
pub fn audit(object: &Value, config: &AuditConfig) -> Vec<Finding> {
    if !config.enabled {
        return Vec::new();
    }
    let mut report = Report::new(config);
    if let Some(type_) = TypeRef::of(object) {
        deprecated::check(&type_, &mut report);
        match type_.kind() {
            Some(Kind::Pod) => pod::check_at(
                object,
                &["metadata", "annotations"],
                &["spec"],
                true,
                "pod",
                &mut report,
            ),
            Some(Kind::Workload(workload)) => workload::check(object, workload, &mut report),
            Some(Kind::Service) => service::check(object, &mut report),
            None => {}
        }
    }
    report.finish()
}
