//! What karpor trusts on disk, checked with the config, before anything is opened: the
//! directories the embedded stores and the local admin token live in, the token and the
//! metadata key. Each must be karpor's user's (or root's) and writable by nobody else;
//! otherwise someone else could have planted a token that writes as admin, or a key.

use std::path::{Path, PathBuf};

use karpor_config::ConfigIssue;
use karpor_core::trusted::{self, Trusted};
use karpor_metastore::MetastoreConfig;
use karpor_storage::StorageConfig;

use super::Config;

/// A path karpor trusts, the config key that places it, and what it is.
struct Place {
    key: &'static str,
    what: &'static str,
    path: PathBuf,
    kind: Trusted,
}

impl Config {
    /// Refuses the first untrusted place, naming its key, its path and the fix.
    pub(super) fn check_files(&self) -> Result<(), ConfigIssue> {
        let user = trusted::User::current();
        for place in self.trusted_places() {
            if let Err(problem) = trusted::check(&place.path, place.kind, place.what, &user) {
                return Err(ConfigIssue::new(place.key, problem));
            }
        }
        Ok(())
    }

    /// Directories before the files in them, each once.
    fn trusted_places(&self) -> Vec<Place> {
        let mut places = Vec::new();
        let data = |key, file: &Path| Place {
            key,
            what: "data directory",
            path: directory_of(file),
            kind: Trusted::Directory,
        };
        if let MetastoreConfig::Sqlite { path, .. } = &self.metadata {
            places.push(data("metadata.path", path));
        }
        if let StorageConfig::Sqlite { path } = &self.storage {
            places.push(data("storage.path", path));
        }
        let loopback = self.server.listen.ip().is_loopback();
        let token = self
            .auth
            .anonymous
            .makes_local_token(loopback, &self.auth.tokens)
            .then_some(&self.auth.local_token_file);
        if let Some(token) = token {
            places.push(data("auth.local_token_file", token));
        }
        places.dedup_by(|a, b| a.path == b.path);
        if let Some(token) = token {
            places.push(Place {
                key: "auth.local_token_file",
                what: "admin token file",
                path: token.clone(),
                kind: Trusted::File,
            });
        }
        let key = match self.metadata.encryption_key_file() {
            Some(file) => Some(("metadata.encryption_key_file", file.clone())),
            None => self
                .metadata
                .default_key_file()
                .map(|file| ("metadata.path", file)),
        };
        if let Some((key, path)) = key {
            places.push(Place {
                key,
                what: "metadata key file",
                path,
                kind: Trusted::File,
            });
        }
        places
    }
}

/// The directory a file is made in: `.` for a bare name.
fn directory_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn config_in(dir: &Path) -> Config {
        let mut config = Config {
            metadata: MetastoreConfig::Sqlite {
                path: dir.join("data/metadata.db"),
                encryption_key_file: None,
            },
            storage: StorageConfig::Sqlite {
                path: dir.join("data/resources.db"),
            },
            ..Config::default()
        };
        config.auth.local_token_file = dir.join("data/admin-token");
        config
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_embedded_default_checks_its_directory_token_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_in(dir.path());
        let places: Vec<(&str, &str)> = config
            .trusted_places()
            .iter()
            .map(|p| (p.key, p.what))
            .collect();
        assert_eq!(
            places,
            [
                ("metadata.path", "data directory"),
                ("auth.local_token_file", "admin token file"),
                ("metadata.path", "metadata key file"),
            ]
        );
        assert_eq!(config.check_files(), Ok(()));
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        chmod(&data, 0o777);
        let refused = config.check_files().unwrap_err().to_string();
        assert!(
            refused.starts_with("key `metadata.path`: data directory "),
            "{refused}"
        );
        assert!(
            refused.ends_with(&format!("chmod 700 {}", data.display())),
            "{refused}"
        );
        chmod(&data, 0o700);
        std::fs::write(data.join("metadata.key"), "k").unwrap();
        chmod(&data.join("metadata.key"), 0o666);
        let refused = config.check_files().unwrap_err().to_string();
        assert!(refused.contains("metadata key file"), "{refused}");
    }

    #[test]
    fn no_token_is_checked_when_none_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config_in(dir.path());
        config.server.listen = "0.0.0.0:7443".parse().unwrap();
        assert!(!config
            .trusted_places()
            .iter()
            .any(|p| p.key == "auth.local_token_file"));
        assert_eq!(directory_of(Path::new("m.db")), PathBuf::from("."));
    }
}
