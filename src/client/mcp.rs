//! `karpor mcp`: MCP on stdin and stdout for a desktop assistant, as a client of a running
//! karpor. Each JSON-RPC message read (one a line) is posted to the server's `/mcp` with
//! this command's token, and the server's answer written back: the tools, their limits and
//! what the token may see are the server's. It holds no cluster credential and no tool of
//! its own. Nothing but MCP goes to stdout; problems go to stderr, and a request the
//! server could not answer gets a JSON-RPC error, so the assistant never waits on it.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Semaphore};

use super::{base_url, token, Failed, EXIT_UNREACHABLE};
use crate::args::McpArgs;

/// The longest message read from the assistant (the server takes 256 KiB).
const MAX_LINE_BYTES: usize = 256 * 1024;
/// The longest answer read from the server.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// Messages sent to the server at once; more wait their turn.
const IN_FLIGHT: usize = 8;
/// Longer than the server's own request timeout (30 s by default).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
/// What the transport requires a client to accept.
const ACCEPT: &str = "application/json, text/event-stream";
/// The version a client speaks before `initialize` settles one.
const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// JSON-RPC's codes for what this bridge answers itself.
const PARSE_ERROR: i64 = -32700;
const SERVER_ERROR: i64 = -32000;

pub(crate) async fn run(args: &McpArgs) -> ExitCode {
    match bridge(args, tokio::io::stdin()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(code, message)) => {
            eprintln!("karpor mcp: {message}");
            ExitCode::from(code)
        }
    }
}

/// Where the server is and how to call it.
struct Server {
    url: String,
    token: Option<String>,
    http: reqwest::Client,
    /// The version `initialize` settled, sent with every later message.
    version: std::sync::RwLock<Option<String>>,
}

async fn bridge(args: &McpArgs, input: impl AsyncRead + Unpin) -> Result<(), Failed> {
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| Failed(EXIT_UNREACHABLE, format!("cannot make an HTTP client: {e}")))?;
    let server = Arc::new(Server {
        url: format!("{}/mcp", base_url(&args.server.server)),
        token: token(&args.server)?,
        http,
        version: std::sync::RwLock::new(None),
    });
    let (out, mut answers) = mpsc::channel::<String>(IN_FLIGHT * 4);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = answers.recv().await {
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            if written.await.is_err() {
                break; // The assistant went away.
            }
        }
    });
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut lines = BufReader::new(input);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let line = match read_line(&mut lines).await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(too_long) => {
                let _ = out.send(error(&Value::Null, PARSE_ERROR, &too_long)).await;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(e) => {
                let why = format!("not JSON: {e}");
                let _ = out.send(error(&Value::Null, PARSE_ERROR, &why)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let (server, out) = (server.clone(), out.clone());
        tasks.spawn(async move {
            let _slot = slot;
            for answer in forward(&server, &message).await {
                if out.send(answer).await.is_err() {
                    break;
                }
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    // The assistant closed stdin: answer what is in flight, then stop.
    while tasks.join_next().await.is_some() {}
    drop(out);
    let _ = writer.await;
    Ok(())
}

/// The next line, without its end; `Ok(None)` at the end of input; `Err` for a line over
/// the limit (skipped to its end).
async fn read_line<R: AsyncBufReadExt + Unpin>(input: &mut R) -> Result<Option<String>, String> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = match input.fill_buf().await {
            Ok(buffer) => buffer,
            Err(_) => return Ok(None),
        };
        if buffer.is_empty() {
            return match (too_long, line.is_empty()) {
                (true, _) => Err(too_long_message()),
                (false, true) => Ok(None),
                (false, false) => Ok(Some(String::from_utf8_lossy(&line).into_owned())),
            };
        }
        let (taken, ended) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        if !too_long {
            let part = &buffer[..taken - usize::from(ended)];
            if line.len() + part.len() > MAX_LINE_BYTES {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(part);
            }
        }
        input.consume(taken);
        if ended {
            return if too_long {
                Err(too_long_message())
            } else {
                Ok(Some(String::from_utf8_lossy(&line).into_owned()))
            };
        }
    }
}

fn too_long_message() -> String {
    format!("a message is longer than {MAX_LINE_BYTES} bytes")
}

/// The server's answers to one message (none to a notification); a JSON-RPC error for a
/// request it did not answer.
async fn forward(server: &Server, message: &Value) -> Vec<String> {
    let id = message.get("id").cloned();
    // A request has a method and an id; only a request is answered.
    let is_request = message.get("method").is_some() && id.is_some();
    let id = id.unwrap_or(Value::Null);
    let mut request = server
        .http
        .post(&server.url)
        .header(reqwest::header::ACCEPT, ACCEPT)
        .json(message);
    if let Some(token) = &server.token {
        request = request.bearer_auth(token);
    }
    let version = server.version.read().ok().and_then(|v| v.clone());
    if let Some(version) = version {
        request = request.header(PROTOCOL_HEADER, version);
    }
    let failed = |why: String| {
        eprintln!("karpor mcp: {why}");
        if is_request {
            vec![error(&id, SERVER_ERROR, &why)]
        } else {
            Vec::new()
        }
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => return failed(format!("cannot reach {}: {e}", server.url)),
    };
    let status = response.status();
    let sse = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = match bounded_body(response).await {
        Ok(body) => body,
        Err(why) => return failed(why),
    };
    if !status.is_success() {
        let message = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| body.chars().take(200).collect());
        let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
            " (give a token with --token or KARPOR_TOKEN, or its file with --token-file)"
        } else {
            ""
        };
        return failed(format!("the server answered {status}: {message}{hint}"));
    }
    let answers: Vec<String> = if sse {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.trim().to_owned())
            .filter(|d| d.starts_with('{'))
            .collect()
    } else if body.trim().is_empty() {
        Vec::new()
    } else {
        vec![body]
    };
    for answer in &answers {
        remember_version(server, message, answer);
    }
    if is_request && answers.is_empty() {
        return failed(format!("the server answered {status} with no message"));
    }
    answers
}

/// After `initialize`, every message carries the version it settled.
fn remember_version(server: &Server, message: &Value, answer: &str) {
    if message["method"] != "initialize" {
        return;
    }
    let Ok(answer) = serde_json::from_str::<Value>(answer) else {
        return;
    };
    if let Some(version) = answer["result"]["protocolVersion"].as_str() {
        if let Ok(mut settled) = server.version.write() {
            *settled = Some(version.to_owned());
        }
    }
}

async fn bounded_body(mut response: reqwest::Response) -> Result<String, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("the server's answer broke off: {e}"))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!(
                "the server's answer is over {MAX_ANSWER_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn error(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_within_the_limit_and_a_long_one_is_skipped() {
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        let input = format!("{{\"a\":1}}\n{long}\n{{\"b\":2}}\nlast");
        let mut reader = BufReader::with_capacity(1024, input.as_bytes());
        assert_eq!(read_line(&mut reader).await, Ok(Some("{\"a\":1}".into())));
        assert!(read_line(&mut reader).await.is_err());
        assert_eq!(read_line(&mut reader).await, Ok(Some("{\"b\":2}".into())));
        assert_eq!(read_line(&mut reader).await, Ok(Some("last".into())));
        assert_eq!(read_line(&mut reader).await, Ok(None));
    }
}
