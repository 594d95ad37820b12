//! The hub's pin: SHA-256 of its certificate authority's public key (`sha256:HEX`, as
//! kubeadm pins a control plane). An agent trusts the hub's listener only through a chain
//! to that key, so a join token sent to the wrong server is never sent at all.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error as TlsError, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::AgentError;

const PREFIX: &str = "sha256:";

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HubPin([u8; 32]);

impl HubPin {
    /// The pin of the authority certificate `der`, or `None` when it is not one.
    pub fn of_certificate(der: &[u8]) -> Option<HubPin> {
        let (_, cert) = X509Certificate::from_der(der).ok()?;
        Some(HubPin(
            Sha256::digest(cert.tbs_certificate.subject_pki.raw).into(),
        ))
    }
}

impl fmt::Display for HubPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PREFIX)?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for HubPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for HubPin {
    type Err = AgentError;

    fn from_str(text: &str) -> Result<HubPin, AgentError> {
        let malformed = || AgentError::Malformed("a hub pin is `sha256:` and 64 hex digits".into());
        let hex = text.trim().strip_prefix(PREFIX).ok_or_else(malformed)?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed());
        }
        let mut pin = [0u8; 32];
        for (byte, pair) in pin.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| malformed())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| malformed())?;
        }
        Ok(HubPin(pin))
    }
}

/// Verifies the hub's chain against the one authority in it whose key matches the pin,
/// then as webpki verifies any server: names, times, signatures.
#[derive(Debug)]
pub struct PinnedVerifier {
    pin: HubPin,
    provider: Arc<CryptoProvider>,
}

impl PinnedVerifier {
    pub fn new(pin: HubPin, provider: Arc<CryptoProvider>) -> PinnedVerifier {
        PinnedVerifier { pin, provider }
    }
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let authority = intermediates
            .iter()
            .find(|cert| HubPin::of_certificate(cert) == Some(self.pin))
            .ok_or_else(|| {
                TlsError::General("the hub's certificate authority does not match the pin".into())
            })?;
        let mut roots = RootCertStore::empty();
        roots.add(authority.clone().into_owned())?;
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                .build()
                .map_err(|e| TlsError::General(e.to_string()))?;
        verifier.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_read_back_and_malformed_ones_are_refused() {
        let pin = HubPin([0xab; 32]);
        let text = pin.to_string();
        assert_eq!(text.len(), 7 + 64);
        assert_eq!(text.parse::<HubPin>().unwrap(), pin);
        for bad in [
            "",
            "sha256:",
            "sha1:ab",
            &text[..70],
            &text.replace("ab", "zz"),
        ] {
            assert!(bad.parse::<HubPin>().is_err(), "{bad}");
        }
    }
}
