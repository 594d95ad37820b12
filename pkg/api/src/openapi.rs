//! What the OpenAPI 3 document shares across handlers: its frame ([`ApiDoc`]), the error
//! responses every route may give, the name parameter. The handlers' routers add their
//! paths, and the document is served at `/openapi.json`.

use axum::routing::get;
use axum::{Json, Router};
use karpor_core::access::AccessPolicy;
use karpor_core::model::{RelationRule, SyncRule};
use karpor_core::names::RecordName;
use serde::Deserialize;
use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, IntoResponses, Modify, OpenApi, ToSchema};

/// A failure's body: the envelope with `success: false` and `data: null`.
#[derive(ToSchema)]
#[allow(dead_code)] // for the document only
pub(crate) struct ErrorEnvelope {
    success: bool,
    message: String,
    #[schema(value_type = Option<Object>, nullable)]
    data: Option<()>,
    #[schema(rename = "traceID")]
    trace_id: String,
    #[schema(rename = "startTime")]
    start_time: String,
    #[schema(rename = "endTime")]
    end_time: String,
    #[schema(rename = "costTime")]
    cost_time: String,
}

/// The failures every route may answer.
#[derive(IntoResponses)]
#[allow(dead_code)] // for the document only
pub(crate) enum Errors {
    #[response(
        status = 400,
        description = "bad input (query, body, kubeconfig, name)"
    )]
    BadRequest(ErrorEnvelope),
    #[response(status = 401, description = "no token, or a token not accepted")]
    Unauthorized(ErrorEnvelope),
    #[response(status = 403, description = "a write without the admin role")]
    Forbidden(ErrorEnvelope),
    #[response(status = 404, description = "no such cluster, rule, resource or route")]
    NotFound(ErrorEnvelope),
    #[response(
        status = 405,
        description = "a write in read-only mode, or a method the route lacks"
    )]
    MethodNotAllowed(ErrorEnvelope),
    #[response(status = 409, description = "already exists, or changed meanwhile")]
    Conflict(ErrorEnvelope),
    #[response(status = 413, description = "the body or kubeconfig is too large")]
    TooLarge(ErrorEnvelope),
    #[response(
        status = 415,
        description = "the body is not of the expected content type"
    )]
    UnsupportedMediaType(ErrorEnvelope),
    #[response(
        status = 503,
        description = "a backend is down, or the request timed out"
    )]
    Unavailable(ErrorEnvelope),
}

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// A record's name in a path: a DNS-1123 label (the pattern is core's `NAME_PATTERN`).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct NamePath {
    /// The cluster's or rule's name.
    #[param(value_type = String, pattern = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    pub name: RecordName,
}

/// The document's frame: info, security and shared schemas. The paths come from the
/// handlers' routers (`routes!`), each registered once.
#[derive(OpenApi)]
#[openapi(
    info(title = "karpor", description = "Karpor's REST API: clusters, search, insight and resource groups"),
    components(schemas(ErrorEnvelope)),
    modifiers(&Bearer),
    security(("bearer" = [])),
)]
pub(crate) struct ApiDoc;

/// Sync and relation rules and access policies are their own bodies on routes named by
/// their path (`/sync-rule/{name}`, `/relation-rule/{name}`, `/access-policy/{name}`):
/// there the body's `name` is optional,
/// the path's filling it in. Their schemas serve only as those bodies (the views document
/// the rule as an object), so `name` is made optional in them.
pub(crate) fn names_from_paths(document: &mut utoipa::openapi::OpenApi) {
    let Some(components) = document.components.as_mut() else {
        return;
    };
    for record in [SyncRule::name(), RelationRule::name(), AccessPolicy::name()] {
        if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(&*record) {
            object.required.retain(|field| field != "name");
        }
    }
}

/// Where the document is served.
pub(crate) const PATH: &str = "/openapi.json";

/// `/openapi.json`, serving `document`.
pub(crate) fn route(document: utoipa::openapi::OpenApi) -> Router {
    let document = serde_json::to_value(document).unwrap_or(Value::Null);
    Router::new().route(PATH, get(move || async move { Json(document) }))
}
