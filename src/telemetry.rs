//! Logs: text by default, JSON by config, to stderr. `RUST_LOG` overrides `log.level`.
//! In text, every value a caller could have chosen is escaped: a value that is not plain
//! is quoted with its control characters escaped, and the message's control characters
//! are escaped, so no input can start a new line or pass for another field.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat, LogLevel};

/// Libraries' lines below this are left out unless `RUST_LOG` asks for them.
const LIBRARIES: &str = "warn";
/// kube-rs logs every failed request at ERROR without saying which cluster; karpor logs
/// them itself, with the cluster and without credentials.
const QUIET: &str = "kube_client::client::builder=off";

/// The filter: `RUST_LOG` when set, else `log.level` for karpor's own crates.
fn filter(level: LogLevel) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!("{LIBRARIES},karpor={},{QUIET}", level.as_str()))
    })
}

pub(crate) fn init(config: &LogConfig) {
    let filter = filter(config.level);
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // try_init: a second init (tests running apps in one process) keeps the first.
    let _ = match config.format {
        LogFormat::Text => builder.fmt_fields(EscapedFields).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Text fields as `key=value`, escaped.
struct EscapedFields;

impl<'w> MakeVisitor<Writer<'w>> for EscapedFields {
    type Visitor = EscapedVisitor<'w>;

    fn make_visitor(&self, target: Writer<'w>) -> Self::Visitor {
        EscapedVisitor {
            writer: target,
            result: Ok(()),
            first: true,
        }
    }
}

struct EscapedVisitor<'w> {
    writer: Writer<'w>,
    result: fmt::Result,
    first: bool,
}

impl EscapedVisitor<'_> {
    fn field(&mut self, field: &Field, text: &str) {
        if self.result.is_err() {
            return;
        }
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = if field.name() == "message" {
            write!(self.writer, "{separator}{}", escape_controls(text))
        } else if is_plain(text) {
            write!(self.writer, "{separator}{}={text}", field.name())
        } else {
            write!(self.writer, "{separator}{}={text:?}", field.name())
        };
    }
}

impl Visit for EscapedVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        self.field(field, &text);
    }
}

impl VisitOutput<fmt::Result> for EscapedVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for EscapedVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// Safe to write bare: not empty, and only characters that cannot end a value or a line.
fn is_plain(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '.' | '_'
                        | '-'
                        | ':'
                        | '/'
                        | '@'
                        | '+'
                        | ','
                        | '['
                        | ']'
                        | '('
                        | ')'
                        | '*'
                        | '%'
                        | '#'
                        | '~'
                        | '?'
                        | '&'
                        | '!'
                )
        })
}

fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            let _ = write!(out, "{}", c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_stay_bare_and_others_are_quoted_and_escaped() {
        assert!(is_plain("127.0.0.1:7443"));
        assert!(is_plain("Cluster/prod"));
        assert!(!is_plain("a b"));
        assert!(!is_plain("x=1"));
        assert!(!is_plain("line\nlevel=ERROR"));
        assert!(!is_plain("\"quoted\""));
        assert!(!is_plain(""));
        assert_eq!(
            format!("{:?}", "id\n2026 ERROR fake=1"),
            "\"id\\n2026 ERROR fake=1\""
        );
        assert_eq!(escape_controls("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
    }
}
