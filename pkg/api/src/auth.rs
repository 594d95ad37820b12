//! Bearer tokens with two roles, anonymous access when configured, and the read-only mode.
//! Any method but GET (and HEAD) is a write: it needs a token with the `admin` role (an
//! anonymous caller never writes) and is refused in read-only mode. Tokens are compared as SHA-256 digests in constant time, so neither content nor
//! length leaks through timing; they are never logged.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::envelope::ApiError;
use crate::Role;

/// Who made a request, put in the request's extensions for handlers and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's configured name, or `anonymous`.
    pub name: String,
    pub role: Role,
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
                });
            }
        }
        found
    }
}

#[derive(Clone)]
pub(crate) struct Guard {
    pub auth: Arc<Authenticator>,
    pub read_only: bool,
}

/// The bearer token of a request: `Ok(None)` without one. An empty header, or `Bearer`
/// with nothing after it, counts as absent, as in Karpor (its page sends
/// `Authorization: ''` when RBAC is off).
fn bearer(request: &Request) -> Result<Option<&str>, ApiError> {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| unauthorized("the Authorization header is not text"))?
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
        _ => Err(unauthorized(
            "the Authorization header must be `Bearer TOKEN`",
        )),
    }
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, message)
}

fn challenge(error: ApiError) -> Response {
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// 401 without an accepted token, 405 for a write in read-only mode, 403 for a write by a
/// guest.
pub(crate) async fn guard(
    State(guard): State<Guard>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = match bearer(&request) {
        Ok(token) => token,
        Err(e) => return challenge(e),
    };
    let had_token = token.is_some();
    let Some(principal) = guard.auth.authenticate(token) else {
        return challenge(unauthorized(if had_token {
            "the token is not accepted"
        } else {
            "a bearer token is required"
        }));
    };
    // The AI streams are POSTs that change nothing.
    let write = !matches!(*request.method(), Method::GET | Method::HEAD)
        && !request.uri().path().ends_with(crate::ai::STREAM_SUFFIX);
    if write && guard.read_only {
        return ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "the server is read-only (server.read_only): writes are refused",
        )
        .into_response();
    }
    if write && principal.role < Role::Admin {
        if !had_token {
            // Anonymous callers never write: they are asked for a credential.
            return challenge(unauthorized(
                "writes need a token with the admin role (Authorization: Bearer TOKEN)",
            ));
        }
        return ApiError::new(StatusCode::FORBIDDEN, "writes need the admin role").into_response();
    }
    tracing::debug!(principal = %principal.name, "authenticated");
    request.extensions_mut().insert(principal);
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
