//! A live read's reply as it crosses the hub: the head line saying how it went, then the
//! answer's bytes, whether the agent posted it here or another replica forwarded it.

use axum::body::Bytes;
use axum::http::StatusCode;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use karpor_agent::wire::{self, ReplyHead};

use crate::envelope::ApiError;

/// A reply's bytes after its head, as the agent sends them.
pub(crate) type ReplyBody = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// A reply as the agent posted it: its head and the rest of its body.
pub(crate) struct Reply {
    pub head: ReplyHead,
    pub body: ReplyBody,
}

/// The reply's first line, and the bytes read past it.
pub(super) async fn head(
    body: &mut (impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin),
) -> Result<(ReplyHead, Bytes), ApiError> {
    let mut read = Vec::new();
    loop {
        if let Some(end) = read.iter().position(|b| *b == b'\n') {
            let head = serde_json::from_slice(&read[..end])
                .map_err(|e| ApiError::bad_request(format!("a reply starts with its head: {e}")))?;
            return Ok((head, Bytes::copy_from_slice(&read[end + 1..])));
        }
        if read.len() > wire::MAX_LINE_BYTES {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a reply's head is at most {} bytes", wire::MAX_LINE_BYTES),
            ));
        }
        match body.next().await {
            Some(Ok(chunk)) => read.extend_from_slice(&chunk),
            Some(Err(e)) => return Err(ApiError::bad_request(format!("the reply broke: {e}"))),
            None => return Err(ApiError::bad_request("a reply ends before its head ends")),
        }
    }
}
