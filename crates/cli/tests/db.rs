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
            "{url}: applied\n  0001 users sessions\n  0002 servers tokens\n  0003 token refresh\n  0004 pending server logins\n  0005 chat\n  0006 catalog\n  0007 gateway oauth\n  0008 chat turn lease\n  0009 workflows\n  0010 chat elicitations\n  0011 app sessions\n  0012 gateway grant use\n  0013 gateway inputs\n  0014 gateway input progress\n  0015 user identity\n  0016 gateway client pending\n  0017 key check\nschema version 17\n"
        )
    );
    let again = run(home.path(), &["db", "migrate", "--database", &url], None);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        format!("{url}: up to date (schema version 17)\n")
    );
    let json_out = run(
        home.path(),
        &["db", "migrate", "--database", &url, "--json"],
        None,
    );
    let v: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(
        v,
        json!({ "database": url, "backend": "sqlite", "applied": [], "version": 17 })
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
    assert_eq!(v["applied"].as_array().unwrap().len(), 17);
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
    assert_eq!(
        versions,
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
    );
    let again = run(home.path(), &["db", "migrate"], Some(&url));
    assert!(again.status.success(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("up to date (schema version 17)"));

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

#[test]
fn reencrypt_finishes_a_key_rotation() {
    use switchboard_store::{Secret, SecretKeys, Store};

    let home = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/team.db?mode=rwc", home.path().display());
    let (old, new) = (
        SecretKeys::generate_base64().unwrap(),
        SecretKeys::generate_base64().unwrap(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let user = rt.block_on(async {
        let store = Store::open(&url)
            .await
            .unwrap()
            .with_keys(SecretKeys::from_base64(&old, None).unwrap());
        store.migrate().await.unwrap();
        let ann = store
            .sign_in_user(
                &switchboard_store::SignInIdentity {
                    issuer: "https://issuer.test",
                    subject: "ann",
                    email: "ann@example.com",
                    email_verified: true,
                },
                "Ann",
                false,
            )
            .await
            .unwrap();
        store
            .for_user(&ann.id)
            .put_model_key("gemini", &Secret::new("model-key-1"))
            .await
            .unwrap();
        store.close().await;
        ann
    });
    let reencrypt = |current: Option<&str>, previous: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
        cmd.args(["db", "reencrypt", "--database", &url])
            .env("SWITCHBOARD_HOME", home.path())
            .env_remove("SWITCHBOARD_SECRET_KEY")
            .env_remove("SWITCHBOARD_SECRET_KEY_PREVIOUS")
            .env_remove("SWITCHBOARD_SECRET_KEY_FILE")
            .env_remove("SWITCHBOARD_SECRET_KEY_PREVIOUS_FILE");
        if let Some(k) = current {
            cmd.env("SWITCHBOARD_SECRET_KEY", k);
        }
        if let Some(k) = previous {
            cmd.env("SWITCHBOARD_SECRET_KEY_PREVIOUS", k);
        }
        cmd.output().unwrap()
    };

    let no_key = reencrypt(None, None);
    assert_eq!(no_key.status.code(), Some(1));
    assert!(
        text(&no_key).contains("set SWITCHBOARD_SECRET_KEY"),
        "{}",
        text(&no_key)
    );
    // The new key alone cannot open what the old one sealed, and says how to go on.
    let no_previous = reencrypt(Some(&new), None);
    assert_eq!(no_previous.status.code(), Some(1));
    assert!(
        text(&no_previous).contains("SWITCHBOARD_SECRET_KEY_PREVIOUS"),
        "{}",
        text(&no_previous)
    );

    let out = reencrypt(Some(&new), Some(&old));
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(": 1 secret(s) re-encrypted under key "),
        "{stdout}"
    );
    assert!(
        stdout.contains("SWITCHBOARD_SECRET_KEY_PREVIOUS can be removed"),
        "{stdout}"
    );
    assert!(!text(&out).contains(&new) && !text(&out).contains(&old));
    let again = reencrypt(Some(&new), Some(&old));
    assert!(String::from_utf8_lossy(&again.stdout).contains(": 0 secret(s) re-encrypted"));

    rt.block_on(async {
        let store = Store::open(&url)
            .await
            .unwrap()
            .with_keys(SecretKeys::from_base64(&new, None).unwrap());
        let key = store.for_user(&user.id).model_key().await.unwrap().unwrap();
        assert_eq!(key.key.expose(), "model-key-1");
    });
}
