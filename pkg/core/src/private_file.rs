//! Files only karpor's user may read (keys, tokens, exports): made 0600 in directories
//! made 0700, never through a symlink, never half-written (a temporary file is linked or
//! renamed into place), and made private again when found open to others.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;

/// Makes `dir` and its missing parents, new ones 0700.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Reads `path` (at most `max` bytes) without following a symlink; `None` when absent. A
/// file readable by group or others is made 0600 first, with a warning.
pub fn read(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(with_path(e, path)),
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if metadata.permissions().mode() & 0o077 != 0 {
        tracing::warn!(file = %path.display(), "a private file was readable by others; made 0600");
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "{} is above {max} bytes",
            path.display()
        )));
    }
    Ok(Some(bytes))
}

/// Creates `path` with `bytes`, 0600, unless it exists: `Ok(false)` then (another process
/// may have made it first; read it). Written to a temporary file and linked into place,
/// so nobody ever reads it half-written.
pub fn create_new(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let temporary = write_temporary(path, bytes)?;
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(with_path(e, path)),
    }
}

/// Replaces `path` (a symlink is replaced, not followed) with a new 0600 file, at once.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = write_temporary(path, bytes)?;
    std::fs::rename(&temporary, path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        with_path(e, path)
    })
}

fn write_temporary(path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new(""));
    create_dir(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(NOFOLLOW)
        .open(&temporary)
        .map_err(|e| with_path(e, &temporary))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    Ok(temporary)
}

/// Makes existing files 0600 when they are open to others (a database made by an older
/// version); absent ones are skipped.
pub fn tighten(paths: &[PathBuf]) {
    for path in paths {
        let Ok(metadata) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if metadata.is_file() && metadata.permissions().mode() & 0o077 != 0 {
            match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
                Ok(()) => {
                    tracing::warn!(file = %path.display(), "was readable by others; made 0600")
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "cannot make a private file 0600")
                }
            }
        }
    }
}

fn with_path(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn created_once_private_in_a_private_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/dir/key");
        assert!(create_new(&path, b"first").unwrap());
        assert!(!create_new(&path, b"second").unwrap());
        assert_eq!(read(&path, 100).unwrap().unwrap(), b"first");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("new/dir")), 0o700);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn symlinks_are_never_followed_and_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(read(&link, 100).is_err());
        assert!(!create_new(&link, b"x").unwrap());
        replace(&link, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert_eq!(std::fs::read(&link).unwrap(), b"new");
        assert_eq!(mode(&link), 0o600);
    }

    #[test]
    fn open_files_are_made_private_and_large_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("open");
        std::fs::write(&path, "x".repeat(10)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read(&path, 5).is_err());
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        tighten(&[path.clone(), dir.path().join("absent")]);
        assert_eq!(mode(&path), 0o600);
    }
}
