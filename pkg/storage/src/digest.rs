//! What one type's documents in one cluster come to, in a few bytes: how many there are
//! and a digest of their uids and resourceVersions that does not depend on their order.
//! An agent restarting compares its list's with storage's and relists only the types
//! whose digests differ.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The documents of a type not marked deleted, in one cluster (and one namespace).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VersionDigest {
    pub count: u64,
    /// The sum of each document's `sha256(uid, resourceVersion)`, first 16 bytes, in hex:
    /// a sum, so the order the documents are read in does not matter.
    #[serde(with = "hex_u128")]
    pub sum: u128,
}

impl VersionDigest {
    /// Counts the object `uid` at `resource_version` in.
    pub fn add(&mut self, uid: &str, resource_version: &str) {
        let mut hash = Sha256::new();
        hash.update(uid.as_bytes());
        // A separator no uid holds, so ("ab", "c") and ("a", "bc") differ.
        hash.update([0]);
        hash.update(resource_version.as_bytes());
        let bytes: [u8; 32] = hash.finalize().into();
        let mut first = [0u8; 16];
        first.copy_from_slice(&bytes[..16]);
        self.count += 1;
        self.sum = self.sum.wrapping_add(u128::from_be_bytes(first));
    }
}

mod hex_u128 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{value:032x}"))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        let text = String::deserialize(d)?;
        if text.len() != 32 {
            return Err(serde::de::Error::custom("a digest is 32 hex digits"));
        }
        u128::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_does_not_matter_and_every_part_does() {
        let digest = |pairs: &[(&str, &str)]| {
            let mut d = VersionDigest::default();
            for (uid, rv) in pairs {
                d.add(uid, rv);
            }
            d
        };
        let a = digest(&[("u1", "1"), ("u2", "7")]);
        assert_eq!(a, digest(&[("u2", "7"), ("u1", "1")]));
        assert_ne!(a, digest(&[("u1", "1"), ("u2", "8")]));
        assert_ne!(a, digest(&[("u1", "1")]));
        assert_ne!(digest(&[("ab", "c")]), digest(&[("a", "bc")]));
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<VersionDigest>(&text).unwrap(), a);
        assert!(serde_json::from_str::<VersionDigest>(r#"{"count":1,"sum":"zz"}"#).is_err());
    }
}
