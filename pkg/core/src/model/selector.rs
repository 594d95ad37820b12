//! A sync rule's cluster selector: equality terms on a cluster's labels (`a=b`, `a==b`,
//! `a!=b`, `a`, `!a`), joined by commas, all of which must hold. Parsed once where it is
//! read (serde reads and writes it as its text), matched by the syncer. Set terms (`in`,
//! `notin`) are refused rather than read as something else.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::validate_name;

/// Parsed label terms; written back as canonical text (`a=b,c!=d,e,!f`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Term {
    Equals { key: String, value: String },
    NotEquals { key: String, value: String },
    Exists(String),
    NotExists(String),
}

/// Why a text is not a cluster label selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(String);

impl LabelSelector {
    /// Whether every term holds for `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().all(|term| match term {
            Term::Equals { key, value } => labels.get(key) == Some(value),
            Term::NotEquals { key, value } => labels.get(key) != Some(value),
            Term::Exists(key) => labels.contains_key(key),
            Term::NotExists(key) => !labels.contains_key(key),
        })
    }

    /// How many terms it has (`syncer.limits.selectors_per_rule` counts them).
    pub fn term_count(&self) -> usize {
        self.terms.len()
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, SelectorError> {
        if text.trim().is_empty() {
            return Err(SelectorError(
                "empty; use \"*\" for every cluster".to_owned(),
            ));
        }
        let terms = text
            .split(',')
            .map(|term| Term::parse(term.trim()))
            .collect::<Result<_, _>>()?;
        Ok(LabelSelector { terms })
    }
}

impl Term {
    /// `term` is trimmed; a key or value is trimmed around its operator too.
    fn parse(term: &str) -> Result<Term, SelectorError> {
        let (key, value) = if let Some((k, v)) = term.split_once("!=") {
            (k, Some(v))
        } else if let Some((k, v)) = term.split_once('=') {
            (k, Some(v.strip_prefix('=').unwrap_or(v)))
        } else {
            (term.strip_prefix('!').unwrap_or(term), None)
        };
        let key = key.trim();
        if !is_label_key(key) {
            return Err(SelectorError(format!(
                "{term:?}: terms are KEY=VALUE, KEY!=VALUE, KEY or !KEY, joined by commas"
            )));
        }
        let key = key.to_owned();
        let Some(value) = value.map(str::trim) else {
            return Ok(if term.starts_with('!') {
                Term::NotExists(key)
            } else {
                Term::Exists(key)
            });
        };
        if !value.is_empty() && !is_label_name(value) {
            return Err(SelectorError(format!(
                "{term:?}: {value:?} is not a label value"
            )));
        }
        let value = value.to_owned();
        Ok(if term.contains("!=") {
            Term::NotEquals { key, value }
        } else {
            Term::Equals { key, value }
        })
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match term {
                Term::Equals { key, value } => write!(f, "{key}={value}")?,
                Term::NotEquals { key, value } => write!(f, "{key}!={value}")?,
                Term::Exists(key) => write!(f, "{key}")?,
                Term::NotExists(key) => write!(f, "!{key}")?,
            }
        }
        Ok(())
    }
}

impl Serialize for LabelSelector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LabelSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name.
fn is_label_key(key: &str) -> bool {
    match key.rsplit_once('/') {
        Some((prefix, name)) => {
            prefix.len() <= 253
                && prefix.split('.').all(|part| validate_name(part).is_ok())
                && is_label_name(name)
        }
        None => is_label_name(key),
    }
}

/// 1 to 63 letters, digits, `-`, `_` and `.`, beginning and ending with a letter or digit.
fn is_label_name(name: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    name.len() <= 63
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// In the OpenAPI document, a selector is the text it is read from.
#[cfg(feature = "schema")]
impl utoipa::PartialSchema for LabelSelector {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "Cluster label terms joined by commas, all of which must hold: `a=b`, `a==b`, `a!=b`, `a`, `!a`",
            ))
            .into()
    }
}

#[cfg(feature = "schema")]
impl utoipa::ToSchema for LabelSelector {}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(text: &str) -> LabelSelector {
        text.parse().unwrap()
    }

    #[test]
    fn each_term_kind_parses_and_is_written_back_canonically() {
        let selector = parse(" env = prod, tier!=2 ,example.com/team, ! canary, a==b, empty=");
        assert_eq!(
            selector.to_string(),
            "env=prod,tier!=2,example.com/team,!canary,a=b,empty="
        );
        assert_eq!(selector.term_count(), 6);
        assert_eq!(parse(&selector.to_string()), selector);
    }

    #[test]
    fn every_term_must_hold() {
        let prod = labels(&[("env", "prod"), ("tier", "1"), ("empty", "")]);
        assert!(parse("env=prod").matches(&prod));
        assert!(parse("env==prod, tier!=2, !canary, empty").matches(&prod));
        assert!(parse("empty=").matches(&prod));
        assert!(parse("absent!=x").matches(&prod));
        assert!(!parse("env=prod,canary").matches(&prod));
        assert!(!parse("tier!=1").matches(&prod));
        assert!(!parse("!env").matches(&prod));
        assert!(!parse("env=dev").matches(&prod));
    }

    #[test]
    fn what_is_not_an_equality_selector_is_refused_with_why() {
        let refused = |text: &str| text.parse::<LabelSelector>().unwrap_err().to_string();
        assert_eq!(refused(" "), "empty; use \"*\" for every cluster");
        assert_eq!(
            refused("env in (prod)"),
            "\"env in (prod)\": terms are KEY=VALUE, KEY!=VALUE, KEY or !KEY, joined by commas"
        );
        assert_eq!(
            refused("env=prod,"),
            "\"\": terms are KEY=VALUE, KEY!=VALUE, KEY or !KEY, joined by commas"
        );
        assert_eq!(refused("a=b c"), "\"a=b c\": \"b c\" is not a label value");
        assert_eq!(refused("a!=-x"), "\"a!=-x\": \"-x\" is not a label value");
        for bad in ["!a=b", "a===b", "Not OK", "a/b/c", "=x"] {
            assert!(bad.parse::<LabelSelector>().is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_reads_and_writes_the_text() {
        let selector: LabelSelector = serde_yaml::from_str("env=prod, !canary").unwrap();
        assert_eq!(selector, parse("env=prod,!canary"));
        let written = serde_yaml::to_string(&selector).unwrap();
        assert_eq!(
            serde_yaml::from_str::<String>(&written).unwrap(),
            "env=prod,!canary"
        );
        let err = serde_yaml::from_str::<LabelSelector>("env in (prod)").unwrap_err();
        assert!(err.to_string().contains("terms are KEY=VALUE"), "{err}");
    }
}
