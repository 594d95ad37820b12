//! What Karpor's page asks the server about itself: `/server-configs` (outside the
//! envelope, in Karpor's Go field names) and `/rest-api/v1/authn` (whether the caller's
//! credential is accepted; the guard has decided by the time it answers).

use crate::access::{Permission, Routes};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa_axum::routes;

use crate::envelope::{ApiResult, Reply};
use crate::openapi::Errors;
use crate::types::Envelope;

/// `/server-configs`'s path (outside [`crate::PREFIX`], as in Karpor).
pub(crate) const SERVER_CONFIGS: &str = "/server-configs";

pub(crate) fn routes() -> Routes {
    Routes::new().route(Permission::Read, routes!(authn))
}

/// 200 with empty `data` when the request's credential (or its absence) is accepted;
/// 401 otherwise.
#[utoipa::path(get, path = "/authn", operation_id = "authn", tag = "auth",
    responses((status = 200, body = inline(Envelope<String>)), Errors))]
pub(crate) async fn authn() -> ApiResult<&'static str> {
    Ok(Reply::ok(""))
}

/// Karpor's `/server-configs` document. Karpor's clients read `CoreOptions.ReadOnlyMode`,
/// `CoreOptions.EnableRBAC` (off: the page sends no token), `Version`, and the AI options
/// (AI is on when `AIModel` and `AIAuthToken` are both non-empty: here never, as no
/// model service can be configured). Storage addresses and credentials are not shown.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ServerConfigs {
    #[serde(rename = "AIOptions")]
    ai_options: AiOptions,
    core_options: CoreOptions,
    storage_options: StorageOptions,
    version: String,
}

#[derive(Debug, Clone, Serialize)]
struct AiOptions {
    #[serde(rename = "AIBackend")]
    backend: &'static str,
    #[serde(rename = "AIModel")]
    model: &'static str,
    #[serde(rename = "AIAuthToken")]
    auth_token: &'static str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
struct CoreOptions {
    /// Always on: every write needs an admin token.
    #[serde(rename = "EnableRBAC")]
    enable_rbac: bool,
    read_only_mode: bool,
    github_badge: bool,
    version: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
struct StorageOptions {
    search_storage_type: &'static str,
}

impl ServerConfigs {
    pub(crate) fn new(read_only: bool, storage: &'static str) -> Self {
        ServerConfigs {
            ai_options: AiOptions {
                backend: "",
                model: "",
                auth_token: "",
            },
            core_options: CoreOptions {
                enable_rbac: true,
                read_only_mode: read_only,
                github_badge: false,
                version: false,
            },
            storage_options: StorageOptions {
                search_storage_type: storage,
            },
            version: format!("v{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// `/server-configs`, outside the envelope and the auth guard (Karpor's page reads it
/// before anyone logs in).
pub(crate) fn server_configs(configs: ServerConfigs) -> Router {
    Router::new()
        .route(SERVER_CONFIGS, get(serve))
        .with_state(std::sync::Arc::new(configs))
}

async fn serve(State(configs): State<std::sync::Arc<ServerConfigs>>) -> Json<ServerConfigs> {
    Json((*configs).clone())
}
