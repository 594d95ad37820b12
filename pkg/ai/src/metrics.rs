//! The model service's counts, registered once per process.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::client::Usage;
use crate::Task;

type Labels = Vec<(&'static str, &'static str)>;

#[derive(Clone)]
pub(crate) struct Metrics {
    requests: Family<Labels, Counter>,
    tokens: Family<Labels, Counter>,
    first_token: Family<Labels, Histogram>,
    refused: Family<Labels, Counter>,
}

impl Metrics {
    pub(crate) fn new(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            requests: Family::default(),
            tokens: Family::default(),
            // 50 ms to about 13 min: a hosted model's first token to a small CPU's.
            first_token: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.05, 2.0, 15))
            }),
            refused: Family::default(),
        };
        registry.register(
            "karpor_ai_requests",
            "Generations asked of the model service, by task and outcome (ok, cancelled, invalid, timeout, unreachable, unauthorized, status, malformed)",
            metrics.requests.clone(),
        );
        registry.register(
            "karpor_ai_tokens",
            "Tokens the model service counted, by direction (in: prompts, out: answers)",
            metrics.tokens.clone(),
        );
        registry.register_with_unit(
            "karpor_ai_first_token",
            "Time from asking to the first token (a whole answer's time when not streamed)",
            Unit::Seconds,
            metrics.first_token.clone(),
        );
        registry.register(
            "karpor_ai_refused",
            "Generations refused before asking, by reason (caller, total, rate)",
            metrics.refused.clone(),
        );
        metrics
    }

    pub(crate) fn outcome(&self, task: Task, outcome: &'static str) {
        self.requests
            .get_or_create(&vec![("task", task.label()), ("outcome", outcome)])
            .inc();
    }

    pub(crate) fn usage(&self, usage: Option<Usage>) {
        if let Some(usage) = usage {
            self.tokens
                .get_or_create(&vec![("direction", "in")])
                .inc_by(usage.prompt_tokens);
            self.tokens
                .get_or_create(&vec![("direction", "out")])
                .inc_by(usage.completion_tokens);
        }
    }

    pub(crate) fn first_token(&self, task: Task, took: Duration) {
        self.first_token
            .get_or_create(&vec![("task", task.label())])
            .observe(took.as_secs_f64());
    }

    pub(crate) fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&vec![("reason", reason)]).inc();
    }
}
