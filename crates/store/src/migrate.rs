//! The schema: migrations embedded in the binary (`migrations/*.sql`), applied in order
//! under sqlx's migration lock (a PostgreSQL advisory lock, so replicas starting together
//! take turns; on SQLite, which has none, a migration another process applied first is
//! skipped) and recorded in `_sqlx_migrations`. Applying is idempotent; a database
//! written by a newer Switchboard (a version this binary does not know) is refused.

use std::borrow::Cow;

use sqlx::AnyConnection;
use sqlx::migrate::{Migrate, Migration, MigrationType};

use crate::error::{Result, StoreError};

/// The embedded migrations: (version, description, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "users sessions",
        include_str!("../migrations/0001_users_sessions.sql"),
    ),
    (
        2,
        "servers tokens",
        include_str!("../migrations/0002_servers_tokens.sql"),
    ),
    (
        3,
        "token refresh",
        include_str!("../migrations/0003_token_refresh.sql"),
    ),
    (
        4,
        "pending server logins",
        include_str!("../migrations/0004_pending_server_logins.sql"),
    ),
    (5, "chat", include_str!("../migrations/0005_chat.sql")),
    (6, "catalog", include_str!("../migrations/0006_catalog.sql")),
    (
        7,
        "gateway oauth",
        include_str!("../migrations/0007_gateway_oauth.sql"),
    ),
    (
        8,
        "chat turn lease",
        include_str!("../migrations/0008_chat_turn_lease.sql"),
    ),
    (
        9,
        "workflows",
        include_str!("../migrations/0009_workflows.sql"),
    ),
    (
        10,
        "chat elicitations",
        include_str!("../migrations/0010_chat_elicitations.sql"),
    ),
    (
        11,
        "app sessions",
        include_str!("../migrations/0011_app_sessions.sql"),
    ),
    (
        12,
        "gateway grant use",
        include_str!("../migrations/0012_gateway_grant_use.sql"),
    ),
    (
        13,
        "gateway inputs",
        include_str!("../migrations/0013_gateway_inputs.sql"),
    ),
    (
        14,
        "gateway input progress",
        include_str!("../migrations/0014_gateway_input_progress.sql"),
    ),
];

/// The newest schema version this binary knows.
pub const LATEST_VERSION: i64 = 14;

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

fn migrations(up_to: i64) -> Vec<Migration> {
    MIGRATIONS
        .iter()
        .filter(|(v, _, _)| *v <= up_to)
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                Cow::Borrowed(*sql),
                false,
            )
        })
        .collect()
}

fn fail(e: impl std::fmt::Display) -> StoreError {
    StoreError::Migrate(e.to_string())
}

/// Apply every embedded migration up to `up_to` that the database lacks.
pub(crate) async fn run(conn: &mut AnyConnection, up_to: i64) -> Result<MigrationReport> {
    conn.lock().await.map_err(fail)?;
    let result = apply(conn, up_to).await;
    let unlocked = conn.unlock().await.map_err(fail);
    let report = result?;
    unlocked?;
    Ok(report)
}

async fn apply(conn: &mut AnyConnection, up_to: i64) -> Result<MigrationReport> {
    conn.ensure_migrations_table().await.map_err(fail)?;
    if let Some(version) = conn.dirty_version().await.map_err(fail)? {
        return Err(StoreError::Migrate(format!(
            "migration {version} started but did not finish: restore the database from a backup, or fix it by hand and delete that row from _sqlx_migrations"
        )));
    }
    let known = migrations(up_to);
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
                if let Some(m) = known.iter().find(|m| m.version == a.version)
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
    for m in &known {
        if applied.iter().any(|a| a.version == m.version) {
            continue;
        }
        if let Err(e) = conn.apply(m).await {
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
