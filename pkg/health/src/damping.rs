//! Two-sided damping of a check's reported state: `failure_threshold` consecutive
//! failures before a passing check is reported failed, `success_threshold` consecutive
//! passes before a failed one recovers. Between the two, the last reported state stands.
//! Pure logic, so every edge is unit-tested without a clock.

use std::time::{Duration, Instant};

use crate::reporter::{CheckOutcome, Failure};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub failure: u32,
    pub success: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            failure: 1,
            success: 1,
        }
    }
}

/// A change of reported state, for the log line and the transitions counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transition {
    /// `None` for the first result a check ever reports.
    pub from_pass: Option<bool>,
    pub to: CheckOutcome,
    pub time_in_previous: Duration,
    /// The raw failure behind a change to failed, or the last one before a recovery.
    pub raw: Option<Failure>,
}

#[derive(Debug, Default)]
pub(crate) struct Damping {
    thresholds: Thresholds,
    reported: Option<CheckOutcome>,
    since: Option<Instant>,
    passes: u32,
    failures: u32,
}

impl Damping {
    pub(crate) fn new(thresholds: Thresholds) -> Self {
        Damping {
            thresholds,
            ..Damping::default()
        }
    }

    /// Feeds one raw result; returns the state to report and the transition, if any.
    /// The first result is reported as it is: there is no earlier state to hold.
    pub(crate) fn observe(
        &mut self,
        raw: &CheckOutcome,
        now: Instant,
    ) -> (CheckOutcome, Option<Transition>) {
        match raw {
            CheckOutcome::Pass => {
                self.passes = self.passes.saturating_add(1);
                self.failures = 0;
            }
            CheckOutcome::Fail(_) => {
                self.failures = self.failures.saturating_add(1);
                self.passes = 0;
            }
        }
        let next = match (&self.reported, raw) {
            (None, _) => raw.clone(),
            (Some(CheckOutcome::Pass), CheckOutcome::Fail(_))
                if self.failures < self.thresholds.failure =>
            {
                CheckOutcome::Pass
            }
            (Some(CheckOutcome::Fail(last)), CheckOutcome::Pass)
                if self.passes < self.thresholds.success =>
            {
                CheckOutcome::Fail(last.clone())
            }
            _ => raw.clone(),
        };
        let previous = self.reported.replace(next.clone());
        let changed = previous.as_ref().map(CheckOutcome::is_pass) != Some(next.is_pass());
        if !changed {
            return (next, None);
        }
        let time_in_previous = self.since.map(|t| now - t).unwrap_or_default();
        self.since = Some(now);
        let raw_failure = match (&next, &previous) {
            (CheckOutcome::Fail(f), _) => Some(f.clone()),
            (CheckOutcome::Pass, Some(CheckOutcome::Fail(f))) => Some(f.clone()),
            _ => None,
        };
        let transition = Transition {
            from_pass: previous.as_ref().map(CheckOutcome::is_pass),
            to: next.clone(),
            time_in_previous,
            raw: raw_failure,
        };
        (next, Some(transition))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporter::Reason;

    fn fail() -> CheckOutcome {
        CheckOutcome::fail(Reason::Unreachable, "connection refused")
    }

    fn run(thresholds: Thresholds, raws: &[CheckOutcome]) -> Vec<bool> {
        let mut damping = Damping::new(thresholds);
        let now = Instant::now();
        raws.iter()
            .map(|raw| damping.observe(raw, now).0.is_pass())
            .collect()
    }

    #[test]
    fn first_result_is_reported_as_is() {
        let t = Thresholds {
            failure: 3,
            success: 3,
        };
        assert_eq!(run(t, &[fail()]), [false]);
        assert_eq!(run(t, &[CheckOutcome::Pass]), [true]);
    }

    #[test]
    fn failure_needs_threshold_consecutive_failures() {
        let t = Thresholds {
            failure: 3,
            success: 1,
        };
        let p = CheckOutcome::Pass;
        let raws = [p.clone(), fail(), fail(), p, fail(), fail(), fail()];
        assert_eq!(
            run(t, &raws),
            [true, true, true, true, true, true, false],
            "a pass in between resets the count"
        );
    }

    #[test]
    fn recovery_needs_threshold_consecutive_passes() {
        let t = Thresholds {
            failure: 1,
            success: 2,
        };
        let p = CheckOutcome::Pass;
        let raws = [fail(), p.clone(), fail(), p.clone(), p];
        assert_eq!(run(t, &raws), [false, false, false, false, true]);
    }

    #[test]
    fn held_failure_keeps_the_last_reason() {
        let mut damping = Damping::new(Thresholds {
            failure: 1,
            success: 2,
        });
        let now = Instant::now();
        damping.observe(&CheckOutcome::fail(Reason::Timeout, "slow"), now);
        let (held, transition) = damping.observe(&CheckOutcome::Pass, now);
        assert_eq!(held, CheckOutcome::fail(Reason::Timeout, "slow"));
        assert!(transition.is_none());
    }

    #[test]
    fn transitions_are_reported_once_per_change() {
        let mut damping = Damping::new(Thresholds::default());
        let t0 = Instant::now();
        let first = damping.observe(&CheckOutcome::Pass, t0).1.unwrap();
        assert_eq!(first.from_pass, None);
        assert!(damping.observe(&CheckOutcome::Pass, t0).1.is_none());
        let down = damping
            .observe(&fail(), t0 + Duration::from_secs(7))
            .1
            .unwrap();
        assert_eq!(down.from_pass, Some(true));
        assert_eq!(down.time_in_previous, Duration::from_secs(7));
        assert_eq!(down.raw.unwrap().detail, "connection refused");
        assert!(damping.observe(&fail(), t0).1.is_none(), "steady failure");
        let up = damping
            .observe(&CheckOutcome::Pass, t0 + Duration::from_secs(9))
            .1
            .unwrap();
        assert_eq!(up.from_pass, Some(false));
        assert_eq!(up.time_in_previous, Duration::from_secs(2));
    }
}
