//! Which watched types' lists the hub holds, kept beside the agent's state: after a
//! restart those types compare their list's digest with the hub's and send nothing when
//! they agree, instead of sending every object again. Lost or unreadable, every type
//! sends its list (nothing is wrong, only slower).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use karpor_core::private_file;
use tokio::sync::watch;

/// The most fingerprints kept: far more watches than a cluster's limits allow.
const MAX_HELD: usize = 100_000;
/// A fingerprint: 32 hex digits ([`karpor_syncer`]'s target fingerprint).
const FINGERPRINT_LEN: usize = 32;

/// Beside the state file: `state.json` keeps its lists in `state.json.lists`.
pub(crate) fn path_beside(state_file: &Path) -> PathBuf {
    let mut name = state_file.as_os_str().to_owned();
    name.push(".lists");
    PathBuf::from(name)
}

/// What the last run kept; empty when there is nothing usable.
pub(crate) async fn load(path: PathBuf) -> BTreeSet<String> {
    let bound = (MAX_HELD * (FINGERPRINT_LEN + 4)) as u64;
    let read = tokio::task::spawn_blocking(move || private_file::read(&path, bound)).await;
    let bytes = match read {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return BTreeSet::new(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read which lists the hub holds; every type sends its list");
            return BTreeSet::new();
        }
        Err(_) => return BTreeSet::new(),
    };
    match serde_json::from_slice::<Vec<String>>(&bytes) {
        Ok(held) if held.iter().all(|f| well_formed(f)) => held.into_iter().collect(),
        _ => {
            tracing::warn!("which lists the hub holds does not parse; every type sends its list");
            BTreeSet::new()
        }
    }
}

/// Writes the set each time it changes, until the sync that changes it has stopped (so
/// what its last writes made it is kept).
pub(crate) async fn keep(path: PathBuf, mut held: watch::Receiver<BTreeSet<String>>) {
    while held.changed().await.is_ok() {
        let now: Vec<String> = held.borrow_and_update().iter().cloned().collect();
        let path = path.clone();
        let written = tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec(&now).map_err(std::io::Error::other)?;
            private_file::replace(&path, &bytes)
        })
        .await;
        if let Ok(Err(e)) = written {
            tracing::warn!(error = %e, "cannot keep which lists the hub holds");
        }
    }
}

fn well_formed(fingerprint: &str) -> bool {
    fingerprint.len() == FINGERPRINT_LEN && fingerprint.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_is_kept_is_loaded_and_anything_else_is_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_beside(&dir.path().join("state.json"));
        assert!(path.ends_with("state.json.lists"));
        assert!(load(path.clone()).await.is_empty(), "none yet");
        let (sender, receiver) = watch::channel(BTreeSet::new());
        let keeper = tokio::spawn(keep(path.clone(), receiver));
        let fingerprint = "0123456789abcdef0123456789abcdef".to_owned();
        sender.send_replace(BTreeSet::from([fingerprint.clone()]));
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while load(path.clone()).await.is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "never written");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(load(path.clone()).await, BTreeSet::from([fingerprint]));
        drop(sender);
        keeper.await.unwrap();
        std::fs::write(&path, br#"["../../etc/passwd"]"#).unwrap();
        assert!(load(path.clone()).await.is_empty());
    }
}
