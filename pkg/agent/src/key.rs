//! The agent's own key: made where the agent runs and never sent; the hub sees only
//! certificate requests signed with it.

use rcgen::{CertificateParams, KeyPair, PublicKeyData, PKCS_ECDSA_P256_SHA256};

use crate::AgentError;

pub struct AgentKey {
    pair: KeyPair,
}

impl AgentKey {
    /// A new ECDSA P-256 key.
    pub fn generate() -> Result<AgentKey, AgentError> {
        let pair = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
            .map_err(|e| AgentError::Authority(format!("cannot make a key: {e}")))?;
        Ok(AgentKey { pair })
    }

    pub fn from_pem(pem: &str) -> Result<AgentKey, AgentError> {
        let pair = KeyPair::from_pem(pem).map_err(|_| {
            AgentError::Malformed("the agent's key is not a PEM private key".into())
        })?;
        Ok(AgentKey { pair })
    }

    /// The key as PKCS#8 PEM, for the agent's own state file alone.
    pub fn to_pem(&self) -> String {
        self.pair.serialize_pem()
    }

    /// The public key as a certificate holds it (SubjectPublicKeyInfo, DER).
    pub fn public_key_der(&self) -> Vec<u8> {
        self.pair.subject_public_key_info()
    }

    /// What the agent logs and an admin approves a join by: [`fingerprint`] of its key.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.public_key_der())
    }

    /// A certificate request: only its key and signature matter, since the hub writes
    /// every name of the certificate itself.
    pub fn request(&self) -> Result<String, AgentError> {
        CertificateParams::default()
            .serialize_request(&self.pair)
            .and_then(|csr| csr.pem())
            .map_err(|e| AgentError::Authority(format!("cannot make a request: {e}")))
    }
}

/// `sha256:HEX` of a public key's SubjectPublicKeyInfo (DER).
pub fn fingerprint(public_key_der: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(public_key_der);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

impl std::fmt::Debug for AgentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentKey(<redacted>)")
    }
}
