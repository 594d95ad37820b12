//! Karpor's score: 100 for a clean resource, falling with the number and the severity of
//! its findings; a scope scores the mean of its resources.

use serde::{Deserialize, Serialize};

use crate::{Finding, Severity};

/// A clean resource's score, and an empty scope's.
pub const PERFECT_SCORE: f64 = 100.0;
/// Weight of the number of findings (`p`) in the exponent.
const PER_FINDING: f64 = 0.04;
/// Weight of the sum of their severity weights (`s`).
const PER_SEVERITY_WEIGHT: f64 = 0.06;

/// Findings of one resource by severity: what a storage aggregation can count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct SeverityCounts {
    pub low: u64,
    pub medium: u64,
    pub high: u64,
}

impl SeverityCounts {
    pub fn of(findings: &[Finding]) -> Self {
        let mut counts = SeverityCounts::default();
        for finding in findings {
            counts.add(finding.severity);
        }
        counts
    }

    pub fn add(&mut self, severity: Severity) {
        match severity {
            Severity::Low => self.low += 1,
            Severity::Medium => self.medium += 1,
            Severity::High => self.high += 1,
        }
    }

    /// `p`: how many findings.
    pub fn total(&self) -> u64 {
        self.low + self.medium + self.high
    }

    /// `s`: the sum of their severity weights.
    pub fn weight(&self) -> u64 {
        self.low * u64::from(Severity::Low.weight())
            + self.medium * u64::from(Severity::Medium.weight())
            + self.high * u64::from(Severity::High.weight())
    }
}

/// One resource's score, `100 · exp(−0.04·p − 0.06·s)`, unrounded (Karpor shows two
/// decimals).
pub fn score_from_counts(counts: SeverityCounts) -> f64 {
    // Counts past 2^53 lose precision as f64; the exponent is long past zero by then.
    let p = counts.total() as f64;
    let s = counts.weight() as f64;
    PERFECT_SCORE * (-PER_FINDING * p - PER_SEVERITY_WEIGHT * s).exp()
}

/// One resource's score from its findings.
pub fn resource_score(findings: &[Finding]) -> f64 {
    score_from_counts(SeverityCounts::of(findings))
}

/// A scope's score: the mean of every audited resource's score, clean ones counting 100;
/// [`PERFECT_SCORE`] for none.
pub fn mean_score(scores: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = scores
        .into_iter()
        .fold((0.0, 0u64), |(sum, n), score| (sum + score, n + 1));
    if n == 0 {
        PERFECT_SCORE
    } else {
        sum / n as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounded(score: f64) -> f64 {
        (score * 100.0).round() / 100.0
    }

    fn counts(low: u64, medium: u64, high: u64) -> SeverityCounts {
        SeverityCounts { low, medium, high }
    }

    #[test]
    fn karpor_reference_values() {
        assert_eq!(rounded(score_from_counts(counts(0, 0, 0))), 100.0);
        assert_eq!(rounded(score_from_counts(counts(1, 0, 0))), 90.48);
        assert_eq!(rounded(score_from_counts(counts(0, 0, 1))), 80.25);
        assert_eq!(rounded(score_from_counts(counts(0, 0, 3))), 51.69);
        assert_eq!(rounded(score_from_counts(counts(10, 0, 0))), 36.79);
        // p = 9, s = 23: 4 Medium and 5 High are 8 + 15.
        let mixed = counts(0, 4, 5);
        assert_eq!((mixed.total(), mixed.weight()), (9, 23));
        assert_eq!(rounded(score_from_counts(mixed)), 17.55);
    }

    #[test]
    fn from_findings() {
        let finding = |severity| Finding {
            rule: "r".into(),
            severity,
            title: String::new(),
            message: String::new(),
            remediation: String::new(),
        };
        let findings = [finding(Severity::High), finding(Severity::Low)];
        assert_eq!(SeverityCounts::of(&findings), counts(1, 0, 1));
        // p = 2, s = 4.
        assert_eq!(rounded(resource_score(&findings)), 72.61);
        assert_eq!(resource_score(&[]), PERFECT_SCORE);
    }

    #[test]
    fn mean_over_resources() {
        assert_eq!(mean_score([]), PERFECT_SCORE);
        assert_eq!(mean_score([100.0, 80.0]), 90.0);
        let one_low = score_from_counts(counts(1, 0, 0));
        let scope = mean_score([PERFECT_SCORE, PERFECT_SCORE, one_low]);
        assert_eq!(rounded(scope), 96.83);
    }
}
