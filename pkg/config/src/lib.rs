//! What every crate's config section shares. Each crate owns its section (shape, defaults,
//! `validate()`); a problem it finds is a [`ConfigIssue`]: the key, from the top of the
//! file, and what is wrong with it. The binary adds the file when it composes the
//! sections, so a user reads `FILE: key `KEY`: PROBLEM` and exits 2 before anything starts.
//!
//! A crate of its own, with no dependency, so that `karpor-health` (which depends on no
//! other karpor crate) and `karpor-core` can both speak it.

use std::fmt;

/// A problem in a config section: which key, and what is wrong with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    key: String,
    problem: String,
}

impl ConfigIssue {
    /// `key` is the full dotted path from the top of the file (`server.limits.max_body`,
    /// `readiness.upstreams[0].url`).
    pub fn new(key: impl Into<String>, problem: impl fmt::Display) -> Self {
        ConfigIssue {
            key: key.into(),
            problem: problem.to_string(),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// The same problem with more said after it (what the caller knows and the section
    /// did not, such as the names that would have been accepted).
    pub fn with_hint(mut self, hint: impl fmt::Display) -> Self {
        self.problem = format!("{} ({hint})", self.problem);
        self
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key `{}`: {}", self.key, self.problem)
    }
}

impl std::error::Error for ConfigIssue {}

#[cfg(test)]
mod tests {
    use super::ConfigIssue;

    #[test]
    fn an_issue_names_its_key_then_the_problem() {
        let issue = ConfigIssue::new("server.listen", "must be an address");
        assert_eq!(issue.key(), "server.listen");
        assert_eq!(issue.problem(), "must be an address");
        assert_eq!(issue.to_string(), "key `server.listen`: must be an address");
        let hinted = issue.with_hint("known: Ping");
        assert_eq!(
            hinted.to_string(),
            "key `server.listen`: must be an address (known: Ping)"
        );
    }
}
