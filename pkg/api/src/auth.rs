//! Bearer tokens with two roles, and anonymous access when configured: who a caller is.
//! What the caller may do is each route's declared permission ([`crate::access`]). Tokens are compared as SHA-256 digests in constant time, so neither content nor
//! length leaks through timing; they are never logged.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::envelope::ApiError;
use crate::Role;

/// What the server's config grants beyond a caller's role, put in each request by the
/// API-wide layer: whether writes are refused, and which role reads pod logs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grants {
    pub read_only: bool,
    pub pod_logs: Role,
}

/// Who made a request, put in the request's extensions for handlers and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's configured name, or `anonymous`.
    pub name: String,
    pub role: Role,
    /// No credential was given.
    pub anonymous: bool,
}

/// The configured tokens, resolved.
#[derive(Clone, Default)]
pub struct Authenticator {
    tokens: Vec<(String, Role, [u8; 32])>,
    anonymous: Option<Role>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("tokens", &self.tokens.len())
            .field("anonymous", &self.anonymous)
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Authenticator {
    /// `tokens`: (name, role, token value); `anonymous`: the role without a token.
    pub fn new(tokens: Vec<(String, Role, String)>, anonymous: Option<Role>) -> Self {
        Authenticator {
            tokens: tokens
                .into_iter()
                .map(|(name, role, token)| (name, role, digest(&token)))
                .collect(),
            anonymous,
        }
    }

    /// The principal of a token, or of no token; `None` when refused.
    pub fn authenticate(&self, token: Option<&str>) -> Option<Principal> {
        let Some(token) = token else {
            return self.anonymous.map(|role| Principal {
                name: "anonymous".to_owned(),
                role,
                anonymous: true,
            });
        };
        let presented = digest(token);
        // Every configured token is compared, whichever matches.
        let mut found = None;
        for (name, role, expected) in &self.tokens {
            if bool::from(presented.ct_eq(expected)) {
                found = Some(Principal {
                    name: name.clone(),
                    role: *role,
                    anonymous: false,
                });
            }
        }
        found
    }
}

#[derive(Clone)]
pub(crate) struct Authentication {
    pub auth: Arc<Authenticator>,
    pub grants: Grants,
}

/// Who is calling, as the API-wide layer found it; each route's permission decides what
/// follows ([`crate::access`]).
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    Known(Principal),
    /// No accepted credential, and why.
    Refused(&'static str),
}

/// The bearer token of a request: `Ok(None)` without one. An empty header, or `Bearer`
/// with nothing after it, counts as absent, as in Karpor (its page sends
/// `Authorization: ''` when RBAC is off).
fn bearer(request: &Request) -> Result<Option<&str>, &'static str> {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| "the Authorization header is not text")?
        .trim();
    if value.is_empty() || value.eq_ignore_ascii_case("bearer") {
        return Ok(None);
    }
    match value.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(Some(token.trim()))
        }
        _ => Err("the Authorization header must be `Bearer TOKEN`"),
    }
}

/// A 401 with the `WWW-Authenticate` challenge.
pub(crate) fn challenge(error: ApiError) -> Response {
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Finds the caller and the server's mode for the route's own check; refuses nothing.
pub(crate) async fn authenticate(
    State(authentication): State<Authentication>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match bearer(&request) {
        Err(why) => Caller::Refused(why),
        Ok(token) => match (authentication.auth.authenticate(token), token.is_some()) {
            (Some(principal), _) => Caller::Known(principal),
            (None, true) => Caller::Refused("the token is not accepted"),
            (None, false) => Caller::Refused("a bearer token is required"),
        },
    };
    if let Caller::Known(principal) = &caller {
        tracing::debug!(principal = %principal.name, "authenticated");
    }
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(authentication.grants);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_map_to_their_roles_and_anonymous_only_when_configured() {
        let auth = Authenticator::new(
            vec![
                ("ops".into(), Role::Admin, "admin-secret".into()),
                ("viewer".into(), Role::Guest, "guest-secret".into()),
            ],
            None,
        );
        assert_eq!(
            auth.authenticate(Some("admin-secret")).unwrap().role,
            Role::Admin
        );
        assert_eq!(
            auth.authenticate(Some("guest-secret")).unwrap().name,
            "viewer"
        );
        assert_eq!(auth.authenticate(Some("admin-secre")), None);
        assert_eq!(auth.authenticate(None), None);
        let open = Authenticator::new(Vec::new(), Some(Role::Guest));
        assert_eq!(open.authenticate(None).unwrap().role, Role::Guest);
        assert_eq!(open.authenticate(Some("anything")), None);
    }
}
