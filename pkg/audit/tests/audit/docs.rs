//! docs/audit.md lists every rule of the catalogue, with its severity, and no other.

use karpor_audit::{rules, Severity};

const DOC: &str = include_str!("../../../../docs/audit.md");

#[test]
fn every_rule_is_documented_with_its_severity() {
    for rule in rules() {
        let row = format!("| `{}` | {} |", rule.id, rule.severity);
        assert!(DOC.contains(&row), "docs/audit.md lacks {row:?}");
    }
    let rule_rows = DOC
        .lines()
        .filter(|line| {
            let severity = |s: &Severity| line.contains(&format!("` | {s} |"));
            line.starts_with("| `") && Severity::ALL.iter().any(severity)
        })
        .count();
    assert_eq!(rule_rows, rules().len());
}
