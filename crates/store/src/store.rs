//! [`Store`]: the connection pool over SQLite or PostgreSQL (one code path through sqlx's
//! `Any` driver and portable SQL), opening (the SQLite file created 0600), migrating,
//! checking that the configured keys open what the database holds ([`Store::check_keys`]:
//! a key check value sealed at the first start, or in an older database one sealed value
//! per sealed column), and re-encrypting every sealed value (the check value included)
//! under the current key.
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
/// The key check value: one known text sealed at the first start under that start's
/// key ([`Store::check_keys`]), so that an instance with another key refuses to start.
pub(crate) const KEY_CHECK: SealedColumn = SealedColumn {
    table: "key_check",
    column: "value",
    user_column: None,
    key_column: "slot",
};
/// The one row of `key_check`, and the text it seals.
const KEY_CHECK_SLOT: &str = "check";
const KEY_CHECK_TEXT: &[u8] = b"switchboard key check v1";

const SEALED_COLUMNS: [SealedColumn; 21] = [
    KEY_CHECK,
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

    /// Check that the configured keys open what the database holds, before serving
    /// anyone: the key check value, sealed at the first start (or, in a database from
    /// before it existed, one sealed value of every sealed column, and then the check
    /// value is recorded). The current or the previous key may open it. Several
    /// instances starting together on a new database record one check value (the first
    /// insert wins); the others then check against it.
    ///
    /// # Errors
    /// [`StoreError::Key`] naming the cause and the fix (the right key, or
    /// `SWITCHBOARD_SECRET_KEY_PREVIOUS` and `switchboard db reencrypt` during a
    /// rotation) when a value does not open; a query error when the database fails.
    pub async fn check_keys(&self) -> Result<()> {
        let keys = self.keys()?;
        if self.open_key_check(keys).await? {
            return Ok(());
        }
        // No check value yet: judge by what is sealed already, then record one.
        for col in SEALED_COLUMNS.iter().filter(|c| c.table != KEY_CHECK.table) {
            let select = format!(
                "SELECT {user_sel} AS owner, {key}, {column} FROM {table} WHERE {column} IS NOT NULL LIMIT 1",
                user_sel = col.user_column.unwrap_or("''"),
                key = col.key_column,
                column = col.column,
                table = col.table,
            );
            let row = sqlx::query(&select)
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::query(
                    "reading a sealed value to check the secret key",
                ))?;
            if let Some(row) = row {
                let owner: String = row.try_get(0).map_err(StoreError::query("reading a row"))?;
                let key: String = row.try_get(1).map_err(StoreError::query("reading a row"))?;
                let sealed: Vec<u8> = row.try_get(2).map_err(StoreError::query("reading a row"))?;
                keys.open(&col.slot(&owner, &key), &sealed)
                    .map_err(|e| wrong_key(keys, &sealed, &e))?;
            }
        }
        let sealed = keys.seal(&KEY_CHECK.slot("", KEY_CHECK_SLOT), KEY_CHECK_TEXT)?;
        sqlx::query(
            "INSERT INTO key_check (slot, value, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (slot) DO NOTHING",
        )
        .bind(KEY_CHECK_SLOT)
        .bind(sealed)
        .bind(crate::account::now())
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("recording the secret key's check value"))?;
        // Another instance may have recorded its own first: check against what is there.
        if self.open_key_check(keys).await? {
            Ok(())
        } else {
            Err(StoreError::Key(
                "the key check value was not recorded: check that the database accepts writes"
                    .into(),
            ))
        }
    }

    /// Open the key check value: `false` when there is none yet.
    async fn open_key_check(&self, keys: &SecretKeys) -> Result<bool> {
        let row = sqlx::query("SELECT value FROM key_check WHERE slot = $1")
            .bind(KEY_CHECK_SLOT)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("reading the secret key's check value"))?;
        let Some(row) = row else {
            return Ok(false);
        };
        let sealed: Vec<u8> = row.try_get(0).map_err(StoreError::query("reading a row"))?;
        let (plain, _) = keys
            .open(&KEY_CHECK.slot("", KEY_CHECK_SLOT), &sealed)
            .map_err(|e| wrong_key(keys, &sealed, &e))?;
        if plain != KEY_CHECK_TEXT {
            return Err(StoreError::Key(
                "the key check value in the database is not Switchboard's: restore the database from a backup".into(),
            ));
        }
        Ok(true)
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

/// The error for a value the configured keys do not open: which key sealed it, which
/// keys are configured, and the two fixes.
fn wrong_key(keys: &SecretKeys, sealed: &[u8], cause: &StoreError) -> StoreError {
    let sealed_under = crate::seal::sealed_key_id(sealed)
        .map_or_else(|| "an unknown key".to_owned(), |id| format!("key id {id}"));
    let configured = match keys.previous_id() {
        Some(prev) => format!(
            "SWITCHBOARD_SECRET_KEY (key id {}) and SWITCHBOARD_SECRET_KEY_PREVIOUS (key id {prev})",
            keys.current_id()
        ),
        None => format!(
            "SWITCHBOARD_SECRET_KEY (key id {}) and no SWITCHBOARD_SECRET_KEY_PREVIOUS",
            keys.current_id()
        ),
    };
    // The reason only: the unseal error's own advice is said once, below.
    let why = match cause {
        StoreError::Unseal {
            table,
            column,
            reason,
        } => format!("{table}.{column}: {reason}"),
        other => other.to_string(),
    };
    StoreError::Key(format!(
        "the configured key does not open what the team database holds ({why}): it is sealed under {sealed_under}, and this instance has {configured}. Start it with the key the database was created with (the one every other replica uses); when rotating to a new key, set the old one as SWITCHBOARD_SECRET_KEY_PREVIOUS and run `switchboard db reencrypt`"
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn opened(dir: &Path, current: &str, previous: Option<&str>) -> Store {
        let url = format!("sqlite://{}", dir.join("team.db").display());
        let store = Store::open(&url)
            .await
            .unwrap()
            .with_keys(SecretKeys::from_base64(current, previous).unwrap());
        store.migrate().await.unwrap();
        store
    }

    fn new_key() -> String {
        SecretKeys::generate_base64().unwrap()
    }

    #[tokio::test]
    async fn another_key_is_refused_and_a_rotation_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (new_key(), new_key());
        opened(dir.path(), &a, None)
            .await
            .check_keys()
            .await
            .unwrap();
        // Checked again: the recorded value opens.
        opened(dir.path(), &a, None)
            .await
            .check_keys()
            .await
            .unwrap();

        let err = opened(dir.path(), &b, None)
            .await
            .check_keys()
            .await
            .unwrap_err()
            .to_string();
        let a_id = SecretKeys::from_base64(&a, None).unwrap().current_id();
        for wanted in [
            a_id.as_str(),
            "SWITCHBOARD_SECRET_KEY",
            "and no SWITCHBOARD_SECRET_KEY_PREVIOUS",
            "switchboard db reencrypt",
        ] {
            assert!(err.contains(wanted), "`{wanted}` missing from: {err}");
        }
        assert!(!err.contains(&a) && !err.contains(&b), "{err}");

        // The previous key counts; re-encryption moves the check value to the new key.
        let rotating = opened(dir.path(), &b, Some(&a)).await;
        rotating.check_keys().await.unwrap();
        let report = rotating.reencrypt().await.unwrap();
        assert_eq!(report.resealed, 1);
        opened(dir.path(), &b, None)
            .await
            .check_keys()
            .await
            .unwrap();
        assert!(
            opened(dir.path(), &a, None)
                .await
                .check_keys()
                .await
                .is_err()
        );
    }

    /// A database from before the check value: judged by what it holds sealed, then the
    /// check value is recorded.
    #[tokio::test]
    async fn a_database_without_a_check_value_is_judged_by_its_sealed_values() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (new_key(), new_key());
        let store = opened(dir.path(), &a, None).await;
        let sealed = store
            .keys()
            .unwrap()
            .seal(&TEAM_MODEL_KEY.slot("", "team"), b"sk-team")
            .unwrap();
        sqlx::query(
            "INSERT INTO team_model_key (slot, provider, api_key, set_by, updated_at) \
             VALUES ('team', 'gemini', $1, 'u1', 0)",
        )
        .bind(sealed)
        .execute(&store.pool)
        .await
        .unwrap();
        let err = opened(dir.path(), &b, None)
            .await
            .check_keys()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("team_model_key.api_key"), "{err}");
        let checks = |s: Store| async move {
            sqlx::query("SELECT COUNT(*) FROM key_check")
                .fetch_one(&s.pool)
                .await
                .unwrap()
                .get::<i64, _>(0)
        };
        assert_eq!(
            checks(store.clone()).await,
            0,
            "nothing recorded on refusal"
        );
        store.check_keys().await.unwrap();
        assert_eq!(checks(store).await, 1);
    }
}
