//! The agent's side of a live read: a control line parsed into one of the reads it
//! serves (anything else refused, whatever the hub sends), served with the agent's own
//! client through [`karpor_kube::reads`], redacted before it leaves the cluster, capped in
//! size and time, and posted back as one reply.

use std::time::Duration;

use bytes::Bytes;
use futures::io::AsyncReadExt;
use futures::stream::{self, BoxStream, StreamExt};
use karpor_kube::reads::{self, ReadError};
use karpor_kube::redact;
use serde_json::Value;

use crate::wire::{self, Control, LiveRead, LiveRequest, ReplyHead};

/// What one control line asks.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    Control(Control),
    /// A read the agent does not serve (no such read, or a name that is no name): its id,
    /// and why, for the refusal.
    Refuse {
        id: u64,
        why: String,
    },
    /// Not even a read: logged and dropped.
    Garbage(String),
}

/// A control line as the agent takes it.
pub(crate) fn parse(line: &[u8]) -> Line {
    match serde_json::from_slice::<Control>(line) {
        Ok(control) => Line::Control(control),
        Err(e) => {
            // The id alone, to say no to a read in a shape the agent does not serve.
            let id = serde_json::from_slice::<Value>(line)
                .ok()
                .filter(|v| v["type"] == "read")
                .and_then(|v| v["of"]["id"].as_u64());
            match id {
                Some(id) => Line::Refuse {
                    id,
                    why: format!("the agent serves no such read: {e}"),
                },
                None => Line::Garbage(e.to_string()),
            }
        }
    }
}

/// A reply: its head, then its bytes.
pub(crate) struct Served {
    pub head: ReplyHead,
    pub body: BoxStream<'static, std::io::Result<Bytes>>,
}

impl Served {
    pub(crate) fn only(head: ReplyHead) -> Served {
        Served {
            head,
            body: stream::empty().boxed(),
        }
    }

    /// The whole reply as it is posted: the head's line, then the bytes.
    pub(crate) fn into_stream(self) -> BoxStream<'static, std::io::Result<Bytes>> {
        let mut head = serde_json::to_vec(&self.head).unwrap_or_default();
        head.push(b'\n');
        stream::once(async move { Ok(Bytes::from(head)) })
            .chain(self.body)
            .boxed()
    }
}

/// How long `request` may run: what the hub asks, never past [`wire::MAX_READ_FOR`].
pub(crate) fn deadline(request: &LiveRequest) -> Duration {
    Duration::from_millis(request.within_ms).min(wire::MAX_READ_FOR)
}

/// Serves `read` with `client`, its first answer within `within`.
pub(crate) async fn serve(client: kube::Client, read: LiveRead, within: Duration) -> Served {
    let answered = tokio::time::timeout(within, answer(client, read)).await;
    answered.unwrap_or_else(|_| {
        Served::only(ReplyHead::Failed {
            message: format!("the member cluster did not answer within {within:?}"),
        })
    })
}

async fn answer(client: kube::Client, read: LiveRead) -> Served {
    match read {
        LiveRead::Object(at) => match reads::object(client, &at).await {
            Ok(Some(object)) => json(&redact::object(object)),
            Ok(None) => Served::only(ReplyHead::NotFound),
            Err(ReadError::NoKind) => Served::only(ReplyHead::NoKind),
            Err(ReadError::Scope(why)) => Served::only(ReplyHead::Scope {
                message: why.to_owned(),
            }),
            Err(ReadError::Cluster(e)) => Served::only(failed(&e)),
        },
        LiveRead::Events(at) => match reads::events(client, &at).await {
            Ok(mut events) => {
                events.sort_by_key(|e| {
                    std::cmp::Reverse(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
                });
                events.truncate(wire::MAX_EVENTS);
                // Typed on both ends: managed fields dropped, not marked (an Event holds
                // no Secret's values; the hub redacts what it answers again).
                for event in &mut events {
                    event.metadata.managed_fields = None;
                }
                json(&serde_json::to_value(events).unwrap_or_default())
            }
            Err(e) => Served::only(failed(&e)),
        },
        LiveRead::Log(mut at) => {
            if !at.follow {
                let cap = at.limit_bytes.unwrap_or(wire::MAX_LOG_BYTES);
                at.limit_bytes = Some(cap.clamp(1, wire::MAX_LOG_BYTES));
            }
            match reads::log(client, &at).await {
                Ok(reader) => Served {
                    head: ReplyHead::Ok,
                    body: chunks(reader),
                },
                Err(e) => Served::only(failed(&e)),
            }
        }
    }
}

/// A JSON answer, or a failure when it is larger than the hub takes.
fn json(value: &Value) -> Served {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    if bytes.len() > wire::MAX_REPLY_BYTES {
        return Served::only(ReplyHead::Failed {
            message: format!("the answer is larger than {} bytes", wire::MAX_REPLY_BYTES),
        });
    }
    Served {
        head: ReplyHead::Ok,
        body: stream::once(async move { Ok(Bytes::from(bytes)) }).boxed(),
    }
}

fn failed(e: &kube::Error) -> ReplyHead {
    match e {
        kube::Error::Api(status) => ReplyHead::Status {
            code: status.code,
            message: status.message.clone(),
        },
        other => ReplyHead::Failed {
            message: karpor_kube::describe(other),
        },
    }
}

/// A log's bytes as they come.
fn chunks(
    reader: impl futures::io::AsyncBufRead + Send + 'static,
) -> BoxStream<'static, std::io::Result<Bytes>> {
    const CHUNK: usize = 16 * 1024;
    stream::unfold(Box::pin(reader), |mut reader| async move {
        let mut buffer = vec![0; CHUNK];
        match reader.read(&mut buffer).await {
            Ok(0) => None,
            Ok(n) => {
                buffer.truncate(n);
                Some((Ok(Bytes::from(buffer)), reader))
            }
            Err(e) => Some((Err(e), reader)),
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exec, attach, port-forward, proxy and writes have no shape among the reads: each
    /// is refused by its id, whatever else the line holds.
    #[test]
    fn reads_the_agent_does_not_serve_are_refused() {
        for (read, of) in [
            ("exec", r#"{"namespace":"ns","pod":"p","command":["sh"]}"#),
            ("attach", r#"{"namespace":"ns","pod":"p"}"#),
            (
                "portForward",
                r#"{"namespace":"ns","pod":"p","ports":[22]}"#,
            ),
            ("proxy", r#"{"path":"/api/v1/nodes/n1/proxy/pods"}"#),
            (
                "delete",
                r#"{"apiVersion":"v1","kind":"Pod","namespace":"ns","name":"p"}"#,
            ),
        ] {
            let line = format!(
                r#"{{"type":"read","of":{{"id":7,"withinMs":1000,"read":{{"read":"{read}","of":{of}}}}}}}"#
            );
            match parse(line.as_bytes()) {
                Line::Refuse { id: 7, why } => assert!(why.contains("no such read"), "{why}"),
                other => panic!("{read}: {other:?}"),
            }
        }
    }

    /// A subresource or a path in a name does not parse into a read.
    #[test]
    fn names_that_are_no_names_are_refused() {
        for of in [
            r#"{"apiVersion":"v1","kind":"Node","name":"n1/proxy/pods"}"#,
            r#"{"apiVersion":"v1","kind":"ConfigMap","namespace":"a/secrets","name":"x"}"#,
            r#"{"apiVersion":"v1","kind":"Node","name":"n1","subresource":"proxy"}"#,
            r#"{"apiVersion":"../v1","kind":"Node","name":"n1"}"#,
        ] {
            let line = format!(
                r#"{{"type":"read","of":{{"id":9,"withinMs":1000,"read":{{"read":"object","of":{of}}}}}}}"#
            );
            assert!(
                matches!(parse(line.as_bytes()), Line::Refuse { id: 9, .. }),
                "{of}"
            );
        }
        let log = r#"{"type":"read","of":{"id":3,"withinMs":5,"read":{"read":"log","of":{"namespace":"ns","pod":"p","follow":true}}}}"#;
        assert!(matches!(
            parse(log.as_bytes()),
            Line::Control(Control::Read(_))
        ));
        assert!(matches!(
            parse(b"{\"type\":\"ping\"}"),
            Line::Control(Control::Ping)
        ));
        assert!(matches!(parse(b"not json"), Line::Garbage(_)));
    }

    #[test]
    fn a_read_runs_no_longer_than_the_agent_allows() {
        let request = |within_ms| LiveRequest {
            id: 1,
            within_ms,
            read: LiveRead::Events(reads::EventsRef::default()),
        };
        assert_eq!(deadline(&request(1500)), Duration::from_millis(1500));
        assert_eq!(deadline(&request(u64::MAX)), wire::MAX_READ_FOR);
    }
}
