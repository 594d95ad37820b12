//! The TLS of the agent link, both ends: the hub's listener (a certificate from the hub's
//! authority, made at start with a key that never leaves memory; client certificates
//! verified against the authority, optional so a joining agent can present a token
//! instead) and the agent's client (the hub checked only by the pin; its certificate
//! once it has one). HTTP/2 first, HTTP/1.1 allowed.

use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use time::OffsetDateTime;

use crate::authority::Authority;
use crate::key::AgentKey;
use crate::pin::{HubPin, PinnedVerifier};
use crate::AgentError;

/// The listener's certificate is made at each start; a year outlives any hub process.
const SERVER_CERTIFICATE_LIFETIME: Duration = Duration::from_secs(365 * 24 * 60 * 60);

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn alpn() -> Vec<Vec<u8>> {
    vec![b"h2".to_vec(), b"http/1.1".to_vec()]
}

fn tls(e: impl std::fmt::Display) -> AgentError {
    AgentError::Authority(format!("TLS: {e}"))
}

/// The hub's agent listener, for `names`.
pub fn hub_server(
    authority: &Authority,
    names: &[String],
) -> Result<Arc<ServerConfig>, AgentError> {
    let server = authority.issue_server(
        names,
        OffsetDateTime::now_utc(),
        SERVER_CERTIFICATE_LIFETIME,
    )?;
    let mut roots = RootCertStore::empty();
    roots
        .add(authority.certificate_der().clone())
        .map_err(tls)?;
    // A joining agent has no certificate yet; every route but the join asks for one.
    let clients = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(tls)?;
    let key = PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).map_err(tls)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls)?
        .with_client_cert_verifier(clients)
        .with_single_cert(server.chain, key)
        .map_err(tls)?;
    config.alpn_protocols = alpn();
    Ok(Arc::new(config))
}

/// The agent's client of the hub: the hub trusted only through `pin`; `identity` (its
/// certificate and key) presented when it has one.
pub fn agent_client(
    pin: HubPin,
    identity: Option<(&str, &AgentKey)>,
) -> Result<ClientConfig, AgentError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedVerifier::new(pin, provider())));
    let mut config = match identity {
        Some((certificate_pem, key)) => {
            let chain =
                vec![CertificateDer::from_pem_slice(certificate_pem.as_bytes()).map_err(tls)?];
            let key = PrivateKeyDer::from_pem_slice(key.to_pem().as_bytes()).map_err(tls)?;
            builder.with_client_auth_cert(chain, key).map_err(tls)?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn();
    Ok(config)
}
