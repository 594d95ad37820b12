use karpor_core::SecretError;

/// What can go wrong talking to the metadata store. Messages may carry addresses: they
/// go to logs and admins, never into a public health body.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("metadata store unreachable: {0}")]
    Unavailable(String),
    #[error("metadata store refused the credentials: {0}")]
    Unauthorized(String),
    #[error("metadata store did not answer in time")]
    Timeout,
    #[error("metadata store misconfigured: {0}")]
    Misconfigured(String),
}

impl From<SecretError> for StoreError {
    fn from(e: SecretError) -> Self {
        StoreError::Misconfigured(e.to_string())
    }
}

/// Sorts an sqlx error into the store's kinds.
pub(crate) fn from_sqlx(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::PoolTimedOut => StoreError::Timeout,
        sqlx::Error::Database(db) if is_auth_code(db.code().as_deref()) => {
            StoreError::Unauthorized(e.to_string())
        }
        sqlx::Error::Configuration(_) => StoreError::Misconfigured(e.to_string()),
        _ => StoreError::Unavailable(e.to_string()),
    }
}

/// MySQL's access-denied SQLSTATE.
fn is_auth_code(code: Option<&str>) -> bool {
    code == Some("28000")
}
