//! `switchboard db …` on team mode's database (`--database URL`,
//! `$SWITCHBOARD_DATABASE_URL`, or `~/.switchboard/team.db`): `migrate` brings it to the
//! schema this binary knows and says which migrations that applied; `reencrypt` finishes
//! a secret-key rotation.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use switchboard_store::{DatabaseUrl, SecretKeys, Store};

use crate::ctx;

/// `switchboard db …`.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Apply the database migrations this Switchboard has and the database lacks (safe to
    /// run again: an up-to-date database is left alone).
    Migrate(DatabaseArgs),
    /// Re-encrypt every stored secret under the current key (`SWITCHBOARD_SECRET_KEY`),
    /// opening old values with the previous one (`SWITCHBOARD_SECRET_KEY_PREVIOUS`); after
    /// it, the previous key can be removed.
    Reencrypt(DatabaseArgs),
}

/// Which database, and how to print the result.
#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// The team database: sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE
    /// (default: sqlite://~/.switchboard/team.db).
    #[arg(
        long,
        env = "SWITCHBOARD_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    database: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

/// The database URL: the flag or variable, else the SQLite file in Switchboard's home.
fn database_url(args: &DatabaseArgs) -> Result<DatabaseUrl> {
    match args.database.as_deref().filter(|u| !u.trim().is_empty()) {
        Some(url) => Ok(DatabaseUrl::parse(url)?),
        None => Ok(DatabaseUrl::default_sqlite(&ctx::home_dir()?)?),
    }
}

pub async fn run(cmd: DbCommand) -> Result<ExitCode> {
    match cmd {
        DbCommand::Migrate(args) => migrate(&args).await,
        DbCommand::Reencrypt(args) => reencrypt(&args).await,
    }
}

async fn migrate(args: &DatabaseArgs) -> Result<ExitCode> {
    let url = database_url(args)?;
    let shown = url.to_string();
    let store = Store::open_url(url).await?;
    let report = store
        .migrate()
        .await
        .with_context(|| format!("migrating {shown}"))?;
    store.close().await;
    if args.json {
        let applied: Vec<_> = report
            .applied
            .iter()
            .map(|m| json!({ "version": m.version, "description": m.description }))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "database": shown,
                "backend": store.backend().name(),
                "applied": applied,
                "version": report.version,
            }))?
        );
    } else if report.applied.is_empty() {
        outln!("{shown}: up to date (schema version {})", report.version);
    } else {
        outln!("{shown}: applied");
        for m in &report.applied {
            outln!("  {:04} {}", m.version, m.description);
        }
        outln!("schema version {}", report.version);
    }
    Ok(ExitCode::SUCCESS)
}

async fn reencrypt(args: &DatabaseArgs) -> Result<ExitCode> {
    let url = database_url(args)?;
    let shown = url.to_string();
    let keys = SecretKeys::from_env(&|k| std::env::var(k).ok())?;
    let current = keys.current_id();
    let store = Store::open_url(url).await?.with_keys(keys);
    store
        .migrate()
        .await
        .with_context(|| format!("migrating {shown}"))?;
    let report = store
        .reencrypt()
        .await
        .with_context(|| format!("re-encrypting the secrets in {shown}"))?;
    store.close().await;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "database": shown,
                "key": current,
                "reencrypted": report.resealed,
                "unchanged": report.unchanged,
            }))?
        );
    } else {
        outln!(
            "{shown}: {} secret(s) re-encrypted under key {current}, {} already under it",
            report.resealed,
            report.unchanged
        );
        if report.resealed > 0 {
            outln!(
                "every secret is now under the current key: SWITCHBOARD_SECRET_KEY_PREVIOUS can be removed"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
