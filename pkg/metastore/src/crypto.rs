//! Credentials at rest: AES-256-GCM with a key from `metadata.encryption_key_file` (on the
//! embedded store, a key made beside the database when none is configured). A sealed
//! value is text (`karpor:aes256gcm:v1:` + base64 of nonce and ciphertext), so it fits
//! every backend; values written before a key was set are read as they are.

use std::path::Path;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::StoreError;

const PREFIX: &str = "karpor:aes256gcm:v1:";
const NONCE_LEN: usize = 12;

pub struct Sealer {
    cipher: Aes256Gcm,
}

impl Sealer {
    /// The file holds 32 bytes, raw or base64 (`openssl rand -base64 32`).
    pub fn from_key_file(path: &Path) -> Result<Sealer, StoreError> {
        let bytes = std::fs::read(path).map_err(|e| {
            StoreError::Misconfigured(format!("cannot read {}: {e}", path.display()))
        })?;
        let key = if bytes.len() == 32 {
            bytes
        } else {
            let text = String::from_utf8_lossy(&bytes);
            STANDARD
                .decode(text.trim())
                .ok()
                .filter(|k| k.len() == 32)
                .ok_or_else(|| {
                    StoreError::Misconfigured(format!(
                        "{} must hold a 32-byte key, raw or base64",
                        path.display()
                    ))
                })?
        };
        Ok(Sealer::new(&key))
    }

    /// The key at `path`, made (32 random bytes, base64, 0600) when absent; `true` when
    /// this call made it.
    pub fn load_or_create(path: &Path) -> Result<(Sealer, bool), StoreError> {
        let misconfigured = |e: std::io::Error| StoreError::Misconfigured(e.to_string());
        if karpor_core::private_file::read(path, 1024)
            .map_err(misconfigured)?
            .is_some()
        {
            return Ok((Sealer::from_key_file(path)?, false));
        }
        let key = Aes256Gcm::generate_key(&mut OsRng);
        let text = format!("{}\n", STANDARD.encode(key));
        let made =
            karpor_core::private_file::create_new(path, text.as_bytes()).map_err(misconfigured)?;
        Ok((Sealer::from_key_file(path)?, made))
    }

    pub fn new(key: &[u8]) -> Sealer {
        Sealer {
            cipher: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key)),
        }
    }

    pub fn seal(&self, plaintext: &str) -> String {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let ciphertext = self
            .cipher
            .encrypt(&nonce, plaintext.as_bytes())
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&ciphertext);
        format!("{PREFIX}{}", STANDARD.encode(sealed))
    }

    pub fn open(&self, stored: &str) -> Result<String, StoreError> {
        let Some(encoded) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_owned());
        };
        let sealed = STANDARD
            .decode(encoded)
            .map_err(|_| StoreError::Corrupt("sealed credential is not base64".to_owned()))?;
        if sealed.len() < NONCE_LEN {
            return Err(StoreError::Corrupt(
                "sealed credential is truncated".to_owned(),
            ));
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        let plaintext = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), ciphertext)
            .map_err(|_| {
                StoreError::Misconfigured(
                    "a credential does not decrypt with metadata.encryption_key_file (wrong key?)"
                        .to_owned(),
                )
            })?;
        String::from_utf8(plaintext).map_err(|e| StoreError::Corrupt(e.to_string()))
    }
}

/// Whether a stored value is sealed (so it cannot be read without the key).
pub(crate) fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_and_refuses_the_wrong_key() {
        let sealer = Sealer::new(&[7; 32]);
        let sealed = sealer.seal("token: hunter2");
        assert!(is_sealed(&sealed) && !sealed.contains("hunter2"));
        assert_ne!(
            sealed,
            sealer.seal("token: hunter2"),
            "a fresh nonce each time"
        );
        assert_eq!(sealer.open(&sealed).unwrap(), "token: hunter2");
        assert_eq!(sealer.open("plain").unwrap(), "plain");
        assert!(Sealer::new(&[8; 32]).open(&sealed).is_err());
    }

    #[test]
    fn reads_raw_and_base64_key_files() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw");
        std::fs::write(&raw, [1u8; 32]).unwrap();
        let b64 = dir.path().join("b64");
        std::fs::write(&b64, format!("{}\n", STANDARD.encode([1u8; 32]))).unwrap();
        let sealed = Sealer::from_key_file(&raw).unwrap().seal("x");
        assert_eq!(
            Sealer::from_key_file(&b64).unwrap().open(&sealed).unwrap(),
            "x"
        );
        let short = dir.path().join("short");
        std::fs::write(&short, "abc").unwrap();
        assert!(Sealer::from_key_file(&short).is_err());
    }
}
