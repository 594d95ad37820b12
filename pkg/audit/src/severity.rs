//! How bad a finding is, with the weights Karpor's score uses.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Ordered `Low < Medium < High`; serialized by name (`"Low"`, `"Medium"`, `"High"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    /// Every severity, lowest first.
    pub const ALL: [Severity; 3] = [Severity::Low, Severity::Medium, Severity::High];

    /// Karpor's numeric level (Low 1, Medium 2, High 3): the score's `s` is their sum.
    pub fn weight(self) -> u32 {
        match self {
            Severity::Low => 1,
            Severity::Medium => 2,
            Severity::High => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "Low",
            Severity::Medium => "Medium",
            Severity::High => "High",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_weighted_and_named() {
        assert!(Severity::Low < Severity::Medium && Severity::Medium < Severity::High);
        let weights: Vec<u32> = Severity::ALL.iter().map(|s| s.weight()).collect();
        assert_eq!(weights, [1, 2, 3]);
        assert_eq!(
            serde_json::to_string(&Severity::Medium).unwrap(),
            "\"Medium\""
        );
        let parsed: Severity = serde_json::from_str("\"High\"").unwrap();
        assert_eq!(parsed, Severity::High);
        assert!(serde_json::from_str::<Severity>("\"high\"").is_err());
        assert!(serde_json::from_str::<Severity>("\"Critical\"").is_err());
    }
}
