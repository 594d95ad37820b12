//! `disabled` and `severities` applied to findings.

use karpor_audit::{audit, missing_pdb, rules, AuditConfig, Severity};
use serde_json::json;

use crate::fixtures::{clean_pod, ids, rule_ids, with};

fn privileged_on_host() -> serde_json::Value {
    let pod = with(
        clean_pod(),
        "/spec/containers/0/securityContext/privileged",
        json!(true),
    );
    with(pod, "/spec/hostPID", json!(true))
}

fn config(text: &str) -> AuditConfig {
    let config: AuditConfig = serde_json::from_str(text).unwrap();
    config.validate().unwrap();
    config
}

#[test]
fn disabled_rules_are_not_reported() {
    assert_eq!(rule_ids(&privileged_on_host()), ["privileged", "host-pid"]);
    let found = audit(
        &privileged_on_host(),
        &config(r#"{"disabled": ["privileged"]}"#),
    );
    let ids = ids(&found);
    assert_eq!(ids, ["host-pid"]);
}

#[test]
fn severities_are_overridden() {
    let found = audit(
        &privileged_on_host(),
        &config(r#"{"severities": {"host-pid": "Low"}}"#),
    );
    let severities: Vec<(&str, Severity)> = found
        .iter()
        .map(|f| (f.rule.as_str(), f.severity))
        .collect();
    assert_eq!(
        severities,
        [("privileged", Severity::High), ("host-pid", Severity::Low)]
    );
}

#[test]
fn every_rule_can_be_named() {
    let all: Vec<&str> = rules().iter().map(|r| r.id).collect();
    let text = json!({"disabled": all, "severities": {"unparseable": "High"}}).to_string();
    let everything_off = config(&text);
    assert!(audit(&privileged_on_host(), &everything_off).is_empty());
}

#[test]
fn unknown_rule_ids_are_named() {
    let config: AuditConfig =
        serde_json::from_str(r#"{"disabled": ["host-pid", "priviledged"]}"#).unwrap();
    let issue = config.validate().unwrap_err();
    let (key, problem) = (issue.key(), issue.problem());
    assert_eq!(key, "audit.disabled");
    assert!(problem.contains("priviledged"), "{problem}");

    let config: AuditConfig =
        serde_json::from_str(r#"{"severities": {"hostpid": "Low"}}"#).unwrap();
    let issue = config.validate().unwrap_err();
    let (key, problem) = (issue.key(), issue.problem());
    assert_eq!(key, "audit.severities.hostpid");
    assert!(problem.contains("hostpid"), "{problem}");

    assert!(serde_json::from_str::<AuditConfig>(r#"{"enabled": []}"#).is_err());
}

#[test]
fn missing_pdb_follows_the_config() {
    let deployment = crate::pdb::deployment(3, json!({"app": "web"}));
    let off = config(r#"{"disabled": ["pdb-missing"]}"#);
    assert!(missing_pdb(&deployment, &[], &off).is_none());
    let high = config(r#"{"severities": {"pdb-missing": "High"}}"#);
    assert_eq!(
        missing_pdb(&deployment, &[], &high).unwrap().severity,
        Severity::High
    );
}
