use karpor_core::model::Kind;
use karpor_core::SecretError;

/// What can go wrong with the metadata store. Messages may carry addresses: they go to
/// logs and admins, never into a public health body.
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
    #[error("{} {name:?} not found", kind.as_str())]
    NotFound { kind: Kind, name: String },
    #[error("{} {name:?} already exists", kind.as_str())]
    AlreadyExists { kind: Kind, name: String },
    #[error("{} {name:?} was changed since version {expected}", kind.as_str())]
    Conflict {
        kind: Kind,
        name: String,
        expected: i64,
    },
    #[error("invalid record: {0}")]
    Invalid(String),
    #[error("the change feed no longer has revision {0}: list again and follow from there")]
    Compacted(i64),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
    #[error("member {0:?} is already alive (its lease has not expired)")]
    MemberAlive(String),
    #[error("the lease of member {0:?} expired or was revoked")]
    LeaseLost(String),
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
        sqlx::Error::Database(db) if is_missing_database(db.as_ref()) => StoreError::Misconfigured(
            "the database in metadata.url does not exist: create it first (docs/metadata.md)"
                .to_owned(),
        ),
        sqlx::Error::Configuration(_) => StoreError::Misconfigured(e.to_string()),
        _ => StoreError::Unavailable(e.to_string()),
    }
}

/// MySQL's "Unknown database" (ER_BAD_DB_ERROR): the server answers, the URL is wrong.
fn is_missing_database(db: &dyn sqlx::error::DatabaseError) -> bool {
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .is_some_and(|mysql| mysql.number() == 1049)
}

/// MySQL's access-denied SQLSTATE.
fn is_auth_code(code: Option<&str>) -> bool {
    code == Some("28000")
}
