//! How the agent's link to the hub stands, for its own probes: `Hub` in `/readyz`
//! (joined and answered, or why not) and `Link` in `/livez` (the agent still tries: its
//! loop went round recently, whatever the hub does).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use karpor_health::{CheckOutcome, HealthReporter, Reason};
use tokio::sync::watch;

/// The name of the agent's readiness check of the hub.
pub const HUB_CHECK: &str = "Hub";
/// The name of the agent's liveness check of its own loop.
pub const LINK_CHECK: &str = "Link";

#[derive(Debug, Clone)]
pub(crate) enum Contact {
    NeverJoined,
    Answered,
    Failed { since: Instant, why: String },
}

/// Written by the agent's loop and its hub client, read by the checks.
#[derive(Clone)]
pub struct Link {
    contact: watch::Sender<Contact>,
    tried: watch::Sender<Instant>,
    /// The loop is stuck when it has not tried for this long.
    stuck_after: Duration,
}

impl Link {
    pub fn new(stuck_after: Duration) -> Link {
        Link {
            contact: watch::Sender::new(Contact::NeverJoined),
            tried: watch::Sender::new(Instant::now()),
            stuck_after,
        }
    }

    pub(crate) fn answered(&self) {
        self.contact.send_replace(Contact::Answered);
    }

    pub(crate) fn failed(&self, why: &str) {
        self.contact.send_modify(|contact| match contact {
            Contact::Failed { why: last, .. } => why.clone_into(last),
            Contact::Answered => {
                *contact = Contact::Failed {
                    since: Instant::now(),
                    why: why.to_owned(),
                }
            }
            Contact::NeverJoined => {}
        });
    }

    /// The loop went round (and will try the hub again).
    pub(crate) fn tried(&self) {
        self.tried.send_replace(Instant::now());
    }

    pub fn hub_check(&self) -> HubCheck {
        HubCheck(self.clone())
    }

    pub fn link_check(&self) -> LinkCheck {
        LinkCheck(self.clone())
    }
}

pub struct HubCheck(Link);

#[async_trait]
impl HealthReporter for HubCheck {
    fn name(&self) -> &str {
        HUB_CHECK
    }

    async fn check(&self) -> CheckOutcome {
        let contact = self.0.contact.borrow().clone();
        match contact {
            Contact::Answered => CheckOutcome::Pass,
            Contact::NeverJoined => CheckOutcome::fail(Reason::Unreachable, "never joined the hub"),
            Contact::Failed { since, why } => CheckOutcome::fail(
                Reason::Unreachable,
                format!(
                    "disconnected from the hub for {} s: {why}",
                    since.elapsed().as_secs()
                ),
            ),
        }
    }
}

pub struct LinkCheck(Link);

#[async_trait]
impl HealthReporter for LinkCheck {
    fn name(&self) -> &str {
        LINK_CHECK
    }

    async fn check(&self) -> CheckOutcome {
        let idle = self.0.tried.borrow().elapsed();
        if idle > self.0.stuck_after {
            return CheckOutcome::fail(
                Reason::Stale,
                format!("the agent has not tried the hub for {} s", idle.as_secs()),
            );
        }
        CheckOutcome::Pass
    }
}
