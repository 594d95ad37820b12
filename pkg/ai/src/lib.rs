//! karpor's model service ([`AiConfig`], `ai:`): natural-language search and the
//! explanations and diagnoses Karpor's dashboard streams, from any OpenAI-compatible
//! chat-completions endpoint. Each generation holds a [`Permit`] (bounded per caller and
//! in total), what is sent is scrubbed of secrets and cut to size ([`scrub`]), and every
//! request is counted: `karpor_ai_requests_total{task,outcome}`,
//! `karpor_ai_tokens_total{direction}`, `karpor_ai_first_token_seconds{task}`,
//! `karpor_ai_refused_total{reason}`. The `AI` check says whether the service answers.

mod client;
mod config;
mod gate;
mod health;
mod metrics;
pub mod prompt;
pub mod scrub;
mod search;

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

pub use client::{Message, ModelError, Piece, Usage};
pub use config::{AiConfig, KeyHeader};
pub use gate::{Busy, Permit};
pub use health::{AiCheck, AI_CHECK};
pub use search::{extract, Found, NlError, RunError};

use client::{ModelClient, Pieces};
use gate::Gate;
use metrics::Metrics;

/// What a generation is for: the metrics' `task` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Search,
    InterpretYaml,
    InterpretIssues,
    DiagnoseEvents,
    DiagnoseLogs,
}

impl Task {
    fn label(self) -> &'static str {
        match self {
            Task::Search => "search",
            Task::InterpretYaml => "interpret_yaml",
            Task::InterpretIssues => "interpret_issues",
            Task::DiagnoseEvents => "diagnose_events",
            Task::DiagnoseLogs => "diagnose_logs",
        }
    }
}

/// The configured model service.
#[derive(Clone)]
pub struct Ai {
    client: ModelClient,
    gate: Gate,
    metrics: Metrics,
    max_input_bytes: usize,
}

impl std::fmt::Debug for Ai {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ai")
    }
}

impl Ai {
    /// The service of `config`, its key read now; its metrics registered in `registry`.
    pub fn new(config: &AiConfig, registry: &mut Registry) -> Result<Ai, String> {
        let key = match &config.api_key {
            Some(source) => Some(source.resolve().map_err(|e| format!("ai.api_key: {e}"))?),
            None => None,
        };
        Ok(Ai {
            client: ModelClient::new(config, key)?,
            gate: Gate::new(config),
            metrics: Metrics::new(registry),
            max_input_bytes: config.max_input_bytes,
        })
    }

    /// Bytes of a YAML, a log or an event list put in a prompt at most.
    pub fn max_input_bytes(&self) -> usize {
        self.max_input_bytes
    }

    /// A place for one generation of `caller`, or why not now.
    pub fn enter(&self, caller: &str) -> Result<Permit, Busy> {
        self.gate.enter(caller).inspect_err(|busy| {
            self.metrics.refused(busy.reason);
        })
    }

    /// The whole answer's text.
    pub(crate) async fn complete(
        &self,
        task: Task,
        messages: &[Message],
    ) -> Result<String, ModelError> {
        let started = Instant::now();
        let answer = self.client.complete(messages).await;
        match &answer {
            Ok(answer) => {
                self.metrics.first_token(task, started.elapsed());
                self.metrics.usage(answer.usage);
                self.metrics.outcome(task, "ok");
            }
            Err(e) => self.metrics.outcome(task, e.kind()),
        }
        answer.map(|a| a.text)
    }

    fn count_invalid(&self) {
        self.metrics.outcome(Task::Search, "invalid");
    }

    /// The answer to `messages`, text by text as the service sends it, holding `permit`
    /// until it ends or is dropped (a dropped stream is a cancelled generation: the
    /// connection to the service closes).
    pub async fn stream(
        &self,
        task: Task,
        permit: Permit,
        messages: &[Message],
    ) -> Result<Generation, ModelError> {
        let started = Instant::now();
        match self.client.stream(messages).await {
            Ok(pieces) => Ok(Generation {
                pieces,
                task,
                started,
                first: true,
                finished: false,
                metrics: self.metrics.clone(),
                _permit: permit,
            }),
            Err(e) => {
                self.metrics.outcome(task, e.kind());
                Err(e)
            }
        }
    }

    /// The `AI` check of `/readyz`.
    pub fn check(&self) -> AiCheck {
        AiCheck::new(self.client.clone())
    }
}

/// A streamed answer: its text pieces, counted as they pass.
pub struct Generation {
    pieces: Pieces,
    task: Task,
    started: Instant,
    first: bool,
    finished: bool,
    metrics: Metrics,
    _permit: Permit,
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Generation({})", self.task.label())
    }
}

impl Stream for Generation {
    type Item = Result<String, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let next = match self.pieces.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(next) => next,
            };
            let this = &mut *self;
            match next {
                None => {
                    if !this.finished {
                        this.finished = true;
                        this.metrics.outcome(this.task, "ok");
                    }
                    return Poll::Ready(None);
                }
                Some(Err(e)) => {
                    this.finished = true;
                    this.metrics.outcome(this.task, e.kind());
                    return Poll::Ready(Some(Err(e)));
                }
                Some(Ok(Piece::Usage(usage))) => this.metrics.usage(Some(usage)),
                Some(Ok(Piece::Text(text))) => {
                    if this.first {
                        this.first = false;
                        this.metrics.first_token(this.task, this.started.elapsed());
                    }
                    return Poll::Ready(Some(Ok(text)));
                }
            }
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        if !self.finished {
            self.metrics.outcome(self.task, "cancelled");
        }
    }
}
