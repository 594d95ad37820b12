//! The commands that talk to a running server's REST API (`karpor cluster`, `karpor
//! rule`, `karpor search`, `karpor audit`, `karpor explain`, `karpor history`, ...): the
//! HTTP client, the token, the exit statuses, and how answers are printed. Exit 0 done, 1
//! refused by the server (its message on stderr), 2 unreachable.

pub(crate) mod audit;
pub(crate) mod changes;
pub(crate) mod cluster;
pub(crate) mod describe;
pub(crate) mod diff;
pub(crate) mod explain;
mod frames;
pub(crate) mod history;
pub(crate) mod logs;
pub(crate) mod mcp;
mod output;
pub(crate) mod relation;
pub(crate) mod rule;
pub(crate) mod search;
pub(crate) mod whoami;

use std::process::ExitCode;
use std::time::Duration;

use karpor_api::local_token;
use karpor_api::types::Envelope;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::args::ServerArgs;

const EXIT_REFUSED: u8 = 1;
const EXIT_UNREACHABLE: u8 = 2;

/// Why a command failed: its exit status and a line for stderr.
struct Failed(u8, String);

fn refused(message: impl Into<String>) -> Failed {
    Failed(EXIT_REFUSED, message.into())
}

/// The address with a scheme: `127.0.0.1:7443` means `http://127.0.0.1:7443`.
pub(crate) fn base_url(server: &str) -> String {
    let server = server.trim().trim_end_matches('/');
    if server.contains("://") {
        server.to_owned()
    } else {
        format!("http://{server}")
    }
}

/// Percent-encoding of a query value or path segment (everything but unreserved bytes).
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Api {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

/// A failed answer: its status and the envelope's message.
struct Refusal {
    status: reqwest::StatusCode,
    message: String,
}

impl Api {
    fn new(args: &ServerArgs) -> Result<Api, Failed> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Failed(EXIT_UNREACHABLE, format!("cannot make an HTTP client: {e}")))?;
        Ok(Api {
            base: format!("{}{}", base_url(&args.server), karpor_api::PREFIX),
            token: token(args)?,
            http,
        })
    }

    /// The envelope's `data` of a 2xx answer, or the refusal.
    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Result<Value, Refusal>, Failed> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Failed(EXIT_UNREACHABLE, format!("cannot reach {}: {e}", self.base)))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let envelope: Option<Envelope<Value>> = match serde_json::from_str(&text) {
            Ok(envelope) => Some(envelope),
            Err(_) if text.trim().is_empty() => None,
            Err(_) => {
                return Err(refused(format!(
                    "{status}: the answer is not karpor's JSON: {}",
                    text.chars().take(200).collect::<String>()
                )))
            }
        };
        if status.is_success() {
            let data = envelope.and_then(|e| e.data);
            return Ok(Ok(data.unwrap_or(Value::Null)));
        }
        let message = envelope
            .map(|e| e.message)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("no message").to_owned());
        Ok(Err(Refusal { status, message }))
    }

    /// The envelope's `data` of a 2xx answer, read as `T` (the API's own types); any other
    /// answer fails the command.
    async fn get<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, Failed> {
        decode(self.call(method, path, body).await?)
    }

    /// As [`Api::try_call`], the data read as `T`.
    async fn try_get<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> Result<Result<T, Refusal>, Failed> {
        match self.try_call(method, path, None).await? {
            Ok(data) => decode(data).map(Ok),
            Err(refusal) => Ok(Err(refusal)),
        }
    }

    /// The envelope's `data` of a 2xx answer; any other answer fails the command.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failed> {
        self.try_call(method, path, body)
            .await?
            .map_err(|refusal| refused(describe(&refusal)))
    }
}

/// A request whose answer is a stream (a followed log, an AI stream): no total timeout but
/// one between reads; a refusal fails the command with the envelope's message.
async fn streamed(
    server: &ServerArgs,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    read_timeout: Duration,
) -> Result<reqwest::Response, Failed> {
    let url = format!("{}{path}", base_url(&server.server));
    let http = reqwest::Client::builder()
        .connect_timeout(STREAM_CONNECT_TIMEOUT)
        .read_timeout(read_timeout)
        .build()
        .map_err(|e| Failed(EXIT_UNREACHABLE, format!("cannot make an HTTP client: {e}")))?;
    let mut request = http.request(method, &url);
    if let Some(token) = token(server)? {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.map_err(|e| {
        Failed(
            EXIT_UNREACHABLE,
            format!("cannot reach {}: {e}", server.server),
        )
    })?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Envelope<Value>>(&text)
            .map(|e| e.message)
            .unwrap_or(text);
        return Err(refused(describe(&Refusal { status, message })));
    }
    Ok(response)
}

const STREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An answer's data as the API type it is.
fn decode<T: DeserializeOwned>(data: Value) -> Result<T, Failed> {
    serde_json::from_value(data)
        .map_err(|e| refused(format!("the answer is not what this karpor reads: {e}")))
}

/// A request body of the API's types.
fn body(value: &impl Serialize) -> Option<Value> {
    serde_json::to_value(value).ok()
}

/// A time as the API writes it (RFC 3339).
fn time_text(time: &OffsetDateTime) -> String {
    time.format(&Rfc3339).unwrap_or_default()
}

fn describe(refusal: &Refusal) -> String {
    let hint = if refusal.status == reqwest::StatusCode::UNAUTHORIZED {
        " (give a token with --token or KARPOR_TOKEN, or its file with --token-file or \
         KARPOR_TOKEN_FILE; a local install keeps its own in data/admin-token)"
    } else {
        ""
    };
    format!("{}: {}{hint}", refusal.status, refusal.message)
}

/// `--token`, else the token file (`--token-file`, else a local install's admin token when
/// the server is on loopback and the file exists).
fn token(args: &ServerArgs) -> Result<Option<String>, Failed> {
    if let Some(token) = args.token.clone().filter(|t| !t.is_empty()) {
        return Ok(Some(token));
    }
    let (path, required) = match &args.token_file {
        Some(path) => (path.clone(), true),
        None if on_loopback(&args.server) => (local_token::default_path(), false),
        None => return Ok(None),
    };
    match karpor_core::private_file::read(&path, 4096) {
        Ok(Some(bytes)) => Ok(Some(String::from_utf8_lossy(&bytes).trim().to_owned())),
        Ok(None) if !required => Ok(None),
        Ok(None) => Err(refused(format!(
            "token file {} does not exist",
            path.display()
        ))),
        Err(e) => Err(refused(format!("cannot read the token file: {e}"))),
    }
}

fn on_loopback(server: &str) -> bool {
    let host = url::Url::parse(&base_url(server))
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn finish(result: Result<(), Failed>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(code, message)) => {
            eprintln!("karpor: {message}");
            ExitCode::from(code)
        }
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_without_a_scheme_is_http() {
        assert_eq!(base_url("127.0.0.1:7443"), "http://127.0.0.1:7443");
        assert_eq!(base_url("https://k.example/"), "https://k.example");
        assert!(on_loopback("localhost:7443"));
        assert!(on_loopback("http://[::1]:7443"));
        assert!(!on_loopback("https://k.example"));
        assert_eq!(encode("Cluster/prod"), "Cluster%2Fprod");
    }
}
