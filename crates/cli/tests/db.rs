//! `switchboard db migrate` on an SQLite file (flag, default file) and on a throwaway
//! PostgreSQL (`SWITCHBOARD_DATABASE_URL`): what it prints, that a second run applies
//! nothing, and that the database password never shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use switchboard_testkit::{PG_PASSWORD, PgCluster};

fn run(home: &Path, args: &[&str], database_env: Option<&str>) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.args(args)
        .env("SWITCHBOARD_HOME", home)
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_LOG");
    if let Some(url) = database_env {
        cmd.env("SWITCHBOARD_DATABASE_URL", url);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn migrate_sqlite_prints_what_it_applied_then_nothing() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("data/team.db");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let first = run(home.path(), &["db", "migrate", "--database", &url], None);
    assert!(first.status.success(), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert_eq!(
        stdout,
        format!(
            "{url}: applied\n  0001 users sessions\n  0002 servers tokens\n  0003 token refresh\nschema version 3\n"
        )
    );
    let again = run(home.path(), &["db", "migrate", "--database", &url], None);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        format!("{url}: up to date (schema version 3)\n")
    );
    let json_out = run(
        home.path(),
        &["db", "migrate", "--database", &url, "--json"],
        None,
    );
    let v: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(
        v,
        json!({ "database": url, "backend": "sqlite", "applied": [], "version": 3 })
    );
}

#[test]
fn migrate_defaults_to_a_private_file_in_switchboard_home() {
    let home = tempfile::tempdir().unwrap();
    let out = run(home.path(), &["db", "migrate", "--json"], None);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = home.path().join("team.db");
    assert_eq!(
        v["database"],
        format!("sqlite://{}?mode=rwc", file.display())
    );
    assert_eq!(v["applied"].as_array().unwrap().len(), 3);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn migrate_postgres_from_the_environment_never_shows_the_password() {
    let cluster = PgCluster::start();
    let url = cluster.create_database("team");
    let home = tempfile::tempdir().unwrap();
    let out = run(home.path(), &["db", "migrate", "--json"], Some(&url));
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(PG_PASSWORD), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["backend"], "postgres");
    assert_eq!(v["database"], url.replace(PG_PASSWORD, "***"));
    let versions: Vec<i64> = v["applied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["version"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, [1, 2, 3]);
    let again = run(home.path(), &["db", "migrate"], Some(&url));
    assert!(again.status.success(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("up to date (schema version 3)"));

    let wrong = url.replace(PG_PASSWORD, "wrong-pass-9");
    let out = run(home.path(), &["db", "migrate", "--database", &wrong], None);
    assert_eq!(out.status.code(), Some(1));
    let all = text(&out);
    assert!(!all.contains("wrong-pass-9"), "{all}");
    assert!(
        all.contains("error: cannot connect to the database postgres://postgres:***@"),
        "{all}"
    );
    // `--help` does not print the variable's value either.
    let help = run(home.path(), &["db", "migrate", "--help"], Some(&url));
    assert!(!text(&help).contains(PG_PASSWORD));
}

#[test]
fn migrate_explains_a_bad_url() {
    let home = tempfile::tempdir().unwrap();
    let out = run(
        home.path(),
        &["db", "migrate", "--database", "mysql://u:p4ss@h/db"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let all = text(&out);
    assert!(all.contains("unsupported scheme `mysql`"), "{all}");
    assert!(all.contains("sqlite://PATH"), "{all}");
    assert!(!all.contains("p4ss"), "{all}");
}
