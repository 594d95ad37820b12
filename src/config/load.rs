use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::error::Kind;
use figment::providers::{Env, Format, Serialized, Yaml};
use figment::{Figment, Source};
use karpor_config::ConfigIssue;

use super::{Config, LogFormat, LogLevel, SECTIONS};

pub(super) const DEFAULT_CONFIG_PATH: &str = "config/karpor.yaml";

/// The common flags, layered over the file and the environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    pub listen: Option<SocketAddr>,
    pub log_level: Option<LogLevel>,
    pub log_format: Option<LogFormat>,
}

/// A config problem: where it was found (the file, `environment`, or the built-in
/// defaults), the key when there is one, and what is wrong. Printed as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) struct ConfigError {
    origin: String,
    key: Option<String>,
    problem: String,
}

impl ConfigError {
    /// A problem with the key's value, as a section's `validate()` found it.
    pub(super) fn in_file(origin: &str, issue: ConfigIssue) -> Self {
        ConfigError {
            origin: origin.to_owned(),
            key: Some(issue.key().to_owned()),
            problem: issue.problem().to_owned(),
        }
    }

    /// A problem of the whole source: it cannot be read, or is not YAML.
    fn whole(origin: &str, problem: impl std::fmt::Display) -> Self {
        ConfigError {
            origin: origin.to_owned(),
            key: None,
            problem: problem.to_string(),
        }
    }

    #[cfg(test)]
    pub(super) fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    #[cfg(test)]
    pub(super) fn problem(&self) -> &str {
        &self.problem
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            Some(key) => write!(
                f,
                "config error: {}: key `{key}`: {}",
                self.origin, self.problem
            ),
            None => write!(f, "config error: {}: {}", self.origin, self.problem),
        }
    }
}

/// Reads the config: the file (`path`, or `config/karpor.yaml` when it exists, or the
/// built-in embedded default), then `KARPOR_SECTION__KEY` variables, then the flags; then
/// validates it. Returns the config and the file it came from, if any.
pub(crate) fn load(
    path: Option<&Path>,
    overrides: &Overrides,
) -> Result<(Config, Option<PathBuf>), ConfigError> {
    let (path, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from(DEFAULT_CONFIG_PATH), false),
    };
    let mut figment = Figment::new();
    let file = match std::fs::read_to_string(&path) {
        Ok(text) => {
            // An empty file is the defaults, not an error.
            if !text.trim().is_empty() {
                figment = figment.merge(Yaml::file_exact(&path));
            }
            Some(path)
        }
        Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(ConfigError::whole(
                &path.display().to_string(),
                format_args!("cannot read: {e}"),
            ));
        }
    };
    // Only `KARPOR_SECTION__KEY`: a client's settings (`KARPOR_SERVER`, `KARPOR_TOKEN`)
    // never reach the server's config.
    figment = figment.merge(
        Env::prefixed("KARPOR_")
            .filter(|key| {
                let key = key.as_str().to_ascii_lowercase();
                key.split_once("__")
                    .is_some_and(|(section, _)| SECTIONS.contains(&section))
            })
            .split("__"),
    );
    if let Some(listen) = overrides.listen {
        figment = figment.merge(Serialized::default("server.listen", listen));
    }
    if let Some(level) = overrides.log_level {
        figment = figment.merge(Serialized::default("log.level", level));
    }
    if let Some(format) = overrides.log_format {
        figment = figment.merge(Serialized::default("log.format", format));
    }
    let origin = file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in defaults".to_owned());
    let mut config: Config = figment.extract().map_err(|e| describe(e, &origin))?;
    config
        .auth
        .read_policies_file()
        .map_err(|issue| ConfigError::in_file(&origin, issue))?;
    config.validate(&origin)?;
    Ok((config, file))
}

/// Turns figment's error into one line: where, which key, what is wrong.
fn describe(error: figment::Error, origin: &str) -> ConfigError {
    let source = match error.metadata.as_ref() {
        Some(m) => match &m.source {
            Some(Source::File(p)) => p.display().to_string(),
            _ if m.name.contains("environment") => "environment".to_owned(),
            _ => m.name.to_string(),
        },
        None => origin.to_owned(),
    };
    let mut key = error.path.join(".");
    let what = match &error.kind {
        Kind::UnknownField(field, expected) => {
            key = join(&key, field);
            format!("unknown key (expected one of: {})", expected.join(", "))
        }
        Kind::MissingField(field) => {
            key = join(&key, field);
            "missing key".to_owned()
        }
        Kind::UnknownVariant(found, expected) => {
            // Backends are tagged by `backend`; other enums are plain values.
            if key == "metadata" || key == "storage" {
                key = join(&key, "backend");
            }
            format!(
                "unknown value `{found}` (supported: {})",
                expected.join(", ")
            )
        }
        other => other.to_string(),
    };
    if key.is_empty() {
        return ConfigError::whole(&source, what);
    }
    ConfigError::in_file(&source, ConfigIssue::new(key, what))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}
