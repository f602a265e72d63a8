//! The schema: migrations embedded in the binary (`migrations/*.sql`; where SQLite and
//! PostgreSQL cannot share one text, a `.sqlite.sql` and a `.postgres.sql` of the same
//! version, SQLite's run with foreign keys off as its table rebuild needs), applied in order
//! under sqlx's migration lock (a PostgreSQL advisory lock, so replicas starting together
//! take turns; on SQLite, which has none, a migration another process applied first is
//! skipped) and recorded in `_sqlx_migrations`. Applying is idempotent; a database
//! written by a newer Switchboard (a version this binary does not know) is refused.

use std::borrow::Cow;

use sqlx::AnyConnection;
use sqlx::migrate::{Migrate, Migration, MigrationType};

use crate::error::{Result, StoreError};
use crate::location::Backend;

/// A migration's SQL: one text for both databases, or one each where they cannot share
/// one (SQLite cannot drop a constraint, so it rebuilds the table). A split migration
/// runs on SQLite with foreign keys off ([`apply`]), as SQLite's table rebuild requires.
#[derive(Debug, Clone, Copy)]
enum Sql {
    Both(&'static str),
    Split {
        sqlite: &'static str,
        postgres: &'static str,
    },
}

impl Sql {
    fn text(self, backend: Backend) -> &'static str {
        match (self, backend) {
            (Self::Both(sql), _) => sql,
            (Self::Split { sqlite, .. }, Backend::Sqlite) => sqlite,
            (Self::Split { postgres, .. }, Backend::Postgres) => postgres,
        }
    }
}

/// The embedded migrations: (version, description, SQL).
const MIGRATIONS: &[(i64, &str, Sql)] = &[
    (
        1,
        "users sessions",
        Sql::Both(include_str!("../migrations/0001_users_sessions.sql")),
    ),
    (
        2,
        "servers tokens",
        Sql::Both(include_str!("../migrations/0002_servers_tokens.sql")),
    ),
    (
        3,
        "token refresh",
        Sql::Both(include_str!("../migrations/0003_token_refresh.sql")),
    ),
    (
        4,
        "pending server logins",
        Sql::Both(include_str!("../migrations/0004_pending_server_logins.sql")),
    ),
    (
        5,
        "chat",
        Sql::Both(include_str!("../migrations/0005_chat.sql")),
    ),
    (
        6,
        "catalog",
        Sql::Both(include_str!("../migrations/0006_catalog.sql")),
    ),
    (
        7,
        "gateway oauth",
        Sql::Both(include_str!("../migrations/0007_gateway_oauth.sql")),
    ),
    (
        8,
        "chat turn lease",
        Sql::Both(include_str!("../migrations/0008_chat_turn_lease.sql")),
    ),
    (
        9,
        "workflows",
        Sql::Both(include_str!("../migrations/0009_workflows.sql")),
    ),
    (
        10,
        "chat elicitations",
        Sql::Both(include_str!("../migrations/0010_chat_elicitations.sql")),
    ),
    (
        11,
        "app sessions",
        Sql::Both(include_str!("../migrations/0011_app_sessions.sql")),
    ),
    (
        12,
        "gateway grant use",
        Sql::Both(include_str!("../migrations/0012_gateway_grant_use.sql")),
    ),
    (
        13,
        "gateway inputs",
        Sql::Both(include_str!("../migrations/0013_gateway_inputs.sql")),
    ),
    (
        14,
        "gateway input progress",
        Sql::Both(include_str!(
            "../migrations/0014_gateway_input_progress.sql"
        )),
    ),
    (
        15,
        "user identity",
        Sql::Split {
            sqlite: include_str!("../migrations/0015_user_identity.sqlite.sql"),
            postgres: include_str!("../migrations/0015_user_identity.postgres.sql"),
        },
    ),
    (
        16,
        "gateway client pending",
        Sql::Both(include_str!(
            "../migrations/0016_gateway_client_pending.sql"
        )),
    ),
    (
        17,
        "key check",
        Sql::Both(include_str!("../migrations/0017_key_check.sql")),
    ),
];

/// The newest schema version this binary knows.
pub const LATEST_VERSION: i64 = 17;

/// One migration: its version and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationInfo {
    /// The version (`0001_…` is 1).
    pub version: i64,
    /// What it adds.
    pub description: String,
}

/// What [`crate::Store::migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The migrations this call applied, in order (empty when the schema was current).
    pub applied: Vec<MigrationInfo>,
    /// The schema version afterwards.
    pub version: i64,
}

fn migrations(up_to: i64, backend: Backend) -> Vec<(Migration, Sql)> {
    MIGRATIONS
        .iter()
        .filter(|(v, _, _)| *v <= up_to)
        .map(|(version, description, sql)| {
            let m = Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                Cow::Borrowed(sql.text(backend)),
                false,
            );
            (m, *sql)
        })
        .collect()
}

fn fail(e: impl std::fmt::Display) -> StoreError {
    StoreError::Migrate(e.to_string())
}

/// Apply every embedded migration up to `up_to` that the database lacks.
pub(crate) async fn run(
    conn: &mut AnyConnection,
    up_to: i64,
    backend: Backend,
) -> Result<MigrationReport> {
    conn.lock().await.map_err(fail)?;
    let result = apply(conn, up_to, backend).await;
    let unlocked = conn.unlock().await.map_err(fail);
    let report = result?;
    unlocked?;
    Ok(report)
}

async fn apply(conn: &mut AnyConnection, up_to: i64, backend: Backend) -> Result<MigrationReport> {
    conn.ensure_migrations_table().await.map_err(fail)?;
    if let Some(version) = conn.dirty_version().await.map_err(fail)? {
        return Err(StoreError::Migrate(format!(
            "migration {version} started but did not finish: restore the database from a backup, or fix it by hand and delete that row from _sqlx_migrations"
        )));
    }
    let known = migrations(up_to, backend);
    let applied = conn.list_applied_migrations().await.map_err(fail)?;
    for a in &applied {
        match MIGRATIONS.iter().find(|(v, _, _)| *v == a.version) {
            None => {
                return Err(StoreError::Migrate(format!(
                    "the database is at schema version {} but this Switchboard knows versions up to {LATEST_VERSION}: run a newer Switchboard",
                    a.version
                )));
            }
            Some(_) => {
                if let Some((m, _)) = known.iter().find(|(m, _)| m.version == a.version)
                    && m.checksum != a.checksum
                {
                    return Err(StoreError::Migrate(format!(
                        "migration {} in the database differs from this binary's: the database was migrated by a different build; restore it or migrate with that build",
                        a.version
                    )));
                }
            }
        }
    }
    let mut report = MigrationReport {
        applied: Vec::new(),
        version: applied.iter().map(|a| a.version).max().unwrap_or(0),
    };
    for (m, sql) in &known {
        if applied.iter().any(|a| a.version == m.version) {
            continue;
        }
        if let Err(e) = apply_one(conn, m, *sql, backend).await {
            // SQLite has no migration lock: another process may have applied this one
            // first (each migration is one transaction, so it is all there or not at all).
            let now_applied = conn.list_applied_migrations().await.map_err(fail)?;
            if now_applied
                .iter()
                .any(|a| a.version == m.version && a.checksum == m.checksum)
            {
                report.version = report.version.max(m.version);
                continue;
            }
            return Err(fail(e));
        }
        report.applied.push(MigrationInfo {
            version: m.version,
            description: m.description.to_string(),
        });
        report.version = report.version.max(m.version);
    }
    Ok(report)
}

/// Apply one migration in its own transaction. A split migration on SQLite rebuilds a
/// table, which needs foreign keys off (else dropping the old table would cascade into
/// every row that refers to it); the switch works only outside a transaction, so it is
/// flipped around the migration's and turned back on whatever the outcome.
async fn apply_one(
    conn: &mut AnyConnection,
    m: &Migration,
    sql: Sql,
    backend: Backend,
) -> std::result::Result<(), sqlx::migrate::MigrateError> {
    let rebuild = backend == Backend::Sqlite && matches!(sql, Sql::Split { .. });
    if !rebuild {
        return conn.apply(m).await.map(drop);
    }
    sqlx::query("PRAGMA foreign_keys = OFF")
        .execute(&mut *conn)
        .await?;
    let applied = conn.apply(m).await.map(drop);
    let restored = sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut *conn)
        .await
        .map(drop);
    applied?;
    restored?;
    Ok(())
}
