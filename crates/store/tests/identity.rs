//! Who a user is: the issuer's account (issuer + `sub`), never the email. An email the
//! issuer gives to another account signs that account in as a new user with nothing of
//! the first one's; a user from before schema 15 (keyed by email) is claimed once, by the
//! first sign-in with that email verified, and afterwards only by that account. On an
//! SQLite file and on a throwaway PostgreSQL cluster. Also the helpers the other modules
//! sign users in with.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use switchboard_store::{
    LATEST_VERSION, SecretKeys, ServerRecord, SignInIdentity, Store, StoreError, Transport, User,
    UserId,
};
use switchboard_testkit::PgCluster;

/// The issuer the tests' accounts come from.
pub const ISSUER: &str = "https://issuer.test";

/// A verified account of [`ISSUER`] whose `sub` is its email.
pub fn who(email: &str) -> SignInIdentity<'_> {
    SignInIdentity {
        issuer: ISSUER,
        subject: email,
        email,
        email_verified: true,
    }
}

/// A user as a Switchboard before schema 15 signed one in (keyed by its email, lower
/// case), written straight into the table of a database at that schema.
pub async fn legacy_user(url: &str, email: &str, name: &str, admin: bool) -> User {
    install_default_drivers();
    let raw = AnyPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap();
    let id = format!("legacy-{}", email.to_lowercase());
    sqlx::query(
        "INSERT INTO users (id, email, name, is_admin, created_at, last_seen_at) \
         VALUES ($1, $2, $3, $4, 1, 1)",
    )
    .bind(id.clone())
    .bind(email.to_lowercase())
    .bind(name.to_owned())
    .bind(i64::from(admin))
    .execute(&raw)
    .await
    .unwrap();
    raw.close().await;
    User {
        id: UserId::from_stored(&id),
        issuer: None,
        subject: None,
        email: email.to_lowercase(),
        name: name.to_owned(),
        is_admin: admin,
        created_at: 1,
        last_seen_at: 1,
    }
}

/// A database for one test, and what must live as long as it (a temp dir, a cluster).
struct Db {
    url: String,
    _keep: Box<dyn std::any::Any>,
}

impl Db {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/team.db?mode=rwc", dir.path().display());
        Self {
            url,
            _keep: Box::new(dir),
        }
    }

    fn postgres() -> Self {
        let cluster = PgCluster::start();
        let url = cluster.create_database("team");
        Self {
            url,
            _keep: Box::new(cluster),
        }
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn open(&self) -> Store {
        let keys = SecretKeys::from_base64(&SecretKeys::generate_base64().unwrap(), None).unwrap();
        Store::open(self.url()).await.unwrap().with_keys(keys)
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
    an_email_given_to_another_account_signs_in_a_new_user,
    a_user_from_before_schema_15_is_claimed_once_by_a_verified_sign_in,
);

fn server(name: &str) -> ServerRecord {
    ServerRecord {
        name: name.into(),
        url: format!("https://{name}.example/mcp"),
        transport: Transport::Http,
        headers: BTreeMap::new(),
        enabled: true,
    }
}

async fn server_names(store: &Store, user: &UserId) -> Vec<String> {
    store
        .for_user(user)
        .servers()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect()
}

async fn an_email_given_to_another_account_signs_in_a_new_user(db: Db) {
    let store = db.open().await;
    store.migrate().await.unwrap();
    let first = SignInIdentity {
        issuer: ISSUER,
        subject: "sub-1",
        email: "Ann@Example.com",
        email_verified: true,
    };
    let ann = store.sign_in_user(&first, "Ann", true).await.unwrap();
    assert_eq!(
        (
            ann.issuer.as_deref(),
            ann.subject.as_deref(),
            ann.email.as_str()
        ),
        (Some(ISSUER), Some("sub-1"), "ann@example.com")
    );
    store
        .for_user(&ann.id)
        .put_server(&server("anns"))
        .await
        .unwrap();
    let session = store
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();

    // The issuer gives the address to another account: a new user, with nothing of Ann's.
    let second = SignInIdentity {
        subject: "sub-2",
        ..first
    };
    let other = store.sign_in_user(&second, "Not Ann", false).await.unwrap();
    assert_ne!(other.id, ann.id);
    assert_eq!(other.email, "ann@example.com", "emails are not unique");
    assert!(server_names(&store, &other.id).await.is_empty());
    assert_eq!(server_names(&store, &ann.id).await, ["anns"]);
    // The same `sub` at another issuer is another account too.
    let elsewhere = SignInIdentity {
        issuer: "https://other-issuer.test",
        ..first
    };
    let third = store.sign_in_user(&elsewhere, "Ann", false).await.unwrap();
    assert!(third.id != ann.id && third.id != other.id);

    // Ann's account under a new address is still Ann; the email only shows.
    let renamed = SignInIdentity {
        email: "ann.b@example.org",
        ..first
    };
    let again = store.sign_in_user(&renamed, "Ann B.", false).await.unwrap();
    assert_eq!(
        (
            &again.id,
            again.email.as_str(),
            again.name.as_str(),
            again.is_admin
        ),
        (&ann.id, "ann.b@example.org", "Ann B.", false)
    );
    let by_session = store.session_user(session.expose()).await.unwrap().unwrap();
    assert_eq!(
        (by_session.id, by_session.email.as_str()),
        (ann.id.clone(), "ann.b@example.org")
    );

    // A sign-in must name its account.
    for bad in [
        SignInIdentity {
            subject: "",
            ..first
        },
        SignInIdentity {
            issuer: "",
            ..first
        },
        SignInIdentity {
            email: "no-at-sign",
            ..first
        },
    ] {
        let err = store.sign_in_user(&bad, "x", false).await.unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{bad:?}: {err}");
    }
}

async fn a_user_from_before_schema_15_is_claimed_once_by_a_verified_sign_in(db: Db) {
    let store = db.open().await;
    assert_eq!(store.migrate_to(14).await.unwrap().version, 14);
    // Ann as the previous schema knew her: keyed by email, with a server and a session.
    let ann = legacy_user(db.url(), "Ann@Example.com", "Ann", false).await;
    store
        .for_user(&ann.id)
        .put_server(&server("anns"))
        .await
        .unwrap();
    // The sessions table is the same at both schemas.
    let old_session = store
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();

    let report = store.migrate().await.unwrap();
    assert_eq!(report.version, LATEST_VERSION);
    // The rebuild (SQLite) or the altered table (PostgreSQL) kept her rows.
    assert_eq!(server_names(&store, &ann.id).await, ["anns"]);
    let back = store
        .session_user(old_session.expose())
        .await
        .unwrap()
        .expect("her session survives the migration");
    assert_eq!(
        (&back.id, back.issuer.as_deref(), back.email.as_str()),
        (&ann.id, None, "ann@example.com")
    );

    // An unverified email claims nothing: a new, empty user; Ann's row stays unclaimed.
    let unverified = SignInIdentity {
        issuer: ISSUER,
        subject: "sub-unverified",
        email: "ann@example.com",
        email_verified: false,
    };
    let stranger = store.sign_in_user(&unverified, "Who", false).await.unwrap();
    assert_ne!(stranger.id, ann.id);
    assert!(server_names(&store, &stranger.id).await.is_empty());
    // …and that account stays itself even once its email is verified: an account that
    // already has a user never takes another's.
    let now_verified = SignInIdentity {
        email_verified: true,
        ..unverified
    };
    let same = store
        .sign_in_user(&now_verified, "Who", false)
        .await
        .unwrap();
    assert_eq!(same.id, stranger.id);

    // The first verified sign-in with her email (any case) claims her row.
    let hers = SignInIdentity {
        issuer: ISSUER,
        subject: "sub-ann",
        email: "ANN@example.com",
        email_verified: true,
    };
    let claimed = store.sign_in_user(&hers, "Ann", true).await.unwrap();
    assert_eq!(
        (
            &claimed.id,
            claimed.issuer.as_deref(),
            claimed.subject.as_deref(),
            claimed.is_admin
        ),
        (&ann.id, Some(ISSUER), Some("sub-ann"), true)
    );
    assert_eq!(server_names(&store, &claimed.id).await, ["anns"]);

    // From then on only that account reaches it: another verified account with the same
    // email is a new user, and Ann is Ann under any email.
    let usurper = SignInIdentity {
        subject: "sub-usurper",
        ..hers
    };
    let late = store.sign_in_user(&usurper, "Late", false).await.unwrap();
    assert!(late.id != ann.id && late.id != stranger.id);
    assert!(server_names(&store, &late.id).await.is_empty());
    let moved = SignInIdentity {
        email: "ann@new.example",
        ..hers
    };
    assert_eq!(
        store.sign_in_user(&moved, "Ann", true).await.unwrap().id,
        ann.id
    );
}
