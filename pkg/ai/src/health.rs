//! The `AI` check: whether the model service answers `/models` with the key. Not
//! critical: without a model, search and everything else still work.

use async_trait::async_trait;
use karpor_health::{CheckOutcome, HealthReporter, Reason};

use crate::client::{ModelClient, ModelError};

/// The name of the model service's check.
pub const AI_CHECK: &str = "AI";

pub struct AiCheck {
    client: ModelClient,
}

impl AiCheck {
    pub(crate) fn new(client: ModelClient) -> AiCheck {
        AiCheck { client }
    }
}

#[async_trait]
impl HealthReporter for AiCheck {
    fn name(&self) -> &str {
        AI_CHECK
    }

    fn critical(&self) -> bool {
        false
    }

    async fn check(&self) -> CheckOutcome {
        match self.client.ping().await {
            Ok(()) => CheckOutcome::Pass,
            Err(e) => {
                let reason = match &e {
                    ModelError::Unauthorized(_) => Reason::Unauthorized,
                    ModelError::Timeout(_) => Reason::Timeout,
                    _ => Reason::Unreachable,
                };
                CheckOutcome::fail(reason, e.to_string())
            }
        }
    }
}
