//! `karpor explain CLUSTER/KIND/[NAMESPACE/]NAME`: the model service's explanation of one
//! object (its YAML as karpor answers it, Secret values already out, and its audit
//! findings), printed as it is written.

use std::process::ExitCode;

use karpor_api::types::{AuditData, InterpretYamlBody};
use serde_json::Value;

use super::describe::fetch;
use super::frames::{print_generation, MODEL_READ_TIMEOUT};
use super::{finish, refused, streamed, Api, Failed};
use crate::args::ExplainArgs;

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
    let response = streamed(
        &args.server,
        reqwest::Method::POST,
        &path,
        body,
        MODEL_READ_TIMEOUT,
    )
    .await?;
    print_generation(response, "explanation").await
}
