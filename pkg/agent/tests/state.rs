//! The agent's state file: written private, read back checked, refused when its pieces
//! do not belong together, and the renewal time taken from its certificate.

#![allow(clippy::unwrap_used)] // a test stops at its first failure

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use karpor_agent::enrollment::Enrollment;
use karpor_agent::key::AgentKey;
use karpor_agent::state::AgentState;
use karpor_agent::AgentError;
use karpor_metastore::{connect, MetastoreConfig};
use time::OffsetDateTime;

const HOUR: Duration = Duration::from_secs(3600);

/// A state as an agent writes it after joining the hub of `dir`'s store as `edge-1`.
async fn joined(dir: &tempfile::TempDir) -> AgentState {
    joined_for(dir, None).await
}

/// As [`joined`], with certificates of `lifetime` when given.
async fn joined_for(dir: &tempfile::TempDir, lifetime: Option<Duration>) -> AgentState {
    let store = connect(&MetastoreConfig::Sqlite {
        path: dir.path().join("metadata.db"),
        encryption_key_file: None,
    })
    .await
    .unwrap();
    let enrollment = match lifetime {
        Some(lifetime) => Enrollment::new(store).with_certificate_lifetime(lifetime),
        None => Enrollment::new(store),
    };
    let (token, pin) = enrollment
        .issue_token(&"edge-1".parse().unwrap(), HOUR)
        .await
        .unwrap();
    let key = AgentKey::generate().unwrap();
    let joined = enrollment
        .join(&token, &key.request().unwrap())
        .await
        .unwrap();
    AgentState {
        pin: pin.to_string(),
        key_pem: key.to_pem(),
        certificate_pem: joined.certificate.certificate_pem,
        authority_pem: joined.authority_pem,
    }
}

fn refusal(result: Result<impl std::fmt::Debug, AgentError>) -> String {
    match result {
        Err(AgentError::State(why)) => why,
        other => panic!("expected a refused state, got {other:?}"),
    }
}

#[tokio::test]
async fn a_state_is_written_private_and_read_back_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent").join("state.json");
    assert!(AgentState::load(&path).unwrap().is_none());
    let state = joined(&dir).await;
    state.save(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let checked = AgentState::load(&path).unwrap().unwrap();
    assert_eq!(checked.identity.cluster.to_string(), "edge-1");
    assert_eq!(checked.identity.generation, 1);
    assert_eq!(checked.pin.to_string(), state.pin);
    assert!(
        !format!("{state:?}").contains("PRIVATE"),
        "Debug shows the key"
    );
}

#[tokio::test]
async fn pieces_that_do_not_belong_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = joined(&dir).await;

    let other_key = AgentState {
        key_pem: AgentKey::generate().unwrap().to_pem(),
        ..state.clone()
    };
    assert!(refusal(other_key.check()).contains("not over the agent's key"));

    let other_hub = AgentState {
        pin: format!("sha256:{}", "ab".repeat(32)),
        ..state.clone()
    };
    assert!(refusal(other_hub.check()).contains("not the one the pin names"));

    // Its own authority as its certificate: names no agent.
    let no_agent = AgentState {
        certificate_pem: state.authority_pem.clone(),
        ..state.clone()
    };
    assert!(refusal(no_agent.check()).contains("names no agent"));

    let path = dir.path().join("state.json");
    std::fs::write(&path, b"{\"pin\": 1}").unwrap();
    assert!(refusal(AgentState::load(&path)).contains("does not parse"));
    std::fs::write(&path, vec![b' '; 65 * 1024]).unwrap();
    assert!(refusal(AgentState::load(&path)).contains("above"));
}

#[tokio::test]
async fn renewal_comes_past_two_thirds_of_the_validity_jittered_earlier() {
    let dir = tempfile::tempdir().unwrap();
    let checked = joined(&dir).await.check().unwrap();
    let validity = checked.not_after - checked.not_before;
    assert!(validity >= time::Duration::hours(24), "{validity}");
    let late = checked.renew_at(0.0);
    let early = checked.renew_at(1.0);
    assert_eq!(late - checked.not_before, validity * (2.0 / 3.0));
    assert_eq!(late - early, validity * 0.1);
    assert!(checked.renew_at(7.0) == early && checked.renew_at(-1.0) == late);

    let now = OffsetDateTime::now_utc();
    let wait = checked.renew_in(now, 0.0);
    assert!(wait > Duration::from_secs(15 * 3600) && wait < Duration::from_secs(17 * 3600));
    assert_eq!(checked.renew_in(checked.not_after, 0.0), Duration::ZERO);
}

/// Certificates start before they are made (clocks differ), but by no more than a tenth
/// of their lifetime: a 30 s certificate is not due for renewal the moment it arrives.
#[tokio::test]
async fn a_short_certificate_is_not_due_for_renewal_when_issued() {
    let dir = tempfile::tempdir().unwrap();
    let lifetime = Duration::from_secs(30);
    let checked = joined_for(&dir, Some(lifetime)).await.check().unwrap();
    let wait = checked.renew_in(OffsetDateTime::now_utc(), 1.0);
    assert!(
        wait > Duration::from_secs(10) && wait < lifetime,
        "renewal due in {wait:?}"
    );
}
