//! Names a caller gives for things in a member cluster, parsed into types at the API's edge
//! by Kubernetes' own rules, so nothing else can reach a URL or a query. Each type's
//! `FromStr` is its parser; its error names what the value was meant to be.
//!
//! - [`Namespace`]: a DNS-1123 label.
//! - [`ObjectName`]: a DNS-1123 subdomain widened to what real names carry (RBAC's
//!   `system:controller:x`, upper case): letters, digits, `-`, `.`, `_` and `:`, not `.`
//!   or `..`; still percent-encoded whenever it is put in a URL
//!   ([`ObjectName::url_segment`]). Nothing in it can end a field selector's value.
//! - [`KindName`]: a kind as the API server spells it (`Deployment`): a letter, then
//!   letters and digits.
//! - [`ApiVersion`]: `version` (the core group) or `group/version`; the group a DNS-1123
//!   subdomain, the version a DNS-1123 label.
//! - [`RecordName`] and [`ClusterName`]: the names of the records users write (clusters,
//!   rules), DNS-1123 labels ([`crate::model::validate_name`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::model::validate_name;

/// Why a value is not the name it was given as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value:?} is not valid: {why}")]
pub struct InvalidName {
    pub what: &'static str,
    /// The value, cut to 80 characters.
    pub value: String,
    pub why: &'static str,
}

fn invalid<T>(what: &'static str, value: &str, why: &'static str) -> Result<T, InvalidName> {
    Err(InvalidName {
        what,
        value: value.chars().take(80).collect(),
        why,
    })
}

/// `Some(why)` when `text` is not a DNS-1123 label of at most `max` characters.
fn label_problem(text: &str, max: usize) -> Option<&'static str> {
    if text.is_empty() {
        return Some("it is empty");
    }
    if text.len() > max {
        return Some("it is too long");
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some("only lowercase letters, digits and '-' are allowed");
    }
    if text.starts_with('-') || text.ends_with('-') {
        return Some("it must start and end with a letter or digit");
    }
    None
}

/// `Some(why)` when `text` is not a DNS-1123 subdomain (dot-separated labels, 253 at most).
fn subdomain_problem(text: &str) -> Option<&'static str> {
    if text.len() > 253 {
        return Some("it is longer than 253 characters");
    }
    text.split('.').find_map(|label| label_problem(label, 63))
}

/// Defines a string newtype parsed by `$parse`, (de)serialised as its text.
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $what:literal, $parse:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        /// As the text itself, quoted: messages say `cluster "prod"`.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl $name {
            /// What the type is, as errors say it.
            pub const WHAT: &'static str = $what;

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = InvalidName;

            fn from_str(text: &str) -> Result<Self, InvalidName> {
                let check: fn(&str) -> Option<&'static str> = $parse;
                match check(text) {
                    Some(why) => invalid($what, text, why),
                    None => Ok($name(text.to_owned())),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// A parsed name is read as its text wherever text is read; it is made only by
        /// parsing.
        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// A cluster's registered name (a record name: a DNS-1123 label).
    ClusterName,
    "cluster",
    |text| validate_name(text).err().map(|e| e.why)
);

name_type!(
    /// A record's name in a path (a cluster, a sync, resource group or relation rule):
    /// a DNS-1123 label.
    RecordName,
    "name",
    |text| validate_name(text).err().map(|e| e.why)
);

name_type!(
    /// A namespace: a DNS-1123 label.
    Namespace,
    "namespace",
    |text| label_problem(text, 63)
);

name_type!(
    /// A container of a pod: a DNS-1123 label.
    ContainerName,
    "container",
    |text| label_problem(text, 63)
);

name_type!(
    /// An object's name: letters, digits, `-`, `.`, `_` and `:`, 253 at most, not `.`
    /// or `..`.
    ObjectName,
    "name",
    object_name_problem
);

name_type!(
    /// A kind: a letter, then letters and digits, 63 at most.
    KindName,
    "kind",
    kind_problem
);

fn object_name_problem(text: &str) -> Option<&'static str> {
    if text.is_empty() {
        return Some("it is empty");
    }
    if text.len() > 253 {
        return Some("it is longer than 253 characters");
    }
    if text == "." || text == ".." {
        return Some("it may not be '.' or '..'");
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'))
    {
        return Some("only letters, digits, '-', '.', '_' and ':' are allowed");
    }
    None
}

fn kind_problem(text: &str) -> Option<&'static str> {
    let mut chars = text.chars();
    match chars.next() {
        None => Some("it is empty"),
        Some(first) if !first.is_ascii_alphabetic() => Some("it must start with a letter"),
        _ if text.len() > 63 => Some("it is longer than 63 characters"),
        _ if !chars.all(|c| c.is_ascii_alphanumeric()) => {
            Some("only letters and digits are allowed")
        }
        _ => None,
    }
}

/// Bytes kept as they are in a path segment: RFC 3986 unreserved characters and the
/// sub-delimiters Kubernetes names use; everything else (`?`, `#`, non-ASCII...) is encoded.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b':')
    .remove(b'@');

impl ObjectName {
    /// The name as one encoded URL path segment: the API server decodes it back to
    /// exactly this name, and it can never add a segment or a query.
    pub fn url_segment(&self) -> String {
        percent_encoding::utf8_percent_encode(&self.0, SEGMENT).to_string()
    }
}

name_type!(
    /// An API group and version: `v1` (the core group) or `apps/v1`.
    ApiVersion,
    "apiVersion",
    api_version_problem
);

fn api_version_problem(text: &str) -> Option<&'static str> {
    match text.split_once('/') {
        Some(("", _)) => Some("the group before '/' is empty"),
        Some((group, version)) => subdomain_problem(group).or_else(|| label_problem(version, 63)),
        None => label_problem(text, 63),
    }
}

impl ApiVersion {
    /// The group; empty for the core group.
    pub fn group(&self) -> &str {
        self.0.split_once('/').map_or("", |(group, _)| group)
    }

    pub fn version(&self) -> &str {
        self.0
            .split_once('/')
            .map_or(self.0.as_str(), |(_, version)| version)
    }
}

/// For `#[serde(deserialize_with)]` on optional query parameters: absent or empty (as
/// Karpor's clients send `namespace=`) is `None`, anything else must parse.
pub fn optional<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = InvalidName>,
{
    let text = Option::<String>::deserialize(deserializer)?;
    match text.as_deref() {
        None | Some("") => Ok(None),
        Some(text) => text.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_labels() {
        for good in ["default", "kube-system", "a", &"x".repeat(63)] {
            assert!(good.parse::<Namespace>().is_ok(), "{good}");
        }
        for bad in ["", "a/b", "a?b", "A", "a.b", "-a", "..", &"x".repeat(64)] {
            let e = bad.parse::<Namespace>().unwrap_err();
            assert_eq!(e.what, "namespace");
        }
    }

    #[test]
    fn object_names_are_widened_subdomains() {
        for good in ["web", "system:controller:x", "a.b-c_d", "Upper"] {
            assert!(good.parse::<ObjectName>().is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a%2fb",
            "a b",
            "a\nb",
            "a,b",
            "a=b",
            "a?b",
            &"x".repeat(254),
        ] {
            assert!(bad.parse::<ObjectName>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_segment_never_carries_a_delimiter() {
        let name: ObjectName = "system:a.b_c-D".parse().unwrap();
        let segment = name.url_segment();
        assert!(
            !segment.contains(['?', '#', '/', ';', '=', '&', '+']),
            "{segment}"
        );
        assert_eq!(
            percent_encoding::percent_decode_str(&segment)
                .decode_utf8()
                .unwrap(),
            name.as_str()
        );
    }

    #[test]
    fn kinds_and_api_versions() {
        assert!("Deployment".parse::<KindName>().is_ok());
        for bad in ["", "1Pod", "Pod/x", "Pod?", "Po d"] {
            assert!(bad.parse::<KindName>().is_err(), "{bad}");
        }
        let core: ApiVersion = "v1".parse().unwrap();
        assert_eq!((core.group(), core.version()), ("", "v1"));
        let apps: ApiVersion = "apps/v1".parse().unwrap();
        assert_eq!(apps.to_string(), "apps/v1");
        assert!("rbac.authorization.k8s.io/v1".parse::<ApiVersion>().is_ok());
        for bad in [
            "",
            "/v1",
            "apps/",
            "apps/v1/x",
            "Apps/v1",
            "apps/v1?x",
            "a..b/v1",
        ] {
            assert!(bad.parse::<ApiVersion>().is_err(), "{bad}");
        }
    }
}
