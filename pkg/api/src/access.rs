//! Who may call a route is part of the route's registration: [`Routes::route`] takes the
//! [`Permission`] beside the handler's OpenAPI entry and layers that route alone with the
//! check, so a route cannot be registered without one and nothing is decided from the
//! path. The API-wide layer ([`crate::auth::authenticate`]) only says who the caller is.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::PathItem;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::auth::{challenge, Caller, Grants, Principal, Refusal};
use crate::envelope::ApiError;
use crate::{AppState, Role, PREFIX};

/// What a route asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// Anyone, credential or not (the OpenAPI document, the server's configs).
    Public,
    /// Any caller a policy (or a token's role, or anonymous reads) lets in; what it reads
    /// is its scope ([`crate::scope`]). Allowed in read-only mode.
    Read,
    /// The admin role, for what changes nothing karpor stores but reaches out or reveals
    /// more (validating a kubeconfig runs its plugin). Allowed in read-only mode.
    Admin,
    /// The admin role, for what changes stored state. Refused in read-only mode.
    Write,
    /// The editor role, for the shared views (resource group rules). Refused in
    /// read-only mode.
    Edit,
    /// The role `auth.pod_logs` names (admin by default): reading the workloads' own
    /// data. Allowed in read-only mode.
    PodLogs,
    /// The agent listener's join: the body's join token is the credential.
    AgentJoin,
    /// The agent listener's other routes: a current agent certificate, whose cluster is
    /// the only one the route acts on.
    Agent,
    /// Another hub replica (forwarded live reads, closing a revoked session): the secret
    /// derived from the agents' authority, which only replicas hold.
    AgentPeer,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Public => "public",
            Permission::Read => "read",
            Permission::Admin => "admin",
            Permission::Write => "write",
            Permission::Edit => "edit",
            Permission::PodLogs => "pod-logs",
            Permission::AgentJoin => "agent-join",
            Permission::Agent => "agent",
            Permission::AgentPeer => "agent-peer",
        }
    }

    /// Whether each use is a line of the access log: writes, admin actions and pod logs.
    pub fn audited(self) -> bool {
        matches!(
            self,
            Permission::Write | Permission::Edit | Permission::Admin | Permission::PodLogs
        )
    }

    pub fn allowed_when_read_only(self) -> bool {
        !matches!(self, Permission::Write | Permission::Edit)
    }

    /// The role a caller needs.
    fn role(self, grants: Grants) -> Role {
        match self {
            Permission::Public | Permission::Read => Role::Viewer,
            Permission::Edit => Role::Editor,
            Permission::Admin
            | Permission::Write
            | Permission::AgentJoin
            | Permission::Agent
            | Permission::AgentPeer => Role::Admin,
            Permission::PodLogs => grants.pod_logs,
        }
    }

    /// The refusal for `caller`, or `None` when it may go on.
    fn refusal(self, caller: &Caller, grants: Grants) -> Option<Response> {
        match self {
            Permission::Public => return None,
            // Users never hold them: they are checked on the agent listener alone.
            Permission::AgentJoin | Permission::Agent | Permission::AgentPeer => {
                let why = "this is an agent's route, served on the agent listener";
                return Some(ApiError::new(StatusCode::FORBIDDEN, why).into_response());
            }
            _ => {}
        }
        let principal = match caller {
            Caller::Refused(Refusal::Unauthenticated(why)) => {
                return Some(challenge(unauthorized(why)))
            }
            Caller::Refused(Refusal::Ungranted(user)) => {
                let why = format!("no policy grants {user:?} access (auth.policies)");
                return Some(ApiError::new(StatusCode::FORBIDDEN, why).into_response());
            }
            Caller::Known(principal) => principal,
        };
        if grants.read_only && !self.allowed_when_read_only() {
            let message = "the server is read-only (server.read_only): writes are refused";
            return Some(ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message).into_response());
        }
        let needed = self.role(grants);
        if principal.role >= needed {
            return None;
        }
        let role = needed.as_str();
        let why = match self {
            Permission::PodLogs => {
                format!("reading pod logs needs the {role} role (auth.pod_logs)")
            }
            _ => format!("this needs the {role} role"),
        };
        if principal.anonymous {
            // Anonymous callers are asked for a credential rather than told no.
            return Some(challenge(unauthorized(&format!(
                "{why}: send a token (Authorization: Bearer TOKEN)"
            ))));
        }
        Some(ApiError::new(StatusCode::FORBIDDEN, why).into_response())
    }
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, message)
}

/// One route karpor serves and what it asks of its caller.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub method: Method,
    /// As `/endpoints` prints it (`{name}` for a parameter).
    pub path: String,
    pub permission: Permission,
}

impl Endpoint {
    pub fn new(method: Method, path: impl Into<String>, permission: Permission) -> Self {
        Endpoint {
            method,
            path: path.into(),
            permission,
        }
    }

    /// `METHOD\tPATH`, Karpor's `/endpoints` line.
    pub fn line(&self) -> String {
        format!("{}\t{}", self.method, self.path)
    }
}

/// The API's routes, each registered with its permission.
pub(crate) struct Routes {
    router: OpenApiRouter<AppState>,
    endpoints: Vec<Endpoint>,
}

impl Routes {
    pub(crate) fn new() -> Self {
        Routes {
            router: OpenApiRouter::new(),
            endpoints: Vec::new(),
        }
    }

    /// One handler (`routes!(handler)`: one path, one method), callable with `permission`.
    pub(crate) fn route(
        mut self,
        permission: Permission,
        (schemas, paths, method_router): UtoipaMethodRouter<AppState>,
    ) -> Self {
        for (path, item) in &paths.paths {
            for method in methods(item) {
                let path = format!("{PREFIX}{path}");
                self.endpoints.push(Endpoint::new(method, path, permission));
            }
        }
        let method_router =
            method_router.route_layer(axum::middleware::from_fn_with_state(permission, authorize));
        self.router = self.router.routes((schemas, paths, method_router));
        self
    }

    pub(crate) fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.endpoints.extend(other.endpoints);
        self
    }

    pub(crate) fn into_parts(self) -> (OpenApiRouter<AppState>, Vec<Endpoint>) {
        (self.router, self.endpoints)
    }
}

/// A route outside the API's document (the MCP endpoint) under `endpoint`'s permission,
/// checked as every route's is.
pub(crate) fn outside<S: Clone + Send + Sync + 'static>(
    router: axum::Router<S>,
    endpoint: &Endpoint,
) -> axum::Router<S> {
    router.route_layer(axum::middleware::from_fn_with_state(
        endpoint.permission,
        authorize,
    ))
}

/// The methods a documented path item has operations for.
fn methods(item: &PathItem) -> Vec<Method> {
    [
        (&item.get, Method::GET),
        (&item.put, Method::PUT),
        (&item.post, Method::POST),
        (&item.delete, Method::DELETE),
        (&item.options, Method::OPTIONS),
        (&item.head, Method::HEAD),
        (&item.patch, Method::PATCH),
        (&item.trace, Method::TRACE),
    ]
    .into_iter()
    .filter(|(operation, _)| operation.is_some())
    .map(|(_, method)| method)
    .collect()
}

/// The per-route check. A request that reached a route without passing the API-wide
/// layer (a wiring mistake) is refused, never let through.
async fn authorize(
    State(permission): State<Permission>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions_mut().remove::<Caller>();
    let grants = request.extensions().get::<Grants>().copied();
    let (Some(caller), Some(grants)) = (caller, grants) else {
        tracing::error!("a route was reached without the authentication layer");
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "access is not configured",
        )
        .into_response();
    };
    let audited = permission.audited().then(|| Access {
        who: caller.name().to_owned(),
        permission,
        method: request.method().clone(),
        uri: request.uri().clone(),
    });
    if let Some(refusal) = permission.refusal(&caller, grants) {
        if let Some(access) = audited {
            access.record("refused", refusal.status());
        }
        return refusal;
    }
    if let Caller::Known(principal) = caller {
        // What the caller may see, for `scope::Visible`, apart from who it is.
        request.extensions_mut().insert(principal.scope.clone());
        request.extensions_mut().insert::<Principal>(principal);
    }
    let response = next.run(request).await;
    if let Some(access) = audited {
        access.record("allowed", response.status());
    }
    response
}

/// Where every write and every sensitive read is recorded, one line each, apart from the
/// diagnostic log (a subscriber can route this target elsewhere).
pub(crate) const ACCESS_LOG: &str = "karpor::access";

/// One request to a route whose use is recorded: who, what, on which object (the path
/// and query name it).
struct Access {
    who: String,
    permission: Permission,
    method: Method,
    uri: axum::http::Uri,
}

impl Access {
    fn record(&self, outcome: &str, status: StatusCode) {
        tracing::info!(target: ACCESS_LOG, who = %self.who, permission = self.permission.as_str(),
            method = %self.method, path = self.uri.path(), query = self.uri.query().unwrap_or(""),
            outcome, status = status.as_u16(), "access");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(role: Role, anonymous: bool) -> Caller {
        Caller::Known(Principal {
            name: "x".into(),
            groups: Vec::new(),
            role,
            anonymous,
            scope: std::sync::Arc::new(crate::scope::Scope::everything(role)),
            policies: Vec::new(),
        })
    }

    fn status(permission: Permission, caller: &Caller, read_only: bool) -> u16 {
        let grants = Grants {
            read_only,
            pod_logs: Role::Admin,
        };
        permission
            .refusal(caller, grants)
            .map_or(200, |r| r.status().as_u16())
    }

    #[test]
    fn each_permission_against_each_caller() {
        let refused = Caller::Refused(Refusal::Unauthenticated("a bearer token is required"));
        let anonymous = known(Role::Viewer, true);
        let guest = known(Role::Viewer, false);
        let admin = known(Role::Admin, false);
        use Permission::*;
        for (permission, read_only, expected) in [
            (Public, false, [200, 200, 200, 200]),
            (Public, true, [200, 200, 200, 200]),
            (Read, false, [401, 200, 200, 200]),
            (Read, true, [401, 200, 200, 200]),
            (Admin, false, [401, 401, 403, 200]),
            (Admin, true, [401, 401, 403, 200]),
            (Write, false, [401, 401, 403, 200]),
            (Write, true, [401, 405, 405, 405]),
            (Edit, false, [401, 401, 403, 200]),
            (Edit, true, [401, 405, 405, 405]),
            (PodLogs, false, [401, 401, 403, 200]),
            (PodLogs, true, [401, 401, 403, 200]),
        ] {
            let got = [&refused, &anonymous, &guest, &admin]
                .map(|caller| status(permission, caller, read_only));
            assert_eq!(got, expected, "{permission:?} read_only={read_only}");
        }
        // Granted to guests by config: anyone who may read.
        let grants = Grants {
            read_only: false,
            pod_logs: Role::Viewer,
        };
        let got = [&refused, &anonymous, &guest, &admin].map(|caller| {
            PodLogs
                .refusal(caller, grants)
                .map_or(200, |r| r.status().as_u16())
        });
        assert_eq!(got, [401, 200, 200, 200]);
        // An editor edits, and nothing more; a caller no policy names is refused.
        let editor = known(Role::Editor, false);
        let grants = Grants {
            read_only: false,
            pod_logs: Role::Admin,
        };
        let got = [Read, Edit, Write, Admin, PodLogs].map(|p| {
            p.refusal(&editor, grants)
                .map_or(200, |r| r.status().as_u16())
        });
        assert_eq!(got, [200, 200, 403, 403, 403]);
        let ungranted = Caller::Refused(Refusal::Ungranted("ann".into()));
        assert_eq!(status(Read, &ungranted, false), 403);
        assert_eq!(status(Public, &ungranted, false), 200);
    }
}
