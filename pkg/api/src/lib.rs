//! karpor's REST API under `/rest-api/v1`, in Karpor's envelope: clusters, sync rules,
//! search, insight and resource groups, behind bearer-token auth with two roles, a read-only
//! mode and request limits; its OpenAPI document at `/openapi.json`. [`types`] is the typed
//! surface: every body and answer, which the CLI and the tests read back.

mod access;
mod access_policies;
mod agents;
mod ai;
mod audit_policy;
mod auth;
mod body;
mod check_lines;
mod clusters;
mod config;
mod envelope;
mod insight;
mod live;
pub mod local_token;
mod locator;
mod mcp;
mod oidc;
mod openapi;
mod params;
mod policy;
mod resource_groups;
mod scope;
mod search;
mod search_rows;
mod server_info;
mod sync_rules;
mod token_review;
mod topology;
pub mod types;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode};
use axum::Router;
use karpor_audit::AuditConfig;
use karpor_kube::{ClientCache, ExecSettings};
use karpor_metastore::Metastore;
use karpor_storage::Storage;
use karpor_syncer::SyncStatus;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub use access::{Endpoint, Permission};
pub use agents::{
    agent_endpoints, agent_routes, follow_agent_clusters, resync_after_storage_outages, AgentParts,
    AgentSessions, Peers,
};
pub use auth::Authenticator;
pub use config::{Anonymous, AuthConfig, LimitsConfig, TokenConfig};
pub use karpor_core::access::Role;
pub use live::bounds::{LiveBounds, LiveLimits};
pub use mcp::McpLimits;
pub use oidc::{OidcConfig, OidcError, OidcIdentity, OidcVerifier};
pub use policy::Policies;
pub use token_review::TokenReviewConfig;

/// The prefix of every API route.
pub const PREFIX: &str = "/rest-api/v1";

/// What the API serves from.
pub struct ApiParts {
    pub metastore: Metastore,
    pub storage: Arc<dyn Storage>,
    /// The in-process syncer's status; `None` when the syncer runs apart (sync states are
    /// then reported as `unknown`).
    pub sync: Option<Arc<SyncStatus>>,
    /// Which exec plugins a kubeconfig may name (validation runs them).
    pub exec: Arc<ExecSettings>,
    pub auth: Authenticator,
    /// Kubernetes tokens checked by a registered cluster (`auth.token_review`).
    pub token_review: Option<TokenReviewConfig>,
    /// Refuse every write (any method but GET) with 405.
    pub read_only: bool,
    /// The role that may read pod logs (`auth.pod_logs`).
    pub pod_logs: Role,
    pub limits: LimitsConfig,
    /// The config file's audit policy (a stored one replaces it).
    pub audit: AuditConfig,
    /// The member clusters' clients (live reads and streams use them).
    pub clients: Arc<ClientCache>,
    /// How much member-cluster work callers may cause ([`LiveBounds::new`]).
    pub live: LiveBounds,
    /// How large a sync or relation rule may be (`syncer.limits`): larger ones are 400.
    pub rule_limits: karpor_core::model::RuleLimits,
    /// The model service (`ai`), when configured.
    pub ai: Option<karpor_ai::Ai>,
    /// Agent mode, when this hub has an agent listener.
    pub agents: Option<AgentHub>,
}

/// What the API needs of agent mode: enrollment, the address install lines give, and
/// the connected agents (live reads of their clusters go through them).
#[derive(Clone)]
pub struct AgentHub {
    pub enrollment: karpor_agent::enrollment::Enrollment,
    /// `https://HOST:PORT` of the agent listener.
    pub advertised: String,
    pub sessions: Arc<AgentSessions>,
}

/// Shared by the handlers.
#[derive(Clone)]
pub(crate) struct AppState {
    pub metastore: Metastore,
    /// Read through [`scope::Visible`] only.
    pub storage: scope::Unscoped,
    pub sync: Option<Arc<SyncStatus>>,
    pub exec: Arc<ExecSettings>,
    pub audit: Arc<AuditConfig>,
    /// One client per member cluster, shared with the in-process syncer.
    pub clients: Arc<ClientCache>,
    pub live: LiveBounds,
    pub rule_limits: karpor_core::model::RuleLimits,
    /// The config file's access policies (`auth.policies`).
    pub configured: Arc<Vec<karpor_core::access::AccessPolicy>>,
    /// The stored ones, read by every server.
    pub policies: Arc<access_policies::PolicyFeed>,
    pub ai: Option<karpor_ai::Ai>,
    pub agents: Option<AgentHub>,
}

/// Every handler's route, each registered once with its permission and its part of the
/// document.
fn handlers() -> access::Routes {
    access::Routes::new()
        .merge(clusters::routes())
        .merge(search::routes())
        .merge(search_rows::routes())
        .merge(insight::routes())
        .merge(resource_groups::routes())
        .merge(server_info::routes())
        .merge(audit_policy::routes())
        .merge(topology::routes())
        .merge(live::routes())
        .merge(sync_rules::routes())
        .merge(ai::routes())
        .merge(access_policies::routes())
}

/// The handlers nested under [`PREFIX`] in the document's frame.
fn nested<S: Clone + Send + Sync + 'static>(
    api: OpenApiRouter<S>,
) -> (Router<S>, utoipa::openapi::OpenApi) {
    let (router, mut document) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .nest(PREFIX, api)
        .split_for_parts();
    openapi::names_from_paths(&mut document);
    (router, document)
}

/// The OpenAPI document, as `/openapi.json` serves it.
pub fn document() -> serde_json::Value {
    let (router, _) = handlers().into_parts();
    let (_, document) = nested(router);
    serde_json::to_value(document).unwrap_or_default()
}

/// The routes outside [`PREFIX`]: two open to anyone, and the MCP endpoint.
fn outside_endpoints() -> [Endpoint; 3] {
    [
        Endpoint::new(Method::GET, openapi::PATH, Permission::Public),
        Endpoint::new(Method::GET, server_info::SERVER_CONFIGS, Permission::Public),
        mcp::endpoint(),
    ]
}

/// Every route this crate serves, with its permission (`/endpoints` prints their lines).
pub fn endpoints() -> Vec<Endpoint> {
    let (_, mut endpoints) = handlers().into_parts();
    endpoints.extend(outside_endpoints());
    endpoints.sort();
    endpoints
}

/// Every documented operation must have been registered with a permission: the routers
/// are built only through [`access::Routes`], and this says so at start should that
/// ever change.
fn check_permissions(document: &utoipa::openapi::OpenApi, endpoints: &[Endpoint]) {
    let document = serde_json::to_value(document).unwrap_or_default();
    let paths = document["paths"].as_object().cloned().unwrap_or_default();
    for (path, operations) in paths {
        for method in operations.as_object().into_iter().flat_map(|o| o.keys()) {
            let declared = endpoints
                .iter()
                .any(|e| e.path == path && e.method.as_str().eq_ignore_ascii_case(method));
            assert!(
                declared,
                "{method} {path} is served without a declared permission"
            );
        }
    }
}

/// The API's routes (under [`PREFIX`]), `/openapi.json` and `/server-configs`, to merge into the server's
/// router (which adds request ids and tracing around them).
pub fn routes(parts: ApiParts) -> Router {
    routes_and_check_lines(parts).0
}

/// [`routes`], and which member clusters' `/readyz` lines each caller sees.
pub fn routes_and_check_lines(parts: ApiParts) -> (Router, Arc<dyn karpor_health::LineFilter>) {
    let token_review = parts.token_review.map(|config| {
        Arc::new(token_review::TokenReviewer::new(
            config,
            parts.metastore.clone(),
            parts.clients.clone(),
        ))
    });
    let (policies, stored) = access_policies::PolicyFeed::start(parts.metastore.clone());
    let auth = parts.auth.with_stored(stored);
    let check_lines_store = parts.metastore.clone();
    let state = AppState {
        configured: Arc::new(auth.configured_policies().to_vec()),
        policies,
        metastore: parts.metastore,
        storage: scope::Unscoped::new(parts.storage),
        sync: parts.sync,
        exec: parts.exec,
        audit: Arc::new(parts.audit),
        clients: parts.clients,
        live: parts.live,
        rule_limits: parts.rule_limits,
        ai: parts.ai,
        agents: parts.agents,
    };
    let authentication = auth::Authentication {
        auth: Arc::new(auth),
        token_review,
        grants: auth::Grants {
            read_only: parts.read_only,
            pod_logs: parts.pod_logs,
        },
    };
    let limits = parts.limits;
    let storage_type = state.storage.backend();
    let (api, declared) = handlers().into_parts();
    // Who the caller is (each route checks its own permission).
    let api = api.fallback(envelope::not_found).with_state(state).layer(
        axum::middleware::from_fn_with_state(authentication.clone(), auth::authenticate),
    );
    // The MCP tools call the routes in process, as their caller: within the `/mcp`
    // request's own limits, so with none of their own.
    let in_process = api.clone().split_for_parts().0;
    // One limit on requests at once for the API and `/mcp` together.
    let concurrency = GlobalConcurrencyLimitLayer::new(limits.concurrency);
    let timeout =
        TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, limits.request_timeout);
    // Innermost first: the body limit, the concurrency limit, the timeout, and outermost
    // the envelope, so every refusal above is enveloped too (`/mcp`'s own answers are
    // marked to pass it).
    let api = api
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(RequestBodyLimitLayer::new(limits.body_bytes))
        .layer(concurrency.clone())
        .layer(timeout)
        .layer(axum::middleware::from_fn(envelope::envelope));
    let mcp = mcp::route(in_process, &limits.mcp)
        .layer(axum::middleware::from_fn_with_state(
            authentication.clone(),
            auth::authenticate,
        ))
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(RequestBodyLimitLayer::new(limits.body_bytes))
        .layer(concurrency)
        .layer(timeout)
        .layer(axum::middleware::from_fn(envelope::envelope));
    let (api, document) = nested(api);
    check_permissions(&document, &declared);
    let check_lines = Arc::new(check_lines::ClusterLines {
        authentication: authentication.clone(),
        metastore: check_lines_store,
    });
    let outside = openapi::route(document)
        .merge(server_info::server_configs(authentication, storage_type))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ));
    (api.merge(outside).merge(mcp), check_lines)
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
    }

    #[test]
    fn schemas_come_from_the_types_each_under_its_own_name() {
        let document = document();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        for name in [
            "SyncRule",
            "ClusterSelector",
            "RelationRule",
            "AuditedResource",
            "SummarizedResource",
            "TopologyResource",
            "ResourceGroupRuleBody",
        ] {
            assert!(schemas.contains_key(name), "{name}: {:?}", schemas.keys());
        }
        for gone in ["ResourceRef", "RuleView", "RuleBody", "SyncRuleBody"] {
            assert!(!schemas.contains_key(gone), "{gone}");
        }
        // A rule's body may leave its name to the path.
        for body in ["SyncRule", "RelationRule", "AccessPolicy"] {
            let required = schemas[body]["required"].as_array().unwrap();
            assert!(
                !required.iter().any(|r| r == "name"),
                "{body}: {required:?}"
            );
        }
        let text = document.to_string();
        assert!(!text.contains("Doc\""), "a doc-only schema is left: {text}");
    }

    #[test]
    fn a_failure_is_documented_as_the_envelope_itself() {
        let document = document();
        let failure = &document["paths"]["/rest-api/v1/clusters"]["get"]["responses"]["400"];
        let reference = failure["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap();
        let name = reference.rsplit('/').next().unwrap();
        let schema = &document["components"]["schemas"][name];
        for key in [
            "success",
            "message",
            "data",
            "traceID",
            "startTime",
            "costTime",
        ] {
            assert!(schema["properties"][key].is_object(), "{key}: {schema}");
        }
        // Every reference resolves (`data`'s to the any-value schema).
        let text = document.to_string();
        for reference in text.split("\"#/components/schemas/").skip(1) {
            let name = &reference[..reference.find('"').unwrap()];
            assert!(
                document["components"]["schemas"][name].is_object(),
                "{name} is referenced, not defined"
            );
        }
    }

    #[test]
    fn answers_read_back_as_they_were_written() {
        let written = serde_json::json!({
            "name": "wide", "description": "", "clusters": {"names": ["a"]},
            "resources": [{"group": "", "version": "v1", "resource": "pods"}],
            "namespaces": [], "labelSelector": null, "fieldSelector": "x=y",
            "transform": {"mode": "metadataOnly", "trim": []}, "keepAfterDelete": false,
            "builtIn": false, "inForce": true, "version": 3,
            "createdAt": "2026-11-30T00:39:12.39Z", "updatedAt": null,
        });
        let view: crate::types::SyncRuleView = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&view).unwrap(), written);
    }

    #[test]
    fn the_name_parameter_follows_the_record_name_rule() {
        let document = document();
        let parameters = document["paths"]["/rest-api/v1/cluster/{name}"]["get"]["parameters"]
            .as_array()
            .unwrap();
        let name = parameters.iter().find(|p| p["name"] == "name").unwrap();
        assert_eq!(
            name["schema"]["pattern"],
            karpor_core::model::NAME_PATTERN,
            "{name}"
        );
        assert_eq!(name["in"], "path");
    }
}
