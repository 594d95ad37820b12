//! `karpor metadata export` and `import`: every record with its times, as JSON, so a user
//! who switches backend keeps their clusters and rules. Credentials are exported in the
//! clear (the target may use another key): the file is as secret as a kubeconfig.

use karpor_core::model::{Cluster, Record, ResourceGroupRule, SyncRule};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::{Metastore, StoreError, Stored};

pub const EXPORT_FORMAT: &str = "karpor-metadata/v1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Export {
    pub format: String,
    pub clusters: Vec<ExportedRecord<Cluster>>,
    pub sync_rules: Vec<ExportedRecord<SyncRule>>,
    pub resource_group_rules: Vec<ExportedRecord<ResourceGroupRule>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportedRecord<T> {
    pub record: T,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

impl<T> From<Stored<T>> for ExportedRecord<T> {
    fn from(stored: Stored<T>) -> Self {
        ExportedRecord {
            record: stored.record,
            created_at: stored.created_at,
            updated_at: stored.updated_at,
        }
    }
}

impl Metastore {
    pub async fn export(&self) -> Result<Export, StoreError> {
        Ok(Export {
            format: EXPORT_FORMAT.to_owned(),
            clusters: self.export_kind().await?,
            sync_rules: self.export_kind().await?,
            resource_group_rules: self.export_kind().await?,
        })
    }

    /// Creates every record of `export`, keeping its times. A record whose name exists
    /// already stops the import with `AlreadyExists` (records before it stay written);
    /// every record is validated before the first write.
    pub async fn import(&self, export: Export) -> Result<usize, StoreError> {
        if export.format != EXPORT_FORMAT {
            return Err(StoreError::Invalid(format!(
                "format {:?} is not {EXPORT_FORMAT:?}",
                export.format
            )));
        }
        validate_all(&export.clusters)?;
        validate_all(&export.sync_rules)?;
        validate_all(&export.resource_group_rules)?;
        let mut count = 0;
        count += self.import_kind(export.clusters).await?;
        count += self.import_kind(export.sync_rules).await?;
        count += self.import_kind(export.resource_group_rules).await?;
        Ok(count)
    }

    async fn export_kind<T: Record>(&self) -> Result<Vec<ExportedRecord<T>>, StoreError> {
        Ok(self
            .list_all::<T>()
            .await?
            .into_iter()
            .map(ExportedRecord::from)
            .collect())
    }

    async fn import_kind<T: Record>(
        &self,
        records: Vec<ExportedRecord<T>>,
    ) -> Result<usize, StoreError> {
        let count = records.len();
        for r in records {
            self.put_new(r.record, r.created_at, r.updated_at).await?;
        }
        Ok(count)
    }
}

fn validate_all<T: Record>(records: &[ExportedRecord<T>]) -> Result<(), StoreError> {
    for r in records {
        r.record
            .validate()
            .map_err(|e| StoreError::Invalid(format!("{}: {e}", T::KIND.as_str())))?;
    }
    Ok(())
}
