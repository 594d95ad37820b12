//! `karpor explain CLUSTER/KIND/[NAMESPACE/]NAME`: the model service's explanation of one
//! object (its YAML as karpor answers it, Secret values already out, and its audit
//! findings), printed as it is written.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use karpor_api::types::{AiFrame, AuditData, InterpretYamlBody};
use serde_json::Value;

use super::describe::fetch;
use super::frames::Frames;
use super::{finish, refused, streamed, Api, Failed, EXIT_UNREACHABLE};
use crate::args::ExplainArgs;

/// A model may think a while before its first token; silence longer than this is a dead
/// connection (the server sends keep-alives meanwhile).
const READ_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) async fn run(args: &ExplainArgs) -> ExitCode {
    finish(explain(args).await)
}

async fn explain(args: &ExplainArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let (detailed, full) = fetch(&api, &args.target).await?;
    let findings = match api
        .try_get::<AuditData>(reqwest::Method::GET, &format!("/insight/audit?{full}"))
        .await?
    {
        Ok(audit) => audit
            .issue_groups
            .into_iter()
            .map(|g| {
                format!(
                    "{} ({}): {}",
                    g.issue.rule, g.issue.severity, g.issue.message
                )
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let yaml = serde_json::to_string_pretty(&Value::Object(detailed.object))
        .map_err(|e| refused(format!("cannot write the object: {e}")))?;
    let body = InterpretYamlBody {
        yaml,
        language: args.language.clone(),
        findings,
    };
    let path = format!("{}/insight/yaml/interpret/stream", karpor_api::PREFIX);
    let body = serde_json::to_value(&body).ok();
    let mut response = streamed(
        &args.server,
        reqwest::Method::POST,
        &path,
        body,
        READ_TIMEOUT,
    )
    .await?;
    let mut frames = Frames::<AiFrame>::default();
    let mut out = std::io::stdout().lock();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| Failed(EXIT_UNREACHABLE, format!("the stream broke: {e}")))?;
        let Some(chunk) = chunk else {
            return Err(refused(
                "the stream ended before the explanation was complete",
            ));
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
