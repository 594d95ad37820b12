//! OIDC ID tokens: `auth.oidc`, and a verifier that accepts a token only when the
//! configured issuer's current keys signed it, for one of our audiences, within its
//! lifetime. The issuer's discovery document and key set are fetched on first use, not at
//! start (a dead issuer must never stop karpor starting), then kept and re-read every
//! `keys_refresh`, or sooner when a token names a key not seen yet: at most once per
//! [`MIN_REFETCH`], one fetch at a time, each bounded in time and size. A failed refresh
//! keeps the last good keys.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use karpor_config::ConfigIssue;
use karpor_core::trusted::{self, Trusted};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Larger tokens are refused before anything is decoded.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The most read of a discovery document or a key set.
const MAX_DOCUMENT_BYTES: usize = 512 * 1024;
/// The longest a refresh (discovery document and key set) may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Tokens naming unknown keys cannot make karpor ask the issuer more often than this.
const MIN_REFETCH: Duration = Duration::from_secs(10);
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);
/// Asymmetric only: with a symmetric one, the issuer's public key would be the secret.
const ACCEPTED_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];
const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";

fn key(field: &str) -> String {
    format!("auth.oidc.{field}")
}

/// `auth.oidc` in the config file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// An https URL; must equal the discovery document's `issuer` and the tokens' `iss`
    /// exactly.
    pub issuer: String,
    /// The client ids: a token's `aud` must hold one of them.
    pub audiences: Vec<String>,
    #[serde(default = "default_username_claim")]
    pub username_claim: String,
    /// Prepended to the user (`oidc:`), so an issuer's users cannot pass for others.
    #[serde(default)]
    pub username_prefix: String,
    /// A string or an array of strings; absent, the user has no groups.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    #[serde(default)]
    pub groups_prefix: String,
    /// A PEM bundle trusted for the issuer, besides the webpki roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The JWS algorithms accepted.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// How far the issuer's clock may be from ours.
    #[serde(default = "default_clock_skew", with = "humantime_serde")]
    pub clock_skew: Duration,
    /// The issuer's keys are re-read at least this often.
    #[serde(default = "default_keys_refresh", with = "humantime_serde")]
    pub keys_refresh: Duration,
}

fn default_username_claim() -> String {
    "sub".to_owned()
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".to_owned(), "ES256".to_owned()]
}

fn default_clock_skew() -> Duration {
    Duration::from_secs(30)
}

fn default_keys_refresh() -> Duration {
    Duration::from_secs(3600)
}

impl OidcConfig {
    /// An issuer and its audiences, everything else the defaults.
    pub fn new(issuer: impl Into<String>, audiences: Vec<String>) -> Self {
        OidcConfig {
            issuer: issuer.into(),
            audiences,
            username_claim: default_username_claim(),
            username_prefix: String::new(),
            groups_claim: default_groups_claim(),
            groups_prefix: String::new(),
            ca_file: None,
            algorithms: default_algorithms(),
            clock_skew: default_clock_skew(),
            keys_refresh: default_keys_refresh(),
        }
    }

    /// For what types cannot say; `ca_file` is checked on disk.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        check_issuer(&self.issuer).map_err(|problem| ConfigIssue::new(key("issuer"), problem))?;
        if self.audiences.is_empty() {
            return Err(ConfigIssue::new(
                key("audiences"),
                "must name at least one audience (the client id)",
            ));
        }
        for (i, audience) in self.audiences.iter().enumerate() {
            if audience.trim().is_empty() {
                return Err(ConfigIssue::new(
                    key(&format!("audiences[{i}]")),
                    "must not be empty",
                ));
            }
        }
        for (field, claim) in [
            ("username_claim", &self.username_claim),
            ("groups_claim", &self.groups_claim),
        ] {
            if claim.trim().is_empty() {
                return Err(ConfigIssue::new(key(field), "must not be empty"));
            }
        }
        if let Some(path) = &self.ca_file {
            check_ca_file(path).map_err(|problem| ConfigIssue::new(key("ca_file"), problem))?;
        }
        algorithms(&self.algorithms)
            .map_err(|problem| ConfigIssue::new(key("algorithms"), problem))?;
        if self.clock_skew > MAX_CLOCK_SKEW {
            return Err(ConfigIssue::new(
                key("clock_skew"),
                "must be at most 5m: a longer one keeps expired tokens alive",
            ));
        }
        if self.keys_refresh < MIN_REFETCH {
            return Err(ConfigIssue::new(
                key("keys_refresh"),
                format!("must be at least {}s", MIN_REFETCH.as_secs()),
            ));
        }
        Ok(())
    }
}

/// An https URL with a host and neither credentials, query nor fragment (OIDC Discovery
/// §3: the issuer identifier).
fn check_issuer(issuer: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(issuer).map_err(|e| format!("not a URL: {e}"))?;
    if url.scheme() != "https" {
        return Err("must be an https URL".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must have no query or fragment".into());
    }
    Ok(())
}

fn check_ca_file(path: &Path) -> Result<(), String> {
    if !path.is_file() {
        return Err(format!("{} is not a readable file", path.display()));
    }
    // Whoever could rewrite it could make karpor trust their own issuer.
    trusted::check(
        path,
        Trusted::File,
        "OIDC CA file",
        &trusted::User::current(),
    )
}

/// The configured algorithms, each an asymmetric one.
fn algorithms(names: &[String]) -> Result<Vec<Algorithm>, String> {
    if names.is_empty() {
        return Err("must name at least one algorithm".into());
    }
    names
        .iter()
        .map(|name| {
            if name.eq_ignore_ascii_case("none") || name.to_ascii_uppercase().starts_with("HS") {
                return Err(format!(
                    "`{name}` is refused: only signatures by the issuer's public keys are accepted"
                ));
            }
            if !ACCEPTED_ALGORITHMS.contains(&name.as_str()) {
                return Err(format!(
                    "`{name}` is not supported (one of {})",
                    ACCEPTED_ALGORITHMS.join(", ")
                ));
            }
            Algorithm::from_str(name).map_err(|e| format!("`{name}`: {e}"))
        })
        .collect()
}

/// Who a verified token says the caller is, prefixes applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcIdentity {
    pub user: String,
    pub groups: Vec<String>,
}

/// Why a token was refused, or could not be checked: for the log. Never holds the token.
#[derive(Debug)]
pub struct OidcError {
    reason: String,
    unavailable: bool,
}

impl OidcError {
    fn refused(reason: impl Into<String>) -> Self {
        OidcError {
            reason: reason.into(),
            unavailable: false,
        }
    }

    fn unavailable(why: impl std::fmt::Display) -> Self {
        OidcError {
            reason: format!("issuer's keys unavailable: {why}"),
            unavailable: true,
        }
    }

    /// The issuer's keys could not be had: not the token's fault (a caller may answer
    /// 503 rather than 401).
    pub fn is_unavailable(&self) -> bool {
        self.unavailable
    }
}

impl std::fmt::Display for OidcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for OidcError {}

/// From verified claims to an identity: which claims, which prefixes.
#[derive(Debug, Clone)]
struct ClaimMapping {
    username_claim: String,
    username_prefix: String,
    groups_claim: String,
    groups_prefix: String,
}

impl ClaimMapping {
    fn identity(&self, claims: &Map<String, Value>) -> Result<OidcIdentity, OidcError> {
        let claim = &self.username_claim;
        let user = match claims.get(claim) {
            Some(Value::String(user)) if !user.is_empty() => user,
            Some(Value::String(_)) => {
                return Err(OidcError::refused(format!("claim `{claim}` is empty")))
            }
            Some(_) => {
                return Err(OidcError::refused(format!(
                    "claim `{claim}` is not a string"
                )))
            }
            None => return Err(OidcError::refused(format!("claim `{claim}` missing"))),
        };
        // As Kubernetes does: an address the issuer says it has not verified names no one.
        if claim == "email" && claims.get("email_verified") == Some(&Value::Bool(false)) {
            return Err(OidcError::refused("email not verified (`email_verified`)"));
        }
        let claim = &self.groups_claim;
        let names: Vec<&str> = match claims.get(claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(group)) => vec![group.as_str()],
            Some(Value::Array(groups)) => groups
                .iter()
                .map(Value::as_str)
                .collect::<Option<_>>()
                .ok_or_else(|| {
                OidcError::refused(format!(
                    "claim `{claim}` holds a value that is not a string"
                ))
            })?,
            Some(_) => {
                return Err(OidcError::refused(format!(
                    "claim `{claim}` is neither a string nor an array of strings"
                )))
            }
        };
        Ok(OidcIdentity {
            user: format!("{}{user}", self.username_prefix),
            groups: names
                .into_iter()
                .filter(|group| !group.is_empty())
                .map(|group| format!("{}{group}", self.groups_prefix))
                .collect(),
        })
    }
}

/// A compact JWS, split but not checked.
struct Parts<'a> {
    header: &'a str,
    payload: &'a str,
}

/// The header fields read before a key is chosen.
#[derive(Deserialize)]
struct JoseHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<Value>,
}

fn decode_part<T: DeserializeOwned>(part: &str, what: &str) -> Result<T, OidcError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| OidcError::refused(format!("malformed token: the {what} is not base64url")))?;
    serde_json::from_slice(&bytes).map_err(|_| {
        OidcError::refused(format!("malformed token: the {what} is not a JSON object"))
    })
}

impl<'a> Parts<'a> {
    fn split(token: &'a str) -> Result<Self, OidcError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(OidcError::refused(format!(
                "token larger than {} KiB",
                MAX_TOKEN_BYTES / 1024
            )));
        }
        let mut parts = token.split('.');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(header), Some(payload), Some(_signature), None) => Ok(Parts { header, payload }),
            _ => Err(OidcError::refused("not a JWT (three dot-separated parts)")),
        }
    }

    fn header(&self) -> Result<JoseHeader, OidcError> {
        decode_part(self.header, "header")
    }

    /// The claims, not yet verified.
    fn claims(&self) -> Result<Map<String, Value>, OidcError> {
        decode_part(self.payload, "payload")
    }
}

/// Which algorithms a key may verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Rsa,
    P256,
    P384,
    Ed25519,
}

/// One of the issuer's signing keys.
#[derive(Debug)]
struct Key {
    kid: Option<String>,
    kind: KeyKind,
    /// The JWK's own `alg`, when it names one.
    alg: Option<Algorithm>,
    key: DecodingKey,
}

impl Key {
    /// A key karpor can verify with; `None` for encryption keys, symmetric keys (never
    /// trusted from a key set) and kinds jsonwebtoken cannot check.
    fn from_jwk(jwk: &Jwk) -> Option<Key> {
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| *u != PublicKeyUse::Signature)
        {
            return None;
        }
        let kind = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => KeyKind::Rsa,
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => KeyKind::P256,
                EllipticCurve::P384 => KeyKind::P384,
                _ => return None,
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                KeyKind::Ed25519
            }
            _ => return None,
        };
        // A key meant for an algorithm karpor does not know is of no use to it.
        let alg = match jwk.common.key_algorithm {
            Some(alg) => Some(Algorithm::from_str(&alg.to_string()).ok()?),
            None => None,
        };
        Some(Key {
            kid: jwk.common.key_id.clone(),
            kind,
            alg,
            key: DecodingKey::from_jwk(jwk).ok()?,
        })
    }

    fn fits(&self, alg: Algorithm) -> bool {
        let kind = match self.kind {
            KeyKind::Rsa => alg.family() == AlgorithmFamily::Rsa,
            KeyKind::P256 => alg == Algorithm::ES256,
            KeyKind::P384 => alg == Algorithm::ES384,
            KeyKind::Ed25519 => alg == Algorithm::EdDSA,
        };
        kind && self.alg.is_none_or(|own| own == alg)
    }
}

/// The issuer's keys as last fetched.
#[derive(Debug)]
struct KeySet {
    keys: Vec<Key>,
    fetched: Instant,
}

impl KeySet {
    fn knows(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }
}

/// The last fetch, for its rate limit and to say why keys are missing.
#[derive(Default)]
struct Attempt {
    at: Option<Instant>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

/// Keys parsed one by one, so one odd key does not hide the others.
#[derive(Deserialize)]
struct RawKeySet {
    keys: Vec<Value>,
}

struct Inner {
    issuer: String,
    audiences: Vec<String>,
    algorithms: Vec<Algorithm>,
    clock_skew: Duration,
    keys_refresh: Duration,
    mapping: ClaimMapping,
    client: reqwest::Client,
    keys: RwLock<Option<Arc<KeySet>>>,
    /// Held for the whole of a fetch: the single flight (a tokio lock, awaited).
    attempt: tokio::sync::Mutex<Attempt>,
}

/// Verifies ID tokens of one issuer. Cheap to clone: clones share the keys.
#[derive(Clone)]
pub struct OidcVerifier {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OidcVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = self.current().map(|set| set.keys.len());
        f.debug_struct("OidcVerifier")
            .field("issuer", &self.inner.issuer)
            .field("audiences", &self.inner.audiences)
            .field("keys", &keys)
            .finish()
    }
}

/// An error with its causes, which reqwest keeps apart (`connection refused` is a
/// source of a source).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl OidcVerifier {
    /// Checks the config and builds the HTTP client (reading `ca_file`, so call it at
    /// start, not per request). Fetches nothing.
    pub fn new(config: &OidcConfig) -> Result<Self, OidcError> {
        config
            .validate()
            .map_err(|issue| OidcError::refused(format!("config: {issue}")))?;
        let algorithms = algorithms(&config.algorithms).map_err(OidcError::refused)?;
        let mut client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .https_only(true)
            .connect_timeout(FETCH_TIMEOUT)
            .timeout(FETCH_TIMEOUT);
        if let Some(path) = &config.ca_file {
            let shown = path.display();
            let pem = std::fs::read(path)
                .map_err(|e| OidcError::refused(format!("OIDC CA file {shown}: {e}")))?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| OidcError::refused(format!("OIDC CA file {shown}: {}", chain(&e))))?;
            if certificates.is_empty() {
                return Err(OidcError::refused(format!(
                    "OIDC CA file {shown} holds no certificate"
                )));
            }
            for certificate in certificates {
                client = client.add_root_certificate(certificate);
            }
        }
        let client = client
            .build()
            .map_err(|e| OidcError::refused(format!("HTTP client: {}", chain(&e))))?;
        Ok(OidcVerifier {
            inner: Arc::new(Inner {
                issuer: config.issuer.clone(),
                audiences: config.audiences.clone(),
                algorithms,
                clock_skew: config.clock_skew,
                keys_refresh: config.keys_refresh,
                mapping: ClaimMapping {
                    username_claim: config.username_claim.clone(),
                    username_prefix: config.username_prefix.clone(),
                    groups_claim: config.groups_claim.clone(),
                    groups_prefix: config.groups_prefix.clone(),
                },
                client,
                keys: RwLock::new(None),
                attempt: tokio::sync::Mutex::new(Attempt::default()),
            }),
        })
    }

    /// Whether `token` is a JWT whose `iss` (unverified) is this issuer, so the caller
    /// sends it here rather than to another authenticator. No network.
    pub fn claims_issuer(&self, token: &str) -> bool {
        Parts::split(token)
            .and_then(|parts| parts.claims())
            .is_ok_and(|claims| {
                claims.get("iss").and_then(Value::as_str) == Some(self.inner.issuer.as_str())
            })
    }

    /// The identity of a token this issuer signed for one of our audiences and that is
    /// within its lifetime.
    pub async fn verify(&self, token: &str) -> Result<OidcIdentity, OidcError> {
        let parts = Parts::split(token)?;
        let header = parts.header()?;
        let alg = self.algorithm(&header.alg)?;
        if header.crit.is_some() {
            return Err(OidcError::refused(
                "critical header extensions (`crit`) are not supported",
            ));
        }
        // Checked again once verified; first so that a foreign token costs no fetch.
        let unverified = parts.claims()?;
        if unverified.get("iss").and_then(Value::as_str) != Some(self.inner.issuer.as_str()) {
            return Err(OidcError::refused("issuer not accepted"));
        }
        let keys = self.keys_for(header.kid.as_deref()).await?;
        let candidates: Vec<&Key> = keys
            .keys
            .iter()
            .filter(|k| header.kid.is_none() || k.kid == header.kid)
            .collect();
        if candidates.is_empty() {
            let kid = header.kid.unwrap_or_default();
            return Err(OidcError::refused(format!("unknown signing key `{kid}`")));
        }
        let fitting: Vec<&Key> = candidates.into_iter().filter(|k| k.fits(alg)).collect();
        if fitting.is_empty() {
            return Err(OidcError::refused(format!(
                "algorithm `{}` does not fit the signing key",
                header.alg
            )));
        }
        let validation = self.validation(alg);
        let mut refusal = OidcError::refused("bad signature");
        let mut verified = None;
        // Without a `kid`, any fitting key of the issuer's may have signed it.
        for key in fitting {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => {
                    verified = Some(data.claims);
                    break;
                }
                Err(e) if *e.kind() == ErrorKind::InvalidSignature => {}
                Err(e) => {
                    refusal = refusal_of(e.kind());
                    break;
                }
            }
        }
        let claims = verified.ok_or(refusal)?;
        if claims.get("iss").and_then(Value::as_str) != Some(self.inner.issuer.as_str()) {
            return Err(OidcError::refused("issuer not accepted"));
        }
        if let Some(iat) = claims.get("iat") {
            let iat = iat
                .as_f64()
                .ok_or_else(|| OidcError::refused("claim `iat` malformed"))?;
            if iat > (now_seconds() + self.inner.clock_skew.as_secs()) as f64 {
                return Err(OidcError::refused("issued in the future (`iat`)"));
            }
        }
        self.inner.mapping.identity(&claims)
    }

    fn algorithm(&self, alg: &str) -> Result<Algorithm, OidcError> {
        if alg.eq_ignore_ascii_case("none") {
            return Err(OidcError::refused("unsigned token (`alg: none`)"));
        }
        Algorithm::from_str(alg)
            .ok()
            .filter(|a| self.inner.algorithms.contains(a))
            .ok_or_else(|| OidcError::refused(format!("algorithm `{alg}` not accepted")))
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut validation = Validation::new(alg);
        validation.leeway = self.inner.clock_skew.as_secs();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_audience(&self.inner.audiences);
        validation.set_issuer(&[&self.inner.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation
    }

    fn current(&self) -> Option<Arc<KeySet>> {
        self.inner
            .keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The keys to check a token naming `kid` with: fetched when there are none yet,
    /// they are due for a refresh, or `kid` is new.
    async fn keys_for(&self, kid: Option<&str>) -> Result<Arc<KeySet>, OidcError> {
        let keys = match self.current() {
            Some(keys) if keys.fetched.elapsed() < self.inner.keys_refresh => keys,
            stale => self.refresh(stale).await?,
        };
        match kid {
            Some(kid) if !keys.knows(kid) => self.refresh(Some(keys)).await,
            _ => Ok(keys),
        }
    }

    /// A newer key set than `seen`: fetched now, or by whoever fetched while this waited.
    /// Within [`MIN_REFETCH`] of the last attempt, the keys at hand (or why there are
    /// none) instead.
    async fn refresh(&self, seen: Option<Arc<KeySet>>) -> Result<Arc<KeySet>, OidcError> {
        let mut attempt = self.inner.attempt.lock().await;
        let current = self.current();
        let newer = match (&current, &seen) {
            (Some(now), Some(seen)) => !Arc::ptr_eq(now, seen),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if newer || attempt.at.is_some_and(|at| at.elapsed() < MIN_REFETCH) {
            return current.ok_or_else(|| {
                OidcError::unavailable(attempt.error.as_deref().unwrap_or("not fetched yet"))
            });
        }
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, self.fetch())
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {}s", FETCH_TIMEOUT.as_secs())));
        // Recorded only once the fetch ends: a caller that gave up mid-fetch leaves the
        // next one free to try.
        attempt.at = Some(Instant::now());
        match fetched {
            Ok(keys) => {
                attempt.error = None;
                let keys = Arc::new(keys);
                *self
                    .inner
                    .keys
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = Some(keys.clone());
                Ok(keys)
            }
            Err(error) => {
                tracing::warn!(issuer = %self.inner.issuer, %error, "OIDC issuer's keys not refreshed");
                let refused = OidcError::unavailable(&error);
                attempt.error = Some(error);
                current.ok_or(refused)
            }
        }
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let issuer = &self.inner.issuer;
        let url = format!("{}{DISCOVERY_PATH}", issuer.trim_end_matches('/'));
        let discovery: Discovery = self.get_json(&url).await?;
        if discovery.issuer != *issuer {
            return Err(format!(
                "the discovery document names issuer `{}`",
                discovery.issuer
            ));
        }
        let raw: RawKeySet = self.get_json(&discovery.jwks_uri).await?;
        let keys: Vec<Key> = raw
            .keys
            .into_iter()
            .filter_map(|jwk| serde_json::from_value::<Jwk>(jwk).ok())
            .filter_map(|jwk| Key::from_jwk(&jwk))
            .collect();
        if keys.is_empty() {
            return Err(format!(
                "{} holds no signing key karpor can use",
                discovery.jwks_uri
            ));
        }
        Ok(KeySet {
            keys,
            fetched: Instant::now(),
        })
    }

    /// A JSON document of at most [`MAX_DOCUMENT_BYTES`].
    async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let mut response = self
            .inner
            .client
            .get(url)
            // A key set may be served only as its own type (kube-apiserver answers 406
            // to a plain `application/json`).
            .header(
                reqwest::header::ACCEPT,
                "application/json, application/jwk-set+json",
            )
            .send()
            .await
            .map_err(|e| chain(&e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{url} answered {status}"));
        }
        let too_large = || format!("{url} answered more than {} KiB", MAX_DOCUMENT_BYTES / 1024);
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| chain(&e))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not the expected document: {e}"))
    }
}

/// What jsonwebtoken found wrong with a token, as a reason of its own.
fn refusal_of(kind: &ErrorKind) -> OidcError {
    OidcError::refused(match kind {
        ErrorKind::InvalidSignature => "bad signature".to_owned(),
        ErrorKind::ExpiredSignature => "expired".to_owned(),
        ErrorKind::ImmatureSignature => "not valid yet (`nbf`)".to_owned(),
        ErrorKind::InvalidAudience => "audience not accepted".to_owned(),
        ErrorKind::InvalidIssuer => "issuer not accepted".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("claim `{claim}` missing"),
        ErrorKind::InvalidClaimFormat(claim) => format!("claim `{claim}` malformed"),
        ErrorKind::InvalidAlgorithm => "algorithm does not fit the signing key".to_owned(),
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => "malformed token".to_owned(),
        _ => "signature not checkable with the issuer's key".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> OidcConfig {
        OidcConfig::new("https://issuer.example", vec!["karpor".into()])
    }

    fn mapping() -> ClaimMapping {
        ClaimMapping {
            username_claim: "sub".into(),
            username_prefix: "oidc:".into(),
            groups_claim: "groups".into(),
            groups_prefix: "g:".into(),
        }
    }

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    fn problem(config: &OidcConfig) -> (String, String) {
        let issue = config.validate().unwrap_err();
        (issue.key().to_owned(), issue.problem().to_owned())
    }

    #[test]
    fn the_file_gives_defaults_for_all_but_issuer_and_audiences() {
        let parsed: OidcConfig = serde_json::from_value(json!({
            "issuer": "https://issuer.example", "audiences": ["karpor"],
        }))
        .unwrap();
        assert_eq!(parsed, config());
        assert_eq!(parsed.username_claim, "sub");
        assert_eq!(parsed.algorithms, ["RS256", "ES256"]);
        assert_eq!(parsed.clock_skew, Duration::from_secs(30));
        assert_eq!(parsed.keys_refresh, Duration::from_secs(3600));
        parsed.validate().unwrap();
        let timed: OidcConfig = serde_json::from_value(json!({
            "issuer": "https://issuer.example/realms/x", "audiences": ["karpor"],
            "clock_skew": "1m", "keys_refresh": "10m",
        }))
        .unwrap();
        assert_eq!(timed.clock_skew, Duration::from_secs(60));
        timed.validate().unwrap();
        let unknown = serde_json::from_value::<OidcConfig>(json!({
            "issuer": "https://issuer.example", "audiences": ["karpor"], "client_secret": "x",
        }));
        assert!(unknown.is_err());
    }

    #[test]
    fn each_bad_value_is_named_by_its_key() {
        for (issuer, expected) in [
            ("http://issuer.example", "https"),
            ("issuer.example", "not a URL"),
            ("https://issuer.example/?tenant=a", "query"),
            ("https://issuer.example/#x", "fragment"),
            ("https://user:pw@issuer.example", "credentials"),
        ] {
            let mut c = config();
            c.issuer = issuer.into();
            let (key, problem) = problem(&c);
            assert_eq!(key, "auth.oidc.issuer");
            assert!(problem.contains(expected), "{issuer}: {problem}");
        }
        let mut c = config();
        c.audiences.clear();
        assert_eq!(problem(&c).0, "auth.oidc.audiences");
        c.audiences = vec!["karpor".into(), " ".into()];
        assert_eq!(problem(&c).0, "auth.oidc.audiences[1]");
        let mut c = config();
        c.username_claim = String::new();
        assert_eq!(problem(&c).0, "auth.oidc.username_claim");
        let mut c = config();
        c.groups_claim = " ".into();
        assert_eq!(problem(&c).0, "auth.oidc.groups_claim");
        for (alg, expected) in [
            ("none", "refused"),
            ("HS256", "refused"),
            ("hs512", "refused"),
            ("ES512", "not supported"),
            ("RSA-OAEP", "not supported"),
        ] {
            let mut c = config();
            c.algorithms = vec!["RS256".into(), alg.into()];
            let (key, problem) = problem(&c);
            assert_eq!(key, "auth.oidc.algorithms");
            assert!(problem.contains(expected), "{alg}: {problem}");
        }
        let mut c = config();
        c.algorithms.clear();
        assert_eq!(problem(&c).0, "auth.oidc.algorithms");
        let mut c = config();
        c.algorithms = ACCEPTED_ALGORITHMS.iter().map(|a| a.to_string()).collect();
        c.validate().unwrap();
        c.clock_skew = Duration::from_secs(301);
        assert_eq!(problem(&c).0, "auth.oidc.clock_skew");
        let mut c = config();
        c.keys_refresh = Duration::from_secs(1);
        assert_eq!(problem(&c).0, "auth.oidc.keys_refresh");
    }

    #[test]
    fn the_ca_file_must_exist_and_be_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config();
        c.ca_file = Some(dir.path().join("absent.pem"));
        let (key, absent) = problem(&c);
        assert_eq!(key, "auth.oidc.ca_file");
        assert!(absent.contains("absent.pem"), "{absent}");
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        c.ca_file = Some(path.clone());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(problem(&c).1.contains("world-writable"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        c.validate().unwrap();
        // Valid as a path, but no certificate in it.
        let refused = OidcVerifier::new(&c).unwrap_err().to_string();
        assert!(refused.contains("ca.pem"), "{refused}");
    }

    #[test]
    fn the_user_and_groups_come_from_their_claims_with_prefixes() {
        let m = mapping();
        let id = m
            .identity(&claims(
                json!({"sub": "alice", "groups": ["dev", "ops", ""]}),
            ))
            .unwrap();
        assert_eq!(id.user, "oidc:alice");
        assert_eq!(id.groups, ["g:dev", "g:ops"]);
        let id = m
            .identity(&claims(json!({"sub": "bob", "groups": "dev"})))
            .unwrap();
        assert_eq!(id.groups, ["g:dev"]);
        for absent in [json!({"sub": "c"}), json!({"sub": "c", "groups": null})] {
            assert!(m.identity(&claims(absent)).unwrap().groups.is_empty());
        }
        for (claims_of, reason) in [
            (json!({"groups": []}), "claim `sub` missing"),
            (json!({"sub": ""}), "claim `sub` is empty"),
            (json!({"sub": 7}), "claim `sub` is not a string"),
            (json!({"sub": "d", "groups": [1]}), "not a string"),
            (json!({"sub": "d", "groups": {"a": 1}}), "neither a string"),
        ] {
            let refused = m.identity(&claims(claims_of.clone())).unwrap_err();
            assert!(
                refused.to_string().contains(reason),
                "{claims_of}: {refused}"
            );
        }
        let email = ClaimMapping {
            username_claim: "email".into(),
            username_prefix: String::new(),
            ..mapping()
        };
        let verified = json!({"email": "a@example.com", "email_verified": true});
        assert_eq!(
            email.identity(&claims(verified)).unwrap().user,
            "a@example.com"
        );
        let unverified = json!({"email": "a@example.com", "email_verified": false});
        assert!(email.identity(&claims(unverified)).is_err());
    }

    fn encode(value: Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
    }

    fn token(header: Value, payload: Value) -> String {
        format!("{}.{}.c2ln", encode(header), encode(payload))
    }

    #[tokio::test]
    async fn tokens_refused_before_any_fetch() {
        let verifier = OidcVerifier::new(&config()).unwrap();
        let ours = json!({"iss": "https://issuer.example", "sub": "a", "aud": "karpor", "exp": 1});
        let foreign = json!({"iss": "https://other.example", "sub": "a"});
        assert!(verifier.claims_issuer(&token(json!({"alg": "RS256"}), ours.clone())));
        assert!(!verifier.claims_issuer(&token(json!({"alg": "RS256"}), foreign.clone())));
        assert!(!verifier.claims_issuer("opaque-static-token"));
        for (token, reason) in [
            ("a.b".to_owned(), "not a JWT"),
            ("x".repeat(MAX_TOKEN_BYTES + 1), "larger than 16 KiB"),
            ("!!.e30.c2ln".to_owned(), "header is not base64url"),
            (token(json!({"alg": "none"}), ours.clone()), "alg: none"),
            (
                token(json!({"alg": "HS256"}), ours.clone()),
                "`HS256` not accepted",
            ),
            (
                token(json!({"alg": "ES384"}), ours.clone()),
                "`ES384` not accepted",
            ),
            (
                token(json!({"alg": "RS256", "crit": ["exp"]}), ours.clone()),
                "crit",
            ),
            (
                token(json!({"alg": "RS256"}), foreign),
                "issuer not accepted",
            ),
        ] {
            let refused = verifier.verify(&token).await.unwrap_err();
            assert!(refused.to_string().contains(reason), "{reason}: {refused}");
            assert!(!refused.is_unavailable());
        }
        assert!(verifier.current().is_none(), "nothing was fetched");
        assert!(format!("{verifier:?}").contains("issuer.example"));
    }

    #[test]
    fn a_key_verifies_only_its_own_algorithms() {
        let rsa: Jwk = serde_json::from_value(json!({
            "kty": "RSA", "kid": "r", "use": "sig",
            "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
            "e": "AQAB",
        }))
        .unwrap();
        let key = Key::from_jwk(&rsa).unwrap();
        assert!(key.fits(Algorithm::RS256) && key.fits(Algorithm::PS512));
        assert!(!key.fits(Algorithm::ES256) && !key.fits(Algorithm::HS256));
        let mut pinned = rsa.clone();
        pinned.common.key_algorithm = Some(jsonwebtoken::jwk::KeyAlgorithm::RS256);
        let key = Key::from_jwk(&pinned).unwrap();
        assert!(key.fits(Algorithm::RS256) && !key.fits(Algorithm::RS512));
        let mut encryption = rsa;
        encryption.common.public_key_use = Some(PublicKeyUse::Encryption);
        assert!(Key::from_jwk(&encryption).is_none());
        let symmetric: Jwk =
            serde_json::from_value(json!({"kty": "oct", "kid": "s", "k": "c2VjcmV0"})).unwrap();
        assert!(Key::from_jwk(&symmetric).is_none());
    }
}
