//! `GET /insight/aggregator/log/pod/{cluster}/{namespace}/{name}`: a pod's log, Karpor's
//! route and shape: server-sent `data: {timestamp, content}` frames that follow the log
//! until the client leaves, or with `download=true` the log so far as a text attachment.
//! Logs are the workloads' own data: reading them is its own permission
//! (`auth.pod_logs`), each read is a line of the access log, nothing of them reaches
//! storage, and each stream holds a place among the caller's streams, is paced, and ends
//! after `server.limits.live.log_stream_for`. A diagnosis reads a pod's newest lines the
//! same way ([`tail`]), under the same role, scope and stream bounds.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, Query as QueryParams, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::io::{AsyncBufRead, AsyncBufReadExt};
use futures::{Stream, StreamExt, TryStreamExt};
use karpor_agent::wire::{LiveRead, ReplyHead};
use karpor_core::names::{self, ClusterName, ContainerName, Namespace, ObjectName};
use karpor_kube::reads::{self, LogRef};
use kube::api::LogParams;
use serde::Deserialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::time::Instant;
use utoipa::IntoParams;

use super::bounds::{LiveLimits, StreamSlot};
use super::source::{AgentLink, Source};
use crate::auth::{Grants, Principal};
use crate::envelope::{ApiError, Unenveloped};
use crate::openapi::Errors;
use crate::scope::{Object as ScopedObject, Visible};
use crate::types::LogLine;
use crate::AppState;

/// Lines when a stream asks for no `tailLines`, as Karpor's.
const DEFAULT_TAIL_LINES: u32 = 1000;
/// The longest line sent; a longer one is cut there.
const MAX_LINE: usize = 64 << 10;
/// How long the cluster has to start answering.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an agent streams a followed log: the hub ends the stream sooner, at
/// `server.limits.live.log_stream_for`, and the agent is told to stop then.
const AGENT_LOG_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// How much of a download is read at a time.
const CHUNK: usize = 16 << 10;
/// Lines read for a diagnosis when the caller asks for no `tailLines`.
const DIAGNOSIS_TAIL_LINES: u32 = 500;
/// How long reading a diagnosis's lines may take, the cluster's first answer included.
const DIAGNOSIS_READ_FOR: Duration = Duration::from_secs(30);

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogQuery {
    /// The container (the pod's only one when absent).
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub container: Option<ContainerName>,
    /// Only lines newer than this long ago: `30s`, `5m`, `1h30m`, `2d`.
    pub since: Option<String>,
    /// Only lines newer than this RFC 3339 time (`since` wins when both are given).
    pub since_time: Option<String>,
    /// `true`: each frame's `timestamp` is the line's time, as the cluster says it.
    #[serde(default, deserialize_with = "crate::params::lenient_bool")]
    #[param(value_type = Option<String>)]
    pub timestamps: bool,
    /// The last this many lines: default 1000 when streaming, the whole log when
    /// downloading; at most `server.limits.live.log_tail_lines`.
    pub tail_lines: Option<String>,
    /// `true`: the log so far as a text attachment, not followed.
    #[serde(default, deserialize_with = "crate::params::lenient_bool")]
    #[param(value_type = Option<String>)]
    pub download: bool,
}

impl LogQuery {
    /// The cluster's parameters for this request, within `limits`.
    fn params(&self, limits: &LiveLimits) -> Result<LogParams, ApiError> {
        let tail_lines = tail_lines(self.tail_lines.as_deref(), limits)?
            .or((!self.download).then_some(DEFAULT_TAIL_LINES));
        Ok(LogParams {
            container: self.container.clone().map(String::from),
            follow: !self.download,
            limit_bytes: self
                .download
                .then(|| i64::try_from(limits.log_download_bytes).unwrap_or(i64::MAX)),
            since_seconds: since_seconds(self.since.as_deref(), self.since_time.as_deref())?,
            tail_lines: tail_lines.map(i64::from),
            timestamps: self.timestamps,
            ..LogParams::default()
        })
    }
}

/// Which of a pod's lines a diagnosis reads: the newest `tailLines` of a container, or
/// of those newer than `since`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TailQuery {
    /// The container (the pod's only one when absent).
    #[serde(default, deserialize_with = "names::optional")]
    #[param(value_type = Option<String>)]
    pub container: Option<ContainerName>,
    /// Only lines newer than this long ago: `30s`, `5m`, `1h30m`, `2d`.
    pub since: Option<String>,
    /// Only lines newer than this RFC 3339 time (`since` wins when both are given).
    pub since_time: Option<String>,
    /// The last this many lines: default 500, at most `server.limits.live.log_tail_lines`;
    /// of those, the newest that fit in `ai.max_input_bytes` reach the model.
    pub tail_lines: Option<String>,
}

impl TailQuery {
    /// The cluster's parameters: the log so far, not followed.
    pub(crate) fn params(&self, limits: &LiveLimits) -> Result<LogParams, ApiError> {
        let tail_lines = tail_lines(self.tail_lines.as_deref(), limits)?
            .unwrap_or(DIAGNOSIS_TAIL_LINES.min(limits.log_tail_lines));
        Ok(LogParams {
            container: self.container.clone().map(String::from),
            since_seconds: since_seconds(self.since.as_deref(), self.since_time.as_deref())?,
            tail_lines: Some(i64::from(tail_lines)),
            ..LogParams::default()
        })
    }
}

/// `tailLines` as a count within `limits`; `None` when not given.
fn tail_lines(text: Option<&str>, limits: &LiveLimits) -> Result<Option<u32>, ApiError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let lines: u32 = text.parse().map_err(|_| {
        ApiError::bad_request(format!("tailLines: {text:?} is not a count of lines"))
    })?;
    if lines == 0 || lines > limits.log_tail_lines {
        return Err(ApiError::bad_request(format!(
            "tailLines: {lines} is not within 1..={} (server.limits.live.log_tail_lines)",
            limits.log_tail_lines
        )));
    }
    Ok(Some(lines))
}

/// `since` (a duration ago) or else `sinceTime` (an RFC 3339 time) as seconds ago.
fn since_seconds(since: Option<&str>, since_time: Option<&str>) -> Result<Option<i64>, ApiError> {
    if let Some(since) = since.filter(|s| !s.trim().is_empty()) {
        let ago = humantime_serde::re::humantime::parse_duration(since.trim()).map_err(|e| {
            ApiError::bad_request(format!("since: {since:?}: {e} (say 30s, 5m, 1h30m or 2d)"))
        })?;
        // A duration past what the cluster's field holds means the whole log.
        return Ok(Some(
            i64::try_from(ago.as_secs()).unwrap_or(i64::MAX).max(1),
        ));
    }
    if let Some(since) = since_time.filter(|s| !s.trim().is_empty()) {
        let at = OffsetDateTime::parse(since.trim(), &Rfc3339).map_err(|e| {
            ApiError::bad_request(format!("sinceTime: {since:?} is not an RFC 3339 time: {e}"))
        })?;
        let ago = OffsetDateTime::now_utc() - at;
        if ago.is_negative() {
            return Err(ApiError::bad_request(format!(
                "sinceTime: {since:?} is in the future"
            )));
        }
        return Ok(Some(ago.whole_seconds().max(1)));
    }
    Ok(None)
}

/// A pod, as a log route names it.
pub(crate) struct PodRef {
    pub cluster: ClusterName,
    pub namespace: Namespace,
    pub name: ObjectName,
}

/// Whether the caller may read `pod`'s log: only where its grants give the role that
/// reads logs. A pod outside them is not found, as one that does not exist.
pub(crate) fn may_read(visible: &Visible, grants: &Grants, pod: &PodRef) -> Result<(), ApiError> {
    let object = ScopedObject {
        cluster: &pod.cluster,
        namespace: Some(&pod.namespace),
        kind: "Pod",
        name: &pod.name,
    };
    if visible.object_as(object, grants.pod_logs) {
        return Ok(());
    }
    Err(ApiError::not_found(format!(
        "no pod {:?} in namespace {:?}",
        pod.name, pod.namespace
    )))
}

#[utoipa::path(get, path = "/insight/aggregator/log/pod/{cluster}/{namespace}/{name}",
    operation_id = "podLog", tag = "stream",
    params(("cluster" = String, Path), ("namespace" = String, Path), ("name" = String, Path), LogQuery),
    responses((status = 200, description = "server-sent events: `data: LogLine` per line, following the log; with `download=true`, the log as a `text/plain` attachment",
        body = LogLine, content_type = "text/event-stream"), Errors))]
pub(crate) async fn pod_log(
    State(state): State<AppState>,
    visible: Visible,
    Extension(caller): Extension<Principal>,
    Extension(grants): Extension<Grants>,
    Path((cluster, namespace, pod)): Path<(ClusterName, Namespace, ObjectName)>,
    QueryParams(query): QueryParams<LogQuery>,
) -> Response {
    let limits = state.live.limits().clone();
    let params = match query.params(&limits) {
        Ok(params) => params,
        Err(e) => return e.into_response(),
    };
    let pod = PodRef {
        cluster,
        namespace,
        name: pod,
    };
    if let Err(hidden) = may_read(&visible, &grants, &pod) {
        return hidden.into_response();
    }
    let slot = match state.live.open_stream(&caller.name) {
        Ok(slot) => slot,
        Err(limited) => return limited.into_response(),
    };
    let reader = match open(&state, &visible, &pod, &params).await {
        Ok(reader) => reader,
        Err(refusal) => return refusal,
    };
    let pace = Pace::new(limits.log_bytes_per_second, limits.log_stream_for);
    let mut response = if query.download {
        download(reader, pace, slot, &pod.name, params.container.as_deref())
    } else {
        let frames = frames(reader, query.timestamps, pace, slot);
        Sse::new(frames)
            .keep_alive(KeepAlive::default())
            .into_response()
    };
    response.extensions_mut().insert(Unenveloped);
    response
}

type Reader = Pin<Box<dyn AsyncBufRead + Send>>;

/// The pod's log from its cluster, once the cluster has answered.
async fn open(
    state: &AppState,
    visible: &Visible,
    at: &PodRef,
    params: &LogParams,
) -> Result<Reader, Response> {
    let PodRef {
        cluster,
        namespace,
        name: pod,
    } = at;
    let source = super::source(state, visible, cluster).await?;
    let at = LogRef::new(namespace.clone(), pod.clone(), params)
        .map_err(|e| ApiError::bad_request(e).into_response())?;
    let client = match source {
        Source::Kube(_, client) => client,
        Source::Agent(link) => return through_agent(&link, at, params).await,
    };
    match tokio::time::timeout(OPEN_TIMEOUT, reads::log(client, &at)).await {
        Ok(Ok(reader)) => Ok(Box::pin(reader)),
        Ok(Err(kube::Error::Api(status))) => Err(refused(
            cluster,
            namespace,
            pod,
            status.code,
            &status.message,
        )),
        Ok(Err(e)) => Err(super::unreachable(cluster, &e).into_response()),
        Err(_) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cluster {cluster:?} did not answer within {OPEN_TIMEOUT:?}"),
        )
        .into_response()),
    }
}

/// The log through the cluster's agent: its head within [`OPEN_TIMEOUT`], its lines until
/// the agent's deadline (the stream's own length, or a download's).
async fn through_agent(
    link: &AgentLink,
    at: LogRef,
    params: &LogParams,
) -> Result<Reader, Response> {
    let (cluster, namespace, pod) = (&link.cluster, at.namespace.clone(), at.pod.clone());
    let within = match params.follow {
        true => AGENT_LOG_FOR,
        false => DIAGNOSIS_READ_FOR.max(OPEN_TIMEOUT),
    };
    let answer = tokio::time::timeout(OPEN_TIMEOUT, link.ask(LiveRead::Log(at), within))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cluster {cluster:?}'s agent did not answer within {OPEN_TIMEOUT:?}"),
            )
            .into_response()
        })?
        .map_err(IntoResponse::into_response)?;
    match answer.head {
        ReplyHead::Ok => Ok(Box::pin(answer.body.into_async_read())),
        ReplyHead::Status { code, message } => {
            Err(refused(cluster, &namespace, &pod, code, &message))
        }
        head => Err(super::source::refusal(cluster, head).into_response()),
    }
}

/// A pod's newest lines, for a diagnosis.
pub(crate) struct Tail {
    /// Oldest first, together at most the bytes asked.
    pub lines: Vec<String>,
    /// Older lines read and left out for room.
    pub left_out: usize,
}

/// The newest lines of `pod`'s log (`params` from [`TailQuery`]) that fit in `max_bytes`,
/// read while holding one of the caller's streams, within [`DIAGNOSIS_READ_FOR`]. The
/// caller has passed [`may_read`].
pub(crate) async fn tail(
    state: &AppState,
    visible: &Visible,
    caller: &Principal,
    pod: &PodRef,
    params: &LogParams,
    max_bytes: usize,
) -> Result<Tail, Response> {
    let _slot = state
        .live
        .open_stream(&caller.name)
        .map_err(IntoResponse::into_response)?;
    let deadline = Instant::now() + DIAGNOSIS_READ_FOR;
    let late = || {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "cluster {:?} did not give pod {:?}'s log within {DIAGNOSIS_READ_FOR:?}",
                pod.cluster, pod.name
            ),
        )
        .into_response()
    };
    let mut reader = tokio::time::timeout_at(deadline, open(state, visible, pod, params))
        .await
        .map_err(|_| late())??;
    let mut kept = VecDeque::new();
    let (mut bytes, mut left_out) = (0, 0);
    loop {
        let line = match tokio::time::timeout_at(deadline, next_line(&mut reader)).await {
            Err(_) => return Err(late()),
            Ok(Err(e)) => {
                let message = format!("pod {:?}'s log broke while read: {e}", pod.name);
                return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).into_response());
            }
            Ok(Ok(None)) => break,
            Ok(Ok(Some(line))) => log_line(&line, false).content,
        };
        bytes += line.len() + 1;
        kept.push_back(line);
        while bytes > max_bytes {
            let Some(oldest) = kept.pop_front() else {
                break;
            };
            bytes -= oldest.len() + 1;
            left_out += 1;
        }
    }
    Ok(Tail {
        lines: kept.into(),
        left_out,
    })
}

/// The cluster's refusal, as karpor's error: what is missing, and what the cluster said.
fn refused(
    cluster: &ClusterName,
    namespace: &Namespace,
    pod: &ObjectName,
    code: u16,
    message: &str,
) -> Response {
    let (status, what) = match code {
        401 | 403 => (
            StatusCode::FORBIDDEN,
            format!("cluster {cluster:?}'s credential may not read pods/log in namespace {namespace:?} (grant `get` on `pods/log`)"),
        ),
        404 => (StatusCode::NOT_FOUND, format!("no pod {pod:?} in namespace {namespace:?} of cluster {cluster:?}")),
        400 => (StatusCode::BAD_REQUEST, format!("pod {pod:?} has no such log")),
        _ => (StatusCode::SERVICE_UNAVAILABLE, format!("cluster {cluster:?} could not give pod {pod:?}'s log")),
    };
    ApiError::new(status, format!("{what}; the cluster said: {message}")).into_response()
}

/// How fast, and how long, one stream sends.
struct Pace {
    bytes_per_second: f64,
    started: Instant,
    until: Instant,
    sent: u64,
}

impl Pace {
    fn new(bytes_per_second: u32, lasting: Duration) -> Self {
        let started = Instant::now();
        Pace {
            bytes_per_second: f64::from(bytes_per_second.max(1)),
            started,
            until: started + lasting,
            sent: 0,
        }
    }

    /// Waits until `bytes` more may be sent; `false` once the stream has lasted its time.
    async fn send(&mut self, bytes: usize) -> bool {
        self.sent += bytes as u64;
        let due = self.started + Duration::from_secs_f64(self.sent as f64 / self.bytes_per_second);
        if due > self.until {
            return false;
        }
        tokio::time::sleep_until(due).await;
        Instant::now() < self.until
    }
}

/// Whatever a stream holds while it runs; its place among the streams is given back
/// when the stream ends or its client goes away (the stream is dropped).
struct Running {
    reader: Reader,
    pace: Pace,
    _slot: StreamSlot,
}

/// The log's lines as frames, until the log ends, the stream has lasted its time, or
/// reading fails (one `error` frame, then the end).
fn frames(
    reader: Reader,
    timestamps: bool,
    pace: Pace,
    slot: StreamSlot,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let running = Running {
        reader,
        pace,
        _slot: slot,
    };
    futures::stream::unfold(Some(running), move |running| async move {
        let mut running = running?;
        // A quiet log sends nothing for as long as it likes: the stream's time is kept
        // while waiting for a line too.
        let line = tokio::time::timeout_at(running.pace.until, next_line(&mut running.reader));
        let line = match line.await {
            Err(_) | Ok(Ok(None)) => return None,
            Ok(Ok(Some(line))) => line,
            Ok(Err(e)) => {
                let broken = LogLine {
                    timestamp: None,
                    content: String::new(),
                    error: Some(format!("the log stream broke: {e}")),
                };
                return Some((Ok(event(&broken)), None));
            }
        };
        if !running.pace.send(line.len()).await {
            return None;
        }
        Some((Ok(event(&log_line(&line, timestamps))), Some(running)))
    })
}

fn event(line: &LogLine) -> SseEvent {
    SseEvent::default().data(serde_json::to_string(line).unwrap_or_default())
}

/// A line as Karpor frames it: with timestamps, the text before the first space is the
/// line's time.
fn log_line(line: &[u8], timestamps: bool) -> LogLine {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    match text.split_once(' ') {
        Some((at, content)) if timestamps => LogLine {
            timestamp: Some(at.to_owned()),
            content: content.to_owned(),
            error: None,
        },
        _ => LogLine {
            timestamp: None,
            content: text.to_owned(),
            error: None,
        },
    }
}

/// The next line without its newline, at most [`MAX_LINE`] bytes (the rest of a longer
/// one is skipped); `None` at the end of the log.
async fn next_line(reader: &mut Reader) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut read_any = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(read_any.then_some(line));
        }
        read_any = true;
        let (take, ends) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (at, true),
            None => (buffer.len(), false),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&buffer[..take.min(room)]);
        reader.consume_unpin(if ends { take + 1 } else { take });
        if ends {
            return Ok(Some(line));
        }
    }
}

fn late() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the download took longer than server.limits.live.log_stream_for",
    )
}

/// The log so far as a text attachment, paced like a stream; one that would outlast
/// `log_stream_for` fails there rather than ending as if whole.
fn download(
    reader: Reader,
    pace: Pace,
    slot: StreamSlot,
    pod: &ObjectName,
    container: Option<&str>,
) -> Response {
    let running = Running {
        reader,
        pace,
        _slot: slot,
    };
    let chunks = futures::stream::unfold(Some(running), |running| async move {
        let mut running = running?;
        let until = running.pace.until;
        let chunk = match tokio::time::timeout_at(until, running.reader.fill_buf()).await {
            Ok(Ok([])) => return None,
            Ok(Ok(buffer)) => Bytes::copy_from_slice(&buffer[..buffer.len().min(CHUNK)]),
            Ok(Err(e)) => return Some((Err(e), None)),
            Err(_) => return Some((Err(late()), None)),
        };
        running.reader.consume_unpin(chunk.len());
        if !running.pace.send(chunk.len()).await {
            // Cut short, said so: the body fails rather than looking whole.
            return Some((Err(late()), None));
        }
        Some((Ok::<_, io::Error>(chunk), Some(running)))
    });
    // Names are validated types: nothing in them needs quoting.
    let file = format!("{pod}-{}.log", container.unwrap_or("pod"));
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{file}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        Body::from_stream(chunks.boxed()),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Result<LogParams, ApiError> {
        let query: LogQuery = serde_urlencoded::from_str(text).unwrap();
        query.params(&LiveLimits::default())
    }

    #[test]
    fn karpors_parameters_become_the_clusters() {
        let streamed = query("container=web&timestamps=true").unwrap();
        assert_eq!(
            (
                streamed.follow,
                streamed.tail_lines,
                streamed.timestamps,
                streamed.limit_bytes
            ),
            (true, Some(1000), true, None)
        );
        assert_eq!(streamed.container.as_deref(), Some("web"));
        let downloaded = query("download=true").unwrap();
        assert_eq!((downloaded.follow, downloaded.tail_lines), (false, None));
        assert_eq!(downloaded.limit_bytes, Some(32 << 20));
        assert_eq!(query("since=1h30m").unwrap().since_seconds, Some(5400));
        assert_eq!(
            query("since=2d&sinceTime=2020-01-01T00:00:00Z")
                .unwrap()
                .since_seconds,
            Some(172_800)
        );
        let since = query("sinceTime=2020-01-01T00:00:00.000Z")
            .unwrap()
            .since_seconds
            .unwrap();
        assert!(since > 150_000_000, "{since}");
        assert_eq!(query("tailLines=10").unwrap().tail_lines, Some(10));
        // Past i64 seconds: the most the cluster's field holds, never a negative count.
        assert_eq!(
            query("since=18446744073709551615s").unwrap().since_seconds,
            Some(i64::MAX)
        );
    }

    #[test]
    fn bad_parameters_are_refused_naming_the_parameter() {
        for (text, says) in [
            ("tailLines=x", "tailLines"),
            ("tailLines=0", "tailLines"),
            ("tailLines=10001", "log_tail_lines"),
            ("since=soon", "since"),
            ("sinceTime=yesterday", "sinceTime"),
            ("sinceTime=2999-01-01T00:00:00Z", "future"),
        ] {
            let refused = query(text).unwrap_err();
            assert!(
                refused.message.contains(says),
                "{text}: {}",
                refused.message
            );
        }
        assert!(serde_urlencoded::from_str::<LogQuery>("container=../x").is_err());
    }

    #[test]
    fn lines_are_framed_as_karpor_frames_them() {
        assert_eq!(
            log_line(b"2024-05-01T10:00:00.1Z GET / 200\r", true),
            LogLine {
                timestamp: Some("2024-05-01T10:00:00.1Z".into()),
                content: "GET / 200".into(),
                error: None
            }
        );
        assert_eq!(log_line(b"GET / 200", false).content, "GET / 200");
        assert_eq!(log_line(b"GET / 200", false).timestamp, None);
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_the_last_line_kept() {
        let mut text = vec![b'a'; MAX_LINE + 10];
        text.extend_from_slice(b"\nsecond\nlast");
        let mut reader: Reader = Box::pin(futures::io::Cursor::new(text));
        assert_eq!(
            next_line(&mut reader).await.unwrap().unwrap().len(),
            MAX_LINE
        );
        assert_eq!(next_line(&mut reader).await.unwrap().unwrap(), b"second");
        assert_eq!(next_line(&mut reader).await.unwrap().unwrap(), b"last");
        assert_eq!(next_line(&mut reader).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_stream_is_paced_and_ends_on_time() {
        let mut pace = Pace::new(10_000, Duration::from_secs(10));
        let started = Instant::now();
        assert!(pace.send(1_000).await);
        assert!(pace.send(1_000).await);
        // 2,000 bytes at 10,000 a second: not sent before 0.2 s.
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(!pace.send(200_000).await, "past its time");
    }
}
