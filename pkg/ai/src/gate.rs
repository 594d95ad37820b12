//! How much generation callers may cause: generations in flight per caller and in total,
//! and a per-caller rate. Beyond any of them a request is refused at once (429 with
//! `Retry-After`), never queued: a model service is slow, and a queue would only hide
//! that behind timeouts.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::AiConfig;

/// A refusal for being over a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Busy {
    pub message: String,
    pub retry_after: Duration,
    /// The metrics' label: `caller`, `total` or `rate`.
    pub reason: &'static str,
}

/// Callers the rate limiter keeps before it drops those at full allowance.
const RATE_KEYS_KEPT: usize = 10_000;

#[derive(Clone)]
pub(crate) struct Gate(Arc<Inner>);

struct Inner {
    total: usize,
    per_caller: usize,
    rate: DefaultKeyedRateLimiter<String>,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    by_caller: HashMap<String, usize>,
    total: usize,
}

impl Gate {
    pub(crate) fn new(config: &AiConfig) -> Gate {
        let per_minute = NonZeroU32::new(config.per_caller_per_minute).unwrap_or(NonZeroU32::MIN);
        Gate(Arc::new(Inner {
            total: config.concurrency,
            per_caller: config.per_caller,
            rate: RateLimiter::keyed(Quota::per_minute(per_minute)),
            held: Mutex::new(Held::default()),
        }))
    }

    /// A place for one generation of `caller`, held until the permit is dropped.
    pub(crate) fn enter(&self, caller: &str) -> Result<Permit, Busy> {
        let inner = &self.0;
        let mut held = inner.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.total >= inner.total {
            return Err(Busy {
                message: format!(
                    "{} generations are running, the most this server runs at once (ai.concurrency)",
                    held.total
                ),
                retry_after: Duration::from_secs(5),
                reason: "total",
            });
        }
        let mine = held.by_caller.get(caller).copied().unwrap_or(0);
        if mine >= inner.per_caller {
            return Err(Busy {
                message: format!(
                    "{mine} generations of yours are running, the most one caller runs at once (ai.per_caller)"
                ),
                retry_after: Duration::from_secs(5),
                reason: "caller",
            });
        }
        // The rate's state is one entry a caller ever seen: callers whose minute has run
        // out are dropped once many have come by, so many users cannot grow it for good.
        if inner.rate.len() > RATE_KEYS_KEPT {
            inner.rate.retain_recent();
        }
        if let Err(not_until) = inner.rate.check_key(&caller.to_owned()) {
            return Err(Busy {
                message: "you started more generations this minute than one caller may (ai.per_caller_per_minute)".to_owned(),
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
                reason: "rate",
            });
        }
        *held.by_caller.entry(caller.to_owned()).or_default() += 1;
        held.total += 1;
        Ok(Permit {
            gate: self.clone(),
            caller: caller.to_owned(),
        })
    }
}

/// One generation's place; given back when dropped.
pub struct Permit {
    gate: Gate,
    caller: String,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Permit({})", self.caller)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut held = self.gate.0.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total = held.total.saturating_sub(1);
        if let Some(mine) = held.by_caller.get_mut(&self.caller) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                held.by_caller.remove(&self.caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(total: usize, per_caller: usize, per_minute: u32) -> Gate {
        let mut config = AiConfig::new("http://127.0.0.1:1/v1".parse().unwrap(), "m");
        config.concurrency = total;
        config.per_caller = per_caller;
        config.per_caller_per_minute = per_minute;
        Gate::new(&config)
    }

    #[test]
    fn a_caller_holds_at_most_its_share_and_gets_it_back() {
        let gate = gate(3, 2, 100);
        let first = gate.enter("ann").unwrap();
        let _second = gate.enter("ann").unwrap();
        assert_eq!(gate.enter("ann").unwrap_err().reason, "caller");
        let _bob = gate.enter("bob").unwrap();
        assert_eq!(gate.enter("cid").unwrap_err().reason, "total");
        drop(first);
        gate.enter("ann").unwrap();
    }

    #[test]
    fn callers_seen_once_do_not_stay_in_the_rate_for_good() {
        let gate = gate(10, 10, 60_000);
        for i in 0..RATE_KEYS_KEPT + 50 {
            drop(gate.enter(&format!("caller-{i}")).unwrap());
        }
        // At 60,000 a minute each caller is back at full allowance within a millisecond.
        std::thread::sleep(Duration::from_millis(20));
        drop(gate.enter("one-more").unwrap());
        assert!(
            gate.0.rate.len() < RATE_KEYS_KEPT / 2,
            "{}",
            gate.0.rate.len()
        );
    }

    #[test]
    fn a_caller_starts_at_most_its_rate() {
        let gate = gate(10, 10, 2);
        gate.enter("ann").unwrap();
        gate.enter("ann").unwrap();
        let refused = gate.enter("ann").unwrap_err();
        assert_eq!(refused.reason, "rate");
        assert!(refused.retry_after > Duration::ZERO);
        gate.enter("bob").unwrap();
    }
}
