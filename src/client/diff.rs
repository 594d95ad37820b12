//! `karpor diff CLUSTER/KIND/[NAMESPACE/]NAME --since D | --from RV [--to RV]`: the lines of
//! the object's YAML that changed, as a unified diff with a few lines of context: the
//! object as history says it was `--since` ago against it as stored now, or two of its
//! revisions (`--to` the newest when absent). "no change" when they are the same.

use std::fmt::Write as _;
use std::process::ExitCode;

use karpor_api::types::{DetailedObject, RevisionView};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::describe::locator;
use super::history::{revisions, seen, Paint, MAX_REVISIONS};
use super::output::emit;
use super::{finish, refused, text, Api, Failed};
use crate::args::DiffArgs;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// A command line that asks for nothing to compare, as clap's usage errors exit.
const EXIT_USAGE: u8 = 2;

pub(crate) async fn run(args: &DiffArgs) -> ExitCode {
    finish(diff(args).await)
}

/// One side of the diff: its heading and the object.
struct Side {
    label: String,
    object: Value,
}

async fn diff(args: &DiffArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let (old, new) = match (&args.since, &args.from) {
        (Some(since), _) => since_then(&api, &args.target, since).await?,
        (None, Some(from)) => between(&api, &args.target, from, args.to.as_deref()).await?,
        (None, None) => {
            return Err(Failed(
                EXIT_USAGE,
                "give --since DURATION (or a time), or --from RV [--to RV]".to_owned(),
            ))
        }
    };
    let old_text = yaml(&old.object)?;
    let new_text = yaml(&new.object)?;
    if old_text == new_text {
        emit("no change\n");
        return Ok(());
    }
    emit(&unified(&old_text, &new_text, &old, &new, Paint::stdout()));
    Ok(())
}

/// The object `since` ago (from history) and now (as stored).
async fn since_then(api: &Api, target: &str, since: &str) -> Result<(Side, Side), Failed> {
    let locator = locator(target)?;
    let then: DetailedObject = api
        .get(
            reqwest::Method::GET,
            &format!("/insight/detail?{locator}&at={}", super::encode(since)),
            None,
        )
        .await?;
    let now: DetailedObject = api
        .get(
            reqwest::Method::GET,
            &format!("/insight/detail?{locator}"),
            None,
        )
        .await?;
    let side = |detailed: DetailedObject, when: String| {
        let object = Value::Object(detailed.object);
        Side {
            label: format!(
                "{target} {when} (resourceVersion {})",
                text(&object["metadata"]["resourceVersion"])
            ),
            object,
        }
    };
    let then_label = if humantime_serde::re::humantime::parse_duration(since).is_ok() {
        format!("{since} ago")
    } else {
        format!("at {since}")
    };
    Ok((side(then, then_label), side(now, "now".to_owned())))
}

/// Revisions `from` and `to` (the newest when absent) of the object's kept history.
async fn between(
    api: &Api,
    target: &str,
    from: &str,
    to: Option<&str>,
) -> Result<(Side, Side), Failed> {
    let answer = revisions(api, target, MAX_REVISIONS).await?;
    let find = |version: Option<&str>| -> Result<&RevisionView, Failed> {
        let found = match version {
            Some(version) => answer
                .revisions
                .iter()
                .find(|r| r.resource_version == version),
            None => answer.revisions.first(),
        };
        found.ok_or_else(|| {
            refused(format!(
                "{target} has no revision {} among the {} karpor answered (karpor history \
                 {target} lists them)",
                version.unwrap_or_default(),
                answer.revisions.len()
            ))
        })
    };
    let side = |revision: &RevisionView| -> Result<Side, Failed> {
        let object = revision.object.clone().ok_or_else(|| {
            refused(format!(
                "revision {} came without its object",
                revision.resource_version
            ))
        })?;
        Ok(Side {
            label: format!(
                "{target} resourceVersion {} ({} {})",
                revision.resource_version,
                revision.change,
                seen(&revision.seen_at)
            ),
            object,
        })
    };
    Ok((side(find(Some(from))?)?, side(find(to)?)?))
}

fn yaml(object: &Value) -> Result<String, Failed> {
    serde_saphyr::to_string(object)
        .map_err(|e| refused(format!("cannot write the object as YAML: {e}")))
}

/// `---`/`+++` headings, then each hunk: `@@` line, ` ` context, `-` old, `+` new.
fn unified(old_text: &str, new_text: &str, old: &Side, new: &Side, paint: Paint) -> String {
    let diff = TextDiff::from_lines(old_text, new_text);
    let mut out = String::new();
    let _ = writeln!(out, "{}", paint.bold(&format!("--- {}", old.label)));
    let _ = writeln!(out, "{}", paint.bold(&format!("+++ {}", new.label)));
    for hunk in diff.unified_diff().context_radius(CONTEXT).iter_hunks() {
        let _ = writeln!(out, "{}", paint.cyan(&hunk.header().to_string()));
        for change in hunk.iter_changes() {
            let line = format!("{}{}", change.tag(), change.value().trim_end_matches('\n'));
            let line = match change.tag() {
                ChangeTag::Equal => line,
                ChangeTag::Delete | ChangeTag::Insert => paint.change(&line),
            };
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_changed_field_is_a_minus_and_a_plus_line_with_context() {
        let side = |label: &str, object: Value| Side {
            label: label.to_owned(),
            object,
        };
        let old = side("a", json!({"spec": {"replicas": 1, "image": "nginx:1.25"}}));
        let new = side("b", json!({"spec": {"replicas": 1, "image": "nginx:1.27"}}));
        let out = unified(
            &yaml(&old.object).ok().unwrap(),
            &yaml(&new.object).ok().unwrap(),
            &old,
            &new,
            Paint::plain(),
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..3], ["--- a", "+++ b", "@@ -1,3 +1,3 @@"], "{out}");
        assert!(lines.contains(&"-  image: nginx:1.25"), "{out}");
        assert!(lines.contains(&"+  image: nginx:1.27"), "{out}");
        assert!(lines.contains(&"   replicas: 1"), "{out}");
    }
}
