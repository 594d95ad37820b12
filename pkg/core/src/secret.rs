//! A credential in config: written inline, or read from a file or an environment variable
//! so it need not sit in the config file. Its `Debug` never shows the value.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a secret comes from: `"literal"`, `{file: PATH}` or `{env: VAR}`.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum SecretSource {
    Inline(String),
    File { file: PathBuf },
    Env { env: String },
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Inline(_) => f.write_str("Inline(<redacted>)"),
            SecretSource::File { file } => write!(f, "File({})", file.display()),
            SecretSource::Env { env } => write!(f, "Env({env})"),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    #[error("cannot read secret file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("environment variable {0} is not set")]
    Env(String),
    #[error("secret is empty")]
    Empty,
}

impl SecretSource {
    /// Reads the value. Trailing newlines of a file are dropped (editors add them).
    pub fn resolve(&self) -> Result<Secret, SecretError> {
        let value = match self {
            SecretSource::Inline(v) => v.clone(),
            SecretSource::File { file } => std::fs::read_to_string(file)
                .map_err(|e| SecretError::File {
                    path: file.display().to_string(),
                    reason: e.to_string(),
                })?
                .trim_end_matches(['\n', '\r'])
                .to_owned(),
            SecretSource::Env { env } => {
                std::env::var(env).map_err(|_| SecretError::Env(env.clone()))?
            }
        };
        if value.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Secret(value))
    }
}

/// A resolved credential.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_source_and_never_prints_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "from-file\n").unwrap();
        let yaml = format!("- inline-value\n- file: {}\n- env: PATH\n", path.display());
        let sources: Vec<SecretSource> = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(sources[0].resolve().unwrap().expose(), "inline-value");
        assert_eq!(sources[1].resolve().unwrap().expose(), "from-file");
        assert!(!sources[2].resolve().unwrap().expose().is_empty());
        let printed = format!("{:?} {:?}", sources, sources[0].resolve().unwrap());
        assert!(!printed.contains("inline-value"), "{printed}");
    }

    #[test]
    fn missing_sources_are_clear_errors() {
        let missing = SecretSource::Env {
            env: "KARPOR_SURELY_UNSET_VARIABLE".into(),
        };
        assert_eq!(
            missing.resolve(),
            Err(SecretError::Env("KARPOR_SURELY_UNSET_VARIABLE".into()))
        );
        let file = SecretSource::File {
            file: "/nonexistent/karpor/token".into(),
        };
        assert!(matches!(file.resolve(), Err(SecretError::File { .. })));
    }
}
