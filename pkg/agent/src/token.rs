//! A join token: `karpor-join.CLUSTER.SECRET`, printed once by `karpor cluster add NAME
//! --mode agent` and presented once by the agent for its first certificate. The hub keeps
//! only the secret's digest ([`JoinToken::digest`]); the cluster in the token only says
//! which enrollment to compare it with.

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use karpor_core::names::ClusterName;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::AgentError;

const PREFIX: &str = "karpor-join";
const SECRET_BYTES: usize = 32;

/// Holds a secret: `Debug` shows only the cluster, and the text is had only through
/// [`JoinToken::reveal`].
#[derive(Clone)]
pub struct JoinToken {
    cluster: ClusterName,
    secret: [u8; SECRET_BYTES],
}

impl JoinToken {
    /// A new token for `cluster`, from the operating system's random source.
    pub fn generate(cluster: ClusterName) -> Result<JoinToken, AgentError> {
        let mut secret = [0u8; SECRET_BYTES];
        getrandom::fill(&mut secret)
            .map_err(|e| AgentError::Authority(format!("no random source: {e}")))?;
        Ok(JoinToken { cluster, secret })
    }

    pub fn cluster(&self) -> &ClusterName {
        &self.cluster
    }

    /// What the hub stores: SHA-256 of the secret, base64url.
    pub fn digest(&self) -> String {
        URL_SAFE_NO_PAD.encode(Sha256::digest(self.secret))
    }

    /// Whether `digest` is this token's, compared in constant time.
    pub fn matches(&self, digest: &str) -> bool {
        self.digest().as_bytes().ct_eq(digest.as_bytes()).into()
    }

    /// The token's text, for the one place it is shown.
    pub fn reveal(&self) -> String {
        format!(
            "{PREFIX}.{}.{}",
            self.cluster,
            URL_SAFE_NO_PAD.encode(self.secret)
        )
    }
}

impl fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinToken({:?}, <redacted>)", self.cluster)
    }
}

impl FromStr for JoinToken {
    type Err = AgentError;

    /// Messages never echo the text: it may be a real token mistyped.
    fn from_str(text: &str) -> Result<JoinToken, AgentError> {
        let malformed = |why: &str| AgentError::Malformed(format!("join token: {why}"));
        let mut parts = text.trim().splitn(3, '.');
        if parts.next() != Some(PREFIX) {
            return Err(malformed("it does not start with `karpor-join.`"));
        }
        let cluster = parts
            .next()
            .and_then(|c| c.parse::<ClusterName>().ok())
            .ok_or_else(|| malformed("its cluster is not a cluster name"))?;
        let secret = parts
            .next()
            .and_then(|s| URL_SAFE_NO_PAD.decode(s).ok())
            .and_then(|s| <[u8; SECRET_BYTES]>::try_from(s).ok())
            .ok_or_else(|| malformed("its secret is not 32 bytes of base64url"))?;
        Ok(JoinToken { cluster, secret })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> ClusterName {
        name.parse().unwrap()
    }

    #[test]
    fn a_token_reads_back_from_its_text_and_matches_only_its_digest() {
        let token = JoinToken::generate(cluster("prod")).unwrap();
        let text = token.reveal();
        assert!(text.starts_with("karpor-join.prod."), "{text}");
        let read: JoinToken = text.parse().unwrap();
        assert_eq!(read.cluster().as_str(), "prod");
        assert!(read.matches(&token.digest()));
        let other = JoinToken::generate(cluster("prod")).unwrap();
        assert!(!other.matches(&token.digest()));
        assert_eq!(token.digest().len(), 43);
    }

    #[test]
    fn malformed_tokens_are_refused_without_echoing_them() {
        let token = JoinToken::generate(cluster("prod")).unwrap().reveal();
        let secret = token.rsplit('.').next().unwrap().to_owned();
        for bad in [
            String::new(),
            format!("kubeadm.prod.{secret}"),
            format!("karpor-join.Prod_1.{secret}"),
            format!("karpor-join.prod.{}", &secret[..20]),
            format!("karpor-join.prod.{secret}x"),
            "karpor-join.prod".to_owned(),
        ] {
            let err = bad.parse::<JoinToken>().unwrap_err().to_string();
            assert!(!err.contains(&secret[..10]), "{err}");
            assert!(err.starts_with("malformed: join token"), "{err}");
        }
    }

    #[test]
    fn debug_hides_the_secret() {
        let token = JoinToken::generate(cluster("prod")).unwrap();
        let secret = token.reveal().rsplit('.').next().unwrap().to_owned();
        assert!(!format!("{token:?}").contains(&secret));
    }
}
