//! The hub's certificate authority: an ECDSA P-256 key and a self-signed certificate,
//! kept in the metadata store (the key sealed) so every hub replica issues and trusts the
//! same certificates. It signs agents' certificates, each naming one cluster and a
//! generation ([`crate::identity`]), and the agent listener's server certificate.

use std::net::IpAddr;
use std::time::Duration;

use karpor_core::model::{AgentAuthority, AUTHORITY_RECORD};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData,
    SanType, SerialNumber, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::CertificateDer;
use time::OffsetDateTime;

use crate::identity::AgentIdentity;
use crate::pin::HubPin;
use crate::{AgentError, MAX_REQUEST_BYTES};

const AUTHORITY_NAME: &str = "karpor agent authority";
const AUTHORITY_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
/// Certificates start a little before they are made: clocks differ.
const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// A certificate request within [`MAX_REQUEST_BYTES`], its signature checked.
fn parse_request(request_pem: &str) -> Result<CertificateSigningRequestParams, AgentError> {
    if request_pem.len() > MAX_REQUEST_BYTES {
        return Err(AgentError::Malformed(format!(
            "a certificate request is at most {MAX_REQUEST_BYTES} bytes"
        )));
    }
    CertificateSigningRequestParams::from_pem(request_pem).map_err(|_| {
        AgentError::Malformed("not a certificate request with a valid signature".into())
    })
}

/// How far before `now` a certificate of `lifetime` starts: at most a tenth of the
/// lifetime, so that agents, which renew past two thirds of the validity, do not find a
/// short certificate due for renewal the moment it is issued.
fn backdated(now: OffsetDateTime, lifetime: Duration) -> OffsetDateTime {
    now - CLOCK_SKEW.min(lifetime / 10)
}

pub struct Authority {
    certificate_pem: String,
    certificate_der: CertificateDer<'static>,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate issued, with when it stops being valid.
#[derive(Debug, Clone)]
pub struct Issued {
    pub certificate_pem: String,
    pub not_after: OffsetDateTime,
}

/// A server certificate and the key made for it.
pub struct ServerCertificate {
    pub chain: Vec<CertificateDer<'static>>,
    pub key_pem: String,
}

impl Authority {
    pub fn generate(now: OffsetDateTime) -> Result<Authority, AgentError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(authority)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = common_name(AUTHORITY_NAME);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now - CLOCK_SKEW;
        params.not_after = now + AUTHORITY_LIFETIME;
        params.serial_number = Some(serial()?);
        let certificate = params.self_signed(&key).map_err(authority)?;
        let key_pem = key.serialize_pem();
        Ok(Authority {
            certificate_pem: certificate.pem(),
            certificate_der: certificate.der().clone(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    pub fn from_record(record: &AgentAuthority) -> Result<Authority, AgentError> {
        let key = KeyPair::from_pem(&record.key_pem).map_err(authority)?;
        let certificate_der = rustls_pem(&record.certificate_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&record.certificate_pem, key).map_err(authority)?;
        Ok(Authority {
            certificate_pem: record.certificate_pem.clone(),
            certificate_der,
            key_pem: record.key_pem.clone(),
            issuer,
        })
    }

    pub fn to_record(&self) -> AgentAuthority {
        AgentAuthority {
            name: AUTHORITY_RECORD.to_owned(),
            certificate_pem: self.certificate_pem.clone(),
            key_pem: self.key_pem.clone(),
        }
    }

    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    pub fn certificate_der(&self) -> &CertificateDer<'static> {
        &self.certificate_der
    }

    pub fn pin(&self) -> Result<HubPin, AgentError> {
        HubPin::of_certificate(&self.certificate_der)
            .ok_or_else(|| AgentError::Authority("its certificate does not parse".into()))
    }

    /// What hub replicas present to each other's agent listener (forwarded live reads):
    /// derived from the authority's key, which only replicas read, so no agent can.
    pub fn peer_secret(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(b"karpor-peer-v1\0");
        hash.update(self.key_pem.as_bytes());
        let bytes: [u8; 32] = hash.finalize().into();
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The fingerprint of the key `request_pem` is over, once its signature is checked.
    pub fn request_fingerprint(request_pem: &str) -> Result<String, AgentError> {
        let request = parse_request(request_pem)?;
        Ok(crate::key::fingerprint(
            &request.public_key.subject_public_key_info(),
        ))
    }

    /// A client certificate for `identity` over the key of `request`, whose signature is
    /// checked; every name in the request is ignored.
    pub fn issue_agent(
        &self,
        identity: &AgentIdentity,
        request_pem: &str,
        now: OffsetDateTime,
        lifetime: Duration,
    ) -> Result<Issued, AgentError> {
        let request = parse_request(request_pem)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = common_name(&format!("karpor-agent:{}", identity.cluster));
        params.subject_alt_names =
            vec![SanType::URI(identity.uri().try_into().map_err(authority)?)];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = backdated(now, lifetime);
        params.not_after = now + lifetime;
        params.serial_number = Some(serial()?);
        params.use_authority_key_identifier_extension = true;
        let certificate = params
            .signed_by(&request.public_key, &self.issuer)
            .map_err(authority)?;
        Ok(Issued {
            certificate_pem: certificate.pem(),
            not_after: params.not_after,
        })
    }

    /// The agent listener's certificate for `names` (DNS names or IP addresses), with a
    /// key of its own; the chain ends in the authority, which agents find by the pin.
    pub fn issue_server(
        &self,
        names: &[String],
        now: OffsetDateTime,
        lifetime: Duration,
    ) -> Result<ServerCertificate, AgentError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(authority)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = common_name("karpor hub");
        params.subject_alt_names = names
            .iter()
            .map(|name| match name.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => Ok(SanType::DnsName(
                    name.clone().try_into().map_err(authority)?,
                )),
            })
            .collect::<Result<_, AgentError>>()?;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = now - CLOCK_SKEW;
        params.not_after = now + lifetime;
        params.serial_number = Some(serial()?);
        params.use_authority_key_identifier_extension = true;
        let certificate = params.signed_by(&key, &self.issuer).map_err(authority)?;
        Ok(ServerCertificate {
            chain: vec![certificate.der().clone(), self.certificate_der.clone()],
            key_pem: key.serialize_pem(),
        })
    }
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authority(<key redacted>)")
    }
}

/// The one certificate in `pem`, as DER.
pub fn rustls_pem(pem: &str) -> Result<CertificateDer<'static>, AgentError> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|_| AgentError::Malformed("not a PEM certificate".into()))
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

/// 16 random bytes, the top bit clear so the serial stays positive.
fn serial() -> Result<SerialNumber, AgentError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| AgentError::Authority(format!("no random source: {e}")))?;
    bytes[0] &= 0x7f;
    Ok(SerialNumber::from_slice(&bytes))
}

fn authority(e: rcgen::Error) -> AgentError {
    AgentError::Authority(e.to_string())
}
