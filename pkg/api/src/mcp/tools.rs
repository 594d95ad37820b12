//! The tools, each read-only and each a REST route's work ([`super::call`]) as the
//! calling request's own credential, shaped for an assistant ([`super::answers`]).

use std::fmt::Write as _;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Instant;

use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, Implementation, ListResourceTemplatesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{prompt_handler, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::answers::{self, AuditAnswer, Described, Event, Graph, Summary};
use super::args::{
    self, AuditArgs, ChangesArgs, HistoryArgs, Names, ObjectArgs, Pattern, SearchArgs, TopologyArgs,
};
use super::call::{Api, Failure};
use super::McpLimits;
use crate::access::ACCESS_LOG;
use crate::auth::Principal;
use crate::types::{
    AuditData, ChangesAnswer, ClusterListAnswer, HistoryAnswer, ScoreData, SearchPage,
    TopologyAnswer,
};

/// Events `describe` shows, newest first.
const EVENTS: usize = 10;

/// What the assistant is told when it connects.
const INSTRUCTIONS: &str = "karpor indexes the Kubernetes objects of every registered cluster \
(Secret values and managed fields are never shown). Start with `clusters`, then `search` with \
SQL such as `select * from resources where kind = 'Deployment' and namespace = 'shop'` or \
`select * from resources where kind = 'Pod' and contains(content, 'CrashLoopBackOff')`. \
`describe` gives one object with its findings, relations and recent events; `audit` the \
findings of a scope, most severe first; `topology` what relates to what; `changes` and \
`history` what changed and when. Everything is read-only and limited to what your token may see.";

/// The MCP server: one per request (stateless), sharing the API and the limits.
#[derive(Clone)]
pub(crate) struct Karpor {
    api: Api,
    limits: McpLimits,
    calls: Arc<DefaultKeyedRateLimiter<String>>,
    tool_router: ToolRouter<Karpor>,
    prompt_router: PromptRouter<Karpor>,
}

/// Who called and with what credential, from the HTTP request the call came in.
pub(super) struct Calling {
    headers: HeaderMap,
    who: String,
}

impl Karpor {
    pub(crate) fn new(api: Api, limits: McpLimits) -> Self {
        let per_minute = NonZeroU32::new(limits.calls_per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(limits.burst).unwrap_or(NonZeroU32::MIN);
        Karpor {
            api,
            limits,
            calls: Arc::new(RateLimiter::keyed(
                Quota::per_minute(per_minute).allow_burst(burst),
            )),
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    /// The caller of this call (the `/mcp` route let it in), within its rate.
    pub(super) fn calling(
        &self,
        tool: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Calling, ErrorData> {
        let parts = ctx.extensions.get::<Parts>().ok_or_else(|| {
            ErrorData::internal_error("a tool was called without its HTTP request", None)
        })?;
        let who = parts
            .extensions
            .get::<Principal>()
            .map(|p| p.name.clone())
            .ok_or_else(|| ErrorData::internal_error("a tool was called without a caller", None))?;
        // Callers that stopped calling are forgotten now and then, so the map stays small.
        if self.calls.len() > 10_000 {
            self.calls.retain_recent();
        }
        if self.calls.check_key(&who).is_err() {
            record(
                &who,
                tool,
                "refused",
                StatusCode::TOO_MANY_REQUESTS,
                Instant::now(),
            );
            return Err(ErrorData::new(
                rmcp::model::ErrorCode(-32029),
                format!(
                    "over {} tool calls a minute for this caller (server.limits.mcp.calls_per_minute): wait and retry",
                    self.limits.calls_per_minute
                ),
                None,
            ));
        }
        Ok(Calling {
            headers: parts.headers.clone(),
            who,
        })
    }

    /// A tool's outcome, with its access-log line.
    fn finish(
        &self,
        calling: &Calling,
        tool: &str,
        started: Instant,
        outcome: Result<CallToolResult, Refused>,
    ) -> Result<CallToolResult, ErrorData> {
        match outcome {
            Ok(result) => {
                record(&calling.who, tool, "allowed", StatusCode::OK, started);
                Ok(result)
            }
            Err(Refused::Arguments(e)) => {
                record(
                    &calling.who,
                    tool,
                    "refused",
                    StatusCode::BAD_REQUEST,
                    started,
                );
                Ok(answers::failed(e.message))
            }
            Err(Refused::Failed(failure)) => {
                record(&calling.who, tool, "failed", failure.status, started);
                Ok(answers::failed(failure.message))
            }
        }
    }

    /// A resource read's outcome, with its access-log line: a refusal is the protocol's
    /// error (a resource has no error result of its own).
    pub(super) fn finish_read<T>(
        &self,
        calling: &Calling,
        started: Instant,
        outcome: Result<T, Refused>,
    ) -> Result<T, ErrorData> {
        let (status, error) = match outcome {
            Ok(read) => {
                record(&calling.who, "resource", "allowed", StatusCode::OK, started);
                return Ok(read);
            }
            Err(Refused::Arguments(e)) => (StatusCode::BAD_REQUEST, e),
            Err(Refused::Failed(f)) if f.status == StatusCode::NOT_FOUND => {
                (f.status, ErrorData::resource_not_found(f.message, None))
            }
            Err(Refused::Failed(f)) => (f.status, ErrorData::internal_error(f.message, None)),
        };
        record(&calling.who, "resource", "failed", status, started);
        Err(error)
    }

    pub(super) async fn get<T: serde::de::DeserializeOwned>(
        &self,
        calling: &Calling,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, Failure> {
        self.api.get(&calling.headers, path, query).await
    }

    /// The names with `apiVersion` found from the stored object when left out; with it,
    /// the object as search answers it (redacted, with its findings).
    pub(super) async fn located(
        &self,
        calling: &Calling,
        mut names: Names,
    ) -> Result<(Names, crate::types::SearchItem), Failure> {
        let mut sql = String::from("select * from resources where");
        let mut and = "";
        let terms = [
            ("cluster", names.cluster.as_ref().map(|n| n.as_str())),
            ("apiVersion", names.api_version.as_ref().map(|n| n.as_str())),
            ("kind", names.kind.as_ref().map(|n| n.as_str())),
            (
                "namespace",
                Some(names.namespace.as_ref().map_or("", |n| n.as_str())),
            ),
            ("name", names.name.as_ref().map(|n| n.as_str())),
        ];
        for (column, value) in terms {
            if let Some(value) = value {
                // Parsed names hold no quote; doubled all the same, as SQL quotes one.
                let _ = write!(sql, "{and} {column} = '{}'", value.replace('\'', "''"));
                and = " and";
            }
        }
        let page: SearchPage = self
            .get(
                calling,
                "/search",
                &[("query", sql), ("pageSize", "1".into())],
            )
            .await?;
        let Some(item) = page.items.into_iter().next() else {
            return Err(Failure {
                status: StatusCode::NOT_FOUND,
                message: "no such object among those this caller may see (the `search` tool finds objects by kind and name)".into(),
            });
        };
        if names.api_version.is_none() {
            let found = item.object["apiVersion"].as_str().unwrap_or_default();
            names.api_version = found.parse().ok();
        }
        Ok((names, item))
    }

    async fn search_as(
        &self,
        calling: &Calling,
        args: SearchArgs,
    ) -> Result<CallToolResult, Refused> {
        let query = args::query_text("query", &args.query)?;
        let page = args::within("page", args.page, 1, u32::MAX)?;
        let size = args::within("pageSize", args.page_size, 20, args::MAX_PAGE)?;
        let mut params = vec![
            ("query", query),
            ("page", page.to_string()),
            ("pageSize", size.to_string()),
        ];
        if args.pattern != Pattern::Sql {
            params.push(("pattern", args.pattern.as_str().to_owned()));
        }
        let found: SearchPage = self.get(calling, "/search", &params).await?;
        let answer = answers::SearchAnswer {
            sql_query: found.sql_query,
            total: found.total,
            total_exact: found.total_relation == crate::types::TotalRelation::Eq,
            page,
            page_size: size,
            items: found
                .items
                .iter()
                .map(|i| Summary::of(&i.cluster, &i.object, i.deleted, answers::finding_lines(i)))
                .collect(),
        };
        done(&answer, answer.text(), self.limits.answer_bytes)
    }

    async fn describe_as(
        &self,
        calling: &Calling,
        args: ObjectArgs,
    ) -> Result<CallToolResult, Refused> {
        let names = args.names()?;
        let (names, item) = self.located(calling, names).await?;
        let locator = names.query();
        let mut graph_query = locator.clone();
        graph_query.push(("hops", "1".into()));
        let summary = Summary::of(
            &item.cluster,
            &item.object,
            item.deleted,
            answers::finding_lines(&item),
        );
        let (score, graph, events) = tokio::join!(
            self.get::<ScoreData>(calling, "/insight/score", &locator),
            self.get::<TopologyAnswer>(calling, "/insight/topology", &graph_query),
            self.get::<Vec<Value>>(calling, "/insight/events", &locator),
        );
        let mut unavailable = Vec::new();
        let mut note = |what: &str, failure: &Failure| {
            unavailable.push(format!("{what}: {}", failure.message));
        };
        let score = score.map(|s| s.score).map_err(|f| note("score", &f)).ok();
        let (parents, children) = match graph {
            Ok(TopologyAnswer::Resources(by_cluster)) => by_cluster
                .into_values()
                .flat_map(|nodes| nodes.into_iter())
                // The root itself: a neighbour may share its name (an HPA named for its
                // Deployment), not its kind and version.
                .find(|(_, node)| {
                    let at = &node.resource_group;
                    (&at.api_version, &at.kind, &at.namespace, &at.name)
                        == (&summary.api_version, &summary.kind, &summary.namespace, &summary.name)
                })
                .map(|(_, node)| (node.parents, node.children))
                .unwrap_or_default(),
            Ok(TopologyAnswer::Kinds(_)) => Default::default(),
            Err(f) => {
                note("relations", &f);
                Default::default()
            }
        };
        let events = events
            .map(|events| events.iter().take(EVENTS).map(Event::of).collect())
            .map_err(|f| note("events", &f))
            .unwrap_or_default();
        let findings = item
            .issues
            .iter()
            .map(|f| answers::Finding {
                severity: f.severity.as_str().to_owned(),
                rule: f.rule.clone(),
                title: f.title.clone(),
                message: f.message.clone(),
                remediation: f.remediation.clone(),
            })
            .collect();
        let answer = Described {
            summary,
            object: item.object,
            score,
            findings,
            parents,
            children,
            events,
            unavailable,
        };
        done(&answer, answer.text(), self.limits.answer_bytes)
    }

    async fn topology_as(
        &self,
        calling: &Calling,
        args: TopologyArgs,
    ) -> Result<CallToolResult, Refused> {
        let hops = args::within("hops", args.hops, 2, 5)?;
        let mut names = args.names()?;
        if names.name.is_some() && names.api_version.is_none() {
            names = self.located(calling, names).await?.0;
        }
        let mut query = names.query();
        query.push(("hops", hops.to_string()));
        let answer: TopologyAnswer = self.get(calling, "/insight/topology", &query).await?;
        let (of, by_cluster) = match answer {
            TopologyAnswer::Resources(graph) => ("resources", to_values(graph)),
            TopologyAnswer::Kinds(graph) => ("kinds", to_values(graph)),
        };
        let cluster = args.cluster;
        let nodes = by_cluster
            .get(&cluster)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let graph = Graph {
            cluster,
            of: of.to_owned(),
            nodes,
        };
        done(&graph, graph.text(), self.limits.answer_bytes)
    }

    async fn audit_as(
        &self,
        calling: &Calling,
        args: AuditArgs,
    ) -> Result<CallToolResult, Refused> {
        let limit = args::within("limit", args.limit, 20, args::MAX_GROUPS)?;
        let locator = args.names()?.query();
        let (data, score) = tokio::join!(
            self.get::<AuditData>(calling, "/insight/audit", &locator),
            self.get::<ScoreData>(calling, "/insight/score", &locator),
        );
        let answer = AuditAnswer::of(data?, score?.score, limit as usize);
        done(&answer, answer.text(), self.limits.answer_bytes)
    }

    async fn clusters_as(&self, calling: &Calling) -> Result<CallToolResult, Refused> {
        let answer: ClusterListAnswer = self.get(calling, "/clusters", &[]).await?;
        let ClusterListAnswer::List(list) = answer else {
            return Err(internal("the cluster list came as a summary").into());
        };
        let clusters = answers::Clusters {
            clusters: list
                .items
                .into_iter()
                .map(|c| answers::ClusterLine {
                    name: c.name,
                    display_name: c.display_name,
                    description: c.description,
                    labels: c.labels,
                    healthy: c.status.healthy,
                    sync: serde_json::to_value(c.sync_status).unwrap_or_default(),
                })
                .collect(),
        };
        done(&clusters, clusters.text(), self.limits.answer_bytes)
    }

    async fn changes_as(
        &self,
        calling: &Calling,
        args: ChangesArgs,
    ) -> Result<CallToolResult, Refused> {
        let page = args::within("page", args.page, 1, u32::MAX)?;
        let size = args::within("pageSize", args.page_size, 20, args::MAX_PAGE)?;
        let mut query = args.names()?.query();
        if let Some(sql) = &args.query {
            query.push(("query", args::query_text("query", sql)?));
        }
        for (key, value) in [("since", &args.since), ("change", &args.change)] {
            if let Some(value) = value {
                query.push((key, value.clone()));
            }
        }
        query.push(("page", page.to_string()));
        query.push(("pageSize", size.to_string()));
        let found: ChangesAnswer = self.get(calling, "/insight/changes", &query).await?;
        let time = |t: time::OffsetDateTime| {
            t.format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
        };
        let answer = answers::Changes {
            total: found.total,
            page,
            page_size: size,
            since: found.since.map(time),
            until: time(found.until),
            by_kind: serde_json::to_value(found.by_kind).unwrap_or_default(),
            by_change: serde_json::to_value(found.by_change).unwrap_or_default(),
            items: found
                .items
                .iter()
                .map(|c| serde_json::to_value(c).unwrap_or_default())
                .collect(),
        };
        done(&answer, answer.text(), self.limits.answer_bytes)
    }

    async fn history_as(
        &self,
        calling: &Calling,
        args: HistoryArgs,
    ) -> Result<CallToolResult, Refused> {
        let limit = args::within("limit", args.limit, 10, args::MAX_REVISIONS)?;
        let mut query = args.names()?.query();
        query.push(("limit", limit.to_string()));
        let found: HistoryAnswer = self.get(calling, "/insight/history", &query).await?;
        let answer = answers::History {
            cluster: found.cluster,
            kind: found.kind,
            namespace: found.namespace,
            name: found.name,
            revisions: found
                .revisions
                .iter()
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .collect(),
        };
        done(&answer, answer.text(), self.limits.answer_bytes)
    }
}

#[tool_router(router = tool_router)]
impl Karpor {
    /// Search the objects of every cluster the caller may see: SQL in karpor's dialect
    /// (`select * from resources where kind = 'Deployment' and namespace = 'shop'`), a
    /// keyword, or a question in plain language. Answers one line per object (use
    /// `describe` for one object) and the SQL that ran.
    #[tool(output_schema = schema_for_output::<answers::SearchAnswer>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (calling, started) = (self.calling("search", &ctx)?, Instant::now());
        let outcome = self.search_as(&calling, args).await;
        self.finish(&calling, "search", started, outcome)
    }

    /// One object: its key fields and stored state (Secret values redacted), its audit
    /// findings and score, what owns or selects it and what it owns or selects, and its
    /// cluster's newest Events about it.
    #[tool(output_schema = schema_for_output::<Described>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn describe(
        &self,
        Parameters(args): Parameters<ObjectArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (calling, started) = (self.calling("describe", &ctx)?, Instant::now());
        let outcome = self.describe_as(&calling, args).await;
        self.finish(&calling, "describe", started, outcome)
    }

    /// What relates to what: a resource's graph (give kind and name), a namespace's graph
    /// of kinds (give namespace), or a cluster's (cluster alone).
    #[tool(output_schema = schema_for_output::<Graph>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn topology(
        &self,
        Parameters(args): Parameters<TopologyArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (calling, started) = (self.calling("topology", &ctx)?, Instant::now());
        let outcome = self.topology_as(&calling, args).await;
        self.finish(&calling, "topology", started, outcome)
    }

    /// Audit findings (security and reliability rules) and the score of a scope (all the
    /// caller sees, a cluster, a namespace, a kind or one object), most severe first.
    #[tool(output_schema = schema_for_output::<AuditAnswer>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn audit(
        &self,
        Parameters(args): Parameters<AuditArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (calling, started) = (self.calling("audit", &ctx)?, Instant::now());
        let outcome = self.audit_as(&calling, args).await;
        self.finish(&calling, "audit", started, outcome)
    }

    /// The registered clusters the caller may see, with their health and sync state.
    #[tool(output_schema = schema_for_output::<answers::Clusters>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn clusters(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let (calling, started) = (self.calling("clusters", &ctx)?, Instant::now());
        let outcome = self.clusters_as(&calling).await;
        self.finish(&calling, "clusters", started, outcome)
    }

    /// What changed where, newest first, with counts by kind and change type: by names
    /// over the last `since` (default 1h), or SQL over the changes table.
    #[tool(output_schema = schema_for_output::<answers::Changes>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn changes(
        &self,
        Parameters(args): Parameters<ChangesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (calling, started) = (self.calling("changes", &ctx)?, Instant::now());
        let outcome = self.changes_as(&calling, args).await;
        self.finish(&calling, "changes", started, outcome)
    }

    /// One object's revisions, newest first, each with what changed (a JSON patch), when
    /// karpor saw it and who changed it.
    #[tool(output_schema = schema_for_output::<answers::History>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn history(
        &self,
        Parameters(args): Parameters<HistoryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (calling, started) = (self.calling("history", &ctx)?, Instant::now());
        let outcome = self.history_as(&calling, args).await;
        self.finish(&calling, "history", started, outcome)
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for Karpor {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("karpor", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(Self::resource_templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read_object(request.uri, ctx).await.map(Into::into)
    }
}

fn done<T: serde::Serialize>(
    answer: &T,
    text: String,
    budget: usize,
) -> Result<CallToolResult, Refused> {
    Ok(answers::answered(answer, text, budget)?)
}

/// Why a tool did not answer: arguments it refused, or a failure of the work itself.
/// Both are tool errors the assistant reads and may correct (as MCP asks of input
/// validation since 2025-11-25, and as the SDK answers arguments of the wrong shape).
pub(super) enum Refused {
    Arguments(ErrorData),
    Failed(Failure),
}

impl From<ErrorData> for Refused {
    fn from(e: ErrorData) -> Self {
        Refused::Arguments(e)
    }
}

impl From<Failure> for Refused {
    fn from(f: Failure) -> Self {
        Refused::Failed(f)
    }
}

fn internal(message: &str) -> Failure {
    Failure {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: message.to_owned(),
    }
}

fn to_values<T: serde::Serialize>(graph: T) -> serde_json::Map<String, Value> {
    match serde_json::to_value(graph) {
        Ok(Value::Object(map)) => map,
        _ => Default::default(),
    }
}

/// One tool call, as a line of the access log.
fn record(who: &str, tool: &str, outcome: &str, status: StatusCode, started: Instant) {
    tracing::info!(target: ACCESS_LOG, who, permission = "read", method = "POST", path = super::PATH,
        tool, outcome, status = status.as_u16(), elapsed_ms = started.elapsed().as_millis() as u64, "access");
}
