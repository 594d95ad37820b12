//! karpor's REST API under `/rest-api/v1`, in Karpor's envelope: clusters, search,
//! insight and resource groups, behind bearer-token auth with two roles, a read-only
//! mode and request limits; its OpenAPI document at `/openapi.json`.

mod auth;
mod clusters;
mod config;
mod envelope;
mod insight;
pub mod local_token;
mod openapi;
mod resource_groups;
mod search;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::Router;
use karpor_kube::ExecSettings;
use karpor_metastore::Metastore;
use karpor_storage::Storage;
use karpor_syncer::SyncStatus;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

pub use auth::{Authenticator, Principal};
pub use config::{Anonymous, AuthConfig, LimitsConfig, Role, TokenConfig};
pub use envelope::ApiError;
pub use openapi::document;

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
    /// Refuse every write (any method but GET) with 405.
    pub read_only: bool,
    pub limits: LimitsConfig,
}

/// Shared by the handlers.
#[derive(Clone)]
pub(crate) struct AppState {
    pub metastore: Metastore,
    pub storage: Arc<dyn Storage>,
    pub sync: Option<Arc<SyncStatus>>,
    pub exec: Arc<ExecSettings>,
}

/// The API's routes (under [`PREFIX`]) and `/openapi.json`, to merge into the server's
/// router (which adds request ids and tracing around them).
pub fn routes(parts: ApiParts) -> Router {
    let state = AppState {
        metastore: parts.metastore,
        storage: parts.storage,
        sync: parts.sync,
        exec: parts.exec,
    };
    let guard = auth::Guard {
        auth: Arc::new(parts.auth),
        read_only: parts.read_only,
    };
    let limits = parts.limits;
    let api = Router::new()
        .merge(clusters::routes())
        .merge(search::routes())
        .merge(insight::routes())
        .merge(resource_groups::routes())
        .fallback(envelope::not_found)
        .with_state(state)
        // Innermost first: the role check, the body limit, the concurrency limit, the
        // timeout, and outermost the envelope, so every refusal above is enveloped too.
        .layer(axum::middleware::from_fn_with_state(guard, auth::guard))
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(RequestBodyLimitLayer::new(limits.body_bytes))
        .layer(GlobalConcurrencyLimitLayer::new(limits.concurrency))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ))
        .layer(axum::middleware::from_fn(envelope::envelope));
    let document = openapi::routes().layer(TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        limits.request_timeout,
    ));
    Router::new().nest(PREFIX, api).merge(document)
}
