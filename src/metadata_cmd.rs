//! `karpor metadata export|import`: move clusters and rules between backends.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use karpor_core::private_file;
use karpor_metastore::Export;

use crate::args::OnConflict;
use crate::config::Config;

pub(crate) async fn export(config: &Config, output: Option<&Path>, force: bool) -> ExitCode {
    let result = async {
        let store = karpor_metastore::connect(&config.metadata).await?;
        let export = store.export().await?;
        let mut text = serde_json::to_string_pretty(&export)?;
        text.push('\n');
        let count =
            export.clusters.len() + export.sync_rules.len() + export.resource_group_rules.len();
        match output {
            Some(path) => {
                let path = path.to_path_buf();
                tokio::task::spawn_blocking(move || write_private(&path, text.as_bytes(), force))
                    .await??
            }
            None => std::io::stdout().write_all(text.as_bytes())?,
        }
        Ok::<_, anyhow::Error>(count)
    }
    .await;
    match result {
        Ok(count) => {
            eprintln!("karpor: exported {count} records");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("karpor: export failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) async fn import(
    config: &Config,
    input: Option<&PathBuf>,
    on_conflict: OnConflict,
) -> ExitCode {
    let result = async {
        let mut text = String::new();
        match input {
            Some(path) => {
                text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?
            }
            None => {
                std::io::stdin().read_to_string(&mut text)?;
            }
        }
        let export: Export = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("not a karpor metadata export: {e}"))?;
        let store = karpor_metastore::connect(&config.metadata).await?;
        let on_conflict = match on_conflict {
            OnConflict::Fail => karpor_metastore::OnConflict::Fail,
            OnConflict::Skip => karpor_metastore::OnConflict::Skip,
            OnConflict::Overwrite => karpor_metastore::OnConflict::Overwrite,
        };
        Ok::<_, anyhow::Error>(store.import(export, on_conflict).await?)
    }
    .await;
    match result {
        Ok(imported) => {
            eprintln!(
                "karpor: imported {} records, left {} existing ones as they were",
                imported.written, imported.skipped
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("karpor: import failed: {e:#} (--on-conflict skip|overwrite for records that exist)");
            ExitCode::FAILURE
        }
    }
}

/// The export holds credentials: a new file only its owner may read, never written through
/// a symlink; an existing file is replaced (at once) only with `--force`.
fn write_private(path: &Path, bytes: &[u8], force: bool) -> anyhow::Result<()> {
    if force {
        return Ok(private_file::replace(path, bytes)?);
    }
    if !private_file::create_new(path, bytes)? {
        anyhow::bail!(
            "{} exists: choose another file, or --force to replace it",
            path.display()
        );
    }
    Ok(())
}
