//! Who an agent is: the cluster it may write and the generation of its certificate, held
//! in the certificate as one URI (`karpor-agent://CLUSTER/GENERATION`) that only the
//! hub's authority writes. Read only from certificates the TLS layer has verified.

use std::fmt;

use karpor_core::names::ClusterName;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::AgentError;

const SCHEME: &str = "karpor-agent://";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIdentity {
    pub cluster: ClusterName,
    pub generation: u64,
}

impl AgentIdentity {
    pub(crate) fn uri(&self) -> String {
        format!("{SCHEME}{}/{}", self.cluster, self.generation)
    }

    fn from_uri(uri: &str) -> Option<AgentIdentity> {
        let (cluster, generation) = uri.strip_prefix(SCHEME)?.split_once('/')?;
        Some(AgentIdentity {
            cluster: cluster.parse().ok()?,
            generation: generation.parse().ok()?,
        })
    }

    /// The identity in `der`, a certificate the authority issued: exactly one
    /// `karpor-agent://` URI among its subject alternative names.
    pub fn from_certificate(der: &[u8]) -> Result<AgentIdentity, AgentError> {
        let refused = AgentError::CertificateRefused;
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|_| refused("not an X.509 certificate"))?;
        let names = cert
            .subject_alternative_name()
            .map_err(|_| refused("its subject alternative names are malformed"))?
            .ok_or(refused("it names no agent"))?;
        let mut found = names
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::URI(uri) if uri.starts_with(SCHEME) => Some(*uri),
                _ => None,
            });
        match (found.next(), found.next()) {
            (Some(uri), None) => {
                AgentIdentity::from_uri(uri).ok_or(refused("its agent name is malformed"))
            }
            (None, _) => Err(refused("it names no agent")),
            (Some(_), Some(_)) => Err(refused("it names more than one agent")),
        }
    }
}

impl fmt::Display for AgentIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "agent of cluster {} (generation {})",
            self.cluster, self.generation
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_read_back_and_bad_ones_are_refused() {
        let identity = AgentIdentity {
            cluster: "prod".parse().unwrap(),
            generation: 3,
        };
        assert_eq!(identity.uri(), "karpor-agent://prod/3");
        assert_eq!(AgentIdentity::from_uri(&identity.uri()), Some(identity));
        for bad in [
            "karpor-agent://prod",
            "karpor-agent://Prod/1",
            "karpor-agent://prod/x",
            "karpor-agent://prod/-1",
            "https://prod/1",
            "karpor-agent://../1",
        ] {
            assert_eq!(AgentIdentity::from_uri(bad), None, "{bad}");
        }
    }
}
