use std::path::PathBuf;

use karpor_core::SecretSource;
use serde::{Deserialize, Serialize};

/// `storage:` in the config file; `backend` selects the variant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "backend", rename_all = "lowercase", deny_unknown_fields)]
pub enum StorageConfig {
    Sqlite { path: PathBuf },
    Elasticsearch(ElasticConfig),
}

impl StorageConfig {
    /// Every secret of the section, by key, so a missing one stops the start.
    pub fn secrets(&self) -> Vec<(&'static str, &SecretSource)> {
        match self {
            StorageConfig::Elasticsearch(ElasticConfig {
                password: Some(password),
                ..
            }) => vec![("storage.password", password)],
            _ => Vec::new(),
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig::Sqlite {
            path: PathBuf::from("./data/resources.db"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ElasticConfig {
    /// `http(s)://host:port` of one node or a load balancer.
    pub url: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// The index karpor creates and uses.
    #[serde(default = "default_index")]
    pub index: String,
    /// When writes become searchable: `wait_for` (the write returns once they are),
    /// `true` (forces a refresh: for tests), `false` (at the next periodic refresh).
    #[serde(default)]
    pub refresh: RefreshPolicy,
}

fn default_index() -> String {
    "karpor-resources".to_owned()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefreshPolicy {
    #[default]
    WaitFor,
    True,
    False,
}

impl RefreshPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            RefreshPolicy::WaitFor => "wait_for",
            RefreshPolicy::True => "true",
            RefreshPolicy::False => "false",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_parse() {
        let es: StorageConfig = serde_yaml::from_str(
            "{backend: elasticsearch, url: 'http://127.0.0.1:9200', username: elastic, password: {env: ES_PASSWORD}}",
        )
        .unwrap();
        assert!(
            matches!(es, StorageConfig::Elasticsearch(c) if c.username.as_deref() == Some("elastic"))
        );
        let sqlite: StorageConfig = serde_yaml::from_str("{backend: sqlite, path: r.db}").unwrap();
        assert_eq!(
            sqlite,
            StorageConfig::Sqlite {
                path: "r.db".into()
            }
        );
    }

    #[test]
    fn unknown_backend_and_keys_are_refused() {
        let err = serde_yaml::from_str::<StorageConfig>("{backend: mongo}").unwrap_err();
        assert!(err.to_string().contains("elasticsearch"), "{err}");
        let err =
            serde_yaml::from_str::<StorageConfig>("{backend: elasticsearch, url: x, urls: y}")
                .unwrap_err();
        assert!(err.to_string().contains("urls"), "{err}");
    }
}
