//! What an agent keeps between runs: its key, its certificate, the authority it trusts
//! and the hub's pin, in one private file (0600, never through a symlink, never half
//! written: `karpor_core::private_file`). Loading checks that the pieces belong together,
//! so a hand-edited or mixed-up file is an error and not a strange handshake later. The
//! file calls block: run them off the async runtime.

use std::path::Path;
use std::time::Duration;

use karpor_core::private_file;
use rustls::pki_types::CertificateDer;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::authority::rustls_pem;
use crate::identity::AgentIdentity;
use crate::key::AgentKey;
use crate::pin::HubPin;
use crate::AgentError;

/// The largest state file read: a key and three certificates are a few KiB.
const MAX_STATE_BYTES: u64 = 64 * 1024;
/// A certificate is renewed once this share of its validity has passed, less jitter.
const RENEW_AT: f64 = 2.0 / 3.0;
/// At most this share of its validity earlier, so agents issued together do not all
/// renew at once.
const RENEW_JITTER: f64 = 0.1;

#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentState {
    pub pin: String,
    pub key_pem: String,
    pub certificate_pem: String,
    pub authority_pem: String,
}

/// A state whose pieces were checked to belong together.
#[derive(Debug)]
pub struct Checked {
    pub state: AgentState,
    pub identity: AgentIdentity,
    pub pin: HubPin,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl AgentState {
    /// The state in `path`, checked; `None` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<Checked>, AgentError> {
        let Some(bytes) = private_file::read(path, MAX_STATE_BYTES)
            .map_err(|e| AgentError::State(e.to_string()))?
        else {
            return Ok(None);
        };
        let state: AgentState = serde_json::from_slice(&bytes)
            .map_err(|e| AgentError::State(format!("{} does not parse: {e}", path.display())))?;
        state.check().map(Some)
    }

    /// Written in place at once, 0600.
    pub fn save(&self, path: &Path) -> Result<(), AgentError> {
        let bytes =
            serde_json::to_vec_pretty(self).map_err(|e| AgentError::State(e.to_string()))?;
        private_file::replace(path, &bytes).map_err(|e| AgentError::State(e.to_string()))
    }

    /// The pieces parsed, and refused unless the certificate is over the key, names an
    /// agent and comes from the authority the pin names.
    pub fn check(self) -> Result<Checked, AgentError> {
        let bad = |what: &str| AgentError::State(format!("the agent's state: {what}"));
        let pin: HubPin = self.pin.parse().map_err(|_| bad("the pin is malformed"))?;
        let key = AgentKey::from_pem(&self.key_pem).map_err(|_| bad("the key does not parse"))?;
        let certificate =
            rustls_pem(&self.certificate_pem).map_err(|_| bad("the certificate does not parse"))?;
        let authority =
            rustls_pem(&self.authority_pem).map_err(|_| bad("the authority does not parse"))?;
        if HubPin::of_certificate(&authority) != Some(pin) {
            return Err(bad("the authority is not the one the pin names"));
        }
        let identity = AgentIdentity::from_certificate(&certificate)
            .map_err(|_| bad("the certificate names no agent"))?;
        let (not_before, not_after, public_key) =
            validity(&certificate).ok_or_else(|| bad("the certificate does not parse"))?;
        if public_key != key.public_key_der() {
            return Err(bad("the certificate is not over the agent's key"));
        }
        Ok(Checked {
            state: self,
            identity,
            pin,
            not_before,
            not_after,
        })
    }
}

impl std::fmt::Debug for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentState")
            .field("pin", &self.pin)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Checked {
    /// When to renew: past two thirds of the validity, up to a tenth of it earlier by
    /// `jitter` (0 to 1, from the caller's random source).
    pub fn renew_at(&self, jitter: f64) -> OffsetDateTime {
        let validity = (self.not_after - self.not_before).max(time::Duration::ZERO);
        let share = RENEW_AT - RENEW_JITTER * jitter.clamp(0.0, 1.0);
        self.not_before + validity * share
    }

    /// How long from `now` until [`Checked::renew_at`]; zero when it has passed.
    pub fn renew_in(&self, now: OffsetDateTime, jitter: f64) -> Duration {
        let wait = self.renew_at(jitter) - now;
        Duration::try_from(wait).unwrap_or(Duration::ZERO)
    }
}

/// A certificate's validity and its public key (SubjectPublicKeyInfo, DER).
fn validity(der: &CertificateDer<'_>) -> Option<(OffsetDateTime, OffsetDateTime, Vec<u8>)> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let validity = cert.validity();
    Some((
        validity.not_before.to_datetime(),
        validity.not_after.to_datetime(),
        cert.tbs_certificate.subject_pki.raw.to_vec(),
    ))
}
