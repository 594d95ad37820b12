//! The admin token of a local install: on a loopback listener with `auth.anonymous: auto`
//! and no admin token configured, karpor makes one at first start, in a file only its
//! user can read, and the CLI finds it there. Reads stay anonymous on loopback; writes
//! always need a token, so no other local user or web page can change anything.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use karpor_core::{private_file, trusted};

/// Where the token is, relative to the working directory, unless configured.
pub const DEFAULT_LOCAL_TOKEN_FILE: &str = "data/admin-token";
/// The configured name of the generated token, in logs.
pub const LOCAL_TOKEN_NAME: &str = "local-admin";
/// A token file is never larger.
const MAX_TOKEN_BYTES: u64 = 4096;

/// The token, and whether this start made it.
pub struct LocalToken {
    pub token: String,
    pub created: bool,
}

/// Reads the token at `path`, or makes one: 256 random bits in a file only karpor's
/// user can read (see [`karpor_core::private_file`]).
pub fn load_or_create(path: &Path) -> std::io::Result<LocalToken> {
    if let Some(token) = read(path)? {
        return Ok(LocalToken {
            token,
            created: false,
        });
    }
    let token = generate()?;
    if private_file::create_new(path, format!("{token}\n").as_bytes())? {
        return Ok(LocalToken {
            token,
            created: true,
        });
    }
    // Another process made it first.
    let token = read(path)?.ok_or_else(|| std::io::Error::other("the token file vanished"))?;
    Ok(LocalToken {
        token,
        created: false,
    })
}

fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!("karpor_{}", URL_SAFE_NO_PAD.encode(bytes)))
}

fn read(path: &Path) -> std::io::Result<Option<String>> {
    refuse_writable(path)?;
    let Some(bytes) = private_file::read(path, MAX_TOKEN_BYTES)? else {
        return Ok(None);
    };
    let token = String::from_utf8_lossy(&bytes).trim().to_owned();
    if token.len() < 32 {
        return Err(std::io::Error::other(format!(
            "{} holds no usable token (delete it to make a new one)",
            path.display()
        )));
    }
    Ok(Some(token))
}

/// A token others could have written is no admin's: refused, whoever reads it (the
/// server's start checks its owner and directory too).
fn refuse_writable(path: &Path) -> std::io::Result<()> {
    let mode = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata.permissions().mode(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    match trusted::writable_by_others(mode) {
        Some(who) => Err(std::io::Error::other(format!(
            "{} is {who}-writable, so its token may not be karpor's: delete it to make a new one, or chmod 600 it",
            path.display()
        ))),
        None => Ok(()),
    }
}

/// The token file the CLI reads when given no token: `KARPOR_TOKEN_FILE`, else the
/// default beside a local install's data.
pub fn default_path() -> PathBuf {
    PathBuf::from(DEFAULT_LOCAL_TOKEN_FILE)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn made_once_private_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/admin-token");
        let first = load_or_create(&path).unwrap();
        assert!(first.created && first.token.starts_with("karpor_"));
        assert_eq!(first.token.len(), "karpor_".len() + 43);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        let again = load_or_create(&path).unwrap();
        assert!(!again.created);
        assert_eq!(again.token, first.token);
    }

    #[test]
    fn a_token_others_could_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin-token");
        load_or_create(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).unwrap();
        let refused = load_or_create(&path).err().unwrap().to_string();
        assert!(refused.contains("is group-writable"), "{refused}");
    }

    #[test]
    fn a_symlink_is_never_followed_and_an_open_file_is_made_private() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "x".repeat(40)).unwrap();
        let link = dir.path().join("admin-token");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(load_or_create(&link).is_err());
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        load_or_create(&target).unwrap();
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
