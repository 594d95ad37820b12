use std::path::PathBuf;

use karpor_config::ConfigIssue;
use karpor_core::SecretSource;
use serde::{Deserialize, Serialize};

/// `metadata:` in the config file; `backend` selects the variant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "backend", rename_all = "lowercase", deny_unknown_fields)]
pub enum MetastoreConfig {
    Sqlite {
        path: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encryption_key_file: Option<PathBuf>,
    },
    Etcd {
        etcd: EtcdConfig,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encryption_key_file: Option<PathBuf>,
    },
    Mysql {
        url: SecretSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encryption_key_file: Option<PathBuf>,
    },
}

/// The key made beside the embedded database when none is configured.
pub(crate) const DEFAULT_KEY_FILE_NAME: &str = "metadata.key";

impl MetastoreConfig {
    /// Where the key of the embedded store is when none is configured.
    pub fn default_key_file(&self) -> Option<PathBuf> {
        match self {
            MetastoreConfig::Sqlite {
                path,
                encryption_key_file: None,
            } => Some(path.with_file_name(DEFAULT_KEY_FILE_NAME)),
            _ => None,
        }
    }

    /// Every secret of the section, by key, so a missing one stops the start.
    pub fn secrets(&self) -> Vec<(&'static str, &SecretSource)> {
        match self {
            MetastoreConfig::Mysql { url, .. } => vec![("metadata.url", url)],
            MetastoreConfig::Etcd {
                etcd:
                    EtcdConfig {
                        password: Some(password),
                        ..
                    },
                ..
            } => vec![("metadata.etcd.password", password)],
            _ => Vec::new(),
        }
    }

    /// For what types cannot say: a configured key file must hold a key.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        match self {
            MetastoreConfig::Sqlite { .. } => {}
            MetastoreConfig::Etcd { etcd, .. } => etcd.validate()?,
            // An unreadable URL is the secrets check's to name; a readable one must parse.
            MetastoreConfig::Mysql { url, .. } => {
                if let Ok(url) = url.resolve() {
                    crate::sql::mysql_options(url.expose())?;
                }
            }
        }
        if let Some(path) = self.encryption_key_file() {
            if let Err(e) = crate::crypto::Sealer::from_key_file(path) {
                return Err(ConfigIssue::new("metadata.encryption_key_file", e));
            }
        }
        Ok(())
    }

    /// When set, cluster credentials are stored encrypted with this key.
    pub fn encryption_key_file(&self) -> Option<&PathBuf> {
        match self {
            MetastoreConfig::Sqlite {
                encryption_key_file,
                ..
            }
            | MetastoreConfig::Etcd {
                encryption_key_file,
                ..
            }
            | MetastoreConfig::Mysql {
                encryption_key_file,
                ..
            } => encryption_key_file.as_ref(),
        }
    }
}

impl Default for MetastoreConfig {
    fn default() -> Self {
        MetastoreConfig::Sqlite {
            path: PathBuf::from("./data/metadata.db"),
            encryption_key_file: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdConfig {
    pub endpoints: Vec<String>,
    #[serde(default = "default_prefix")]
    pub prefix: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<SecretSource>,
    #[serde(default)]
    pub tls: Option<EtcdTls>,
}

impl EtcdConfig {
    fn validate(&self) -> Result<(), ConfigIssue> {
        if self.endpoints.is_empty() {
            return Err(ConfigIssue::new(
                "metadata.etcd.endpoints",
                "must name at least one endpoint",
            ));
        }
        for (i, endpoint) in self.endpoints.iter().enumerate() {
            // etcd's client takes `host:port` or an http(s) URL.
            let url = if endpoint.contains("://") {
                url::Url::parse(endpoint).ok()
            } else {
                url::Url::parse(&format!("http://{endpoint}")).ok()
            };
            let fine = url.is_some_and(|u| {
                matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.path() == "/"
            });
            if !fine {
                return Err(ConfigIssue::new(
                    format!("metadata.etcd.endpoints[{i}]"),
                    format_args!("`{endpoint}` is not host:port or an http(s) URL"),
                ));
            }
        }
        if !self.prefix.starts_with('/') {
            return Err(ConfigIssue::new(
                "metadata.etcd.prefix",
                "must start with /",
            ));
        }
        Ok(())
    }
}

fn default_prefix() -> String {
    "/karpor".to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdTls {
    pub ca_file: PathBuf,
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_backend_parses_from_its_documented_shape() {
        let sqlite: MetastoreConfig =
            serde_yaml::from_str("{backend: sqlite, path: ./data/m.db}").unwrap();
        assert_eq!(
            sqlite,
            MetastoreConfig::Sqlite {
                path: "./data/m.db".into(),
                encryption_key_file: None
            }
        );
        let etcd: MetastoreConfig =
            serde_yaml::from_str("{backend: etcd, etcd: {endpoints: [http://127.0.0.1:2379]}}")
                .unwrap();
        assert!(matches!(etcd, MetastoreConfig::Etcd { etcd, .. } if etcd.prefix == "/karpor"));
        let mysql: MetastoreConfig =
            serde_yaml::from_str("{backend: mysql, url: {env: KARPOR_MYSQL_URL}}").unwrap();
        assert!(matches!(mysql, MetastoreConfig::Mysql { .. }));
    }

    #[test]
    fn unknown_backend_lists_the_supported_ones() {
        let err = serde_yaml::from_str::<MetastoreConfig>("{backend: oracle}").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("oracle") && text.contains("sqlite"), "{text}");
        assert!(text.contains("etcd") && text.contains("mysql"), "{text}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = serde_yaml::from_str::<MetastoreConfig>("{backend: sqlite, path: x, pth: y}")
            .unwrap_err();
        assert!(err.to_string().contains("pth"), "{err}");
    }
}
