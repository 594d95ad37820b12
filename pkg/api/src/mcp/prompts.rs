//! The prompts an assistant's user can pick: a workload diagnosed with the tools.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{GetPromptResult, PromptMessage, Role};
use rmcp::{prompt, prompt_router, ErrorData};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::Names;
use super::tools::Karpor;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DiagnoseArgs {
    pub cluster: String,
    /// `Deployment`, `StatefulSet`, `Pod`, ...
    pub kind: String,
    /// Leave it out for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
}

#[prompt_router(vis = "pub(crate)")]
impl Karpor {
    /// Diagnose a workload: what it is, what is wrong with it, what changed before it
    /// went wrong, and what to do, from karpor's tools only.
    #[prompt(name = "diagnose")]
    async fn diagnose(
        &self,
        Parameters(args): Parameters<DiagnoseArgs>,
    ) -> Result<GetPromptResult, ErrorData> {
        // Names a tool would refuse are refused here, before they reach a prompt.
        let names = Names::parse(
            Some(&args.cluster),
            None,
            Some(&args.kind),
            args.namespace.as_deref(),
            Some(&args.name),
        )?;
        let at = names
            .query()
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            "Diagnose this Kubernetes workload with karpor's tools ({at}).\n\
             1. `describe` it: its state, audit findings, relations and recent Events.\n\
             2. `describe` what it owns or selects that looks unhealthy (Pods, ReplicaSets).\n\
             3. `changes` in its namespace over the last day, and `history` of it and of what \
             it mounts (ConfigMaps, Secrets by name only), to find what changed before it broke.\n\
             4. Say what is wrong, the most likely cause with the evidence from the tools, and \
             the fix. Say what you could not see. Do not guess beyond what the tools answered."
        );
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description("Diagnose a workload with karpor"),
        )
    }
}
