//! Transitive readiness (Kraken style): a client for another karpor process's health
//! endpoints, used by `karpor health` and, as `UpstreamCheck`, by `readiness.upstreams`.
//! Every upstream call carries the hop header; a process answers such a request from its local
//! checks only, so two processes that list each other cannot loop.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde_json::Value;

use crate::reporter::{CheckOutcome, HealthReporter, Reason};

/// Marks a health request made by another karpor process.
pub(crate) const HOP_HEADER: &str = "x-karpor-health-hop";

#[derive(Debug, Clone)]
pub struct ProbeResponse {
    pub status: u16,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeError {
    Timeout,
    Unreachable(String),
}

/// How to ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProbeOptions<'a> {
    /// Ask for the IETF JSON form.
    pub json: bool,
    /// An admin token, for raw details.
    pub token: Option<&'a str>,
    /// Mark the request as coming from another karpor process (upstream checks do).
    pub hop: bool,
}

#[derive(Clone)]
pub struct HealthClient {
    http: reqwest::Client,
    timeout: Duration,
}

impl HealthClient {
    pub fn new(timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()
            .expect("a client with only timeouts set builds");
        HealthClient { http, timeout }
    }

    /// GETs a health URL.
    pub async fn probe(
        &self,
        url: &str,
        options: &ProbeOptions<'_>,
    ) -> Result<ProbeResponse, ProbeError> {
        let mut request = self.http.get(url);
        if options.hop {
            request = request.header(HOP_HEADER, "1");
        }
        if options.json {
            request = request.header(ACCEPT, "application/health+json");
        }
        if let Some(token) = options.token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        // reqwest's own timeout covers the body too; this one also bounds DNS and TLS.
        let call = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let body = response.text().await?;
            Ok::<_, reqwest::Error>(ProbeResponse { status, body })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(ProbeError::Timeout),
            Ok(Err(e)) if e.is_timeout() => Err(ProbeError::Timeout),
            Ok(Err(e)) => Err(ProbeError::Unreachable(error_chain(&e))),
            Ok(Ok(response)) => Ok(response),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

const UPSTREAM_PROBE: ProbeOptions<'static> = ProbeOptions {
    json: true,
    token: None,
    hop: true,
};

/// Another karpor process's `/readyz` as a check of this one.
pub struct UpstreamCheck {
    name: String,
    url: String,
    critical: bool,
    client: HealthClient,
}

impl UpstreamCheck {
    pub fn new(name: String, url: String, critical: bool, client: HealthClient) -> Self {
        UpstreamCheck {
            name,
            url,
            critical,
            client,
        }
    }
}

#[async_trait]
impl HealthReporter for UpstreamCheck {
    fn name(&self) -> &str {
        &self.name
    }

    fn critical(&self) -> bool {
        self.critical
    }

    async fn check(&self) -> CheckOutcome {
        let response = match self.client.probe(&self.url, &UPSTREAM_PROBE).await {
            Ok(r) => r,
            Err(ProbeError::Timeout) => {
                return CheckOutcome::fail(Reason::Timeout, format!("{}: no answer", self.url))
            }
            Err(ProbeError::Unreachable(e)) => {
                return CheckOutcome::fail(Reason::Unreachable, format!("{}: {e}", self.url))
            }
        };
        match response.status {
            200 => CheckOutcome::Pass,
            401 | 403 => CheckOutcome::fail(
                Reason::Unauthorized,
                format!("{} answered {}", self.url, response.status),
            ),
            503 => {
                // Pass on the upstream's own reason: it names the root cause.
                let (reason, check) = first_failure(&response.body)
                    .unwrap_or((Reason::Unreachable, "unknown".to_owned()));
                CheckOutcome::fail(
                    reason,
                    format!("{} not ready: its check {check} failed: {reason}", self.url),
                )
            }
            other => CheckOutcome::fail(
                Reason::Misconfigured,
                format!("{} answered {other}, not a karpor readyz", self.url),
            ),
        }
    }
}

/// The first failing check of an IETF health body, with its reason.
fn first_failure(body: &str) -> Option<(Reason, String)> {
    let value: Value = serde_json::from_str(body).ok()?;
    value["checks"]
        .as_object()?
        .iter()
        .find_map(|(name, list)| {
            let check = list.get(0)?;
            (check["status"] == "fail")
                .then(|| Reason::parse(check["output"].as_str()?))
                .flatten()
                .map(|reason| (reason, name.clone()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_failure_takes_the_upstream_reason() {
        let body = r#"{"status":"fail","checks":{
            "ping":[{"status":"pass"}],
            "cluster/a":[{"status":"warn","output":"unreachable"}],
            "storage":[{"status":"fail","output":"status red"}]}}"#;
        assert_eq!(
            first_failure(body),
            Some((Reason::StatusRed, "storage".to_owned()))
        );
        assert_eq!(first_failure("not json"), None);
    }
}
