//! `karpor metadata export` and `import`: every record with its times, as JSON, so a user
//! who switches backend keeps their clusters and rules. Credentials are exported in the
//! clear (the target may use another key): the file is as secret as a kubeconfig.

use karpor_core::access::AccessPolicy;
use karpor_core::model::{
    AuditPolicy, Cluster, Record, RelationRule, ResourceGroupRule, Seed, SyncRule,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::{Metastore, StoreError, Stored};

pub(crate) const EXPORT_FORMAT: &str = "karpor-metadata/v1";

/// What an import does with a record whose name exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// Stop there.
    Fail,
    /// Keep the existing record.
    Skip,
    /// Replace it with the imported one (its times too).
    Overwrite,
}

/// How many records an import wrote and left alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    pub written: usize,
    pub skipped: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Export {
    pub format: String,
    pub clusters: Vec<ExportedRecord<Cluster>>,
    pub sync_rules: Vec<ExportedRecord<SyncRule>>,
    pub resource_group_rules: Vec<ExportedRecord<ResourceGroupRule>>,
    /// Absent from exports made before audit policies existed.
    #[serde(default)]
    pub audit_policies: Vec<ExportedRecord<AuditPolicy>>,
    /// Absent from exports made before relation rules existed.
    #[serde(default)]
    pub relation_rules: Vec<ExportedRecord<RelationRule>>,
    /// Which built-in records karpor made (so one deleted stays deleted where the
    /// export is imported); absent from exports made before there were any.
    #[serde(default)]
    pub seeds: Vec<ExportedRecord<Seed>>,
    /// Absent from exports made before access policies were stored.
    #[serde(default)]
    pub access_policies: Vec<ExportedRecord<AccessPolicy>>,
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
            audit_policies: self.export_kind().await?,
            relation_rules: self.export_kind().await?,
            seeds: self.export_kind().await?,
            access_policies: self.export_kind().await?,
        })
    }

    /// Writes every record of `export`, keeping its times; a record whose name exists
    /// already is handled as `on_conflict` says (`Fail` stops the import with
    /// `AlreadyExists`, records before it staying written). Every record is validated
    /// before the first write.
    pub async fn import(
        &self,
        export: Export,
        on_conflict: OnConflict,
    ) -> Result<Imported, StoreError> {
        if export.format != EXPORT_FORMAT {
            return Err(StoreError::Invalid(format!(
                "format {:?} is not {EXPORT_FORMAT:?}",
                export.format
            )));
        }
        validate_all(&export.clusters)?;
        validate_all(&export.sync_rules)?;
        validate_all(&export.resource_group_rules)?;
        validate_all(&export.audit_policies)?;
        validate_all(&export.relation_rules)?;
        validate_all(&export.seeds)?;
        validate_all(&export.access_policies)?;
        let mut imported = Imported::default();
        self.import_kind(export.clusters, on_conflict, &mut imported)
            .await?;
        self.import_kind(export.sync_rules, on_conflict, &mut imported)
            .await?;
        self.import_kind(export.resource_group_rules, on_conflict, &mut imported)
            .await?;
        self.import_kind(export.audit_policies, on_conflict, &mut imported)
            .await?;
        self.import_kind(export.relation_rules, on_conflict, &mut imported)
            .await?;
        self.import_kind(export.seeds, on_conflict, &mut imported)
            .await?;
        self.import_kind(export.access_policies, on_conflict, &mut imported)
            .await?;
        Ok(imported)
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
        on_conflict: OnConflict,
        imported: &mut Imported,
    ) -> Result<(), StoreError> {
        for r in records {
            if on_conflict == OnConflict::Overwrite {
                self.put_over(r.record, r.created_at, r.updated_at).await?;
                imported.written += 1;
                continue;
            }
            match self.put_new(r.record, r.created_at, r.updated_at).await {
                Ok(_) => imported.written += 1,
                Err(StoreError::AlreadyExists { .. }) if on_conflict == OnConflict::Skip => {
                    imported.skipped += 1
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
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
