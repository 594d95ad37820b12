use std::sync::Arc;

use async_trait::async_trait;
use karpor_health::{CheckOutcome, ComponentType, HealthReporter, Reason};

use crate::{Storage, StorageError};

/// The `Storage` check of `/readyz`.
/// The name of the storage check.
pub const STORAGE_CHECK: &str = "Storage";

pub struct StorageCheck {
    storage: Arc<dyn Storage>,
}

impl StorageCheck {
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        StorageCheck { storage }
    }
}

/// The public reason for a storage error.
pub fn reason_of(e: &StorageError) -> Reason {
    match e {
        StorageError::Unavailable(_) => Reason::Unreachable,
        StorageError::Unauthorized(_) => Reason::Unauthorized,
        StorageError::Timeout => Reason::Timeout,
        StorageError::StatusRed => Reason::StatusRed,
        StorageError::Misconfigured(_) => Reason::Misconfigured,
        StorageError::Invalid(_) | StorageError::Corrupt(_) => Reason::Unreachable,
    }
}

#[async_trait]
impl HealthReporter for StorageCheck {
    fn name(&self) -> &str {
        STORAGE_CHECK
    }

    fn component_type(&self) -> ComponentType {
        ComponentType::Datastore
    }

    async fn check(&self) -> CheckOutcome {
        match self.storage.ping().await {
            Ok(()) => CheckOutcome::Pass,
            Err(e) => CheckOutcome::fail(
                reason_of(&e),
                format!("{} backend: {e}", self.storage.backend()),
            ),
        }
    }
}
