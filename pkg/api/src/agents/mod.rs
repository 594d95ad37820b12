//! The agent listener's routes (`/agent/v1`, on a listener of their own whose TLS asks
//! for the hub authority's client certificates): join with a token, renew, the plan, and
//! the writes. Each route is registered once with its [`Permission`]: `agent-join` (the
//! body's join token is the credential) or `agent` (a verified certificate whose
//! generation is current, for a cluster registered in agent mode). The cluster a route
//! acts on is the certificate's alone ([`AgentIdentity`]); no payload names it.

mod checks;
mod control;
mod load;
pub(crate) mod peers;
pub(crate) mod reply;
mod routes;
pub(crate) mod sessions;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::{Extension, Router};
use karpor_agent::enrollment::Enrollment;
use karpor_agent::identity::AgentIdentity;
use karpor_agent::wire::{self, Certified, WriteBatch};
use karpor_agent::AgentError;
use karpor_audit::AuditConfig;
use karpor_core::model::{Cluster, ClusterMode};
use karpor_metastore::Metastore;
use karpor_server::ClientCertificate;
use karpor_storage::Storage;
use karpor_syncer::HistorySettings;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::access::{Endpoint, Permission, ACCESS_LOG};
use crate::envelope::ApiError;
pub use checks::follow_agent_clusters;
pub use peers::Peers;
pub use sessions::resync_after_storage_outages;
pub use sessions::AgentSessions;

/// Requests the agent listener serves at once, every agent together.
const CONCURRENCY: usize = 256;
/// Control streams and replies open at once, every agent together.
const STREAMS: usize = 4096;
/// The longest an agent's request may take (a batch waits for storage's commit).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What the agent routes work with.
pub struct AgentParts {
    pub metastore: Metastore,
    pub storage: Arc<dyn Storage>,
    pub enrollment: Enrollment,
    /// The config file's audit policy (a stored one replaces it in the plan).
    pub audit: AuditConfig,
    pub history: HistorySettings,
    /// The agents connected to this hub, shared with the REST API's live reads.
    pub sessions: Arc<AgentSessions>,
}

#[derive(Clone)]
struct AgentState {
    metastore: Metastore,
    storage: Arc<dyn Storage>,
    enrollment: Enrollment,
    audit: Arc<AuditConfig>,
    history: HistorySettings,
    sessions: Arc<AgentSessions>,
    load: load::AgentLoad,
}

/// How long a route's exchange lasts, which decides the bounds it runs under.
#[derive(Clone, Copy)]
enum Lasting {
    /// A request and its answer: body and time limits.
    Exchange,
    /// A stream (the control stream, a reply): bounded by its own deadline and lines.
    Stream,
}

/// The routes of the agent listener, each with its permission.
struct AgentRoutes {
    exchanges: Router<AgentState>,
    streams: Router<AgentState>,
    endpoints: Vec<Endpoint>,
}

impl AgentRoutes {
    fn route(
        mut self,
        permission: Permission,
        lasting: Lasting,
        method: Method,
        path: &str,
        handler: MethodRouter<AgentState>,
    ) -> Self {
        let full = format!("{}{path}", wire::PREFIX);
        self.endpoints.push(Endpoint::new(method, full, permission));
        let checked = handler.route_layer(axum::middleware::from_fn(
            move |request: Request, next: Next| authorize(permission, lasting, request, next),
        ));
        match lasting {
            Lasting::Exchange => self.exchanges = self.exchanges.route(path, checked),
            Lasting::Stream => self.streams = self.streams.route(path, checked),
        }
        self
    }
}

fn table() -> AgentRoutes {
    use axum::routing::{get, post};
    use Lasting::{Exchange, Stream};
    AgentRoutes {
        exchanges: Router::new(),
        streams: Router::new(),
        endpoints: Vec::new(),
    }
    .route(
        Permission::AgentJoin,
        Exchange,
        Method::POST,
        wire::JOIN,
        post(routes::join),
    )
    .route(
        Permission::Agent,
        Exchange,
        Method::POST,
        wire::RENEW,
        post(routes::renew),
    )
    .route(
        Permission::Agent,
        Exchange,
        Method::GET,
        wire::PLAN,
        get(routes::plan),
    )
    .route(
        Permission::Agent,
        Exchange,
        Method::POST,
        wire::WRITES,
        post(routes::writes),
    )
    .route(
        Permission::Agent,
        Exchange,
        Method::POST,
        wire::VERSIONS,
        post(routes::versions),
    )
    .route(
        Permission::AgentPeer,
        Stream,
        Method::POST,
        peers::PEER_READS,
        post(peers::read),
    )
    .route(
        Permission::AgentPeer,
        Exchange,
        Method::POST,
        peers::PEER_CLOSE,
        post(peers::close),
    )
    .route(
        Permission::Agent,
        Stream,
        Method::GET,
        wire::CONTROL,
        get(control::control),
    )
    .route(
        Permission::Agent,
        Stream,
        Method::POST,
        wire::REPLY_ROUTE,
        post(control::reply),
    )
}

/// Every route of the agent listener, with its permission.
pub fn agent_endpoints() -> Vec<Endpoint> {
    let mut endpoints = table().endpoints;
    endpoints.sort();
    endpoints
}

/// The agent listener's router: its routes under [`wire::PREFIX`], bounded in body size,
/// time and requests at once, every answer in the envelope.
pub fn agent_routes(parts: AgentParts) -> Router {
    let state = AgentState {
        metastore: parts.metastore,
        storage: parts.storage,
        enrollment: parts.enrollment,
        audit: Arc::new(parts.audit),
        history: parts.history,
        sessions: parts.sessions,
        load: load::AgentLoad::default(),
    };
    let AgentRoutes {
        exchanges, streams, ..
    } = table();
    let exchanges = exchanges
        .layer(DefaultBodyLimit::max(wire::MAX_BODY_BYTES))
        .layer(RequestBodyLimitLayer::new(wire::MAX_BODY_BYTES))
        .layer(GlobalConcurrencyLimitLayer::new(CONCURRENCY))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ));
    // Streams: a reply's reader bounds its size and time; sessions are one per cluster.
    let streams = streams
        .layer(DefaultBodyLimit::disable())
        .layer(GlobalConcurrencyLimitLayer::new(STREAMS));
    let routes = exchanges
        .merge(streams)
        .fallback(crate::envelope::not_found)
        .layer(Extension(state.clone()))
        .with_state(state)
        .layer(axum::middleware::from_fn(crate::envelope::envelope));
    Router::new().nest(wire::PREFIX, routes)
}

/// The per-route check: an `agent` route needs a current agent certificate of a cluster
/// registered in agent mode; its identity goes to the handler.
async fn authorize(
    permission: Permission,
    lasting: Lasting,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(state) = request.extensions().get::<AgentState>().cloned() else {
        tracing::error!("an agent route was reached without its state");
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "access is not configured",
        )
        .into_response();
    };
    // An agent's request holds its place until its answer is made.
    let mut place = None;
    match permission {
        Permission::AgentJoin => {}
        Permission::AgentPeer => {
            let presented = request
                .headers()
                .get(peers::PEER_HEADER)
                .map(|v| v.as_bytes().to_vec());
            let admitted = match (state.sessions.peers(), presented) {
                (Some(peers), Some(presented)) => peers.admits(&presented),
                _ => false,
            };
            if !admitted {
                tracing::info!(target: ACCESS_LOG, permission = permission.as_str(),
                    path = request.uri().path(), status = 401u16, outcome = "refused", "access");
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "a hub replica's peer secret is required",
                )
                .into_response();
            }
        }
        Permission::Agent => {
            let certificate = request.extensions().get::<ClientCertificate>().cloned();
            let identity = match agent_of(&state, certificate).await {
                Ok(identity) => identity,
                Err(refusal) => {
                    tracing::info!(target: ACCESS_LOG, permission = permission.as_str(),
                        path = request.uri().path(), status = refusal.status.as_u16(),
                        why = %refusal.message, outcome = "refused", "access");
                    return refusal.into_response();
                }
            };
            if let Lasting::Exchange = lasting {
                match state.load.exchange(&identity.cluster) {
                    Ok(taken) => place = Some(taken),
                    Err(limited) => {
                        tracing::info!(target: ACCESS_LOG, permission = permission.as_str(),
                            who = %format!("agent:{}", identity.cluster),
                            path = request.uri().path(), status = 429u16,
                            outcome = "limited", "access");
                        return limited.into_response();
                    }
                }
            }
            request.extensions_mut().insert(identity);
        }
        _ => {
            tracing::error!(
                permission = permission.as_str(),
                "a user permission on an agent route"
            );
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "access is not configured",
            )
            .into_response();
        }
    }
    let response = next.run(request).await;
    drop(place);
    response
}

/// Who the certificate names, when it is current and its cluster is an agent's.
async fn agent_of(
    state: &AgentState,
    certificate: Option<ClientCertificate>,
) -> Result<AgentIdentity, ApiError> {
    let certificate = certificate.ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "an agent certificate from the hub's authority is required",
        )
    })?;
    let identity = AgentIdentity::from_certificate(&certificate.0).map_err(refused)?;
    state.enrollment.check(&identity).await.map_err(refused)?;
    agent_cluster(&state.metastore, identity.cluster.as_ref()).await?;
    Ok(identity)
}

/// `Ok` when `cluster` is registered in agent mode.
async fn agent_cluster(metastore: &Metastore, cluster: &str) -> Result<(), ApiError> {
    match metastore.get::<Cluster>(cluster).await? {
        Some(stored) if stored.record.mode == ClusterMode::Agent => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("cluster {cluster:?} is not registered in agent mode"),
        )),
        None => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("cluster {cluster:?} is not registered"),
        )),
    }
}

/// An identity step's failure as the agent (or the admin issuing its token) reads it; no
/// secret is in any message.
pub(crate) fn refused(e: AgentError) -> ApiError {
    match e {
        AgentError::JoinRefused(_) | AgentError::CertificateRefused(_) => {
            ApiError::new(StatusCode::UNAUTHORIZED, e.to_string())
        }
        // Not a refusal: the agent tries again until an admin approved its key.
        AgentError::AwaitingApproval(_) => ApiError::new(StatusCode::ACCEPTED, e.to_string()),
        AgentError::Malformed(_) => ApiError::bad_request(e.to_string()),
        AgentError::Store(store) => store.into(),
        AgentError::Authority(_) | AgentError::State(_) => {
            tracing::error!(error = %e, "agent identity");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the hub cannot issue agent credentials now",
            )
        }
    }
}

fn certified(issued: karpor_agent::authority::Issued, authority: String) -> Certified {
    Certified {
        certificate: issued.certificate_pem,
        authority,
        not_after: issued.not_after.unix_timestamp(),
    }
}

/// The batch's writes for `cluster`, checked and bounded, before any is applied.
fn checked_batch(batch: WriteBatch, cluster: &str) -> Result<Vec<karpor_syncer::Write>, ApiError> {
    if batch.writes.len() > wire::MAX_WRITES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a batch holds at most {} writes", wire::MAX_WRITES),
        ));
    }
    if batch.documents() > wire::MAX_DOCUMENTS {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a batch holds at most {} documents", wire::MAX_DOCUMENTS),
        ));
    }
    batch
        .writes
        .into_iter()
        .map(|write| write.from_agent(cluster).map_err(ApiError::bad_request))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The join alone takes no certificate; every other route needs an agent's.
    #[test]
    fn each_agent_route_is_registered_with_its_permission() {
        let lines: Vec<(String, Permission)> = agent_endpoints()
            .into_iter()
            .map(|e| (e.line(), e.permission))
            .collect();
        let expected = [
            ("GET", wire::CONTROL, Permission::Agent),
            ("GET", wire::PLAN, Permission::Agent),
            ("POST", wire::JOIN, Permission::AgentJoin),
            ("POST", peers::PEER_CLOSE, Permission::AgentPeer),
            ("POST", peers::PEER_READS, Permission::AgentPeer),
            ("POST", wire::RENEW, Permission::Agent),
            ("POST", wire::REPLY_ROUTE, Permission::Agent),
            ("POST", wire::VERSIONS, Permission::Agent),
            ("POST", wire::WRITES, Permission::Agent),
        ]
        .map(|(method, path, permission)| {
            (format!("{method}\t{}{path}", wire::PREFIX), permission)
        });
        assert_eq!(lines, expected);
    }
}
