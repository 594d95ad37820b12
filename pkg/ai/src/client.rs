//! OpenAI's chat-completions protocol, the part karpor uses: messages in, an answer out,
//! whole or streamed as server-sent `chat.completion.chunk` events. Only the fields read
//! are declared, so the services that speak the protocol loosely (llama.cpp, Ollama, vLLM)
//! answer as well as OpenAI's. No redirects are followed and nothing is retried: a
//! failure is the caller's answer, at once.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use karpor_core::Secret;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use url::Url;

use crate::config::{AiConfig, KeyHeader};

/// The most bytes of an answer read, whole or streamed: a service that sends more is cut
/// off with an error rather than filling memory.
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// Whole answers to `/models` are small.
const MAX_MODELS_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Message {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Tokens counted by the service, when it says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
}

/// Why a generation gave no (more) answer; the kinds are the metrics' `outcome` labels.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model service could not be reached: {0}")]
    Unreachable(String),
    #[error("the model service gave no answer within {0:?}")]
    Timeout(Duration),
    #[error("the model service refused the key (HTTP {0})")]
    Unauthorized(u16),
    #[error("the model service answered HTTP {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the model service's answer could not be read: {0}")]
    Malformed(String),
}

impl ModelError {
    /// The metrics' label for it.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Unreachable(_) => "unreachable",
            ModelError::Timeout(_) => "timeout",
            ModelError::Unauthorized(_) => "unauthorized",
            ModelError::Status { .. } => "status",
            ModelError::Malformed(_) => "malformed",
        }
    }
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: &'a [Message],
    max_tokens: u32,
    temperature: f32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<Content>,
    #[serde(default)]
    delta: Option<Content>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    content: Option<String>,
}

/// A whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub text: String,
    pub usage: Option<Usage>,
}

/// A piece of a streamed answer: text as it comes, and the service's count at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Usage(Usage),
}

pub(crate) type Pieces = Pin<Box<dyn Stream<Item = Result<Piece, ModelError>> + Send>>;

/// The model service, as configured.
#[derive(Clone)]
pub(crate) struct ModelClient {
    http: reqwest::Client,
    chat: Url,
    models: Url,
    model: String,
    max_tokens: u32,
    temperature: f32,
    first_token_timeout: Duration,
    timeout: Duration,
}

/// `base` with `path` below it (a base without a trailing slash keeps its last segment).
fn below(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    url.path_segments_mut()
        .map(|mut segments| {
            segments.pop_if_empty().extend(path.split('/'));
        })
        .ok();
    url
}

impl ModelClient {
    pub(crate) fn new(config: &AiConfig, key: Option<Secret>) -> Result<ModelClient, String> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            let (name, value) = match config.key_header {
                KeyHeader::Bearer => (AUTHORIZATION, format!("Bearer {}", key.expose())),
                KeyHeader::ApiKey => (HeaderName::from_static("api-key"), key.expose().to_owned()),
            };
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| "ai.api_key: not a valid header value".to_owned())?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("ai: cannot build the HTTP client: {e}"))?;
        Ok(ModelClient {
            http,
            chat: below(&config.base_url, "chat/completions"),
            models: below(&config.base_url, "models"),
            model: config.model.clone(),
            max_tokens: config.max_tokens,
            temperature: config.temperature,
            first_token_timeout: config.first_token_timeout,
            timeout: config.timeout,
        })
    }

    fn request(&self, messages: &[Message], stream: bool) -> reqwest::RequestBuilder {
        self.http.post(self.chat.clone()).json(&ChatRequest {
            model: &self.model,
            messages,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
        })
    }

    /// The whole answer to `messages`.
    pub(crate) async fn complete(&self, messages: &[Message]) -> Result<Answer, ModelError> {
        let wait = self.first_token_timeout;
        let work = async {
            let response = accepted(self.request(messages, false).send().await).await?;
            let body = read_capped(response, MAX_ANSWER_BYTES).await?;
            let answer: ChatResponse =
                serde_json::from_slice(&body).map_err(|e| ModelError::Malformed(e.to_string()))?;
            let text = answer
                .choices
                .into_iter()
                .next()
                .and_then(|c| c.message)
                .and_then(|m| m.content)
                .ok_or_else(|| ModelError::Malformed("no choice with a message".into()))?;
            Ok(Answer {
                text,
                usage: answer.usage,
            })
        };
        tokio::time::timeout(wait, work)
            .await
            .map_err(|_| ModelError::Timeout(wait))?
    }

    /// The answer to `messages`, piece by piece as the service sends it. Dropping the
    /// stream closes the connection, which is how a service learns to stop.
    pub(crate) async fn stream(&self, messages: &[Message]) -> Result<Pieces, ModelError> {
        let first = Instant::now() + self.first_token_timeout;
        let response = tokio::time::timeout_at(first, async {
            accepted(self.request(messages, true).send().await).await
        })
        .await
        .map_err(|_| ModelError::Timeout(self.first_token_timeout))??;
        let mut read = 0usize;
        let bytes = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| ModelError::Unreachable(without_url(&e)))?;
            read += chunk.len();
            if read > MAX_ANSWER_BYTES {
                return Err(ModelError::Malformed(format!(
                    "the answer is longer than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            Ok(chunk)
        });
        let reading = Reading {
            events: Box::pin(bytes.eventsource()),
            until: first,
            first_wait: self.first_token_timeout,
            timeout: self.timeout,
            started: false,
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(reading, Reading::next)))
    }

    /// Whether the service answers `/models` with the key.
    pub(crate) async fn ping(&self) -> Result<(), ModelError> {
        let response = accepted(self.http.get(self.models.clone()).send().await).await?;
        read_capped(response, MAX_MODELS_BYTES).await.map(|_| ())
    }
}

type Events = Pin<
    Box<
        dyn Stream<
                Item = Result<
                    eventsource_stream::Event,
                    eventsource_stream::EventStreamError<ModelError>,
                >,
            > + Send,
    >,
>;

/// A streamed answer being read: until the first text, within the first-token wait;
/// from it, within the generation's timeout.
struct Reading {
    events: Events,
    until: Instant,
    first_wait: Duration,
    timeout: Duration,
    started: bool,
    done: bool,
}

impl Reading {
    async fn next(mut self) -> Option<(Result<Piece, ModelError>, Reading)> {
        while !self.done {
            let next = match tokio::time::timeout_at(self.until, self.events.next()).await {
                Err(_) => {
                    let waited = if self.started {
                        self.timeout
                    } else {
                        self.first_wait
                    };
                    Err(ModelError::Timeout(waited))
                }
                Ok(None) => return None,
                Ok(Some(Err(eventsource_stream::EventStreamError::Transport(e)))) => Err(e),
                Ok(Some(Err(e))) => Err(ModelError::Malformed(e.to_string())),
                Ok(Some(Ok(event))) if event.data.trim() == "[DONE]" => return None,
                Ok(Some(Ok(event))) => match piece(&event.data) {
                    Ok(None) => continue,
                    Ok(Some(piece)) => Ok(piece),
                    Err(e) => Err(e),
                },
            };
            match &next {
                Ok(_) if !self.started => {
                    self.started = true;
                    self.until = Instant::now() + self.timeout;
                }
                Ok(_) => {}
                Err(_) => self.done = true,
            }
            return Some((next, self));
        }
        None
    }
}

/// What one event of a streamed answer holds: text, the count, or nothing of use (a
/// role-only first chunk).
fn piece(data: &str) -> Result<Option<Piece>, ModelError> {
    let chunk: ChatResponse =
        serde_json::from_str(data).map_err(|e| ModelError::Malformed(e.to_string()))?;
    let text = chunk
        .choices
        .into_iter()
        .next()
        .and_then(|c| c.delta.or(c.message))
        .and_then(|d| d.content)
        .filter(|t| !t.is_empty());
    Ok(match (text, chunk.usage) {
        (Some(text), _) => Some(Piece::Text(text)),
        (None, Some(usage)) => Some(Piece::Usage(usage)),
        (None, None) => None,
    })
}

/// The response when its status is a success; the service's complaint otherwise.
async fn accepted(
    sent: Result<reqwest::Response, reqwest::Error>,
) -> Result<reqwest::Response, ModelError> {
    let response = sent.map_err(|e| ModelError::Unreachable(without_url(&e)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    if matches!(status.as_u16(), 401 | 403) {
        return Err(ModelError::Unauthorized(status.as_u16()));
    }
    let body = read_capped(response, 4096).await.unwrap_or_default();
    let message: String = String::from_utf8_lossy(&body).chars().take(300).collect();
    Err(ModelError::Status {
        status: status.as_u16(),
        message,
    })
}

/// reqwest's message without the URL it names (a base URL may name an internal host).
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "connection failed"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_redirect() {
        "answered with a redirect, which is not followed"
    } else {
        "request failed"
    };
    kind.to_owned()
}

async fn read_capped(response: reqwest::Response, cap: usize) -> Result<Vec<u8>, ModelError> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| ModelError::Unreachable(without_url(&e)))?;
        if body.len() + chunk.len() > cap {
            return Err(ModelError::Malformed(format!(
                "the answer is longer than {cap} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_go_below_the_base() {
        let base: Url = "http://h:1/v1".parse().unwrap();
        assert_eq!(below(&base, "models").as_str(), "http://h:1/v1/models");
        let slash: Url = "http://h:1/openai/v1/".parse().unwrap();
        assert_eq!(
            below(&slash, "chat/completions").path(),
            "/openai/v1/chat/completions"
        );
    }

    #[test]
    fn a_chunk_is_text_a_count_or_nothing() {
        let text = r#"{"choices":[{"delta":{"content":"SEL"}}]}"#;
        assert_eq!(piece(text).unwrap(), Some(Piece::Text("SEL".into())));
        let role = r#"{"choices":[{"delta":{"role":"assistant"}}]}"#;
        assert_eq!(piece(role).unwrap(), None);
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}"#;
        assert_eq!(
            piece(usage).unwrap(),
            Some(Piece::Usage(Usage {
                prompt_tokens: 3,
                completion_tokens: 5
            }))
        );
        assert!(piece("{").is_err());
    }
}
