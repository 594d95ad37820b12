//! A finished evaluation and its two public renderings: the text lines users `curl`, and
//! the IETF health-check JSON.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::reporter::{CheckOutcome, ComponentType};

#[derive(Debug, Clone)]
pub struct Entry {
    pub name: Arc<str>,
    pub critical: bool,
    pub component_type: ComponentType,
    /// The reported (damped) outcome.
    pub outcome: CheckOutcome,
    pub duration: Duration,
    pub at: SystemTime,
}

#[derive(Debug, Clone)]
pub struct HealthReport {
    pub entries: Vec<Entry>,
    pub unknown_excludes: Vec<String>,
    /// One check asked for by name (`/readyz/{check}`): it answers for itself, so a
    /// failure fails the answer, critical or not.
    pub alone: bool,
    /// Checks whose lines this caller may not see ([`HealthReport::withhold`]): they
    /// still count towards the status.
    pub withheld: Vec<Entry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    /// Only non-critical checks failed: still serving.
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

impl Entry {
    fn status(&self) -> Status {
        match (&self.outcome, self.critical) {
            (CheckOutcome::Pass, _) => Status::Pass,
            (CheckOutcome::Fail(_), true) => Status::Fail,
            (CheckOutcome::Fail(_), false) => Status::Warn,
        }
    }
}

impl HealthReport {
    /// Leaves the lines of the checks `hide` names out of the renderings; what they
    /// report still counts.
    pub fn withhold(&mut self, hide: impl Fn(&str) -> bool) {
        let (hidden, shown) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|entry| hide(&entry.name));
        self.entries = shown;
        self.withheld.extend::<Vec<Entry>>(hidden);
    }

    pub fn status(&self) -> Status {
        let status = self
            .entries
            .iter()
            .chain(&self.withheld)
            .map(Entry::status)
            .fold(Status::Pass, |acc, s| match (acc, s) {
                (Status::Fail, _) | (_, Status::Fail) => Status::Fail,
                (Status::Warn, _) | (_, Status::Warn) => Status::Warn,
                _ => Status::Pass,
            });
        match (status, self.alone) {
            (Status::Warn, true) => Status::Fail,
            (status, _) => status,
        }
    }

    /// Whether the endpoint passes (200): every critical check passed.
    pub fn passed(&self) -> bool {
        self.status() != Status::Fail
    }

    /// The verbose text form. `detail` adds each failure's raw error (admin only).
    pub fn to_text(&self, detail: bool) -> String {
        let mut out = String::with_capacity(32 * (self.entries.len() + 1));
        for entry in &self.entries {
            match &entry.outcome {
                CheckOutcome::Pass => {
                    out.push_str("[+] ");
                    out.push_str(&entry.name);
                    out.push_str(" ok\n");
                }
                CheckOutcome::Fail(f) => {
                    let tag = if entry.critical {
                        ""
                    } else {
                        " (non-critical)"
                    };
                    let _ = writeln!(out, "[-] {} failed: {}{tag}", entry.name, f.reason);
                    if detail {
                        let _ = writeln!(out, "    detail: {}", f.detail);
                    }
                }
            }
        }
        for name in &self.unknown_excludes {
            let _ = writeln!(out, "[!] unknown check \"{name}\" in exclude");
        }
        out.push_str(if self.passed() {
            "health check passed\n"
        } else {
            "health check failed\n"
        });
        out
    }

    /// The terse form of `/livez`.
    pub fn to_short_text(&self) -> &'static str {
        if self.passed() {
            "OK\n"
        } else {
            "Fail\n"
        }
    }

    /// The IETF health-check draft shape. `detail` adds each failure's raw error.
    pub fn to_json(&self, detail: bool) -> Value {
        let mut checks = Map::new();
        for entry in &self.entries {
            // Keys are lowercase (the draft's convention); `componentId` keeps the name
            // as the text output spells it.
            let mut check = json!({
                "componentId": entry.name,
                "componentType": entry.component_type.as_str(),
                "status": entry.status().as_str(),
                "observedValue": (entry.duration.as_secs_f64() * 1e6).round() / 1e3,
                "observedUnit": "ms",
                "time": rfc3339(entry.at),
            });
            if let CheckOutcome::Fail(f) = &entry.outcome {
                check["output"] = Value::String(f.reason.to_string());
                if detail {
                    check["detail"] = Value::String(f.detail.clone());
                }
            }
            checks.insert(entry.name.to_ascii_lowercase(), Value::Array(vec![check]));
        }
        let mut body = json!({ "status": self.status().as_str(), "checks": checks });
        if !self.unknown_excludes.is_empty() {
            body["notes"] = self
                .unknown_excludes
                .iter()
                .map(|n| Value::String(format!("unknown check \"{n}\" in exclude")))
                .collect();
        }
        body
    }
}

fn rfc3339(at: SystemTime) -> String {
    OffsetDateTime::from(at)
        .format(&Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporter::Reason;

    fn entry(name: &str, critical: bool, outcome: CheckOutcome) -> Entry {
        Entry {
            name: Arc::from(name),
            critical,
            component_type: ComponentType::Datastore,
            outcome,
            duration: Duration::from_micros(3100),
            at: SystemTime::UNIX_EPOCH,
        }
    }

    fn report(entries: Vec<Entry>) -> HealthReport {
        HealthReport {
            withheld: Vec::new(),
            entries,
            unknown_excludes: Vec::new(),
            alone: false,
        }
    }

    #[test]
    fn withheld_lines_are_not_shown_and_still_count() {
        let mut r = report(vec![
            entry("Ping", true, CheckOutcome::Pass),
            entry(
                "Cluster/b",
                true,
                CheckOutcome::fail(Reason::Unreachable, "dial tcp 10.1.2.3:6443"),
            ),
        ]);
        r.withhold(|name| name.starts_with("Cluster/"));
        assert_eq!(r.to_text(false), "[+] Ping ok\nhealth check failed\n");
        assert_eq!(r.to_json(false)["status"], "fail");
        assert!(r.to_json(false)["checks"].get("cluster/b").is_none());
    }

    #[test]
    fn passing_text_is_byte_exact() {
        let r = report(vec![
            entry("Ping", true, CheckOutcome::Pass),
            entry("Server", true, CheckOutcome::Pass),
            entry("Syncer", true, CheckOutcome::Pass),
            entry("Storage", true, CheckOutcome::Pass),
        ]);
        assert_eq!(
            r.to_text(false),
            "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\nhealth check passed\n"
        );
        assert_eq!(r.status(), Status::Pass);
    }

    #[test]
    fn failing_text_is_byte_exact_and_hides_detail() {
        let r = report(vec![
            entry("Ping", true, CheckOutcome::Pass),
            entry(
                "Server",
                true,
                CheckOutcome::fail(Reason::Unreachable, "dial tcp 10.1.2.3:2379"),
            ),
        ]);
        assert_eq!(
            r.to_text(false),
            "[+] Ping ok\n[-] Server failed: unreachable\nhealth check failed\n"
        );
        assert!(r
            .to_text(true)
            .contains("    detail: dial tcp 10.1.2.3:2379\n"));
        assert!(!r.to_json(false).to_string().contains("10.1.2.3"));
    }

    #[test]
    fn non_critical_failure_warns_and_passes() {
        let r = report(vec![
            entry("Ping", true, CheckOutcome::Pass),
            entry(
                "Cluster/prod",
                false,
                CheckOutcome::fail(Reason::Unreachable, "x"),
            ),
        ]);
        assert_eq!(
            r.to_text(false),
            "[+] Ping ok\n[-] Cluster/prod failed: unreachable (non-critical)\nhealth check passed\n"
        );
        assert_eq!(r.status(), Status::Warn);
        assert!(r.passed());
    }

    #[test]
    fn json_has_the_ietf_shape() {
        let r = report(vec![entry(
            "Storage",
            true,
            CheckOutcome::fail(Reason::StatusRed, "cluster red"),
        )]);
        assert_eq!(
            r.to_json(false),
            json!({
                "status": "fail",
                "checks": {"storage": [{
                    "componentId": "Storage",
                    "componentType": "datastore",
                    "status": "fail",
                    "observedValue": 3.1,
                    "observedUnit": "ms",
                    "time": "1970-01-01T00:00:00Z",
                    "output": "status red"
                }]}
            })
        );
    }
}
