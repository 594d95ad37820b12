//! What Karpor's page asks the server about itself: `/server-configs` (outside the
//! envelope, in Karpor's Go field names, and for the caller) and `/rest-api/v1/authn`
//! (whether the caller's credential is accepted; the guard has decided by the time it
//! answers).

use crate::access::{Permission, Routes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Serialize;
use utoipa_axum::routes;

use crate::auth::{Authentication, Caller, Grants, Principal};
use crate::envelope::{ApiResult, Reply};
use crate::openapi::Errors;
use crate::types::{Envelope, Identity};
use crate::Role;

/// `/server-configs`'s path (outside [`crate::PREFIX`], as in Karpor).
pub(crate) const SERVER_CONFIGS: &str = "/server-configs";

pub(crate) fn routes() -> Routes {
    Routes::new().route(Permission::Read, routes!(authn))
}

/// 200 with who the caller is and what it may do here when its credential (or its
/// absence) is accepted; 401 otherwise. Karpor's login page reads only `success`.
#[utoipa::path(get, path = "/authn", operation_id = "authn", tag = "auth",
    responses((status = 200, body = inline(Envelope<Identity>)), Errors))]
pub(crate) async fn authn(
    Extension(caller): Extension<Principal>,
    Extension(grants): Extension<Grants>,
) -> ApiResult<Identity> {
    let admin = caller.role >= Role::Admin;
    let may = [
        ("read", true),
        ("edit", caller.role >= Role::Editor && !grants.read_only),
        ("write", admin && !grants.read_only),
        ("admin", admin),
        ("pod-logs", caller.role >= grants.pod_logs),
    ];
    Ok(Reply::ok(Identity {
        user: caller.name,
        groups: caller.groups,
        role: caller.role.as_str().to_owned(),
        anonymous: caller.anonymous,
        policies: caller.policies,
        scope: caller.scope.views(),
        may: may
            .into_iter()
            .filter(|(_, granted)| *granted)
            .map(|(what, _)| what.to_owned())
            .collect(),
    }))
}

/// Karpor's `/server-configs` document, as it applies to the caller. Karpor's page reads
/// `CoreOptions.ReadOnlyMode` (on: its write buttons are disabled),
/// `CoreOptions.EnableRBAC` (on: every page but search asks for a login first; off: no
/// login, no token sent), `Version`, and the AI options (AI is on when `AIModel` and
/// `AIAuthToken` are both non-empty: here never, as no model service can be
/// configured). Storage addresses and credentials are not shown.
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

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "PascalCase")]
struct CoreOptions {
    #[serde(rename = "EnableRBAC")]
    enable_rbac: bool,
    read_only_mode: bool,
    github_badge: bool,
    version: bool,
}

impl CoreOptions {
    /// What the page should offer `caller`. Anonymous readers get every page without a
    /// login, read-only; a caller with a token gets the login and the writes its role
    /// allows; a refused credential (a stale token, say) gets the login page.
    fn for_caller(caller: &Caller, read_only: bool) -> Self {
        let (enable_rbac, read_only_mode) = match caller {
            Caller::Known(principal) => (
                !principal.anonymous,
                read_only || principal.role < Role::Admin,
            ),
            Caller::Refused(_) => (true, read_only),
        };
        CoreOptions {
            enable_rbac,
            read_only_mode,
            github_badge: false,
            version: false,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
struct StorageOptions {
    search_storage_type: &'static str,
}

impl ServerConfigs {
    fn new(core_options: CoreOptions, storage: &'static str) -> Self {
        ServerConfigs {
            ai_options: AiOptions {
                backend: "",
                model: "",
                auth_token: "",
            },
            core_options,
            storage_options: StorageOptions {
                search_storage_type: storage,
            },
            version: format!("v{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

#[derive(Clone)]
struct Served {
    read_only: bool,
    storage: &'static str,
}

/// `/server-configs`, outside the envelope and the permission checks (Karpor's page reads
/// it before anyone logs in), behind the API's authentication so that it answers for the
/// caller.
pub(crate) fn server_configs(authentication: Authentication, storage: &'static str) -> Router {
    let served = Served {
        read_only: authentication.grants.read_only,
        storage,
    };
    Router::new()
        .route(SERVER_CONFIGS, get(serve))
        .with_state(served)
        .layer(axum::middleware::from_fn_with_state(
            authentication,
            crate::auth::authenticate,
        ))
}

async fn serve(State(served): State<Served>, Extension(caller): Extension<Caller>) -> Response {
    let core = CoreOptions::for_caller(&caller, served.read_only);
    let headers = [
        (header::CACHE_CONTROL, "no-store"),
        (header::VARY, "authorization"),
    ];
    (headers, Json(ServerConfigs::new(core, served.storage))).into_response()
}
