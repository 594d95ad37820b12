//! The agent's client of the hub: join, renew, the plan, and the writer's sink. Every
//! connection starts here; the hub is trusted only through the pin. A renewal swaps the
//! client for one presenting the new certificate; requests under way finish on the old.

use std::sync::Arc;
use std::time::Duration;

use karpor_storage::{Storage, VersionDigest};
use karpor_syncer::{Sink, SinkError, SyncPlan, TypeScope, Write};
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{watch, Semaphore};

use super::link::Link;
use crate::key::AgentKey;
use crate::pin::HubPin;
use crate::wire::{self, Certified, JoinRequest, RenewRequest, Written};
use crate::AgentError;

/// The largest answer read from the hub: a plan with every rule at its limit.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

pub(crate) struct Hub {
    base: String,
    pin: HubPin,
    timeout: Duration,
    client: watch::Sender<reqwest::Client>,
    /// How the last request went, for the agent's `Hub` check.
    link: Link,
}

/// What went wrong talking to the hub, in words for the log.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HubError {
    #[error("cannot reach the hub: {0}")]
    Unreachable(String),
    #[error("the hub refused ({status}): {message}")]
    Refused { status: u16, message: String },
    /// The hub holds the join until an admin approves the agent's key.
    #[error("the hub holds the join for an admin's approval: {0}")]
    Held(String),
    #[error("the hub's answer is malformed: {0}")]
    Malformed(String),
    #[error(transparent)]
    Identity(#[from] AgentError),
}

impl HubError {
    /// The hub said no, and asking again the same way will not change that.
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(self, HubError::Refused { status, .. } if (400..500).contains(status) && *status != 408 && *status != 429)
    }
}

impl Hub {
    pub(crate) fn new(
        base: &str,
        pin: HubPin,
        timeout: Duration,
        identity: Option<(&str, &AgentKey)>,
        link: Link,
    ) -> Result<Hub, HubError> {
        let client = client(pin, timeout, identity)?;
        Ok(Hub {
            base: base.trim_end_matches('/').to_owned(),
            pin,
            timeout,
            client: watch::Sender::new(client),
            link,
        })
    }

    /// From now on, requests present `certificate_pem` over `key`.
    pub(crate) fn present(&self, certificate_pem: &str, key: &AgentKey) -> Result<(), HubError> {
        let client = client(self.pin, self.timeout, Some((certificate_pem, key)))?;
        self.client.send_replace(client);
        Ok(())
    }

    pub(crate) async fn join(&self, token: &str, key: &AgentKey) -> Result<Certified, HubError> {
        let body = JoinRequest {
            token: token.to_owned(),
            request: key.request()?,
        };
        self.call(reqwest::Method::POST, wire::JOIN, Some(&body))
            .await
    }

    pub(crate) async fn renew(&self, key: &AgentKey) -> Result<Certified, HubError> {
        let body = RenewRequest {
            request: key.request()?,
        };
        self.call(reqwest::Method::POST, wire::RENEW, Some(&body))
            .await
    }

    pub(crate) async fn plan(&self) -> Result<SyncPlan, HubError> {
        self.call::<(), _>(reqwest::Method::GET, wire::PLAN, None)
            .await
    }

    /// The control stream: the hub's lines until either end leaves. No time limit: the
    /// reader notices an idle link by the hub's pings missing.
    pub(crate) async fn control(&self) -> Result<reqwest::Response, HubError> {
        let client = self.client.borrow().clone();
        let url = format!("{}{}{}", self.base, wire::PREFIX, wire::CONTROL);
        let response = client
            .get(url)
            .send()
            .await
            .map_err(|e| HubError::Unreachable(describe(&e)))?;
        if response.status() != StatusCode::OK {
            let status = response.status().as_u16();
            let bytes = read_bounded(response).await?;
            return Err(HubError::Refused {
                status,
                message: refusal(&bytes),
            });
        }
        Ok(response)
    }

    /// Posts the reply to read `id`, its body streamed, within `within`.
    pub(crate) async fn reply(
        &self,
        id: u64,
        body: reqwest::Body,
        within: Duration,
    ) -> Result<(), HubError> {
        let client = self.client.borrow().clone();
        let url = format!("{}{}{}/{id}", self.base, wire::PREFIX, wire::REPLIES);
        let response = client
            .post(url)
            .timeout(within)
            .body(body)
            .send()
            .await
            .map_err(|e| HubError::Unreachable(describe(&e)))?;
        let status = response.status();
        let bytes = read_bounded(response).await?;
        if status != StatusCode::OK {
            return Err(HubError::Refused {
                status: status.as_u16(),
                message: refusal(&bytes),
            });
        }
        Ok(())
    }

    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, HubError> {
        let client = self.client.borrow().clone();
        let url = format!("{}{}{path}", self.base, wire::PREFIX);
        let mut request = client.request(method, url).timeout(self.timeout);
        if let Some(body) = body {
            request = request.json(body);
        }
        let answered = async {
            let response = request
                .send()
                .await
                .map_err(|e| HubError::Unreachable(describe(&e)))?;
            let status = response.status();
            let bytes = read_bounded(response).await?;
            if status == StatusCode::ACCEPTED {
                return Err(HubError::Held(refusal(&bytes)));
            }
            if status != StatusCode::OK {
                return Err(HubError::Refused {
                    status: status.as_u16(),
                    message: refusal(&bytes),
                });
            }
            serde_json::from_slice::<Enveloped<T>>(&bytes)
                .map(|enveloped| enveloped.data)
                .map_err(|e| HubError::Malformed(e.to_string()))
        }
        .await;
        match &answered {
            Ok(_) => self.link.answered(),
            Err(e) => self.link.failed(&e.to_string()),
        }
        answered
    }
}

/// The hub answers in the API's envelope; its `data` is the answer.
#[derive(serde::Deserialize)]
struct Enveloped<T> {
    data: T,
}

/// The writer's sink: each write is one batch, answered once the hub committed it.
pub(crate) struct HubSink {
    hub: Arc<Hub>,
    /// Each `versions` is a scan of the hub's storage: no more at once than the hub takes
    /// from one agent.
    versions: Semaphore,
}

impl HubSink {
    pub(crate) fn new(hub: Arc<Hub>) -> HubSink {
        HubSink {
            hub,
            versions: Semaphore::new(wire::VERSIONS_AT_ONCE),
        }
    }
}

/// One write as a batch, without copying its documents.
#[derive(Serialize)]
struct Outgoing<'a> {
    writes: [&'a Write; 1],
}

#[async_trait::async_trait]
impl Sink for HubSink {
    async fn write(&self, _cluster: &str, write: &Write) -> Result<u64, SinkError> {
        // The cluster is the one the certificate names; the hub takes it from there.
        let batch = Outgoing { writes: [write] };
        let written: Written = self
            .hub
            .call(reqwest::Method::POST, wire::WRITES, Some(&batch))
            .await?;
        Ok(written.removed)
    }

    fn storage(&self) -> Option<&Arc<dyn Storage>> {
        None
    }

    async fn versions(
        &self,
        _cluster: &str,
        scope: &TypeScope,
    ) -> Result<Option<VersionDigest>, SinkError> {
        let _turn = self
            .versions
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let digest = self
            .hub
            .call(reqwest::Method::POST, wire::VERSIONS, Some(scope))
            .await?;
        Ok(Some(digest))
    }
}

fn client(
    pin: HubPin,
    timeout: Duration,
    identity: Option<(&str, &AgentKey)>,
) -> Result<reqwest::Client, HubError> {
    let tls = crate::tls::agent_client(pin, identity)?;
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        // No time limit for the client: each request sets its own, the control stream none.
        .redirect(reqwest::redirect::Policy::none())
        // No proxy from the environment: the pin is checked end to end anyway, but the
        // agent's route to the hub is its config's, not its pod's environment's.
        .no_proxy()
        .build()
        .map_err(|e| HubError::Unreachable(e.to_string()))
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, HubError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| HubError::Unreachable(describe(&e)))?
    {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(HubError::Malformed(format!(
                "longer than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The envelope's message, or the start of whatever the hub answered.
fn refusal(bytes: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned())
}

/// reqwest's error with its causes (a TLS refusal says why only in a source).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}
