//! Whether karpor may trust what it finds on disk: its data directory, the admin token
//! and the metadata key are trusted only when nobody but karpor's user (or root, who can
//! do anything anyway) could have written them. A world-writable `data/` once let anyone
//! plant an `admin-token` that then wrote as admin. Checked at start, before anything is
//! read, so a refusal names the path and the fix and nothing starts.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// What a path is to karpor, for its checks and their messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trusted {
    /// A directory karpor keeps its files in: `chmod 700` fixes it.
    Directory,
    /// A file karpor trusts (a token, a key): `chmod 600` fixes it.
    File,
}

/// Who karpor runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    /// Its effective and supplementary groups.
    pub groups: Vec<u32>,
}

impl User {
    pub fn current() -> Self {
        let mut groups: Vec<u32> = rustix::process::getgroups()
            .unwrap_or_default()
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        groups.push(rustix::process::getegid().as_raw());
        User {
            uid: rustix::process::geteuid().as_raw(),
            groups,
        }
    }
}

/// `Err` with the whole sentence (`data directory ./data is world-writable: chmod 700
/// ./data`) when `path` could have been written by someone other than `user` or root;
/// `Ok` when it is absent (karpor makes it private). `what` names it (`data directory`).
/// A directory writable by karpor's own group is accepted: a Kubernetes volume with an
/// `fsGroup` is root's, group-writable, of karpor's group (the Helm chart's layout).
pub fn check(path: &Path, kind: Trusted, what: &str, user: &User) -> Result<(), String> {
    let uid = user.uid;
    let metadata = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{what} {}: {e}", path.display())),
    };
    let shown = path.display();
    let (is_kind, noun, mode) = match kind {
        Trusted::Directory => (metadata.is_dir(), "a directory", "700"),
        Trusted::File => (metadata.is_file(), "a regular file", "600"),
    };
    if !is_kind {
        return Err(format!("{what} {shown} is not {noun}"));
    }
    let owner = metadata.uid();
    if owner != uid && owner != 0 {
        return Err(format!(
            "{what} {shown} is owned by uid {owner}, not karpor's user (uid {uid}): \
             chown {uid} {shown}, or run karpor as uid {owner}"
        ));
    }
    let mut bits = metadata.permissions().mode();
    if kind == Trusted::Directory && user.groups.contains(&metadata.gid()) {
        bits &= !0o020;
    }
    if let Some(who) = writable_by_others(bits) {
        let anyone = match who {
            "world" => "anyone on the machine",
            _ => "anyone in its group",
        };
        let harm = match kind {
            Trusted::Directory => "plant files karpor trusts",
            Trusted::File => "rewrite it",
        };
        return Err(format!(
            "{what} {shown} is {who}-writable, so {anyone} could {harm}: chmod {mode} {shown}"
        ));
    }
    Ok(())
}

/// `world` or `group` when a mode lets others than its owner write.
pub fn writable_by_others(mode: u32) -> Option<&'static str> {
    if mode & 0o002 != 0 {
        Some("world")
    } else if mode & 0o020 != 0 {
        Some("group")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn alone(uid: u32) -> User {
        User {
            uid,
            groups: Vec::new(),
        }
    }

    #[test]
    fn a_directory_of_karpors_own_group_may_be_group_writable() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        chmod(&data, 0o2775);
        let metadata = std::fs::metadata(&data).unwrap();
        let (uid, gid) = (metadata.uid(), metadata.gid());
        let member = User {
            uid,
            groups: vec![gid],
        };
        assert_eq!(
            check(&data, Trusted::Directory, "data directory", &member),
            Ok(())
        );
        assert!(check(&data, Trusted::Directory, "data directory", &alone(uid)).is_err());
        let token = data.join("admin-token");
        std::fs::write(&token, "x").unwrap();
        chmod(&token, 0o660);
        assert!(check(&token, Trusted::File, "admin token file", &member).is_err());
        chmod(&data, 0o2777);
        assert!(check(&data, Trusted::Directory, "data directory", &member).is_err());
    }

    fn me(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().uid()
    }

    #[test]
    fn open_directories_and_files_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let uid = me(dir.path());
        assert_eq!(
            check(&data, Trusted::Directory, "data directory", &alone(uid)),
            Ok(())
        );
        std::fs::create_dir(&data).unwrap();
        chmod(&data, 0o777);
        let refused = check(&data, Trusted::Directory, "data directory", &alone(uid)).unwrap_err();
        assert!(refused.contains("is world-writable"), "{refused}");
        assert!(
            refused.ends_with(&format!("chmod 700 {}", data.display())),
            "{refused}"
        );
        chmod(&data, 0o700);
        assert_eq!(
            check(&data, Trusted::Directory, "data directory", &alone(uid)),
            Ok(())
        );
        let token = data.join("admin-token");
        std::fs::write(&token, "x").unwrap();
        chmod(&token, 0o620);
        let refused = check(&token, Trusted::File, "admin token file", &alone(uid)).unwrap_err();
        assert!(refused.contains("is group-writable"), "{refused}");
        assert!(
            refused.ends_with(&format!("chmod 600 {}", token.display())),
            "{refused}"
        );
        chmod(&token, 0o644);
        assert_eq!(
            check(&token, Trusted::File, "admin token file", &alone(uid)),
            Ok(())
        );
        assert!(
            check(&token, Trusted::Directory, "data directory", &alone(uid))
                .unwrap_err()
                .contains("is not a directory")
        );
    }

    #[test]
    fn another_owner_is_refused_but_root_is_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::create_dir(&path).unwrap();
        // As root, the directory is given away; otherwise karpor is taken to be another
        // user than the owner.
        let (owner, uid) = match me(&path) {
            0 => {
                std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
                assert_eq!(
                    check(
                        dir.path(),
                        Trusted::Directory,
                        "data directory",
                        &alone(1000)
                    ),
                    Ok(())
                );
                (65534, 0)
            }
            owner => (owner, owner + 1),
        };
        let refused = check(&path, Trusted::Directory, "data directory", &alone(uid)).unwrap_err();
        assert!(
            refused.contains(&format!(
                "owned by uid {owner}, not karpor's user (uid {uid})"
            )),
            "{refused}"
        );
        assert!(
            refused.contains(&format!("chown {uid} {}", path.display())),
            "{refused}"
        );
    }
}
