use std::sync::Arc;

use async_trait::async_trait;
use karpor_health::{CheckOutcome, ComponentType, HealthReporter, Reason};

use crate::{MetadataStore, StoreError};

/// The name of the metadata store's check (`Server`, as Karpor calls it).
pub const SERVER_CHECK: &str = "Server";

/// The `Server` check of `/readyz`: the metadata store answers.
pub struct MetastoreCheck {
    store: Arc<dyn MetadataStore>,
}

impl MetastoreCheck {
    pub fn new(store: Arc<dyn MetadataStore>) -> Self {
        MetastoreCheck { store }
    }
}

fn reason_of(e: &StoreError) -> Reason {
    match e {
        StoreError::Unauthorized(_) => Reason::Unauthorized,
        StoreError::Timeout => Reason::Timeout,
        StoreError::Misconfigured(_) => Reason::Misconfigured,
        _ => Reason::Unreachable,
    }
}

#[async_trait]
impl HealthReporter for MetastoreCheck {
    fn name(&self) -> &str {
        SERVER_CHECK
    }

    fn component_type(&self) -> ComponentType {
        ComponentType::Datastore
    }

    async fn check(&self) -> CheckOutcome {
        match self.store.ping().await {
            Ok(()) => CheckOutcome::Pass,
            Err(e) => CheckOutcome::fail(
                reason_of(&e),
                format!("{} backend: {e}", self.store.backend()),
            ),
        }
    }
}
