//! [`Store`]: the connection pool over SQLite or PostgreSQL (one code path through sqlx's
//! `Any` driver and portable SQL), opening (the SQLite file created 0600), migrating, and
//! re-encrypting every sealed value under the current key.
//!
//! Why `Any`: every query is written once in portable SQL (`$N` parameters,
//! `ON CONFLICT … DO UPDATE`, `RETURNING`; columns TEXT, BIGINT for times and 0/1 flags,
//! BYTEA), so one set of statements, one set of migrations (split per engine only where
//! a text cannot be shared: `migrate`) and one test suite cover both engines; an enum
//! of two pools would mean every query and row decoder twice, and a query that works
//! only on SQLite could pass the tests and fail on PostgreSQL. Migrations are embedded
//! with `include_str!` (no `macros` feature, no database at build time). sqlx 0.8 (0.9
//! needs Rust 1.94) brings second versions of `sha2` 0.10, `rand` 0.8,
//! `hashbrown`/`hashlink` and `webpki-roots`; they go when sqlx moves on.

use std::fmt;
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};

use crate::error::{Result, StoreError};
use crate::location::{Backend, DatabaseUrl};
use crate::migrate::{self, LATEST_VERSION, MigrationReport};
use crate::seal::{SecretKeys, Slot};

/// The team store: users, sessions, pending sign-ins, and each user's servers and secrets.
/// Cheap to clone (a pool and the keys behind `Arc`s). Per-user data is reached only
/// through [`Store::for_user`].
#[derive(Clone)]
pub struct Store {
    pub(crate) pool: AnyPool,
    url: DatabaseUrl,
    keys: Option<Arc<SecretKeys>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.url)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// What [`Store::reencrypt`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReencryptReport {
    /// Values that were sealed under the previous key and are now under the current one.
    pub resealed: u64,
    /// Values already under the current key, left as they were.
    pub unchanged: u64,
}

/// A column holding sealed values, and the columns that name its row. The one list
/// [`Store::reencrypt`] walks and every [`Slot`] is built from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SealedColumn {
    pub table: &'static str,
    pub column: &'static str,
    /// The owning user's column; `None` for rows no user owns yet.
    pub user_column: Option<&'static str>,
    /// The row's key within its user.
    pub key_column: &'static str,
}

impl SealedColumn {
    pub(crate) fn slot<'a>(&self, user: &'a str, row: &'a str) -> Slot<'a> {
        Slot {
            table: self.table,
            column: self.column,
            user,
            row,
        }
    }
}

pub(crate) const PENDING_VERIFIER: SealedColumn = SealedColumn {
    table: "pending_logins",
    column: "verifier",
    user_column: None,
    key_column: "state_hash",
};
pub(crate) const SERVER_HEADERS: SealedColumn = SealedColumn {
    table: "mcp_servers",
    column: "headers",
    user_column: Some("user_id"),
    key_column: "name",
};
pub(crate) const OAUTH_TOKENS: SealedColumn = SealedColumn {
    table: "oauth_tokens",
    column: "tokens",
    user_column: Some("user_id"),
    key_column: "server_name",
};
pub(crate) const MODEL_KEY: SealedColumn = SealedColumn {
    table: "model_keys",
    column: "api_key",
    user_column: Some("user_id"),
    key_column: "provider",
};
pub(crate) const SERVER_LOGIN_VERIFIER: SealedColumn = SealedColumn {
    table: "pending_server_logins",
    column: "verifier",
    user_column: Some("user_id"),
    key_column: "state_hash",
};
pub(crate) const CHAT_CONTENT: SealedColumn = SealedColumn {
    table: "chat_messages",
    column: "content",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const CONFIRM_REQUEST: SealedColumn = SealedColumn {
    table: "chat_confirmations",
    column: "request",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const TEAM_MODEL_KEY: SealedColumn = SealedColumn {
    table: "team_model_key",
    column: "api_key",
    user_column: None,
    key_column: "slot",
};
pub(crate) const CATALOG_HEADERS: SealedColumn = SealedColumn {
    table: "catalog_servers",
    column: "headers",
    user_column: None,
    key_column: "name",
};
pub(crate) const CATALOG_ENV: SealedColumn = SealedColumn {
    table: "catalog_servers",
    column: "env",
    user_column: None,
    key_column: "name",
};
pub(crate) const APP_INIT: SealedColumn = SealedColumn {
    table: "app_sessions",
    column: "init",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const APP_CONTEXT: SealedColumn = SealedColumn {
    table: "app_sessions",
    column: "model_context",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const CATALOG_TOKENS: SealedColumn = SealedColumn {
    table: "catalog_oauth_tokens",
    column: "tokens",
    user_column: Some("user_id"),
    key_column: "catalog_name",
};
pub(crate) const WORKFLOW_SOURCE: SealedColumn = SealedColumn {
    table: "workflows",
    column: "source",
    user_column: Some("user_id"),
    key_column: "name",
};
pub(crate) const WORKFLOW_RUN_LOG: SealedColumn = SealedColumn {
    table: "workflow_runs",
    column: "log",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const ELICIT_REQUEST: SealedColumn = SealedColumn {
    table: "chat_elicitations",
    column: "request",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const ELICIT_CONTENT: SealedColumn = SealedColumn {
    table: "chat_elicitations",
    column: "content",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const GATEWAY_INPUT_ANSWER: SealedColumn = SealedColumn {
    table: "gateway_inputs",
    column: "answer",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const GATEWAY_INPUT_OUTCOME: SealedColumn = SealedColumn {
    table: "gateway_inputs",
    column: "outcome",
    user_column: Some("user_id"),
    key_column: "id",
};
pub(crate) const GATEWAY_INPUT_PROGRESS: SealedColumn = SealedColumn {
    table: "gateway_inputs",
    column: "progress",
    user_column: Some("user_id"),
    key_column: "id",
};
const SEALED_COLUMNS: [SealedColumn; 20] = [
    PENDING_VERIFIER,
    SERVER_HEADERS,
    OAUTH_TOKENS,
    MODEL_KEY,
    SERVER_LOGIN_VERIFIER,
    CHAT_CONTENT,
    CONFIRM_REQUEST,
    TEAM_MODEL_KEY,
    CATALOG_HEADERS,
    CATALOG_ENV,
    CATALOG_TOKENS,
    WORKFLOW_SOURCE,
    WORKFLOW_RUN_LOG,
    APP_INIT,
    APP_CONTEXT,
    ELICIT_REQUEST,
    ELICIT_CONTENT,
    GATEWAY_INPUT_ANSWER,
    GATEWAY_INPUT_OUTCOME,
    GATEWAY_INPUT_PROGRESS,
];

impl Store {
    /// Open the database at `url` (see [`DatabaseUrl::parse`]). A missing SQLite file is
    /// created 0600 (its folder 0700). Does not migrate: call [`Store::migrate`].
    ///
    /// # Errors
    /// A bad URL, an unusable file, or a database that refuses the connection; the message
    /// names the fix and never the password.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_url(DatabaseUrl::parse(url)?).await
    }

    /// [`Store::open`] with a checked URL.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub async fn open_url(url: DatabaseUrl) -> Result<Self> {
        if let Some(file) = url.sqlite_file() {
            prepare_sqlite_file(file)?;
        }
        install_default_drivers();
        let max = match url.backend() {
            Backend::Sqlite => 4,
            Backend::Postgres => 10,
        };
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url.driver_url())
            .await
            .map_err(|source| StoreError::Connect {
                url: url.to_string(),
                source,
            })?;
        if url.backend() == Backend::Sqlite {
            // Readers do not wait for a writer (the setting is kept in the file). sqlx
            // turns foreign keys on for every SQLite connection (cascading deletes).
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await
                .map_err(StoreError::query("turning on SQLite's write-ahead log"))?;
        }
        Ok(Self {
            pool,
            url,
            keys: None,
        })
    }

    /// The same store, sealing and opening secrets with `keys`.
    #[must_use]
    pub fn with_keys(mut self, keys: SecretKeys) -> Self {
        self.keys = Some(Arc::new(keys));
        self
    }

    /// The database URL (shown without its password).
    pub fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    /// SQLite or PostgreSQL.
    pub fn backend(&self) -> Backend {
        self.url.backend()
    }

    pub(crate) fn keys(&self) -> Result<&SecretKeys> {
        self.keys.as_deref().ok_or_else(|| {
            StoreError::Key(
                "this store was opened without a secret key: set SWITCHBOARD_SECRET_KEY".into(),
            )
        })
    }

    /// Apply every migration the database lacks (idempotent: a current schema is left
    /// alone), under a lock so that instances starting together take turns.
    ///
    /// # Errors
    /// When a migration fails, or the database has a schema version this binary does not
    /// know (written by a newer Switchboard).
    pub async fn migrate(&self) -> Result<MigrationReport> {
        self.migrate_to(LATEST_VERSION).await
    }

    /// Apply the migrations up to and including `version` only (tests of upgrades from an
    /// older schema; staged upgrades).
    ///
    /// # Errors
    /// As [`Store::migrate`].
    pub async fn migrate_to(&self, version: i64) -> Result<MigrationReport> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(StoreError::query("taking a connection to migrate"))?;
        let report = migrate::run(&mut conn, version, self.backend()).await;
        if report.is_err() {
            // A failed migration may leave the connection in a state the pool's other
            // users must not inherit (e.g. SQLite's foreign keys off): close it.
            if let Err(e) = conn.close().await {
                tracing::warn!("closing the connection of a failed migration: {e}");
            }
        }
        report
    }

    /// One cheap query (`SELECT 1`): whether the database answers (readiness probes).
    ///
    /// # Errors
    /// When the database does not answer within the pool's acquire timeout, or fails.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("checking that the database answers"))?;
        Ok(())
    }

    /// Close the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Re-seal every value sealed under the previous key with the current key (the second
    /// half of a key rotation; afterwards the previous key can be dropped). Each row is
    /// rewritten only if it still holds the value that was read, so a concurrent write is
    /// never overwritten.
    ///
    /// # Errors
    /// When no key is configured, or a value opens under neither key (the error names the
    /// table and column).
    pub async fn reencrypt(&self) -> Result<ReencryptReport> {
        let keys = self.keys()?;
        let mut report = ReencryptReport::default();
        for col in SEALED_COLUMNS {
            let user_sel = col.user_column.unwrap_or("''");
            let select = format!(
                "SELECT {user_sel} AS owner, {key}, {column} FROM {table} WHERE {column} IS NOT NULL",
                key = col.key_column,
                column = col.column,
                table = col.table,
            );
            let rows = sqlx::query(&select)
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("reading sealed values to re-encrypt"))?;
            for row in rows {
                let owner: String = row.try_get(0).map_err(StoreError::query("reading a row"))?;
                let key: String = row.try_get(1).map_err(StoreError::query("reading a row"))?;
                let sealed: Vec<u8> = row.try_get(2).map_err(StoreError::query("reading a row"))?;
                let slot = col.slot(&owner, &key);
                let (plain, current) = keys.open(&slot, &sealed)?;
                if current {
                    report.unchanged += 1;
                    continue;
                }
                let resealed = keys.seal(&slot, &plain)?;
                // $1 new value, $2 row key, $3 old value, $4 owner (when the table has one).
                let owner_cond = match col.user_column {
                    Some(u) => format!(" AND {u} = $4"),
                    None => String::new(),
                };
                let update = format!(
                    "UPDATE {table} SET {column} = $1 WHERE {key} = $2 AND {column} = $3{owner_cond}",
                    table = col.table,
                    column = col.column,
                    key = col.key_column,
                );
                let mut q = sqlx::query(&update).bind(resealed).bind(key).bind(sealed);
                if col.user_column.is_some() {
                    q = q.bind(owner);
                }
                let done = q
                    .execute(&self.pool)
                    .await
                    .map_err(StoreError::query("re-encrypting a sealed value"))?;
                report.resealed += done.rows_affected();
            }
        }
        Ok(report)
    }
}

/// Create the SQLite file 0600 (and its folder 0700) if missing; refuse a symlink.
fn prepare_sqlite_file(file: &Path) -> Result<()> {
    let shown = file.display().to_string();
    let err = |problem: String| StoreError::File {
        path: shown.clone(),
        problem,
    };
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                err(format!(
                    "cannot create its folder ({e}): create it, or pass another --database"
                ))
            })?;
    }
    match std::fs::symlink_metadata(file) {
        Ok(meta) if meta.file_type().is_symlink() => {
            Err(err("is a symlink: point --database at the real file".into()))
        }
        Ok(meta) if !meta.is_file() => Err(err("is not a file".into())),
        Ok(meta) => {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(
                    "{shown} may be read by other users (mode {:o}): run `chmod 600 {shown}`",
                    meta.permissions().mode() & 0o777
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(file)
            .map(drop)
            .map_err(|e| {
                err(format!(
                    "cannot create it ({e}): check the folder's permissions"
                ))
            }),
        Err(e) => Err(err(format!("cannot read it ({e})"))),
    }
}
