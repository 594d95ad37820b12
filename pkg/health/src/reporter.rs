//! What a component implements to take part in health: a name, whether it is critical,
//! and an async check that passes or fails with a public reason and a private detail.

use std::fmt;

use async_trait::async_trait;

/// A component or backend that can say whether it is healthy.
///
/// Implementations do only the check itself: timeouts, caching, single flight, damping
/// and panic safety are the aggregator's job, so a check may simply `await` its backend.
#[async_trait]
pub trait HealthReporter: Send + Sync + 'static {
    /// The name printed in `/readyz` (`Storage`, `Cluster/prod`). Matched case-insensitively.
    fn name(&self) -> &str;

    /// Whether a failure makes the endpoint fail. Configuration may override it
    /// (`must_ready`).
    fn critical(&self) -> bool {
        true
    }

    /// The IETF health-check `componentType` of this check.
    fn component_type(&self) -> ComponentType {
        ComponentType::Component
    }

    async fn check(&self) -> CheckOutcome;
}

/// The result of one run of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckOutcome {
    Pass,
    Fail(Failure),
}

impl CheckOutcome {
    pub fn fail(reason: Reason, detail: impl Into<String>) -> Self {
        CheckOutcome::Fail(Failure {
            reason,
            detail: detail.into(),
        })
    }

    pub fn is_pass(&self) -> bool {
        matches!(self, CheckOutcome::Pass)
    }
}

/// Why a check failed: a public reason code and a private detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: Reason,
    /// The raw error (may hold addresses, DSNs, TLS details). Logged on state changes and
    /// shown only to an admin; never in a public body.
    pub detail: String,
}

/// The fixed vocabulary of public reason codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Unreachable,
    Timeout,
    Unauthorized,
    StatusRed,
    InitialSync {
        done: usize,
        total: usize,
    },
    ShuttingDown,
    Misconfigured,
    Panicked,
    Stale,
    /// A registered cluster has had no live syncer holding it for longer than the lease
    /// TTL.
    Unowned,
    /// A cluster's agent has joined but holds no session with this hub now.
    Disconnected,
    /// A cluster in agent mode whose agent has never joined.
    NeverJoined,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Unreachable => f.write_str("unreachable"),
            Reason::Timeout => f.write_str("timeout"),
            Reason::Unauthorized => f.write_str("unauthorized"),
            Reason::StatusRed => f.write_str("status red"),
            Reason::InitialSync { done, total } => {
                write!(f, "initial sync in progress ({done}/{total} clusters)")
            }
            Reason::ShuttingDown => f.write_str("shutting down"),
            Reason::Misconfigured => f.write_str("misconfigured"),
            Reason::Panicked => f.write_str("panicked"),
            Reason::Stale => f.write_str("stale"),
            Reason::Unowned => f.write_str("unowned"),
            Reason::Disconnected => f.write_str("disconnected"),
            Reason::NeverJoined => f.write_str("never joined"),
        }
    }
}

impl Reason {
    /// Parses a reason code as printed, so an upstream's reason can be passed on.
    pub fn parse(code: &str) -> Option<Reason> {
        Some(match code {
            "unreachable" => Reason::Unreachable,
            "timeout" => Reason::Timeout,
            "unauthorized" => Reason::Unauthorized,
            "status red" => Reason::StatusRed,
            "shutting down" => Reason::ShuttingDown,
            "misconfigured" => Reason::Misconfigured,
            "panicked" => Reason::Panicked,
            "stale" => Reason::Stale,
            "disconnected" => Reason::Disconnected,
            "never joined" => Reason::NeverJoined,
            "unowned" => Reason::Unowned,
            other => {
                let counts = other
                    .strip_prefix("initial sync in progress (")?
                    .strip_suffix(" clusters)")?;
                let (done, total) = counts.split_once('/')?;
                Reason::InitialSync {
                    done: done.parse().ok()?,
                    total: total.parse().ok()?,
                }
            }
        })
    }
}

/// IETF health-check draft component types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentType {
    Component,
    Datastore,
    System,
}

impl ComponentType {
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentType::Component => "component",
            ComponentType::Datastore => "datastore",
            ComponentType::System => "system",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_parses_back_from_its_code() {
        let all = [
            Reason::Unreachable,
            Reason::Timeout,
            Reason::Unauthorized,
            Reason::StatusRed,
            Reason::InitialSync { done: 2, total: 3 },
            Reason::ShuttingDown,
            Reason::Misconfigured,
            Reason::Panicked,
            Reason::Stale,
            Reason::Unowned,
        ];
        for reason in all {
            assert_eq!(Reason::parse(&reason.to_string()), Some(reason));
        }
        assert_eq!(Reason::parse("connection refused"), None);
    }
}
