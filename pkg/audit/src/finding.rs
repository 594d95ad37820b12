//! A finding, and the collector the checks report into: it applies the config, orders the
//! findings and bounds how many one object can produce.

use serde::{Deserialize, Serialize};

use crate::rules::{position, rules, RuleInfo};
use crate::{AuditConfig, Severity};

/// One problem of one object.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The rule's id (`privileged`).
    pub rule: String,
    /// The catalogue's, or the config's override.
    pub severity: Severity,
    pub title: String,
    /// What was found, naming the container, volume or field.
    pub message: String,
    pub remediation: String,
}

/// Findings one object may produce. A real pod gives a few dozen at most; this bounds
/// what a hostile object with thousands of containers could make the syncer store.
pub const MAX_FINDINGS: usize = 200;

/// Characters of an object's own text (an image, a name, an error) kept in a message.
const MAX_QUOTED_CHARS: usize = 120;

pub(crate) struct Report<'c> {
    config: &'c AuditConfig,
    findings: Vec<Finding>,
    /// Findings kept per rule, by catalogue position: past [`MAX_FINDINGS`] a rule's
    /// further findings could never survive [`Report::finish`], so they are not kept.
    per_rule: Vec<usize>,
}

impl<'c> Report<'c> {
    pub(crate) fn new(config: &'c AuditConfig) -> Self {
        Report {
            config,
            findings: Vec::new(),
            per_rule: vec![0; rules().len()],
        }
    }

    pub(crate) fn add(&mut self, rule: &'static RuleInfo, message: String) {
        let Some(severity) = self.config.severity_of(rule) else {
            return;
        };
        if let Some(kept) = self.per_rule.get_mut(position(rule.id)) {
            if *kept >= MAX_FINDINGS {
                return;
            }
            *kept += 1;
        }
        self.findings.push(Finding {
            rule: rule.id.to_owned(),
            severity,
            title: rule.title.to_owned(),
            message,
            remediation: rule.remediation.to_owned(),
        });
    }

    /// In catalogue order, and within a rule in the object's order (init containers,
    /// containers, ephemeral containers; volumes as listed); at most [`MAX_FINDINGS`].
    pub(crate) fn finish(mut self) -> Vec<Finding> {
        self.findings.sort_by_key(|f| position(&f.rule));
        self.findings.truncate(MAX_FINDINGS);
        self.findings
    }
}

/// `text` quoted and escaped, cut to [`MAX_QUOTED_CHARS`]: it comes from the object, and
/// the message goes to a UI and maybe a log.
pub(crate) fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
    }
}

/// `text` as it is when it is a plain identifier (a kind, a port), else [`quoted`].
pub(crate) fn plain_or_quoted(text: &str) -> String {
    let plain = !text.is_empty()
        && text.len() <= MAX_QUOTED_CHARS
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._/".contains(&b));
    if plain {
        text.to_owned()
    } else {
        quoted(text)
    }
}

/// The first few `items`, each [`quoted`], and how many more there are.
pub(crate) fn quoted_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 8;
    let mut shown = Vec::new();
    let mut more = 0usize;
    for item in items {
        if shown.len() < SHOWN {
            shown.push(quoted(item));
        } else {
            more += 1;
        }
    }
    let mut text = shown.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{HOST_IPC, PRIVILEGED};

    #[test]
    fn sorted_by_catalogue_then_kept_in_order() {
        let config = AuditConfig::default();
        let mut report = Report::new(&config);
        report.add(&HOST_IPC, "b".into());
        report.add(&PRIVILEGED, "first".into());
        report.add(&HOST_IPC, "c".into());
        let messages: Vec<String> = report.finish().into_iter().map(|f| f.message).collect();
        assert_eq!(messages, ["first", "b", "c"]);
    }

    #[test]
    fn bounded() {
        let config = AuditConfig::default();
        let mut report = Report::new(&config);
        for i in 0..MAX_FINDINGS + 5 {
            report.add(&HOST_IPC, format!("ipc {i}"));
            report.add(&PRIVILEGED, format!("privileged {i}"));
        }
        assert_eq!(report.findings.len(), 2 * MAX_FINDINGS);
        let kept = report.finish();
        assert_eq!(kept.len(), MAX_FINDINGS);
        assert!(kept.iter().all(|f| f.rule == PRIVILEGED.id));
        assert_eq!(
            kept[MAX_FINDINGS - 1].message,
            format!("privileged {}", MAX_FINDINGS - 1)
        );
    }

    #[test]
    fn quoted_escapes_and_cuts() {
        assert_eq!(quoted("a\"b\n"), r#""a\"b\n""#);
        let long = "é".repeat(500);
        let shown = quoted(&long);
        assert!(shown.ends_with('…'));
        assert_eq!(
            shown.chars().filter(|c| *c == 'é').count(),
            MAX_QUOTED_CHARS
        );
    }

    #[test]
    fn plain_and_lists() {
        assert_eq!(plain_or_quoted("Deployment"), "Deployment");
        assert_eq!(plain_or_quoted("Deploy ment"), "\"Deploy ment\"");
        assert_eq!(plain_or_quoted(""), "\"\"");
        assert_eq!(quoted_list(["A", "B"]), "\"A\", \"B\"");
        let many: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        let text = quoted_list(many.iter().map(String::as_str));
        assert!(
            text.starts_with("\"0\", \"1\"") && text.ends_with("\"7\" and 2 more"),
            "{text}"
        );
    }

    #[test]
    fn serialized_in_camel_case() {
        let config = AuditConfig::default();
        let mut report = Report::new(&config);
        report.add(&PRIVILEGED, "m".into());
        let json = serde_json::to_value(&report.finish()[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "rule": "privileged",
                "severity": "High",
                "title": PRIVILEGED.title,
                "message": "m",
                "remediation": PRIVILEGED.remediation,
            })
        );
    }
}
