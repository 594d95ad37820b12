//! Enrollment over the embedded metadata store (a real SQLite file, sealed with a key made
//! beside it): a join token is single use, bound to its cluster, stored only as a digest
//! and refused once expired; revoking raises the generation, so older certificates are
//! refused and cannot be renewed; two hubs over one store share one authority.

#![allow(clippy::unwrap_used)] // a test stops at its first failure

use std::time::Duration;

use karpor_agent::enrollment::Enrollment;
use karpor_agent::identity::AgentIdentity;
use karpor_agent::key::AgentKey;
use karpor_agent::token::JoinToken;
use karpor_agent::AgentError;
use karpor_core::model::{AgentAuthority, AgentEnrollment, AUTHORITY_RECORD};
use karpor_core::names::ClusterName;
use karpor_metastore::{connect, Metastore, MetastoreConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

const HOUR: Duration = Duration::from_secs(3600);

async fn store(dir: &tempfile::TempDir) -> Metastore {
    connect(&MetastoreConfig::Sqlite {
        path: dir.path().join("metadata.db"),
        encryption_key_file: None,
    })
    .await
    .unwrap()
}

fn cluster(name: &str) -> ClusterName {
    name.parse().unwrap()
}

fn request() -> String {
    AgentKey::generate().unwrap().request().unwrap()
}

fn refused_join(result: Result<impl std::fmt::Debug, AgentError>) -> String {
    match result {
        Err(e @ AgentError::JoinRefused(_)) => e.to_string(),
        other => panic!("expected a refused join, got {other:?}"),
    }
}

#[tokio::test]
async fn a_join_token_is_used_once_for_its_own_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let enrollment = Enrollment::new(store(&dir).await);
    let (token, pin) = enrollment
        .issue_token(&cluster("edge-1"), HOUR)
        .await
        .unwrap();

    // The hub keeps a digest, never the token.
    let stored = store(&dir)
        .await
        .get::<AgentEnrollment>("edge-1")
        .await
        .unwrap()
        .unwrap();
    let text = token.reveal();
    let secret = text.rsplit('.').next().unwrap();
    let kept = serde_json::to_string(&stored.record).unwrap();
    assert!(!kept.contains(secret), "the token's secret is stored");

    // The same secret presented for another cluster is refused.
    let elsewhere: JoinToken = text.replace(".edge-1.", ".edge-2.").parse().unwrap();
    refused_join(enrollment.join(&elsewhere, &request()).await);

    let joined = enrollment.join(&token, &request()).await.unwrap();
    assert_eq!(joined.identity.cluster, cluster("edge-1"));
    assert_eq!(joined.identity.generation, 1);
    let der =
        CertificateDer::from_pem_slice(joined.certificate.certificate_pem.as_bytes()).unwrap();
    assert_eq!(
        AgentIdentity::from_certificate(&der).unwrap(),
        joined.identity
    );
    // The authority returned is the one the pin names.
    let authority = CertificateDer::from_pem_slice(joined.authority_pem.as_bytes()).unwrap();
    assert_eq!(
        karpor_agent::pin::HubPin::of_certificate(&authority),
        Some(pin)
    );

    let again = refused_join(enrollment.join(&token, &request()).await);
    assert!(!again.contains(secret), "an error echoes the token");
}

#[tokio::test]
async fn two_joins_racing_with_one_token_give_one_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let enrollment = Enrollment::new(store(&dir).await);
    let (token, _) = enrollment
        .issue_token(&cluster("edge-1"), HOUR)
        .await
        .unwrap();
    let joins: Vec<_> = (0..8)
        .map(|_| {
            let (enrollment, token) = (enrollment.clone(), token.clone());
            tokio::spawn(async move { enrollment.join(&token, &request()).await })
        })
        .collect();
    let mut won = 0;
    for join in joins {
        match join.await.unwrap() {
            Ok(_) => won += 1,
            Err(AgentError::JoinRefused(_)) => {}
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert_eq!(won, 1);
}

#[tokio::test]
async fn an_expired_or_replaced_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let enrollment = Enrollment::new(store(&dir).await);
    let (short, _) = enrollment
        .issue_token(&cluster("edge-1"), Duration::from_secs(1))
        .await
        .unwrap();
    // Expiry is in whole seconds: two of them have passed for certain.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let expired = refused_join(enrollment.join(&short, &request()).await);
    assert!(expired.contains("expired"), "{expired}");

    let (first, _) = enrollment
        .issue_token(&cluster("edge-1"), HOUR)
        .await
        .unwrap();
    let (second, _) = enrollment
        .issue_token(&cluster("edge-1"), HOUR)
        .await
        .unwrap();
    refused_join(enrollment.join(&first, &request()).await);
    enrollment.join(&second, &request()).await.unwrap();

    // A token never issued, and lifetimes out of bounds.
    let never = JoinToken::generate(cluster("edge-9")).unwrap();
    refused_join(enrollment.join(&never, &request()).await);
    for ttl in [
        Duration::ZERO,
        karpor_agent::MAX_JOIN_TTL + Duration::from_secs(1),
    ] {
        assert!(enrollment
            .issue_token(&cluster("edge-1"), ttl)
            .await
            .is_err());
    }
}

#[tokio::test]
async fn revoking_refuses_every_older_certificate_and_its_renewal() {
    let dir = tempfile::tempdir().unwrap();
    let enrollment = Enrollment::new(store(&dir).await);
    let (token, _) = enrollment
        .issue_token(&cluster("edge-1"), HOUR)
        .await
        .unwrap();
    let joined = enrollment.join(&token, &request()).await.unwrap();
    enrollment.check(&joined.identity).await.unwrap();
    let renewed = enrollment
        .renew(&joined.identity, &request())
        .await
        .unwrap();
    let der = CertificateDer::from_pem_slice(renewed.certificate_pem.as_bytes()).unwrap();
    assert_eq!(
        AgentIdentity::from_certificate(&der).unwrap(),
        joined.identity
    );

    // A token issued before the revocation goes with it.
    let (pending, _) = enrollment
        .issue_token(&cluster("edge-1"), HOUR)
        .await
        .unwrap();
    assert_eq!(enrollment.revoke(&cluster("edge-1")).await.unwrap(), 2);
    assert!(matches!(
        enrollment.check(&joined.identity).await,
        Err(AgentError::CertificateRefused(_))
    ));
    assert!(enrollment
        .renew(&joined.identity, &request())
        .await
        .is_err());
    refused_join(enrollment.join(&pending, &request()).await);

    // Joining again gives the new generation; another cluster was never affected.
    let (token, _) = enrollment
        .issue_token(&cluster("edge-1"), HOUR)
        .await
        .unwrap();
    assert_eq!(
        enrollment
            .join(&token, &request())
            .await
            .unwrap()
            .identity
            .generation,
        2
    );
    let other = AgentIdentity {
        cluster: cluster("edge-2"),
        generation: 1,
    };
    assert!(enrollment.check(&other).await.is_err(), "never joined");
}

#[tokio::test]
async fn hubs_over_one_store_share_one_authority_whose_key_is_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (
        Enrollment::new(store(&dir).await),
        Enrollment::new(store(&dir).await),
    );
    let (a, b) = tokio::join!(one.authority(), two.authority());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.certificate_pem(), b.certificate_pem());
    assert_eq!(a.pin().unwrap(), b.pin().unwrap());

    // A token issued by one hub is redeemed at the other.
    let (token, _) = one.issue_token(&cluster("edge-1"), HOUR).await.unwrap();
    two.join(&token, &request()).await.unwrap();

    // The key is read back through the store, but the file holds it sealed.
    let stored = store(&dir)
        .await
        .get::<AgentAuthority>(AUTHORITY_RECORD)
        .await
        .unwrap()
        .unwrap();
    assert!(stored.record.key_pem.contains("PRIVATE KEY"));
    let needle = b"PRIVATE KEY";
    for file in std::fs::read_dir(dir.path()).unwrap() {
        let path = file.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "the authority's key is in {} in clear",
            path.display()
        );
    }
    assert!(!format!("{:?}", stored.record).contains("PRIVATE"));
}
