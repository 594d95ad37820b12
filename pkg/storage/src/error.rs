/// What can go wrong with storage. Messages may carry addresses: they go to logs and
/// admins, never into a public health body.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage unreachable: {0}")]
    Unavailable(String),
    #[error("storage refused the credentials: {0}")]
    Unauthorized(String),
    #[error("storage did not answer in time")]
    Timeout,
    #[error("storage cluster status is red")]
    StatusRed,
    #[error("storage misconfigured: {0}")]
    Misconfigured(String),
    #[error("{0}")]
    Invalid(String),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
}
