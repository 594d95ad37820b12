//! Server-sent event frames (a pod log's lines, an AI stream's frames), from chunks that
//! may split them anywhere.

use std::io::Write;
use std::marker::PhantomData;
use std::time::Duration;

use karpor_api::types::AiFrame;
use serde::de::DeserializeOwned;

use super::{refused, Failed, EXIT_UNREACHABLE};

pub(super) struct Frames<T> {
    pending: Vec<u8>,
    frame: PhantomData<T>,
}

impl<T> Default for Frames<T> {
    fn default() -> Self {
        Frames {
            pending: Vec::new(),
            frame: PhantomData,
        }
    }
}

impl<T: DeserializeOwned> Frames<T> {
    /// The frames of every `data:` line completed by `chunk`; comments (keep-alives) and
    /// other fields are skipped.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<T> {
        self.pending.extend_from_slice(chunk);
        let mut frames = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            if let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") {
                if let Ok(parsed) = serde_json::from_str::<T>(data.trim_start()) {
                    frames.push(parsed);
                }
            }
        }
        frames
    }
}

/// A model may think a while before its first token; silence longer than this is a dead
/// connection (the server sends keep-alives meanwhile).
pub(super) const MODEL_READ_TIMEOUT: Duration = Duration::from_secs(120);

/// Prints a model's `what` (an explanation, a diagnosis) from an AI stream as it is
/// written; fails on an `error` frame or a stream that ends before `complete`.
pub(super) async fn print_generation(
    mut response: reqwest::Response,
    what: &str,
) -> Result<(), Failed> {
    let mut frames = Frames::<AiFrame>::default();
    let mut out = std::io::stdout().lock();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| Failed(EXIT_UNREACHABLE, format!("the stream broke: {e}")))?;
        let Some(chunk) = chunk else {
            return Err(refused(format!(
                "the stream ended before the {what} was complete"
            )));
        };
        for frame in frames.push(&chunk) {
            match frame.kind.as_str() {
                "chunk" => {
                    let text = frame.content.unwrap_or_default();
                    // A closed pipe (`| head`) ends the command quietly.
                    if out
                        .write_all(text.as_bytes())
                        .and_then(|()| out.flush())
                        .is_err()
                    {
                        return Ok(());
                    }
                }
                "complete" => {
                    let _ = writeln!(out);
                    return Ok(());
                }
                "error" => return Err(refused(frame.content.unwrap_or_default())),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use karpor_api::types::LogLine;

    use super::*;

    #[test]
    fn frames_split_anywhere_are_put_back_together() {
        let mut frames = Frames::<LogLine>::default();
        assert!(frames
            .push(b": keep-alive\n\ndata: {\"content\":\"one")
            .is_empty());
        let lines = frames.push(b"\"}\n\ndata: {\"timestamp\":\"t\",\"content\":\"two\"}\n\n");
        let contents: Vec<_> = lines.iter().map(|l| l.content.as_str()).collect();
        assert_eq!(contents, ["one", "two"]);
        assert_eq!(lines[1].timestamp.as_deref(), Some("t"));
    }
}
