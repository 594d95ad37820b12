//! karpor as an MCP server: `POST /mcp`, the streamable HTTP transport of the official
//! SDK (rmcp), stateless with JSON answers, on karpor's own listener behind its Host and
//! Origin guard. The route has its permission as every route does (`read`, the caller's
//! scope); each tool is REST routes' work called in process with the request's own
//! credential ([`call`]), so a tool sees nothing its caller could not read over REST.
//! Calls are limited per caller (a rate) and with the API's (its concurrency, body size
//! and timeout); each is a line of the access log.

mod answers;
mod args;
mod call;
mod prompts;
mod resources;
mod tools;

use std::sync::Arc;

use axum::http::Method;
use axum::response::Response;
use axum::Router;
use karpor_config::ConfigIssue;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};

use crate::access::{Endpoint, Permission};
use crate::envelope::Unenveloped;

/// Where the MCP endpoint is served, outside the REST prefix (as clients expect it).
pub(crate) const PATH: &str = "/mcp";
/// The largest JSON-RPC message taken (a tool's arguments are small).
const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// The MCP endpoint and what it asks of its caller: what a REST read asks.
pub(crate) fn endpoint() -> Endpoint {
    Endpoint::new(Method::POST, PATH, Permission::Read)
}

/// `server.limits.mcp`: what one caller's assistant may ask.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpLimits {
    /// Tool calls one caller (one token; anonymous callers together) makes a minute.
    pub calls_per_minute: u32,
    /// Calls allowed at once above the rate.
    pub burst: u32,
    /// The largest structured answer, in bytes: longer texts are cut and lists shortened
    /// to fit (the answer then says `truncated`).
    pub answer_bytes: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits {
            calls_per_minute: 120,
            burst: 30,
            answer_bytes: 256 * 1024,
        }
    }
}

/// The smallest answer budget: one object's summary and a page of lines.
const MIN_ANSWER_BYTES: usize = 4 * 1024;

impl McpLimits {
    pub(crate) fn validate(&self) -> Result<(), ConfigIssue> {
        let fail = |key: &str, what: &str| {
            Err(ConfigIssue::new(
                format!("server.limits.mcp.{key}"),
                what.to_owned(),
            ))
        };
        if self.calls_per_minute == 0 {
            return fail("calls_per_minute", "must be at least 1");
        }
        if self.burst == 0 {
            return fail("burst", "must be at least 1");
        }
        if self.answer_bytes < MIN_ANSWER_BYTES {
            return fail("answer_bytes", "must be at least 4096");
        }
        Ok(())
    }
}

/// The MCP endpoint over `api` (the REST routes without the prefix, who-is-calling and
/// the envelope included), registered with its permission.
pub(crate) fn route(api: Router, limits: &McpLimits) -> Router {
    let tools = tools::Karpor::new(call::Api::new(api), limits.clone());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
        // karpor's own guard checks Host and Origin on every route, this one included.
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let router = Router::new()
        .route_service(PATH, service)
        // The SDK's own answers are MCP's, not the REST envelope's.
        .layer(axum::middleware::map_response(unenveloped));
    crate::access::outside(router, &endpoint())
}

async fn unenveloped(mut response: Response) -> Response {
    response.extensions_mut().insert(Unenveloped);
    response
}
