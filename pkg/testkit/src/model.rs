//! The test model server: a real OpenAI-compatible server (`tests/model-server`,
//! SmolLM2-135M on node-llama-cpp) that `scripts/test.sh` starts for the AI tests, and
//! its request log, so a test can assert what reached the model (the key arrived, no
//! Secret value did) and what became of each request (completed, cancelled).
//!
//! Tests share the one server. A test marks where the log ends before it acts
//! ([`ModelServer::mark`]) and reads what came after; other tests' requests may be there
//! too, so it tells its own by something only it sent (a [`crate::unique`] word in the
//! prompt).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::service;

/// The shared model server, from `KARPOR_TEST_MODEL_URL`, `_KEY`, `_NAME` and `_LOG`.
pub struct ModelServer {
    /// The base URL, ending in `/v1` (OpenAI's `base_url`).
    pub url: String,
    /// The bearer key every `/v1` request must carry (401 without it).
    pub key: String,
    /// The one model's id (`model` in a request; any other is 404).
    pub name: String,
    log_path: PathBuf,
}

impl ModelServer {
    /// The server the test script started; missing, the test fails under CI and skips
    /// elsewhere (see [`service`]).
    pub fn shared() -> Option<ModelServer> {
        Some(ModelServer {
            url: service("KARPOR_TEST_MODEL_URL")?,
            key: service("KARPOR_TEST_MODEL_KEY")?,
            name: service("KARPOR_TEST_MODEL_NAME")?,
            log_path: service("KARPOR_TEST_MODEL_LOG")?.into(),
        })
    }

    /// The request log: one JSON object a line.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Where the log ends now (its number of lines), for [`ModelServer::entries_since`].
    pub fn mark(&self) -> usize {
        self.lines().len()
    }

    /// Every entry of the log, in order. A request is `{"event": "request", "request": N,
    /// "method", "path", "headers" (all of them, `authorization` included), "body"}` (the
    /// body as JSON when it is JSON); what became of it is a later entry with the same
    /// `request` and an `event` of `completed` (with `id`, `finish_reason` and OpenAI's
    /// `usage`), `cancelled` (the client left; `completion_tokens` so far), `rejected`
    /// (`status` 401, 429 or 400 for a prompt past the context) or `failed`. `GET /health`
    /// is not logged.
    pub fn entries(&self) -> Vec<Value> {
        self.entries_since(0)
    }

    /// The entries after `mark` (from [`ModelServer::mark`]).
    pub fn entries_since(&self, mark: usize) -> Vec<Value> {
        self.lines()
            .iter()
            .skip(mark)
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: {e}: {line}", self.log_path.display()))
            })
            .collect()
    }

    /// The requests among all entries.
    pub fn requests(&self) -> Vec<Value> {
        self.requests_since(0)
    }

    /// The requests among the entries after `mark`.
    pub fn requests_since(&self, mark: usize) -> Vec<Value> {
        self.entries_since(mark)
            .into_iter()
            .filter(|entry| entry["event"] == "request")
            .collect()
    }

    /// Whether `needle` is anywhere in the log (a header, a body, an event), as sent or
    /// as JSON escapes it: `!log_contains(secret)` says the value never reached the model
    /// in plain text.
    pub fn log_contains(&self, needle: &str) -> bool {
        let text = self.text();
        let escaped = serde_json::to_string(needle).expect("a string serializes");
        text.contains(needle) || text.contains(&escaped[1..escaped.len() - 1])
    }

    /// Waits up to `limit` for an entry after `mark` whose `event` is `event` (say
    /// `cancelled`, logged once the server has seen the client leave) and returns it.
    pub async fn wait_for_event(&self, mark: usize, event: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(found) = self
                .entries_since(mark)
                .into_iter()
                .find(|entry| entry["event"] == event)
            {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no {event:?} entry in {} within {limit:?}",
                self.log_path.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log_path)
            .unwrap_or_else(|e| panic!("{}: {e}", self.log_path.display()))
    }

    /// The complete lines: a line the server is writing as this reads is left for later.
    fn lines(&self) -> Vec<String> {
        self.text()
            .split_inclusive('\n')
            .filter(|line| line.ends_with('\n'))
            .map(|line| line.trim_end().to_owned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(log: &Path) -> ModelServer {
        ModelServer {
            url: "http://127.0.0.1:1/v1".into(),
            key: "k".into(),
            name: "m".into(),
            log_path: log.to_owned(),
        }
    }

    #[test]
    fn reads_complete_lines_after_a_mark() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.jsonl");
        std::fs::write(&log, "{\"event\":\"request\",\"request\":1}\n").unwrap();
        let model = server(&log);
        let mark = model.mark();
        assert_eq!(mark, 1);
        // The second line is complete, the third is still being written.
        let more = "{\"event\":\"request\",\"request\":2,\"body\":{\"q\":\"say \\\"hi\\\"\"}}\n\
                    {\"event\":\"completed\",\"request\":2}\n{\"event\":\"canc";
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut file, more.as_bytes()).unwrap();
        assert_eq!(model.mark(), 3);
        let after = model.entries_since(mark);
        assert_eq!(after.len(), 2);
        assert_eq!(after[1]["event"], "completed");
        assert_eq!(model.requests_since(mark).len(), 1);
        assert_eq!(model.requests().len(), 2);
        assert!(model.log_contains("say \"hi\""), "found as JSON escapes it");
        assert!(!model.log_contains("secret"));
    }
}
