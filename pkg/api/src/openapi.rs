//! The OpenAPI 3 document, generated from the handlers' annotations, at `/openapi.json`.

use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi, ToSchema};

use crate::{clusters, insight, resource_groups, search};

/// A failure's body: the envelope with `success: false` and `data: null`.
#[derive(ToSchema)]
#[allow(dead_code)] // for the document only
pub struct ErrorEnvelope {
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
pub enum Errors {
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

#[derive(OpenApi)]
#[openapi(
    info(title = "karpor", description = "Karpor's REST API: clusters, search, insight and resource groups"),
    paths(
        clusters::list, clusters::read, clusters::create, clusters::update, clusters::remove,
        clusters::upload, clusters::validate,
        search::search,
        insight::stats, insight::summary, insight::detail,
        resource_groups::list, resource_groups::read, resource_groups::create,
        resource_groups::update, resource_groups::remove, resource_groups::groups,
    ),
    components(schemas(ErrorEnvelope)),
    modifiers(&Bearer),
    security(("bearer" = [])),
)]
struct ApiDoc;

/// The document, as `/openapi.json` serves it.
pub fn document() -> Value {
    let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or(Value::Null);
    camel_case_links(&mut document);
    document
}

/// utoipa 5 writes a link's fields in snake case (`operation_id`); OpenAPI's are camel case.
fn camel_case_links(document: &mut Value) {
    let links = document["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|operations| operations.values_mut())
        .filter_map(|operation| operation["responses"].as_object_mut())
        .flat_map(|responses| responses.values_mut())
        .filter_map(|response| response.get_mut("links").and_then(Value::as_object_mut))
        .flat_map(|links| links.values_mut())
        .filter_map(Value::as_object_mut);
    for link in links {
        for (from, to) in [
            ("operation_id", "operationId"),
            ("operation_ref", "operationRef"),
            ("request_body", "requestBody"),
        ] {
            if let Some(value) = link.remove(from) {
                link.insert(to.to_owned(), value);
            }
        }
    }
}

pub(crate) fn routes() -> Router {
    let document = document();
    Router::new().route("/openapi.json", get(move || async move { Json(document) }))
}

#[cfg(test)]
mod tests {
    use super::document;

    #[test]
    fn operation_ids_are_unique_and_links_are_camel_case() {
        let document = document();
        let text = document.to_string();
        assert!(!text.contains("operation_id"), "{text}");
        let link = &document["paths"]["/rest-api/v1/cluster/{name}"]["post"]["responses"]["201"]
            ["links"]["getCluster"];
        assert_eq!(link["operationId"], "getCluster");
        let mut ids: Vec<&str> = document["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|p| p.as_object().unwrap().values())
            .map(|o| o["operationId"].as_str().unwrap())
            .collect();
        let all = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all);
        assert_eq!(all, 17);
    }
}
