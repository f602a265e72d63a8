//! [`StoreError`]: every way the store fails, each message with the next step. No message
//! carries a secret: database URLs are shown with their password replaced.

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database URL cannot be used (scheme, path, syntax).
    #[error("database URL {url}: {problem}; {fix}")]
    Url {
        /// The URL with any password replaced by `***`.
        url: String,
        /// What is wrong with it.
        problem: String,
        /// How to write it instead.
        fix: &'static str,
    },
    /// The SQLite file or its folder cannot be created or has unsafe permissions.
    #[error("{path}: {problem}")]
    File {
        /// The file or folder.
        path: String,
        /// What failed and what to do.
        problem: String,
    },
    /// The database refused the connection or is unreachable.
    #[error(
        "cannot connect to the database {url}: {source}. Check that it is running and that the URL's host, port, user, password and database name are right"
    )]
    Connect {
        /// The URL with any password replaced by `***`.
        url: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A query failed.
    #[error("database error while {doing}: {source}")]
    Query {
        /// What the store was doing.
        doing: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// Migrating failed.
    #[error("cannot migrate the database: {0}")]
    Migrate(String),
    /// The secret key is missing or malformed.
    #[error("secret key: {0}")]
    Key(String),
    /// A sealed value cannot be opened: wrong row, tampered, or sealed under a key that is
    /// neither the current nor the previous one.
    #[error(
        "cannot decrypt {table}.{column} for this row: {reason}. If the secret key was rotated, set the old key as SWITCHBOARD_SECRET_KEY_PREVIOUS and run the re-encryption"
    )]
    Unseal {
        /// The table of the sealed value.
        table: &'static str,
        /// Its column.
        column: &'static str,
        /// Why it did not open.
        reason: &'static str,
    },
    /// The caller passed a value the schema does not accept.
    #[error("{0}")]
    Invalid(String),
    /// The acting user may not do this (a catalog write by a user who is not an admin).
    #[error("{0}")]
    Forbidden(String),
    /// A cap on what a user or a chat may hold is reached (the message names the limit
    /// and the next step).
    #[error("{0}")]
    Full(String),
}

impl StoreError {
    pub(crate) fn query(doing: &'static str) -> impl FnOnce(sqlx::Error) -> Self {
        move |source| Self::Query { doing, source }
    }
}

/// Results of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
