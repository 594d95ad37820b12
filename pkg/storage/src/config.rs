use std::path::PathBuf;

use karpor_config::ConfigIssue;
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

impl StorageConfig {
    /// What types cannot say, checked at load so a bad value exits 2 naming the file
    /// instead of failing at connect.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        match self {
            StorageConfig::Sqlite { .. } => Ok(()),
            StorageConfig::Elasticsearch(elastic) => elastic.validate(),
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

impl ElasticConfig {
    fn validate(&self) -> Result<(), ConfigIssue> {
        self.endpoint()?;
        index_problem(&self.index).map_or(Ok(()), |problem| {
            Err(ConfigIssue::new("storage.index", problem))
        })
    }

    /// The node's address: an http(s) URL with a host and no credentials in it (they
    /// go in `username` and `password`, which are kept out of logs).
    pub(crate) fn endpoint(&self) -> Result<url::Url, ConfigIssue> {
        let issue = |problem: &str| ConfigIssue::new("storage.url", problem);
        let url = url::Url::parse(&self.url).map_err(|e| issue(&format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(issue("must be an http(s) URL with a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(issue(
                "must not hold credentials (use storage.username and storage.password)",
            ));
        }
        Ok(url)
    }
}

/// Elasticsearch's and OpenSearch's rules for an index name, which both refuse at
/// creation: better said at load than on the first write.
fn index_problem(index: &str) -> Option<&'static str> {
    const FORBIDDEN: &[char] = &['\\', '/', '*', '?', '"', '<', '>', '|', ' ', ',', '#', ':'];
    if index.is_empty() || index.len() > 255 {
        Some("must be 1 to 255 bytes")
    } else if index
        .chars()
        .any(|c| c.is_uppercase() || FORBIDDEN.contains(&c))
    {
        Some("must be lowercase, without \\ / * ? \" < > | , # : or spaces")
    } else if index.starts_with(['-', '_', '+']) || index == "." || index == ".." {
        Some("must not start with -, _ or +, nor be . or ..")
    } else {
        None
    }
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
