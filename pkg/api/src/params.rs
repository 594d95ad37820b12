//! Query parameters as Karpor's clients send them: booleans read as Go's
//! `strconv.ParseBool` does (anything else is false), and `format=yaml` answering a YAML
//! string in `data`.

use serde::{Deserialize, Deserializer, Serialize};

use crate::envelope::{ApiError, ApiResult, Reply};
use crate::types::ObjectOrYaml;

/// `1`, `t`, `T`, `TRUE`, `true`, `True` are true; anything else (`0`, `false`, an empty
/// value, a typo) is false, as Karpor reads it.
pub(crate) fn lenient_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    let text = String::deserialize(deserializer)?;
    Ok(matches!(
        text.as_str(),
        "1" | "t" | "T" | "TRUE" | "true" | "True"
    ))
}

/// How an object is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Object,
    Yaml,
}

impl Format {
    /// `yaml` (any case) is YAML; anything else, or nothing, the object, as Karpor.
    pub(crate) fn parse(format: Option<&str>) -> Result<Format, ApiError> {
        Ok(match format {
            Some(f) if f.eq_ignore_ascii_case("yaml") => Format::Yaml,
            _ => Format::Object,
        })
    }

    pub(crate) fn reply<T: Serialize>(self, value: T) -> ApiResult<ObjectOrYaml<T>> {
        match self {
            Format::Object => Ok(Reply::ok(ObjectOrYaml::Object(value))),
            Format::Yaml => Ok(Reply::ok(ObjectOrYaml::Yaml(yaml(&value)?))),
        }
    }
}

/// `value`'s YAML text.
pub(crate) fn yaml(value: &impl Serialize) -> Result<String, ApiError> {
    let json = serde_json::to_value(value).unwrap_or_default();
    serde_saphyr::to_string(&json)
        .map_err(|e| ApiError::bad_request(format!("cannot write YAML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Q {
        #[serde(default, deserialize_with = "lenient_bool")]
        b: bool,
    }

    #[test]
    fn booleans_read_as_karpor_reads_them() {
        for (text, expected) in [
            ("b=true", true),
            ("b=1", true),
            ("b=T", true),
            ("b=false", false),
            ("b=", false),
            ("b=maybe", false),
            ("", false),
        ] {
            let q: Q = serde_urlencoded::from_str(text).unwrap();
            assert_eq!(q.b, expected, "{text}");
        }
    }
}
