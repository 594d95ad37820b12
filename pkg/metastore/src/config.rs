use std::path::PathBuf;

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

    /// `(key, problem)` for what types cannot say: a configured key file must hold a key.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if let Some(path) = self.encryption_key_file() {
            if let Err(e) = crate::crypto::Sealer::from_key_file(path) {
                return Err(("metadata.encryption_key_file".into(), e.to_string()));
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
