//! The team catalog in the store, on an SQLite file AND on a throwaway PostgreSQL cluster:
//! only admins write it, each user's enablement and tokens are theirs, a catalog server
//! and a user's own server of the same name never share a token or a login, secrets are
//! sealed (and re-encrypted), and the schema upgrades from version 4 with rows kept.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::identity::{legacy_user, who};
use sqlx::Row;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use switchboard_store::{
    CatalogLaunch, CatalogServer, LATEST_VERSION, NewServerLogin, Secret, SecretKeys,
    ServerLoginClient, ServerRecord, ServerRef, Store, StoreError, Transport,
};
use switchboard_testkit::PgCluster;

#[allow(dead_code)] // The temp dir and the cluster are held to live as long as the test.
enum Db {
    Sqlite(tempfile::TempDir, String),
    Postgres(PgCluster, String),
}

impl Db {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/team.db?mode=rwc", dir.path().display());
        Self::Sqlite(dir, url)
    }

    fn postgres() -> Self {
        let cluster = PgCluster::start();
        let url = cluster.create_database("team");
        Self::Postgres(cluster, url)
    }

    fn url(&self) -> &str {
        match self {
            Self::Sqlite(_, u) | Self::Postgres(_, u) => u,
        }
    }

    async fn raw(&self) -> sqlx::AnyPool {
        install_default_drivers();
        AnyPoolOptions::new()
            .max_connections(1)
            .connect(self.url())
            .await
            .unwrap()
    }
}

macro_rules! on_both {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Db::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Db::postgres()).await;
                }
            )*
        }
    };
}

on_both!(
    only_admins_publish_and_each_user_has_their_own_enablement_and_tokens,
    a_catalog_login_and_refresh_are_the_users_and_the_catalogs,
    secrets_are_sealed_and_reencrypted,
    upgrading_from_schema_4_keeps_rows,
);

fn keys(current: &str, previous: Option<&str>) -> SecretKeys {
    SecretKeys::from_base64(current, previous).unwrap()
}

fn http_entry(name: &str, url: &str) -> CatalogServer {
    CatalogServer {
        name: name.into(),
        description: "Team docs".into(),
        launch: CatalogLaunch::Http {
            url: url.into(),
            transport: Transport::Http,
            headers: BTreeMap::from([("X-Team-Key".to_owned(), Secret::new("team-header-1"))]),
        },
    }
}

fn stdio_entry(name: &str) -> CatalogServer {
    CatalogServer {
        name: name.into(),
        description: "Runs on the server".into(),
        launch: CatalogLaunch::Stdio {
            command: "/usr/local/bin/tool".into(),
            args: vec!["--flag".into(), "two words".into()],
            cwd: Some("/srv".into()),
            env: BTreeMap::from([("API_KEY".to_owned(), Secret::new("team-env-2"))]),
        },
    }
}

fn tokens(t: &str) -> Secret {
    Secret::new(format!("{{\"accessToken\":\"{t}\"}}"))
}

async fn only_admins_publish_and_each_user_has_their_own_enablement_and_tokens(db: Db) {
    let store = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&SecretKeys::generate_base64().unwrap(), None));
    store.migrate().await.unwrap();
    let admin = store
        .sign_in_user(&who("admin@example.com"), "Admin", true)
        .await
        .unwrap();
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = store
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();

    // A non-admin cannot publish or unpublish.
    let refused = store
        .publish_catalog_server(&ann.id, &http_entry("docs", "https://docs.example/mcp"))
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::Forbidden(_)), "{refused}");
    assert!(store.catalog_servers().await.unwrap().is_empty());

    store
        .publish_catalog_server(&admin.id, &http_entry("docs", "https://docs.example/mcp"))
        .await
        .unwrap();
    store
        .publish_catalog_server(&admin.id, &stdio_entry("tool"))
        .await
        .unwrap();
    assert!(matches!(
        store.unpublish_catalog_server(&ann.id, "docs").await,
        Err(StoreError::Forbidden(_))
    ));
    // Admin rights are checked in the database at the write: a demoted admin is refused.
    store
        .sign_in_user(&who("admin@example.com"), "Admin", false)
        .await
        .unwrap();
    assert!(matches!(
        store
            .publish_catalog_server(&admin.id, &stdio_entry("other"))
            .await,
        Err(StoreError::Forbidden(_))
    ));
    store
        .sign_in_user(&who("admin@example.com"), "Admin", true)
        .await
        .unwrap();

    let all = store.catalog_servers().await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[0].server,
        http_entry("docs", "https://docs.example/mcp")
    );
    assert_eq!(all[1].server, stdio_entry("tool"));
    assert_eq!(all[0].published_by.as_ref(), Some(&admin.id));

    // Bad entries are refused with the reason.
    for (bad, why) in [
        (http_entry("no spaces", "https://a.example"), "server name"),
        (http_entry("x", "file:///etc/passwd"), "http://"),
        (
            CatalogServer {
                launch: CatalogLaunch::Stdio {
                    command: " ".into(),
                    args: vec![],
                    cwd: None,
                    env: BTreeMap::new(),
                },
                ..stdio_entry("x")
            },
            "command",
        ),
        (
            CatalogServer {
                launch: CatalogLaunch::Stdio {
                    command: "tool".into(),
                    args: vec![],
                    cwd: Some("relative".into()),
                    env: BTreeMap::new(),
                },
                ..stdio_entry("x")
            },
            "absolute",
        ),
    ] {
        let e = store
            .publish_catalog_server(&admin.id, &bad)
            .await
            .unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
    }

    // Enabling is per user.
    let a = store.for_user(&ann.id);
    let b = store.for_user(&bob.id);
    assert!(a.catalog().await.unwrap().iter().all(|e| !e.enabled));
    assert!(a.enable_catalog_server("docs").await.unwrap());
    assert!(
        a.enable_catalog_server("docs").await.unwrap(),
        "twice is once"
    );
    assert!(!a.enable_catalog_server("missing").await.unwrap());
    assert!(a.catalog_server("docs").await.unwrap().unwrap().enabled);
    assert!(!b.catalog_server("docs").await.unwrap().unwrap().enabled);

    // Tokens need the enablement, and are each user's own.
    let e = b
        .put_tokens(&ServerRef::catalog("docs"), &tokens("bob-1"), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not enabled"), "{e}");
    b.enable_catalog_server("docs").await.unwrap();
    a.put_tokens(&ServerRef::catalog("docs"), &tokens("ann-1"), Some(99))
        .await
        .unwrap();
    b.put_tokens(&ServerRef::catalog("docs"), &tokens("bob-1"), None)
        .await
        .unwrap();
    let read = |us: &switchboard_store::UserStore, r: ServerRef| {
        let us = us.clone();
        async move {
            us.tokens(&r)
                .await
                .unwrap()
                .map(|t| t.tokens.expose().to_owned())
        }
    };
    assert!(
        read(&a, ServerRef::catalog("docs"))
            .await
            .unwrap()
            .contains("ann-1")
    );
    assert!(
        read(&b, ServerRef::catalog("docs"))
            .await
            .unwrap()
            .contains("bob-1")
    );
    // A server of ann's own named like the catalog server is another namespace.
    a.put_server(&ServerRecord {
        name: "docs".into(),
        url: "https://mine.example/mcp".into(),
        transport: Transport::Http,
        headers: BTreeMap::new(),
        enabled: true,
    })
    .await
    .unwrap();
    assert_eq!(a.oauth_tokens("docs").await.unwrap(), None);
    a.put_oauth_tokens("docs", &tokens("ann-own"), None)
        .await
        .unwrap();
    assert!(
        read(&a, ServerRef::catalog("docs"))
            .await
            .unwrap()
            .contains("ann-1")
    );
    assert!(
        read(&a, ServerRef::own("docs"))
            .await
            .unwrap()
            .contains("ann-own")
    );
    a.remove_server("docs").await.unwrap();
    assert!(read(&a, ServerRef::catalog("docs")).await.is_some());

    // A new description keeps tokens; a new URL drops everyone's (not the enablements).
    let mut described = http_entry("docs", "https://docs.example/mcp");
    described.description = "Updated".into();
    store
        .publish_catalog_server(&admin.id, &described)
        .await
        .unwrap();
    assert!(read(&a, ServerRef::catalog("docs")).await.is_some());
    store
        .publish_catalog_server(&admin.id, &http_entry("docs", "https://moved.example/mcp"))
        .await
        .unwrap();
    assert_eq!(read(&a, ServerRef::catalog("docs")).await, None);
    assert_eq!(read(&b, ServerRef::catalog("docs")).await, None);
    assert!(a.catalog_server("docs").await.unwrap().unwrap().enabled);

    // Disabling forgets the user's tokens, only theirs.
    a.put_tokens(&ServerRef::catalog("docs"), &tokens("ann-2"), None)
        .await
        .unwrap();
    b.put_tokens(&ServerRef::catalog("docs"), &tokens("bob-2"), None)
        .await
        .unwrap();
    assert!(a.disable_catalog_server("docs").await.unwrap());
    assert!(!a.disable_catalog_server("docs").await.unwrap());
    assert_eq!(read(&a, ServerRef::catalog("docs")).await, None);
    assert!(read(&b, ServerRef::catalog("docs")).await.is_some());

    // Unpublishing removes enablements and tokens of everyone.
    assert!(
        store
            .unpublish_catalog_server(&admin.id, "docs")
            .await
            .unwrap()
    );
    assert!(
        !store
            .unpublish_catalog_server(&admin.id, "docs")
            .await
            .unwrap()
    );
    assert_eq!(read(&b, ServerRef::catalog("docs")).await, None);
    let raw = db.raw().await;
    for table in ["catalog_enablements", "catalog_oauth_tokens"] {
        let n: i64 = sqlx::query(&format!(
            "SELECT COUNT(*) FROM {table} WHERE catalog_name = 'docs'"
        ))
        .fetch_one(&raw)
        .await
        .unwrap()
        .get(0);
        assert_eq!(n, 0, "{table}");
    }
}

fn login(name: &str, url: &str) -> NewServerLogin {
    NewServerLogin {
        server_name: name.into(),
        server_url: url.into(),
        client: ServerLoginClient {
            client_id: "cid".into(),
            token_url: "https://as.example/token".into(),
            redirect_uri: "https://team.example/oauth/mcp/callback".into(),
            resource: None,
            scopes: vec![],
            issuer: Some("https://as.example".into()),
            iss_required: false,
        },
    }
}

async fn a_catalog_login_and_refresh_are_the_users_and_the_catalogs(db: Db) {
    let k = SecretKeys::generate_base64().unwrap();
    let one = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    one.migrate().await.unwrap();
    let two = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    let admin = one
        .sign_in_user(&who("admin@example.com"), "Admin", true)
        .await
        .unwrap();
    let ann = one
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = one
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    one.publish_catalog_server(&admin.id, &http_entry("docs", "https://docs.example/mcp"))
        .await
        .unwrap();
    let a = one.for_user(&ann.id);
    // Not enabled: no login; a login for the wrong URL: none either.
    let ttl = Duration::from_secs(600);
    assert!(
        a.start_catalog_login(&login("docs", "https://docs.example/mcp"), ttl)
            .await
            .is_err()
    );
    a.enable_catalog_server("docs").await.unwrap();
    assert!(
        a.start_catalog_login(&login("docs", "https://elsewhere.example/mcp"), ttl)
            .await
            .is_err()
    );
    // Ann has no own server `docs`: the catalog login does not make one count.
    assert!(
        a.start_server_login(&login("docs", "https://docs.example/mcp"), ttl)
            .await
            .is_err()
    );
    let started = a
        .start_catalog_login(&login("docs", "https://docs.example/mcp"), ttl)
        .await
        .unwrap();
    // Bob cannot take it; ann can, once, on another instance; it says "catalog".
    assert_eq!(
        two.for_user(&bob.id)
            .take_server_login(&started.state)
            .await
            .unwrap(),
        None
    );
    let taken = two
        .for_user(&ann.id)
        .take_server_login(&started.state)
        .await
        .unwrap()
        .expect("ann's login");
    assert_eq!(taken.server, ServerRef::catalog("docs"));
    assert_eq!(taken.server_url, "https://docs.example/mcp");
    assert_eq!(taken.verifier, started.verifier);

    // One refresh at a time across instances, on the catalog tokens.
    a.put_tokens(&ServerRef::catalog("docs"), &tokens("old"), None)
        .await
        .unwrap();
    let r = ServerRef::catalog("docs");
    let lease = a
        .begin_tokens_refresh(&r, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("first claim");
    assert!(
        two.for_user(&ann.id)
            .begin_tokens_refresh(&r, Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "a second claim while the first holds"
    );
    // Bob's own row is not ann's lease.
    one.for_user(&bob.id)
        .enable_catalog_server("docs")
        .await
        .unwrap();
    one.for_user(&bob.id)
        .put_tokens(&r, &tokens("bobs"), None)
        .await
        .unwrap();
    let bob_lease = one
        .for_user(&bob.id)
        .begin_tokens_refresh(&r, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("bob's claim is his own");
    one.for_user(&bob.id)
        .abandon_refresh(bob_lease)
        .await
        .unwrap();
    assert!(
        a.finish_refresh(lease, &tokens("new"), Some(7))
            .await
            .unwrap()
    );
    let now = a.tokens(&r).await.unwrap().unwrap();
    assert!(now.tokens.expose().contains("new"));
    assert_eq!(now.expires_at, Some(7));
    assert!(
        one.for_user(&bob.id)
            .tokens(&r)
            .await
            .unwrap()
            .unwrap()
            .tokens
            .expose()
            .contains("bobs")
    );
    assert!(a.remove_tokens(&r).await.unwrap());
    assert!(!a.remove_tokens(&r).await.unwrap());
}

async fn dump(db: &Db) -> String {
    let raw = db.raw().await;
    let mut out = String::new();
    for (table, cols) in [
        (
            "catalog_servers",
            "name, transport, url, command, args, cwd, headers, env, description",
        ),
        ("catalog_oauth_tokens", "user_id, catalog_name, tokens"),
    ] {
        for col in cols.split(", ") {
            let sql = match db {
                Db::Sqlite(..) => format!("SELECT hex(CAST({col} AS BLOB)) FROM {table}"),
                Db::Postgres(..) => format!(
                    "SELECT CASE WHEN pg_typeof({col})::text = 'bytea' \
                     THEN encode({col}::bytea, 'hex') \
                     ELSE encode(convert_to({col}::text, 'UTF8'), 'hex') END FROM {table}"
                ),
            };
            for row in sqlx::query(&sql).fetch_all(&raw).await.unwrap() {
                let v: Option<String> = row.get(0);
                out.push_str(&v.unwrap_or_default().to_uppercase());
                out.push('\n');
            }
        }
    }
    out
}

async fn secrets_are_sealed_and_reencrypted(db: Db) {
    let old = SecretKeys::generate_base64().unwrap();
    let store = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&old, None));
    store.migrate().await.unwrap();
    let admin = store
        .sign_in_user(&who("admin@example.com"), "Admin", true)
        .await
        .unwrap();
    store
        .publish_catalog_server(&admin.id, &http_entry("docs", "https://docs.example/mcp"))
        .await
        .unwrap();
    store
        .publish_catalog_server(&admin.id, &stdio_entry("tool"))
        .await
        .unwrap();
    let us = store.for_user(&admin.id);
    us.enable_catalog_server("docs").await.unwrap();
    us.put_tokens(&ServerRef::catalog("docs"), &tokens("token-secret-3"), None)
        .await
        .unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02X}")).collect::<String>();
    let d = dump(&db).await;
    assert!(d.contains(&hex("https://docs.example/mcp")), "{d}");
    assert!(d.contains(&hex("/usr/local/bin/tool")), "{d}");
    for secret in ["team-header-1", "team-env-2", "token-secret-3"] {
        assert!(!d.contains(&hex(secret)), "{secret} is in clear");
    }
    // A sealed value copied to another catalog row and column does not open.
    let raw = db.raw().await;
    sqlx::query(
        "UPDATE catalog_servers SET env = (SELECT headers FROM catalog_servers WHERE name = 'docs') \
         WHERE name = 'tool'",
    )
    .execute(&raw)
    .await
    .unwrap();
    let e = store.catalog_server("tool").await.unwrap_err();
    assert!(matches!(e, StoreError::Unseal { .. }), "{e}");
    store
        .publish_catalog_server(&admin.id, &stdio_entry("tool"))
        .await
        .unwrap();

    // Rotation: everything catalog is re-sealed and opens under the new key alone.
    let new = SecretKeys::generate_base64().unwrap();
    let rotated = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&new, Some(&old)));
    let report = rotated.reencrypt().await.unwrap();
    assert!(report.resealed >= 3, "{report:?}");
    let only_new = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&new, None));
    let all = only_new.catalog_servers().await.unwrap();
    assert_eq!(
        all[0].server,
        http_entry("docs", "https://docs.example/mcp")
    );
    assert_eq!(all[1].server, stdio_entry("tool"));
    assert!(
        only_new
            .for_user(&admin.id)
            .tokens(&ServerRef::catalog("docs"))
            .await
            .unwrap()
            .unwrap()
            .tokens
            .expose()
            .contains("token-secret-3")
    );
}

async fn upgrading_from_schema_4_keeps_rows(db: Db) {
    let store = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&SecretKeys::generate_base64().unwrap(), None));
    assert_eq!(store.migrate_to(4).await.unwrap().version, 4);
    let ann = legacy_user(db.url(), "ann@example.com", "Ann", true).await;
    let a = store.for_user(&ann.id);
    a.put_server(&ServerRecord {
        name: "s".into(),
        url: "https://x.example/mcp".into(),
        transport: Transport::Http,
        headers: BTreeMap::new(),
        enabled: true,
    })
    .await
    .unwrap();
    a.put_oauth_tokens("s", &tokens("kept"), None)
        .await
        .unwrap();
    // A login in flight written by the schema-4 binary (its columns only).
    let raw = db.raw().await;
    sqlx::query(
        "INSERT INTO pending_server_logins (state_hash, user_id, server_name, server_url, \
         verifier, client, created_at, expires_at) VALUES ('h', $1, 's', 'https://x.example/mcp', \
         $2, '{}', 0, 9999999999)",
    )
    .bind(ann.id.as_str().to_owned())
    .bind(b"sealed".to_vec())
    .execute(&raw)
    .await
    .unwrap();
    assert!(
        sqlx::query("SELECT COUNT(*) FROM catalog_servers")
            .fetch_one(&raw)
            .await
            .is_err(),
        "schema 4 has no catalog"
    );
    let report = store.migrate().await.unwrap();
    let versions: Vec<i64> = report.applied.iter().map(|m| m.version).collect();
    assert_eq!(versions, (5..=LATEST_VERSION).collect::<Vec<i64>>());
    assert_eq!(report.version, LATEST_VERSION);
    assert!(
        a.oauth_tokens("s")
            .await
            .unwrap()
            .unwrap()
            .tokens
            .expose()
            .contains("kept")
    );
    // A login begun before the upgrade is for the user's own server.
    let catalog: i64 =
        sqlx::query("SELECT catalog FROM pending_server_logins WHERE state_hash = 'h'")
            .fetch_one(&raw)
            .await
            .unwrap()
            .get(0);
    assert_eq!(catalog, 0);
    store
        .publish_catalog_server(&ann.id, &http_entry("docs", "https://docs.example/mcp"))
        .await
        .unwrap();
    assert!(store.migrate().await.unwrap().applied.is_empty());
}
