//! The log lines of the API under test, kept in memory as the binary's filter would let
//! them through (karpor's crates at debug, libraries at warn), so a test can scan them
//! for credentials. One subscriber for the process: under nextest that is one test.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

use karpor_testkit::api::SECRETS;

fn lines() -> &'static Mutex<Vec<u8>> {
    static LINES: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    LINES.get_or_init(|| Mutex::new(Vec::new()))
}

struct Sink;

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        lines().lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts keeping the log lines (once; later calls keep the first subscriber).
pub(crate) fn capture() {
    let _ = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn,karpor=debug"))
        .with_writer(|| Sink)
        .try_init();
}

/// Everything logged so far.
pub(crate) fn text() -> String {
    String::from_utf8_lossy(&lines().lock().unwrap()).into_owned()
}

pub(crate) fn assert_no_secret_logged() {
    let logs = text();
    for secret in SECRETS {
        assert!(!logs.contains(secret), "{secret} logged:\n{logs}");
    }
}
