//! `karpor history CLUSTER/KIND/[NAMESPACE/]NAME [--limit N]`: an object's revisions as
//! karpor kept them, newest first: when karpor saw each, the change, its resourceVersion,
//! who made it, and what changed from the revision before, one line per patch operation
//! (`~ path: old → new`, `+ path: value`, `- path: value`; colored on a terminal).
//! `-o json|yaml` prints the API's answer.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::process::ExitCode;

use karpor_api::types::{HistoryAnswer, RevisionView};
use serde_json::Value;
use time::OffsetDateTime;

use super::describe::locator;
use super::output::{emit, print_json, print_yaml};
use super::{finish, time_text, Api, Failed};
use crate::args::{HistoryArgs, Output};

/// Revisions the API answers at most.
pub(super) const MAX_REVISIONS: u16 = 1_000;

/// Every revision changes it, and the block's heading shows it already.
const RESOURCE_VERSION: &str = "/metadata/resourceVersion";

pub(crate) async fn run(args: &HistoryArgs) -> ExitCode {
    finish(history(args).await)
}

/// The object's newest `limit` revisions, each with the object as it was.
pub(super) async fn revisions(
    api: &Api,
    target_text: &str,
    limit: u16,
) -> Result<HistoryAnswer, Failed> {
    let path = format!(
        "/insight/history?{}&limit={limit}&objects=true",
        locator(target_text)?
    );
    api.get(reqwest::Method::GET, &path, None).await
}

async fn history(args: &HistoryArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    match args.output.format() {
        Output::Json => {
            print_json(&revisions(&api, &args.target, args.limit).await?);
            return Ok(());
        }
        Output::Yaml => return print_yaml(&revisions(&api, &args.target, args.limit).await?),
        _ => {}
    }
    // One more than shown: the API diffs a revision only against one in the same answer,
    // and the old values of the oldest shown are read from the one before it.
    let answer = revisions(&api, &args.target, (args.limit + 1).min(MAX_REVISIONS)).await?;
    let paint = Paint::stdout();
    let mut out = String::new();
    let shown = usize::from(args.limit);
    for (i, revision) in answer.revisions.iter().enumerate().take(shown) {
        if i > 0 {
            out.push('\n');
        }
        let before = answer
            .revisions
            .get(i + 1)
            .filter(|older| older.uid == revision.uid)
            .and_then(|older| older.object.as_ref());
        block(&mut out, paint, revision, before);
    }
    emit(&out);
    Ok(())
}

/// A time to the second, as the tables show it.
pub(super) fn seen(time: &OffsetDateTime) -> String {
    time_text(&time.replace_nanosecond(0).unwrap_or(*time))
}

/// Who changed it, as the object says, or `<unknown>`.
pub(super) fn who(managers: &[String]) -> String {
    if managers.is_empty() {
        "<unknown>".to_owned()
    } else {
        managers.join(", ")
    }
}

/// One revision: its heading, then what changed.
fn block(out: &mut String, paint: Paint, revision: &RevisionView, before: Option<&Value>) {
    let mut heading = format!(
        "{}  {}  resourceVersion {}  by {}",
        seen(&revision.seen_at),
        revision.change,
        revision.resource_version,
        who(&revision.managers)
    );
    if revision.change != "updated" {
        let _ = write!(heading, "  uid {}", revision.uid);
    }
    if revision.late {
        heading.push_str("  (seen late)");
    }
    let _ = writeln!(out, "{}", paint.bold(&heading));
    if revision.change != "updated" {
        return;
    }
    let operations = match revision.diff.as_ref().and_then(Value::as_array) {
        Some(operations) => operations,
        None => {
            let _ = writeln!(
                out,
                "    (what changed is unknown: the revision before is gone)"
            );
            return;
        }
    };
    let now = revision.object.as_ref();
    let mut shown = 0;
    for operation in operations {
        if let Some(line) = change_line(operation, before, now) {
            let _ = writeln!(out, "    {}", paint.change(&line));
            shown += 1;
        }
    }
    if shown == 0 {
        let _ = writeln!(out, "    (no field changed but its resourceVersion)");
    }
}

/// `~ path: old → new`, `+ path: value` or `- path: old` for one RFC 6902 operation;
/// `None` for what is not shown.
fn change_line(operation: &Value, before: Option<&Value>, now: Option<&Value>) -> Option<String> {
    let pointer = operation["path"].as_str().unwrap_or_default();
    if pointer == RESOURCE_VERSION {
        return None;
    }
    let old = || {
        before
            .and_then(|b| b.pointer(pointer))
            .map_or_else(|| "?".to_owned(), shown)
    };
    let new = || shown(&operation["value"]);
    let line = match operation["op"].as_str().unwrap_or_default() {
        "add" => format!("+ {}: {}", path(pointer, now), new()),
        "remove" => format!("- {}: {}", path(pointer, before), old()),
        "replace" => format!("~ {}: {} → {}", path(pointer, now), old(), new()),
        "test" => return None,
        other => format!(
            "~ {}: {other} from {}",
            path(pointer, now),
            path(operation["from"].as_str().unwrap_or_default(), now)
        ),
    };
    Some(line)
}

/// A value on one line: a plain string bare, anything else as JSON (quoted, escaped).
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) if plain(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A string that reads the same bare: not empty, no control characters, no edge spaces.
fn plain(text: &str) -> bool {
    !text.is_empty() && !text.chars().any(char::is_control) && text.trim() == text
}

/// `spec.template.spec.containers[0].image` of the JSON pointer
/// `/spec/template/spec/containers/0/image`, read against the object where it is known (a
/// number is an index only in an array); a key that is not a plain word is quoted
/// (`metadata.annotations["deployment.kubernetes.io/revision"]`), as is a key of digits.
pub(super) fn path(pointer: &str, object: Option<&Value>) -> String {
    let mut out = String::new();
    let mut at = object;
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let in_array = match at {
            Some(value) => value.is_array(),
            None => segment.bytes().all(|b| b.is_ascii_digit()) && !segment.is_empty(),
        };
        if in_array {
            let _ = write!(out, "[{segment}]");
            at = at.and_then(|a| segment.parse::<usize>().ok().and_then(|i| a.get(i)));
            continue;
        }
        // A key of digits alone is quoted: bare, it would read as an index.
        let word = !segment.bytes().all(|b| b.is_ascii_digit())
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if word {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        } else {
            out.push('[');
            out.push_str(&Value::String(segment.clone()).to_string());
            out.push(']');
        }
        at = at.and_then(|a| a.get(&segment));
    }
    out
}

/// Colors for a terminal: none when stdout is not one, or `NO_COLOR` is set
/// (no-color.org).
#[derive(Debug, Clone, Copy)]
pub(super) struct Paint {
    on: bool,
}

impl Paint {
    pub(super) fn stdout() -> Paint {
        let asked_none = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint {
            on: std::io::stdout().is_terminal() && !asked_none,
        }
    }

    /// No colors, whatever stdout is.
    #[cfg(test)]
    pub(super) fn plain() -> Paint {
        Paint { on: false }
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub(super) fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    pub(super) fn cyan(self, text: &str) -> String {
        self.wrap("36", text)
    }

    /// A line by its first character: `+` green, `-` red, `~` yellow.
    pub(super) fn change(self, line: &str) -> String {
        match line.as_bytes().first() {
            Some(b'+') => self.wrap("32", line),
            Some(b'-') => self.wrap("31", line),
            Some(b'~') => self.wrap("33", line),
            _ => line.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pointers_read_as_paths_and_operations_as_lines() {
        let before = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"image": "nginx:1.25"}]}}}, "metadata": {"annotations": {"a.io/b": "x", "0": "y"}}});
        let now = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"image": "nginx:1.27"}]}}}, "metadata": {"labels": {"tier": ""}}});
        assert_eq!(
            path("/spec/template/spec/containers/0/image", Some(&now)),
            "spec.template.spec.containers[0].image"
        );
        assert_eq!(
            path("/metadata/annotations/a.io~1b", Some(&before)),
            r#"metadata.annotations["a.io/b"]"#
        );
        // A number names a key outside arrays.
        assert_eq!(
            path("/metadata/annotations/0", Some(&before)),
            "metadata.annotations[\"0\"]"
        );
        assert_eq!(path("/a/0/b", None), "a[0].b");
        let line = |op: Value| change_line(&op, Some(&before), Some(&now));
        assert_eq!(
            line(json!({"op": "replace", "path": "/spec/replicas", "value": 3})).unwrap(),
            "~ spec.replicas: 1 → 3"
        );
        assert_eq!(
            line(json!({"op": "add", "path": "/metadata/labels", "value": {"tier": ""}})).unwrap(),
            r#"+ metadata.labels: {"tier":""}"#
        );
        assert_eq!(
            line(json!({"op": "remove", "path": "/metadata/annotations"})).unwrap(),
            r#"- metadata.annotations: {"0":"y","a.io/b":"x"}"#
        );
        assert_eq!(
            line(json!({"op": "replace", "path": "/x", "value": "a\u{1b}[31m"})).unwrap(),
            r#"~ x: ? → "a\u001b[31m""#
        );
        assert!(line(json!({"op": "replace", "path": RESOURCE_VERSION, "value": "9"})).is_none());
    }
}
