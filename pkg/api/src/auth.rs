//! Who a caller is: a static token (`auth.tokens`), a Kubernetes token checked by a
//! TokenReview ([`crate::token_review`]), or no credential; then what it may do, from its
//! token's own role and the policies naming it ([`crate::policy`]). What each route asks
//! is its declared permission ([`crate::access`]). Static tokens are compared as SHA-256
//! digests in constant time, so neither content nor length leaks through timing; no
//! token is ever logged.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::envelope::ApiError;
use crate::oidc::OidcVerifier;
use crate::policy::{Identity, Policies};
use crate::scope::Scope;
use crate::token_review::TokenReviewer;
use crate::Role;

/// What the server's config grants beyond a caller's role, put in each request by the
/// API-wide layer: whether writes are refused, and which role reads pod logs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grants {
    pub read_only: bool,
    pub pod_logs: Role,
}

/// Who made a request and what it may do, put in the request's extensions for handlers
/// and logs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Principal {
    /// The token's configured name, the identity provider's user, or `anonymous`.
    pub name: String,
    pub groups: Vec<String>,
    /// The highest role its grants give.
    pub role: Role,
    /// No credential was given.
    pub anonymous: bool,
    pub scope: Arc<Scope>,
    /// The policies that let it in.
    pub policies: Vec<String>,
}

/// A static token: its name, its own role (if any), its digest.
#[derive(Clone)]
struct StaticToken {
    name: String,
    role: Option<Role>,
    digest: [u8; 32],
}

/// The configured ways in, resolved.
#[derive(Clone, Default)]
pub struct Authenticator {
    tokens: Vec<StaticToken>,
    anonymous: Option<Role>,
    policies: Policies,
    oidc: Option<OidcVerifier>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("tokens", &self.tokens.len())
            .field("anonymous", &self.anonymous)
            .field("oidc", &self.oidc.is_some())
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Why a caller was not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No accepted credential (a 401), and what to tell the caller.
    Unauthenticated(&'static str),
    /// Known, but no policy grants it anything (a 403).
    Ungranted(String),
}

impl Authenticator {
    /// `tokens`: (name, its own role, token value); `anonymous`: the role without a
    /// token, everywhere.
    pub fn new(tokens: Vec<(String, Option<Role>, String)>, anonymous: Option<Role>) -> Self {
        Authenticator {
            tokens: tokens
                .into_iter()
                .map(|(name, role, token)| StaticToken {
                    name,
                    role,
                    digest: digest(&token),
                })
                .collect(),
            anonymous,
            policies: Policies::default(),
            oidc: None,
        }
    }

    /// OIDC ID tokens from one issuer (`auth.oidc`).
    pub fn with_oidc(mut self, verifier: OidcVerifier) -> Self {
        self.oidc = Some(verifier);
        self
    }

    /// Who else gets what, and where (`auth.policies`).
    pub fn with_policies(mut self, policies: Policies) -> Self {
        self.policies = policies;
        self
    }

    /// Stored policies join the configured ones.
    pub(crate) fn with_stored(mut self, stored: crate::policy::StoredPolicies) -> Self {
        self.policies = self.policies.with_stored(stored);
        self
    }

    /// Whether any policy exists (then callers see only their scope's cluster checks).
    pub(crate) fn has_policies(&self) -> bool {
        self.policies.any()
    }

    /// The config file's policies.
    pub(crate) fn configured_policies(&self) -> &[karpor_core::access::AccessPolicy] {
        self.policies.configured()
    }

    /// The static token presented, if it is one.
    fn static_token(&self, token: &str) -> Option<&StaticToken> {
        let presented = digest(token);
        // Every configured token is compared, whichever matches.
        let mut found = None;
        for candidate in &self.tokens {
            if bool::from(presented.ct_eq(&candidate.digest)) {
                found = Some(candidate);
            }
        }
        found
    }

    /// What `who` may do, with the role it has outside policies.
    fn grant(&self, who: Identity, implicit: Option<Role>) -> Result<Principal, Refusal> {
        let Some(access) = self.policies.resolve(&who, implicit) else {
            return Err(if who.anonymous {
                Refusal::Unauthenticated("a bearer token is required")
            } else {
                Refusal::Ungranted(who.user)
            });
        };
        Ok(Principal {
            name: who.user,
            groups: who.groups,
            role: access.role,
            anonymous: who.anonymous,
            scope: Arc::new(access.scope),
            policies: access.policies,
        })
    }

    /// The principal of a static token or of no token; `Ok(None)` for a token that is
    /// not a static one (another authenticator may know it).
    pub(crate) fn known(&self, token: Option<&str>) -> Result<Option<Principal>, Refusal> {
        let Some(token) = token else {
            let who = Identity {
                user: "anonymous".to_owned(),
                groups: Vec::new(),
                token: None,
                anonymous: true,
            };
            return self.grant(who, self.anonymous).map(Some);
        };
        let Some(found) = self.static_token(token) else {
            return Ok(None);
        };
        let who = Identity {
            user: found.name.clone(),
            groups: Vec::new(),
            token: Some(found.name.clone()),
            anonymous: false,
        };
        self.grant(who, found.role).map(Some)
    }

    /// The principal of an identity another authenticator vouched for.
    pub(crate) fn vouched(&self, who: Identity) -> Result<Principal, Refusal> {
        self.grant(who, None)
    }
}

#[derive(Clone)]
pub(crate) struct Authentication {
    pub auth: Arc<Authenticator>,
    pub token_review: Option<Arc<TokenReviewer>>,
    pub grants: Grants,
}

/// Who is calling, as the API-wide layer found it; each route's permission decides what
/// follows ([`crate::access`]).
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    Known(Principal),
    Refused(Refusal),
}

impl Caller {
    /// For the access log.
    pub(crate) fn name(&self) -> &str {
        match self {
            Caller::Known(principal) => &principal.name,
            Caller::Refused(Refusal::Ungranted(user)) => user,
            Caller::Refused(Refusal::Unauthenticated(_)) => "unknown",
        }
    }
}

/// The bearer token of a request: `Ok(None)` without one. An empty header, or `Bearer`
/// with nothing after it, counts as absent, as in Karpor (its page sends
/// `Authorization: ''` when RBAC is off).
pub(crate) fn bearer(headers: &HeaderMap) -> Result<Option<&str>, &'static str> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
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

impl Authentication {
    /// Who `token` (or its absence) is.
    async fn caller(&self, token: Option<&str>) -> Caller {
        match self.auth.known(token) {
            Ok(Some(principal)) => return Caller::Known(principal),
            Err(refusal) => return Caller::Refused(refusal),
            Ok(None) => {}
        }
        let not_accepted = Caller::Refused(Refusal::Unauthenticated("the token is not accepted"));
        let Some(token) = token else {
            return not_accepted;
        };
        // An ID token of the configured issuer is that issuer's to vouch for, and no
        // one else's.
        if let Some(oidc) = self.auth.oidc.as_ref().filter(|o| o.claims_issuer(token)) {
            return match oidc.verify(token).await {
                Ok(who) => self.vouched(Identity {
                    user: who.user,
                    groups: who.groups,
                    token: None,
                    anonymous: false,
                }),
                Err(why) => {
                    tracing::info!(reason = %why, "an OIDC token was refused");
                    not_accepted
                }
            };
        }
        let Some(reviewer) = &self.token_review else {
            return not_accepted;
        };
        match reviewer.review(token).await {
            Ok(who) => self.vouched(who),
            Err(why) => {
                tracing::info!(reason = %why, "a Kubernetes token was refused");
                not_accepted
            }
        }
    }

    fn vouched(&self, who: Identity) -> Caller {
        match self.auth.vouched(who) {
            Ok(principal) => Caller::Known(principal),
            Err(refusal) => Caller::Refused(refusal),
        }
    }
}

/// Finds the caller and the server's mode for the route's own check; refuses nothing.
pub(crate) async fn authenticate(
    State(authentication): State<Authentication>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match bearer(request.headers()) {
        Err(why) => Caller::Refused(Refusal::Unauthenticated(why)),
        Ok(token) => authentication.caller(token).await,
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
                ("ops".into(), Some(Role::Admin), "admin-secret".into()),
                ("viewer".into(), Some(Role::Viewer), "guest-secret".into()),
                ("bare".into(), None, "bare-secret".into()),
            ],
            None,
        );
        let known = |token| auth.known(token);
        assert_eq!(
            known(Some("admin-secret")).unwrap().unwrap().role,
            Role::Admin
        );
        assert_eq!(known(Some("guest-secret")).unwrap().unwrap().name, "viewer");
        assert_eq!(known(Some("admin-secre")), Ok(None));
        assert_eq!(
            known(Some("bare-secret")),
            Err(Refusal::Ungranted("bare".into()))
        );
        assert!(matches!(known(None), Err(Refusal::Unauthenticated(_))));
        let open = Authenticator::new(Vec::new(), Some(Role::Viewer));
        let anonymous = open.known(None).unwrap().unwrap();
        assert!(anonymous.anonymous && anonymous.scope.is_everything());
        assert_eq!(open.known(Some("anything")), Ok(None));
    }
}
