//! Certificates from the authority in real TLS handshakes (rustls over loopback TCP): an
//! agent trusts the hub only by its pin, the hub trusts agents only by the authority, and
//! the identity the hub reads is the one the authority wrote.

#![allow(clippy::unwrap_used)] // a test stops at its first failure

use std::sync::Arc;
use std::time::Duration;

use karpor_agent::authority::Authority;
use karpor_agent::identity::AgentIdentity;
use karpor_agent::key::AgentKey;
use karpor_agent::pin::{HubPin, PinnedVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use time::OffsetDateTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const HOUR: Duration = Duration::from_secs(3600);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn key(pem: &str) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// The hub's listener: the authority's server certificate for `localhost`, client
/// certificates required and verified against the authority.
fn hub_config(authority: &Authority) -> ServerConfig {
    let server = authority
        .issue_server(&["localhost".to_owned()], OffsetDateTime::now_utc(), HOUR)
        .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(authority.certificate_der().clone()).unwrap();
    let clients = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .unwrap();
    ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(clients)
        .with_single_cert(server.chain, key(&server.key_pem))
        .unwrap()
}

/// An agent's side: the hub checked by `pin`, the agent's certificate `issued_pem` over
/// `agent_key`.
fn agent_config(pin: HubPin, issued_pem: &str, agent_key: &AgentKey) -> ClientConfig {
    let chain = vec![CertificateDer::from_pem_slice(issued_pem.as_bytes()).unwrap()];
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedVerifier::new(pin, provider())))
        .with_client_auth_cert(chain, key(&agent_key.to_pem()))
        .unwrap()
}

/// One handshake and one round trip; the hub's answer is the identity it read from the
/// agent's verified certificate.
async fn connect(hub: ServerConfig, agent: ClientConfig) -> Result<AgentIdentity, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(hub));
    let served = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.map_err(|e| e.to_string())?;
        let peer = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        let identity = AgentIdentity::from_certificate(&peer).map_err(|e| e.to_string())?;
        tls.write_all(b"ok").await.map_err(|e| e.to_string())?;
        tls.shutdown().await.ok();
        Ok::<_, String>(identity)
    });
    let tcp = TcpStream::connect(address).await.unwrap();
    let connector = TlsConnector::from(Arc::new(agent));
    let name = ServerName::try_from("localhost").unwrap();
    let client = async {
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        tls.read_to_end(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(answer)
    };
    let answered = tokio::time::timeout(Duration::from_secs(10), client)
        .await
        .expect("the handshake does not hang");
    let identity = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the hub does not hang")
        .unwrap();
    match (answered, identity) {
        (Ok(answer), Ok(identity)) if answer == b"ok" => Ok(identity),
        (Err(agent), Err(hub)) => Err(format!("agent: {agent}; hub: {hub}")),
        (Err(e), _) | (_, Err(e)) => Err(e),
        (Ok(answer), Ok(_)) => Err(format!("unexpected answer {answer:?}")),
    }
}

fn identity(cluster: &str, generation: u64) -> AgentIdentity {
    AgentIdentity {
        cluster: cluster.parse().unwrap(),
        generation,
    }
}

#[tokio::test]
async fn an_agent_with_the_right_pin_and_an_issued_certificate_is_known_by_its_cluster() {
    let authority = Authority::generate(OffsetDateTime::now_utc()).unwrap();
    let agent_key = AgentKey::generate().unwrap();
    let issued = authority
        .issue_agent(
            &identity("edge-1", 3),
            &agent_key.request().unwrap(),
            OffsetDateTime::now_utc(),
            HOUR,
        )
        .unwrap();
    let pin = authority.pin().unwrap();
    let seen = connect(
        hub_config(&authority),
        agent_config(pin, &issued.certificate_pem, &agent_key),
    )
    .await
    .unwrap();
    assert_eq!(seen, identity("edge-1", 3));
}

#[tokio::test]
async fn an_agent_refuses_a_hub_whose_authority_is_not_the_pinned_one() {
    let authority = Authority::generate(OffsetDateTime::now_utc()).unwrap();
    let impostor = Authority::generate(OffsetDateTime::now_utc()).unwrap();
    let agent_key = AgentKey::generate().unwrap();
    let issued = authority
        .issue_agent(
            &identity("edge-1", 1),
            &agent_key.request().unwrap(),
            OffsetDateTime::now_utc(),
            HOUR,
        )
        .unwrap();
    // The impostor serves its own chain; the agent pins the real authority.
    let refused = connect(
        hub_config(&impostor),
        agent_config(
            authority.pin().unwrap(),
            &issued.certificate_pem,
            &agent_key,
        ),
    )
    .await
    .unwrap_err();
    assert!(refused.contains("does not match the pin"), "{refused}");
}

#[tokio::test]
async fn the_hub_refuses_an_expired_certificate_and_one_from_another_authority() {
    let authority = Authority::generate(OffsetDateTime::now_utc()).unwrap();
    let pin = authority.pin().unwrap();
    let agent_key = AgentKey::generate().unwrap();
    let request = agent_key.request().unwrap();
    let long_ago = OffsetDateTime::now_utc() - time::Duration::days(3);
    let expired = authority
        .issue_agent(&identity("edge-1", 1), &request, long_ago, HOUR)
        .unwrap();
    let refused = connect(
        hub_config(&authority),
        agent_config(pin, &expired.certificate_pem, &agent_key),
    )
    .await
    .unwrap_err();
    assert!(
        refused.contains("hub: ") && refused.contains("Expired"),
        "{refused}"
    );

    let other = Authority::generate(OffsetDateTime::now_utc()).unwrap();
    let foreign = other
        .issue_agent(
            &identity("edge-1", 1),
            &request,
            OffsetDateTime::now_utc(),
            HOUR,
        )
        .unwrap();
    let refused = connect(
        hub_config(&authority),
        agent_config(pin, &foreign.certificate_pem, &agent_key),
    )
    .await
    .unwrap_err();
    // Every authority has the same name: the other's signature is what fails.
    assert!(
        refused.contains("hub: ") && refused.contains("BadSignature"),
        "{refused}"
    );
}

#[test]
fn a_certificate_names_only_what_the_authority_wrote() {
    let authority = Authority::generate(OffsetDateTime::now_utc()).unwrap();
    // A request naming another cluster and generation: its names are not copied.
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut forged = rcgen::CertificateParams::default();
    forged.subject_alt_names = vec![rcgen::SanType::URI(
        "karpor-agent://edge-1/99".try_into().unwrap(),
    )];
    let request = forged.serialize_request(&pair).unwrap().pem().unwrap();
    let issued = authority
        .issue_agent(
            &identity("edge-2", 7),
            &request,
            OffsetDateTime::now_utc(),
            HOUR,
        )
        .unwrap();
    let der = CertificateDer::from_pem_slice(issued.certificate_pem.as_bytes()).unwrap();
    assert_eq!(
        AgentIdentity::from_certificate(&der).unwrap(),
        identity("edge-2", 7)
    );
    // The authority's own certificate and the server's name no agent.
    assert!(AgentIdentity::from_certificate(authority.certificate_der()).is_err());
    let server = authority
        .issue_server(&["localhost".to_owned()], OffsetDateTime::now_utc(), HOUR)
        .unwrap();
    assert!(AgentIdentity::from_certificate(&server.chain[0]).is_err());
    // A request that is not one, or is too large, is refused.
    for bad in [
        "",
        "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
    ] {
        assert!(authority
            .issue_agent(&identity("edge-2", 7), bad, OffsetDateTime::now_utc(), HOUR)
            .is_err());
    }
    let huge = "A".repeat(karpor_agent::MAX_REQUEST_BYTES + 1);
    assert!(authority
        .issue_agent(
            &identity("edge-2", 7),
            &huge,
            OffsetDateTime::now_utc(),
            HOUR
        )
        .is_err());
}
