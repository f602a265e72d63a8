//! The store against real databases: every scenario runs on an SQLite file AND on a
//! throwaway PostgreSQL cluster (testkit's `PgCluster`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::identity::{legacy_user, who};
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};
use switchboard_store::{
    Backend, InputRow, LATEST_VERSION, NewServerLogin, PendingLogin, PendingServerLogin, Secret,
    SecretKeys, ServerLoginClient, ServerRecord, ServerRef, SignInIdentity, Store, StoreError,
    Transport,
};
use switchboard_testkit::{PG_PASSWORD, PgCluster};

/// A database for one test: an SQLite file in a temp dir, or a database on a fresh cluster.
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

    fn backend(&self) -> Backend {
        match self {
            Self::Sqlite(..) => Backend::Sqlite,
            Self::Postgres(..) => Backend::Postgres,
        }
    }

    /// A connection pool that bypasses the store (to read and tamper with raw rows).
    async fn raw(&self) -> AnyPool {
        install_default_drivers();
        AnyPoolOptions::new()
            .max_connections(1)
            .connect(self.url())
            .await
            .unwrap()
    }

    /// A migrated store sealing with `keys`.
    async fn store(&self, keys: SecretKeys) -> Store {
        let store = Store::open(self.url()).await.unwrap().with_keys(keys);
        store.migrate().await.unwrap();
        store
    }
}

fn key() -> String {
    SecretKeys::generate_base64().unwrap()
}

/// Reads the rows of `sql` straight from the database and asserts that none of their
/// columns holds any of `secrets` in clear; the number of rows.
async fn assert_sealed(db: &Db, sql: &str, secrets: &[&str]) -> usize {
    let raw = db.raw().await;
    let rows = sqlx::query(sql).fetch_all(&raw).await.unwrap();
    for row in &rows {
        for i in 0..row.len() {
            let bytes: Vec<u8> = row.try_get(i).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            for secret in secrets {
                assert!(!text.contains(secret), "column {i} of `{sql}` in clear");
            }
        }
    }
    rows.len()
}

fn keys(current: &str, previous: Option<&str>) -> SecretKeys {
    SecretKeys::from_base64(current, previous).unwrap()
}

fn server(name: &str, url: &str, header: &str) -> ServerRecord {
    ServerRecord {
        name: name.into(),
        url: url.into(),
        transport: Transport::Http,
        headers: BTreeMap::from([("Authorization".to_owned(), Secret::new(header))]),
        enabled: true,
    }
}

/// Run each scenario on SQLite and on PostgreSQL.
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
    gateway_grants_are_hashed_single_use_rotated_and_end_with_their_session,
    gateway_tokens_are_revoked_by_their_client_and_grants_by_their_user,
    migrations_from_empty_are_idempotent,
    migrating_from_the_previous_schema_keeps_rows,
    a_newer_schema_is_refused,
    sessions_are_hashed_expire_and_end_everywhere,
    a_login_started_on_one_instance_completes_on_another_once,
    users_never_see_each_others_rows,
    changing_a_server_url_drops_its_tokens,
    copied_or_tampered_ciphertext_is_refused,
    rotation_then_reencrypt_moves_everything_to_the_new_key,
    a_raw_dump_holds_no_secret_in_clear,
    one_instance_at_a_time_refreshes_tokens,
    a_server_login_is_its_users_once_on_any_instance,
    chats_are_their_users_and_sealed,
    chats_migrate_from_schema_4,
    one_turn_at_a_time_in_a_chat_on_any_instance,
    workflows_and_runs_are_their_users_sealed_and_capped,
    app_sessions_are_their_users_sealed_and_migrate_from_8,
    elicitations_migrate_from_schema_8_are_sealed_their_users_and_answered_once,
    a_chat_stops_at_its_message_cap,
    gateway_inputs_cross_instances_once_sealed_and_bound_to_their_call,
    a_users_waiting_gateway_calls_are_bounded_across_instances,
);

/// A user's team-gateway calls waiting for input are counted in the store, whichever
/// instance opened them: at the limit the next row is refused with how many wait; another
/// user has their own count; a row with its outcome written, an expired row and the row
/// a call's next question replaces do not count; a finished row frees its place.
async fn a_users_waiting_gateway_calls_are_bounded_across_instances(db: Db) {
    use switchboard_store::call_hash;
    let k = key();
    let one = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    one.migrate().await.unwrap();
    let two = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    let ann = one
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = one
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let call = call_hash("tools/call s__ask");
    let ttl = Duration::from_secs(60);
    let (a1, a2) = (one.for_user(&ann.id), two.for_user(&ann.id));
    for i in 0..3 {
        let on = if i % 2 == 0 { &a1 } else { &a2 };
        let opened = on
            .open_gateway_input(&format!("s{i}"), &call, ttl, 3, None)
            .await
            .unwrap();
        assert_eq!(opened, InputRow::Opened, "row {i}");
    }
    let full = a2
        .open_gateway_input("s3", &call, ttl, 3, None)
        .await
        .unwrap();
    assert_eq!(full, InputRow::Full { waiting: 3 });
    assert!(!a2.gateway_input_waiting("s3", &call).await.unwrap());
    // Bob has his own.
    let bob_row = two
        .for_user(&bob.id)
        .open_gateway_input("b0", &call, ttl, 3, None)
        .await
        .unwrap();
    assert_eq!(bob_row, InputRow::Opened);
    // The same call asking again replaces its row: not counted against itself.
    let next = a1
        .open_gateway_input("s0-next", &call, ttl, 3, Some("s0"))
        .await
        .unwrap();
    assert_eq!(next, InputRow::Opened);
    // Its old row has its outcome now: no longer waiting.
    a1.put_gateway_input_outcome("s0", &serde_json::json!({"inputRequired": {}}))
        .await
        .unwrap();
    assert_eq!(
        a2.open_gateway_input("s4", &call, ttl, 3, None)
            .await
            .unwrap(),
        InputRow::Full { waiting: 3 }
    );
    // An expired row does not count; a finished one frees its place.
    a1.finish_gateway_input("s1").await.unwrap();
    a1.open_gateway_input("gone", &call, Duration::ZERO, 3, None)
        .await
        .unwrap();
    assert_eq!(
        a2.open_gateway_input("s5", &call, ttl, 3, None)
            .await
            .unwrap(),
        InputRow::Opened
    );
}

/// A team-gateway call waiting for input: opened by the running instance, answered
/// through another (once, only for the same user and call), the answer taken once, the
/// outcome written and taken once (the row ends with it); answer and outcome sealed and
/// moved by re-encryption; an expired row is refused and purged.
async fn gateway_inputs_cross_instances_once_sealed_and_bound_to_their_call(db: Db) {
    use serde_json::json;
    use switchboard_store::call_hash;
    let k = key();
    let running = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    running.migrate().await.unwrap();
    let retrying = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    let ann = running
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = running
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let call = call_hash("tools/call everything__trigger-elicitation-request");
    let other_call = call_hash("tools/call everything__echo");
    let a = running.for_user(&ann.id);
    let opened = a
        .open_gateway_input("state-1", &call, Duration::from_secs(60), 32, None)
        .await
        .unwrap();
    assert_eq!(opened, InputRow::Opened);
    let a2 = retrying.for_user(&ann.id);
    let b2 = retrying.for_user(&bob.id);
    assert!(a2.gateway_input_waiting("state-1", &call).await.unwrap());
    assert!(
        !a2.gateway_input_waiting("state-1", &other_call)
            .await
            .unwrap()
    );
    assert!(!b2.gateway_input_waiting("state-1", &call).await.unwrap());
    assert!(
        a.take_gateway_input_answer("state-1")
            .await
            .unwrap()
            .is_none()
    );

    let answer =
        json!({"elicitation-1": {"action": "accept", "content": {"pin": "SECRET-PIN-5521"}}});
    assert!(
        !b2.answer_gateway_input("state-1", &call, &answer)
            .await
            .unwrap(),
        "another user"
    );
    assert!(
        !a2.answer_gateway_input("state-1", &other_call, &answer)
            .await
            .unwrap(),
        "another call"
    );
    assert!(
        a2.answer_gateway_input("state-1", &call, &answer)
            .await
            .unwrap()
    );
    assert!(
        !a2.answer_gateway_input("state-1", &call, &json!({}))
            .await
            .unwrap(),
        "the first answer wins"
    );
    assert_eq!(
        a.take_gateway_input_answer("state-1").await.unwrap(),
        Some(answer)
    );
    assert!(
        a.take_gateway_input_answer("state-1")
            .await
            .unwrap()
            .is_none(),
        "taken once"
    );

    assert!(
        a2.take_gateway_input_outcome("state-1", &call)
            .await
            .unwrap()
            .is_none()
    );
    // Progress of the call relaying on: the latest, counted, only for its user and call.
    assert!(
        a2.gateway_input_progress("state-1", &call)
            .await
            .unwrap()
            .is_none()
    );
    for step in 1..=2 {
        let p = json!({"progress": step, "total": 3, "message": "PROGRESS-NOTE-4417"});
        a.put_gateway_input_progress("state-1", &p).await.unwrap();
    }
    let (seq, latest) = a2
        .gateway_input_progress("state-1", &call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((seq, latest["progress"].as_i64()), (2, Some(2)));
    assert!(
        b2.gateway_input_progress("state-1", &call)
            .await
            .unwrap()
            .is_none(),
        "another user"
    );
    assert!(
        a2.gateway_input_progress("state-1", &other_call)
            .await
            .unwrap()
            .is_none(),
        "another call"
    );
    let outcome = json!({"result": {"content": [{"type": "text", "text": "PIN-OUTCOME-8830"}]}});
    a.put_gateway_input_outcome("state-1", &outcome)
        .await
        .unwrap();

    // Sealed at rest, and moved to a new key by re-encryption.
    let rows = assert_sealed(
        &db,
        "SELECT answer, outcome, progress FROM gateway_inputs",
        &["SECRET-PIN-5521", "PIN-OUTCOME-8830", "PROGRESS-NOTE-4417"],
    )
    .await;
    assert_eq!(rows, 1);
    let k2 = key();
    let rotated = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, Some(&k)));
    let r = rotated.reencrypt().await.unwrap();
    assert_eq!(
        r.resealed, 3,
        "the answer, the outcome and the progress: {r:?}"
    );
    let only_new = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, None));
    let n = only_new.for_user(&ann.id);
    assert!(
        n.take_gateway_input_outcome("state-1", &other_call)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        only_new
            .for_user(&bob.id)
            .take_gateway_input_outcome("state-1", &call)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        n.take_gateway_input_outcome("state-1", &call)
            .await
            .unwrap(),
        Some(outcome)
    );
    assert!(
        n.take_gateway_input_outcome("state-1", &call)
            .await
            .unwrap()
            .is_none(),
        "taken once"
    );
    assert!(
        !n.gateway_input_waiting("state-1", &call).await.unwrap(),
        "the row ended"
    );

    // Expired: not waiting, not answerable, purged.
    n.open_gateway_input("state-2", &call, Duration::ZERO, 32, None)
        .await
        .unwrap();
    assert!(!n.gateway_input_waiting("state-2", &call).await.unwrap());
    assert!(
        !n.answer_gateway_input("state-2", &call, &json!({}))
            .await
            .unwrap()
    );
    assert!(only_new.purge_expired().await.unwrap() >= 1);
    let left: i64 = sqlx::query("SELECT COUNT(*) FROM gateway_inputs")
        .fetch_one(&db.raw().await)
        .await
        .unwrap()
        .try_get(0)
        .unwrap();
    assert_eq!(left, 0);
    // Finished by the running instance when the retry came back to it.
    n.open_gateway_input("state-3", &call, Duration::from_secs(60), 32, None)
        .await
        .unwrap();
    n.finish_gateway_input("state-3").await.unwrap();
    assert!(!n.gateway_input_waiting("state-3", &call).await.unwrap());
}

fn login_client() -> ServerLoginClient {
    ServerLoginClient {
        client_id: "cid".into(),
        token_url: "https://as.example/token".into(),
        redirect_uri: "https://team.example/oauth/mcp/callback".into(),
        resource: Some("https://x.example/mcp".into()),
        scopes: vec!["mcp".into()],
        issuer: Some("https://as.example".into()),
        iss_required: true,
    }
}

async fn a_server_login_is_its_users_once_on_any_instance(db: Db) {
    let k = key();
    // Schema 3 with a user and a server, then the upgrade to 4.
    let one = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    assert_eq!(one.migrate_to(3).await.unwrap().version, 3);
    let ann = legacy_user(db.url(), "ann@example.com", "Ann", false).await;
    let bob = legacy_user(db.url(), "bob@example.com", "Bob", false).await;
    one.for_user(&ann.id)
        .put_server(&server("s", "https://x.example/mcp", "h"))
        .await
        .unwrap();
    let report = one.migrate().await.unwrap();
    assert_eq!(
        report.applied.iter().map(|m| m.version).collect::<Vec<_>>(),
        (4..=LATEST_VERSION).collect::<Vec<i64>>()
    );
    let two = db.store(keys(&k, None)).await;
    let new = NewServerLogin {
        server_name: "s".into(),
        server_url: "https://x.example/mcp".into(),
        client: login_client(),
    };
    // Only for the user's own server at its current URL.
    assert!(
        one.for_user(&bob.id)
            .start_server_login(&new, Duration::from_secs(600))
            .await
            .is_err()
    );
    let moved = NewServerLogin {
        server_url: "https://y.example/mcp".into(),
        ..new.clone()
    };
    assert!(
        one.for_user(&ann.id)
            .start_server_login(&moved, Duration::from_secs(600))
            .await
            .is_err()
    );
    let started = one
        .for_user(&ann.id)
        .start_server_login(&new, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(started.verifier.expose().len(), 43);
    // Nothing of it in clear in the database.
    let raw = db.raw().await;
    let row = sqlx::query("SELECT state_hash, verifier FROM pending_server_logins")
        .fetch_one(&raw)
        .await
        .unwrap();
    let (hash, sealed): (String, Vec<u8>) = (row.get(0), row.get(1));
    assert_ne!(hash, started.state);
    assert!(
        !String::from_utf8_lossy(&sealed).contains(started.verifier.expose()),
        "verifier in clear"
    );
    // Bob, on the other instance, cannot take it — and it stays for ann.
    assert_eq!(
        two.for_user(&bob.id)
            .take_server_login(&started.state)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        two.for_user(&ann.id)
            .take_server_login("unknown-state")
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
    assert_eq!(
        taken,
        PendingServerLogin {
            server: ServerRef::own("s"),
            server_name: "s".into(),
            server_url: "https://x.example/mcp".into(),
            verifier: started.verifier.clone(),
            client: login_client(),
        }
    );
    // Once only, on any instance.
    for store in [&one, &two] {
        assert_eq!(
            store
                .for_user(&ann.id)
                .take_server_login(&started.state)
                .await
                .unwrap(),
            None
        );
    }
    // An expired login is removed and not returned; re-encryption covers the verifier.
    let expired = one
        .for_user(&ann.id)
        .start_server_login(&new, Duration::ZERO)
        .await
        .unwrap();
    let live = one
        .for_user(&ann.id)
        .start_server_login(&new, Duration::from_secs(600))
        .await
        .unwrap();
    let rotated = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&key(), Some(&k)));
    assert!(rotated.reencrypt().await.unwrap().resealed >= 2);
    assert_eq!(
        rotated
            .for_user(&ann.id)
            .take_server_login(&expired.state)
            .await
            .unwrap(),
        None
    );
    let n: i64 = sqlx::query("SELECT COUNT(*) FROM pending_server_logins")
        .fetch_one(&raw)
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "the expired one was removed by the take");
    let back = rotated
        .for_user(&ann.id)
        .take_server_login(&live.state)
        .await
        .unwrap()
        .expect("live login after rotation");
    assert_eq!(back.verifier, live.verifier);
}

async fn migrations_from_empty_are_idempotent(db: Db) {
    let store = Store::open(db.url()).await.unwrap();
    assert_eq!(store.backend(), db.backend());
    let first = store.migrate().await.unwrap();
    let versions: Vec<i64> = first.applied.iter().map(|m| m.version).collect();
    assert_eq!(versions, (1..=LATEST_VERSION).collect::<Vec<i64>>());
    assert_eq!(first.applied[0].description, "users sessions");
    assert_eq!(first.version, LATEST_VERSION);
    let again = store.migrate().await.unwrap();
    assert!(again.applied.is_empty(), "{again:?}");
    assert_eq!(again.version, LATEST_VERSION);

    // Two instances starting at once on a fresh database take turns.
    let fresh = match &db {
        Db::Sqlite(dir, _) => format!("sqlite://{}/other.db?mode=rwc", dir.path().display()),
        Db::Postgres(cluster, _) => cluster.create_database("other"),
    };
    let (a, b) = (
        Store::open(&fresh).await.unwrap(),
        Store::open(&fresh).await.unwrap(),
    );
    let (ra, rb) = tokio::join!(a.migrate(), b.migrate());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(
        ra.applied.len() + rb.applied.len(),
        usize::try_from(LATEST_VERSION).unwrap(),
        "{ra:?} {rb:?}"
    );
    assert_eq!((ra.version, rb.version), (LATEST_VERSION, LATEST_VERSION));
    let raw = db.raw().await;
    for table in [
        "users",
        "sessions",
        "pending_logins",
        "mcp_servers",
        "oauth_tokens",
        "model_keys",
        "pending_server_logins",
        "conversations",
        "chat_messages",
        "chat_confirmations",
        "team_model_key",
        "catalog_servers",
        "catalog_enablements",
        "catalog_oauth_tokens",
        "gateway_clients",
        "gateway_grants",
        "gateway_codes",
        "gateway_tokens",
        "workflows",
        "workflow_runs",
        "app_sessions",
        "chat_elicitations",
    ] {
        let n: i64 = sqlx::query(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&raw)
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
}

async fn migrating_from_the_previous_schema_keeps_rows(db: Db) {
    let store = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&key(), None));
    let first = store.migrate_to(1).await.unwrap();
    assert_eq!(first.version, 1);
    let ann = legacy_user(db.url(), "Ann@Example.com", "Ann", true).await;
    let token = store
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();
    let raw = db.raw().await;
    assert!(
        sqlx::query("SELECT COUNT(*) FROM mcp_servers")
            .fetch_one(&raw)
            .await
            .is_err(),
        "schema 1 has no servers table"
    );

    let report = store.migrate().await.unwrap();
    let versions: Vec<i64> = report.applied.iter().map(|m| m.version).collect();
    assert_eq!(versions, (2..=LATEST_VERSION).collect::<Vec<i64>>());
    assert_eq!(report.version, LATEST_VERSION);
    let back = store
        .session_user(token.expose())
        .await
        .unwrap()
        .expect("session kept");
    assert_eq!(
        (back.id, back.email.as_str(), back.is_admin),
        (ann.id.clone(), "ann@example.com", true)
    );
    store
        .for_user(&ann.id)
        .put_server(&server("docs", "https://docs.example/mcp", "Bearer x"))
        .await
        .unwrap();
}

async fn a_newer_schema_is_refused(db: Db) {
    let store = db.store(keys(&key(), None)).await;
    let raw = db.raw().await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99, 'from the future', $1, $2, 0)",
    )
    .bind(true)
    .bind(vec![0u8; 48])
    .execute(&raw)
    .await
    .unwrap();
    let err = store.migrate().await.unwrap_err().to_string();
    assert!(
        err.contains("version 99") && err.contains("newer Switchboard"),
        "{err}"
    );
}

async fn sessions_are_hashed_expire_and_end_everywhere(db: Db) {
    let store = db.store(keys(&key(), None)).await;
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = store
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    // A second sign-in finds the same user and updates what the issuer says.
    let again = store
        .sign_in_user(
            &SignInIdentity {
                email: " ANN@example.com ",
                ..who("ann@example.com")
            },
            "Ann B.",
            true,
        )
        .await
        .unwrap();
    assert_eq!(
        (&again.id, again.name.as_str(), again.is_admin),
        (&ann.id, "Ann B.", true)
    );

    let a1 = store
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();
    let a2 = store
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();
    let b1 = store
        .create_session(&bob.id, Duration::from_secs(600))
        .await
        .unwrap();
    let expired = store.create_session(&ann.id, Duration::ZERO).await.unwrap();
    assert_ne!(a1.expose(), a2.expose());
    assert_eq!(format!("{a1:?}"), "SessionToken(***)");
    assert_eq!(
        store.session_user(a1.expose()).await.unwrap().unwrap().id,
        ann.id
    );
    assert_eq!(
        store.session_user(b1.expose()).await.unwrap().unwrap().id,
        bob.id
    );
    assert!(
        store
            .session_user(expired.expose())
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.session_user("not-a-session").await.unwrap().is_none());

    assert!(store.end_session(a1.expose()).await.unwrap());
    assert!(store.session_user(a1.expose()).await.unwrap().is_none());
    assert!(store.session_user(a2.expose()).await.unwrap().is_some());
    // Sign-out everywhere ends Ann's other sessions, not Bob's.
    assert_eq!(store.end_all_sessions(&ann.id).await.unwrap(), 2);
    assert!(store.session_user(a2.expose()).await.unwrap().is_none());
    assert!(store.session_user(b1.expose()).await.unwrap().is_some());
    // Expired sessions and logins in flight are purged; live ones stay.
    store.create_session(&bob.id, Duration::ZERO).await.unwrap();
    let login = PendingLogin {
        verifier: Secret::new("v"),
        nonce: "n".into(),
        return_path: "/".into(),
    };
    store
        .put_pending_login("old", &login, Duration::ZERO)
        .await
        .unwrap();
    store
        .put_pending_login("live", &login, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(store.purge_expired().await.unwrap(), 2);
    assert_eq!(store.purge_expired().await.unwrap(), 0);
    assert!(store.session_user(b1.expose()).await.unwrap().is_some());
    assert!(store.take_pending_login("live").await.unwrap().is_some());

    let raw = db.raw().await;
    let hashes: Vec<String> = sqlx::query("SELECT id_hash FROM sessions")
        .fetch_all(&raw)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(hashes.len(), 1);
    assert!(!hashes.contains(&b1.expose().to_owned()));
}

async fn a_login_started_on_one_instance_completes_on_another_once(db: Db) {
    let k = key();
    let one = db.store(keys(&k, None)).await;
    let two = db.store(keys(&k, None)).await;
    let login = PendingLogin {
        verifier: Secret::new("pkce-verifier-0123456789abcdefghijklmnopqrstuvwxyz"),
        nonce: "n-1".into(),
        return_path: "/chat".into(),
    };
    one.put_pending_login("state-1", &login, Duration::from_secs(600))
        .await
        .unwrap();
    one.put_pending_login("state-old", &login, Duration::ZERO)
        .await
        .unwrap();
    assert!(
        one.put_pending_login("state-1", &login, Duration::from_secs(600))
            .await
            .is_err()
    );
    assert_eq!(
        two.take_pending_login("state-1").await.unwrap(),
        Some(login)
    );
    assert_eq!(
        one.take_pending_login("state-1").await.unwrap(),
        None,
        "taken once"
    );
    assert_eq!(
        two.take_pending_login("state-old").await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(two.take_pending_login("never").await.unwrap(), None);
    for open_redirect in [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "",
    ] {
        let bad = PendingLogin {
            return_path: open_redirect.into(),
            ..PendingLogin {
                verifier: Secret::new("v"),
                nonce: "n".into(),
                return_path: String::new(),
            }
        };
        let err = one
            .put_pending_login("s2", &bad, Duration::from_secs(60))
            .await;
        assert!(
            matches!(err, Err(StoreError::Invalid(_))),
            "{open_redirect}: {err:?}"
        );
    }
}

async fn users_never_see_each_others_rows(db: Db) {
    let store = db.store(keys(&key(), None)).await;
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = store
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let (a, b) = (store.for_user(&ann.id), store.for_user(&bob.id));
    a.put_server(&server(
        "shared",
        "https://a.example/mcp",
        "Bearer ann-header",
    ))
    .await
    .unwrap();
    b.put_server(&server(
        "shared",
        "https://b.example/mcp",
        "Bearer bob-header",
    ))
    .await
    .unwrap();
    b.put_server(&ServerRecord {
        transport: Transport::Sse,
        enabled: false,
        ..server("bob-only", "http://127.0.0.1:9/sse", "Bearer bob-2")
    })
    .await
    .unwrap();
    a.put_oauth_tokens("shared", &Secret::new("{\"access\":\"ann-tok\"}"), Some(10))
        .await
        .unwrap();
    b.put_oauth_tokens("shared", &Secret::new("{\"access\":\"bob-tok\"}"), None)
        .await
        .unwrap();
    b.put_oauth_tokens("bob-only", &Secret::new("bob-only-tok"), None)
        .await
        .unwrap();
    a.put_model_key("gemini", &Secret::new("ann-api-key"))
        .await
        .unwrap();
    b.put_model_key("openai", &Secret::new("bob-api-key"))
        .await
        .unwrap();

    let ann_servers = a.servers().await.unwrap();
    assert_eq!(ann_servers.len(), 1);
    assert_eq!(ann_servers[0].url, "https://a.example/mcp");
    assert_eq!(
        ann_servers[0].headers["Authorization"].expose(),
        "Bearer ann-header"
    );
    assert!(a.server("bob-only").await.unwrap().is_none());
    assert_eq!(
        a.server("shared").await.unwrap().unwrap().url,
        "https://a.example/mcp"
    );
    assert_eq!(
        a.oauth_tokens("shared")
            .await
            .unwrap()
            .unwrap()
            .tokens
            .expose(),
        "{\"access\":\"ann-tok\"}"
    );
    assert!(a.oauth_tokens("bob-only").await.unwrap().is_none());
    let err = a
        .put_oauth_tokens("bob-only", &Secret::new("x"), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("add the server first"), "{err}");
    assert_eq!(
        a.model_key().await.unwrap().unwrap().key.expose(),
        "ann-api-key"
    );
    let shown = format!(
        "{ann_servers:?} {:?} {:?} {store:?}",
        a.oauth_tokens("shared").await.unwrap(),
        a.model_key().await.unwrap()
    );
    for secret in ["ann-header", "ann-tok", "ann-api-key"] {
        assert!(!shown.contains(secret), "{secret} in Debug: {shown}");
    }

    // Ann's deletes touch only Ann's rows.
    assert!(!a.remove_server("bob-only").await.unwrap());
    assert!(!a.remove_oauth_tokens("bob-only").await.unwrap());
    assert!(a.remove_model_key().await.unwrap());
    assert!(a.remove_server("shared").await.unwrap());
    assert!(a.servers().await.unwrap().is_empty());
    assert!(
        a.oauth_tokens("shared").await.unwrap().is_none(),
        "tokens go with the server"
    );

    let bob_servers = b.servers().await.unwrap();
    let names: Vec<&str> = bob_servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["bob-only", "shared"]);
    assert_eq!(bob_servers[0].transport, Transport::Sse);
    assert!(!bob_servers[0].enabled);
    assert_eq!(
        b.oauth_tokens("bob-only")
            .await
            .unwrap()
            .unwrap()
            .tokens
            .expose(),
        "bob-only-tok"
    );
    assert_eq!(b.model_key().await.unwrap().unwrap().provider, "openai");
    assert_eq!(b.user(), &bob.id);
}

async fn changing_a_server_url_drops_its_tokens(db: Db) {
    let store = db.store(keys(&key(), None)).await;
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let a = store.for_user(&ann.id);
    a.put_server(&server("s", "https://one.example/mcp", "h"))
        .await
        .unwrap();
    a.put_oauth_tokens("s", &Secret::new("tok"), None)
        .await
        .unwrap();
    // Same URL, other fields changed: tokens stay.
    a.put_server(&ServerRecord {
        enabled: false,
        ..server("s", "https://one.example/mcp", "h2")
    })
    .await
    .unwrap();
    assert!(a.oauth_tokens("s").await.unwrap().is_some());
    a.put_server(&server("s", "https://two.example/mcp", "h2"))
        .await
        .unwrap();
    assert!(a.oauth_tokens("s").await.unwrap().is_none());
    for bad in [
        server("bad name", "https://x.example", "h"),
        server("cmd", "file:///bin/sh", "h"),
        server("", "https://x.example", "h"),
    ] {
        assert!(
            matches!(a.put_server(&bad).await, Err(StoreError::Invalid(_))),
            "{bad:?}"
        );
    }
}

async fn copied_or_tampered_ciphertext_is_refused(db: Db) {
    let store = db.store(keys(&key(), None)).await;
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = store
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let (a, b) = (store.for_user(&ann.id), store.for_user(&bob.id));
    for (u, name) in [(&a, "shared"), (&b, "shared"), (&a, "second")] {
        u.put_server(&server(name, "https://x.example/mcp", "Bearer h"))
            .await
            .unwrap();
        u.put_oauth_tokens(name, &Secret::new("tok"), None)
            .await
            .unwrap();
    }
    b.put_model_key("gemini", &Secret::new("bob-key"))
        .await
        .unwrap();
    a.put_model_key("gemini", &Secret::new("ann-key"))
        .await
        .unwrap();
    let raw = db.raw().await;

    // Bob's token blob pasted into Ann's row for the same server name.
    sqlx::query(
        "UPDATE oauth_tokens SET tokens = (SELECT tokens FROM oauth_tokens WHERE user_id = $1 AND server_name = 'shared') \
         WHERE user_id = $2 AND server_name = 'shared'",
    )
    .bind(bob.id.as_str())
    .bind(ann.id.as_str())
    .execute(&raw)
    .await
    .unwrap();
    let err = a.oauth_tokens("shared").await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Unseal {
                table: "oauth_tokens",
                ..
            }
        ),
        "{err}"
    );
    // Ann's own token for another server, moved between her rows.
    sqlx::query(
        "UPDATE oauth_tokens SET tokens = (SELECT tokens FROM oauth_tokens WHERE user_id = $1 AND server_name = 'shared') \
         WHERE user_id = $1 AND server_name = 'second'",
    )
    .bind(bob.id.as_str())
    .execute(&raw)
    .await
    .unwrap();
    assert!(b.oauth_tokens("second").await.unwrap().is_none());
    // Bob's model key into Ann's row.
    sqlx::query(
        "UPDATE model_keys SET api_key = (SELECT api_key FROM model_keys WHERE user_id = $1) WHERE user_id = $2",
    )
    .bind(bob.id.as_str())
    .bind(ann.id.as_str())
    .execute(&raw)
    .await
    .unwrap();
    assert!(a.model_key().await.is_err());
    // Headers of one of Ann's servers moved to another of hers.
    sqlx::query(
        "UPDATE mcp_servers SET headers = (SELECT headers FROM mcp_servers WHERE user_id = $1 AND name = 'shared') \
         WHERE user_id = $1 AND name = 'second'",
    )
    .bind(ann.id.as_str())
    .execute(&raw)
    .await
    .unwrap();
    assert!(a.server("second").await.is_err());
    assert!(a.server("shared").await.unwrap().is_some());
    // One flipped bit in Bob's own, untouched key.
    let sealed: Vec<u8> = sqlx::query("SELECT api_key FROM model_keys WHERE user_id = $1")
        .bind(bob.id.as_str())
        .fetch_one(&raw)
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        b.model_key().await.unwrap().unwrap().key.expose(),
        "bob-key"
    );
    let mut flipped = sealed.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x01;
    sqlx::query("UPDATE model_keys SET api_key = $1 WHERE user_id = $2")
        .bind(flipped)
        .bind(bob.id.as_str())
        .execute(&raw)
        .await
        .unwrap();
    let err = b.model_key().await.unwrap_err().to_string();
    assert!(
        err.contains("model_keys.api_key") && err.contains("changed"),
        "{err}"
    );
}

async fn rotation_then_reencrypt_moves_everything_to_the_new_key(db: Db) {
    let (old, new) = (key(), key());
    let before = db.store(keys(&old, None)).await;
    let ann = before
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let a = before.for_user(&ann.id);
    a.put_server(&server(
        "s",
        "https://x.example/mcp",
        "Bearer header-secret",
    ))
    .await
    .unwrap();
    a.put_oauth_tokens("s", &Secret::new("token-secret"), Some(5))
        .await
        .unwrap();
    a.put_model_key("gemini", &Secret::new("key-secret"))
        .await
        .unwrap();
    let login = PendingLogin {
        verifier: Secret::new("verifier-secret"),
        nonce: "n".into(),
        return_path: "/".into(),
    };
    before
        .put_pending_login("st", &login, Duration::from_secs(600))
        .await
        .unwrap();

    let check = |store: Store| {
        let id = ann.id.clone();
        async move {
            let a = store.for_user(&id);
            assert_eq!(
                a.server("s").await?.unwrap().headers["Authorization"].expose(),
                "Bearer header-secret"
            );
            assert_eq!(
                a.oauth_tokens("s").await?.unwrap().tokens.expose(),
                "token-secret"
            );
            assert_eq!(a.model_key().await?.unwrap().key.expose(), "key-secret");
            Ok::<_, StoreError>(())
        }
    };

    // During the rotation the previous key still opens everything.
    let rotating = db.store(keys(&new, Some(&old))).await;
    check(rotating.clone()).await.unwrap();
    let report = rotating.reencrypt().await.unwrap();
    assert_eq!((report.resealed, report.unchanged), (4, 0));
    let report = rotating.reencrypt().await.unwrap();
    assert_eq!((report.resealed, report.unchanged), (0, 4));

    // Afterwards the new key alone opens everything, and the old key alone nothing.
    let after = db.store(keys(&new, None)).await;
    check(after.clone()).await.unwrap();
    assert_eq!(
        after
            .take_pending_login("st")
            .await
            .unwrap()
            .unwrap()
            .verifier
            .expose(),
        "verifier-secret"
    );
    let stale = db.store(keys(&old, None)).await;
    let err = check(stale).await.unwrap_err();
    assert!(matches!(err, StoreError::Unseal { .. }), "{err}");
    // A value under neither key stops the re-encryption with its table and column.
    let third = db.store(keys(&key(), Some(&old))).await;
    let err = third.reencrypt().await.unwrap_err().to_string();
    assert!(err.contains("not configured"), "{err}");
}

async fn a_raw_dump_holds_no_secret_in_clear(db: Db) {
    let store = db.store(keys(&key(), None)).await;
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let session = store
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();
    let a = store.for_user(&ann.id);
    a.put_server(&server(
        "s",
        "https://visible.example/mcp",
        "Bearer header-secret-1",
    ))
    .await
    .unwrap();
    a.put_oauth_tokens(
        "s",
        &Secret::new("{\"access_token\":\"oauth-secret-2\"}"),
        None,
    )
    .await
    .unwrap();
    a.put_model_key("gemini", &Secret::new("AIza-model-secret-3"))
        .await
        .unwrap();
    let login = PendingLogin {
        verifier: Secret::new("pkce-secret-4"),
        nonce: "n".into(),
        return_path: "/".into(),
    };
    store
        .put_pending_login("state-secret-5", &login, Duration::from_secs(600))
        .await
        .unwrap();

    let dump = dump_hex(&db).await;
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02X}")).collect::<String>();
    // The dump does show what is stored in clear, so a missing secret means it is sealed.
    assert!(dump.contains(&hex("https://visible.example/mcp")));
    assert!(dump.contains(&hex("ann@example.com")));
    for secret in [
        session.expose(),
        "header-secret-1",
        "oauth-secret-2",
        "AIza-model-secret-3",
        "pkce-secret-4",
        "state-secret-5",
    ] {
        assert!(
            !dump.contains(&hex(secret)),
            "{secret} is in the dump in clear"
        );
    }
}

/// Every column of every table, as the hex of its stored bytes, one line per value.
async fn dump_hex(db: &Db) -> String {
    let raw = db.raw().await;
    let columns: Vec<(String, String, bool)> = match db.backend() {
        Backend::Sqlite => sqlx::query(
            "SELECT m.name, p.name, 0 FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table'",
        )
        .fetch_all(&raw)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), false))
        .collect(),
        Backend::Postgres => sqlx::query(
            "SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_schema = 'public'",
        )
        .fetch_all(&raw)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get::<String, _>(2) == "bytea"))
        .collect(),
    };
    assert!(columns.len() > 20, "{columns:?}");
    let mut out = String::new();
    for (table, column, bytea) in columns {
        let sql = match (db.backend(), bytea) {
            (Backend::Sqlite, _) => format!("SELECT hex(CAST({column} AS BLOB)) FROM {table}"),
            (Backend::Postgres, true) => format!("SELECT encode({column}, 'hex') FROM {table}"),
            (Backend::Postgres, false) => {
                format!("SELECT encode(convert_to({column}::text, 'UTF8'), 'hex') FROM {table}")
            }
        };
        for row in sqlx::query(&sql).fetch_all(&raw).await.unwrap() {
            let value: Option<String> = row.get(0);
            out.push_str(&value.unwrap_or_default().to_uppercase());
            out.push('\n');
        }
    }
    out
}

#[tokio::test]
async fn sqlite_file_is_created_private_and_symlinks_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("new/sub/team.db");
    let store = Store::open(&format!("sqlite://{}?mode=rwc", file.display()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("new"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    // Readers do not wait for writers: the write-ahead log is on (kept in the file).
    install_default_drivers();
    let raw = AnyPoolOptions::new()
        .connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    let mode: String = sqlx::query("PRAGMA journal_mode")
        .fetch_one(&raw)
        .await
        .unwrap()
        .get(0);
    assert_eq!(mode, "wal");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let err = Store::open(&format!("sqlite://{}", link.display()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
}

#[tokio::test]
async fn postgres_errors_and_debug_never_show_the_password() {
    let cluster = PgCluster::start();
    let url = cluster.create_database("team");
    let store = Store::open(&url)
        .await
        .unwrap()
        .with_keys(keys(&key(), None));
    let shown = format!("{store:?} {}", store.url());
    assert!(!shown.contains(PG_PASSWORD), "{shown}");
    assert!(shown.contains("postgres:***@127.0.0.1"), "{shown}");

    let wrong = url.replace(PG_PASSWORD, "wrong-password-x");
    let err = Store::open(&wrong).await.unwrap_err().to_string();
    assert!(!err.contains("wrong-password-x"), "{err}");
    assert!(
        err.contains("cannot connect") && err.contains("password"),
        "{err}"
    );
    let missing = cluster.url("no_such_db");
    let err = Store::open(&missing).await.unwrap_err().to_string();
    assert!(!err.contains(PG_PASSWORD), "{err}");
    assert!(err.contains("no_such_db"), "{err}");
}

#[tokio::test]
async fn secrets_need_a_key() {
    let db = Db::sqlite();
    let store = Store::open(db.url()).await.unwrap();
    store.migrate().await.unwrap();
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let err = store
        .for_user(&ann.id)
        .put_model_key("gemini", &Secret::new("k"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("SWITCHBOARD_SECRET_KEY"), "{err}");
}

async fn one_instance_at_a_time_refreshes_tokens(db: Db) {
    let k = key();
    // A token row written under schema 2 (before refresh leases) survives the upgrade
    // and can be claimed.
    let one = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    assert_eq!(one.migrate_to(2).await.unwrap().version, 2);
    let ann = legacy_user(db.url(), "ann@example.com", "Ann", false).await;
    let bob = legacy_user(db.url(), "bob@example.com", "Bob", false).await;
    let raw = db.raw().await;
    for user in [&ann.id, &bob.id] {
        one.for_user(user)
            .put_server(&server("s", "https://x.example/mcp", "h"))
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO oauth_tokens (user_id, server_name, tokens, expires_at, updated_at) \
             VALUES ($1, 's', $2, 100, 1)",
        )
        .bind(user.as_str())
        .bind(b"sealed-by-an-older-build".to_vec())
        .execute(&raw)
        .await
        .unwrap();
    }
    assert_eq!(
        one.migrate().await.unwrap().applied.len(),
        usize::try_from(LATEST_VERSION - 2).unwrap()
    );
    let kept: (i64, Option<String>) = {
        let row =
            sqlx::query("SELECT expires_at, refresh_holder FROM oauth_tokens WHERE user_id = $1")
                .bind(ann.id.as_str())
                .fetch_one(&raw)
                .await
                .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(kept, (100, None));
    let old_row = one
        .for_user(&ann.id)
        .begin_refresh("s", Duration::from_secs(60))
        .await
        .unwrap();
    one.for_user(&ann.id)
        .abandon_refresh(old_row.unwrap())
        .await
        .unwrap();
    for user in [&ann.id, &bob.id] {
        one.for_user(user)
            .put_oauth_tokens("s", &Secret::new("rt-1"), Some(100))
            .await
            .unwrap();
    }
    let two = db.store(keys(&k, None)).await;
    let (a1, a2) = (one.for_user(&ann.id), two.for_user(&ann.id));
    assert_eq!(
        a2.oauth_tokens("s").await.unwrap().unwrap().tokens.expose(),
        "rt-1"
    );

    // Two instances ask at once: exactly one gets the claim.
    let (l1, l2) = tokio::join!(
        a1.begin_refresh("s", Duration::from_secs(60)),
        a2.begin_refresh("s", Duration::from_secs(60))
    );
    let (l1, l2) = (l1.unwrap(), l2.unwrap());
    assert!(l1.is_some() != l2.is_some(), "{l1:?} {l2:?}");
    let (winner, lease) = match (l1, l2) {
        (Some(l), None) => (&a1, l),
        (None, Some(l)) => (&a2, l),
        _ => unreachable!(),
    };
    // Bob's row is his own: Ann's claim does not block him.
    let bob_lease = two
        .for_user(&bob.id)
        .begin_refresh("s", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(bob_lease.is_some());
    assert!(
        a1.begin_refresh("s", Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        winner
            .finish_refresh(lease, &Secret::new("rt-2"), Some(200))
            .await
            .unwrap()
    );
    let now = a2.oauth_tokens("s").await.unwrap().unwrap();
    assert_eq!((now.tokens.expose(), now.expires_at), ("rt-2", Some(200)));
    assert_eq!(
        two.for_user(&bob.id)
            .oauth_tokens("s")
            .await
            .unwrap()
            .unwrap()
            .tokens
            .expose(),
        "rt-1"
    );

    // A claim that ran out is taken over, and the slow holder's result is not written.
    let slow = a1
        .begin_refresh("s", Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let fast = a2
        .begin_refresh("s", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert!(
        !a1.finish_refresh(slow, &Secret::new("rt-slow"), None)
            .await
            .unwrap()
    );
    assert!(
        a2.finish_refresh(fast, &Secret::new("rt-3"), None)
            .await
            .unwrap()
    );
    assert_eq!(
        a1.oauth_tokens("s").await.unwrap().unwrap().tokens.expose(),
        "rt-3"
    );

    // Abandoning frees the row at once; a new login cancels a refresh in flight.
    let gave_up = a1
        .begin_refresh("s", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    a1.abandon_refresh(gave_up).await.unwrap();
    let in_flight = a2
        .begin_refresh("s", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    a1.put_oauth_tokens("s", &Secret::new("fresh-login"), None)
        .await
        .unwrap();
    assert!(
        !a2.finish_refresh(in_flight, &Secret::new("stale"), None)
            .await
            .unwrap()
    );
    assert_eq!(
        a2.oauth_tokens("s").await.unwrap().unwrap().tokens.expose(),
        "fresh-login"
    );
    assert!(
        a1.begin_refresh("nope", Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
}

async fn chats_are_their_users_and_sealed(db: Db) {
    use serde_json::json;
    use switchboard_store::{Approvals, KeySource, MessageRole};
    let store = db.store(keys(&key(), None)).await;
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", true)
        .await
        .unwrap();
    let bob = store
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let (a, b) = (store.for_user(&ann.id), store.for_user(&bob.id));

    let chat = a.create_conversation("  Plans  ").await.unwrap();
    assert_eq!(chat.title, "Plans");
    assert!(a.create_conversation("").await.is_err());
    assert!(a.create_conversation("a\u{7}b").await.is_err());
    let user = json!({"role": "user", "parts": [{"text": "my pasted token chat-secret-1"}]});
    let model = json!({"role": "model", "parts": [{"functionCall": {"name": "mcp_demo_echo", "args": {}}}]});
    let tool = json!({"role": "user", "parts": [{"functionResponse": {"name": "mcp_demo_echo", "response": {"output": "tool-secret-2"}}}]});
    assert_eq!(
        a.append_message(&chat.id, MessageRole::User, &user)
            .await
            .unwrap(),
        Some(1)
    );
    assert_eq!(
        a.append_message(&chat.id, MessageRole::Model, &model)
            .await
            .unwrap(),
        Some(2)
    );
    // Bob cannot write into, read, rename, toggle, cancel, confirm or delete Ann's chat.
    assert_eq!(
        b.append_message(&chat.id, MessageRole::Tool, &tool)
            .await
            .unwrap(),
        None
    );
    assert_eq!(b.messages(&chat.id).await.unwrap(), None);
    assert_eq!(b.conversation(&chat.id).await.unwrap(), None);
    assert!(b.conversations().await.unwrap().is_empty());
    assert!(!b.rename_conversation(&chat.id, "mine").await.unwrap());
    assert!(
        !b.set_server_toggles(&chat.id, &BTreeMap::from([("x".into(), false)]))
            .await
            .unwrap()
    );
    assert!(!b.request_cancel(&chat.id).await.unwrap());
    assert!(!b.delete_conversation(&chat.id).await.unwrap());
    assert_eq!(
        a.append_message(&chat.id, MessageRole::Tool, &tool)
            .await
            .unwrap(),
        Some(3)
    );
    let got = a.messages(&chat.id).await.unwrap().unwrap();
    let roles: Vec<_> = got.iter().map(|m| (m.seq, m.role)).collect();
    assert_eq!(
        roles,
        [
            (1, MessageRole::User),
            (2, MessageRole::Model),
            (3, MessageRole::Tool)
        ]
    );
    assert_eq!(got[2].content, tool);

    // Rename, toggles, approvals, cancel.
    assert!(a.rename_conversation(&chat.id, "Trip").await.unwrap());
    assert!(
        a.set_server_toggles(&chat.id, &BTreeMap::from([("demo".into(), false)]))
            .await
            .unwrap()
    );
    let approvals = Approvals {
        tools: vec![("demo".into(), "echo".into())],
        servers: vec!["docs".into()],
    };
    assert!(a.set_approvals(&chat.id, &approvals).await.unwrap());
    assert!(a.request_cancel(&chat.id).await.unwrap());
    let back = a.conversation(&chat.id).await.unwrap().unwrap();
    assert_eq!(back.title, "Trip");
    assert_eq!(
        back.server_toggles,
        BTreeMap::from([("demo".into(), false)])
    );
    assert_eq!(back.approvals, approvals);
    assert!(back.approvals.allows("demo", "echo") && back.approvals.allows("docs", "any"));
    assert!(!back.approvals.allows("demo", "other"));
    assert!(back.cancel_requested_at.is_some());
    assert!(a.clear_cancel(&chat.id).await.unwrap());
    assert_eq!(
        a.conversation(&chat.id)
            .await
            .unwrap()
            .unwrap()
            .cancel_requested_at,
        None
    );

    // A confirmation asked on one instance, answered through another (another store).
    let other = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&key(), None));
    let request =
        json!({"server": "demo", "tool": "echo", "args": {"message": "confirm-secret-3"}});
    let cid = a
        .ask_confirmation(&chat.id, &request, Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        b.ask_confirmation(&chat.id, &request, Duration::from_secs(60))
            .await
            .unwrap(),
        None
    );
    let pending = a.pending_confirmations(&chat.id).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].id.as_str(), &pending[0].request),
        (cid.as_str(), &request)
    );
    assert!(b.pending_confirmations(&chat.id).await.unwrap().is_empty());
    assert!(!b.answer_confirmation(&chat.id, &cid, "once").await.unwrap());
    assert!(
        a.answer_confirmation(&chat.id, &cid, "maybe")
            .await
            .is_err()
    );
    assert_eq!(a.confirmation_decision(&cid).await.unwrap(), None);
    // The other store needs no key to answer (the decision is not secret).
    assert!(
        other
            .for_user(&ann.id)
            .answer_confirmation(&chat.id, &cid, "server")
            .await
            .unwrap()
    );
    assert!(
        !a.answer_confirmation(&chat.id, &cid, "once").await.unwrap(),
        "answered once"
    );
    assert_eq!(
        a.confirmation_decision(&cid).await.unwrap().as_deref(),
        Some("server")
    );
    assert_eq!(b.confirmation_decision(&cid).await.unwrap(), None);
    a.finish_confirmation(&cid).await.unwrap();
    assert_eq!(a.confirmation_decision(&cid).await.unwrap(), None);
    // An expired one cannot be answered.
    let old = a
        .ask_confirmation(&chat.id, &request, Duration::from_secs(0))
        .await
        .unwrap()
        .unwrap();
    assert!(!a.answer_confirmation(&chat.id, &old, "once").await.unwrap());

    // Keys: the user's own wins over the team's; only an admin sets the team key.
    assert!(b.chat_model_key().await.unwrap().is_none());
    assert!(
        !b.put_team_model_key("gemini", &Secret::new("not-an-admin"))
            .await
            .unwrap()
    );
    assert!(
        a.put_team_model_key("gemini", &Secret::new("team-key-secret-4"))
            .await
            .unwrap()
    );
    let (k, source) = b.chat_model_key().await.unwrap().unwrap();
    assert_eq!(
        (k.key.expose(), k.provider.as_str(), source),
        ("team-key-secret-4", "gemini", KeySource::Team)
    );
    assert_eq!(
        b.team_model_key_info().await.unwrap().unwrap().provider,
        "gemini"
    );
    b.put_model_key("gemini", &Secret::new("bob-key-secret-5"))
        .await
        .unwrap();
    let (k, source) = b.chat_model_key().await.unwrap().unwrap();
    assert_eq!(
        (k.key.expose(), source),
        ("bob-key-secret-5", KeySource::User)
    );
    assert!(!b.remove_team_model_key().await.unwrap());

    // Nothing secret is in a dump; rotation reseals chat rows too.
    let dump = dump_hex(&db).await;
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02X}")).collect::<String>();
    assert!(dump.contains(&hex("Trip")));
    for secret in [
        "chat-secret-1",
        "tool-secret-2",
        "confirm-secret-3",
        "team-key-secret-4",
        "bob-key-secret-5",
    ] {
        assert!(!dump.contains(&hex(secret)), "{secret} is in the dump");
    }

    // Deleting removes the messages and confirmations with it.
    assert!(a.delete_conversation(&chat.id).await.unwrap());
    assert_eq!(a.messages(&chat.id).await.unwrap(), None);
    let raw = db.raw().await;
    for table in ["chat_messages", "chat_confirmations"] {
        let n: i64 = sqlx::query(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&raw)
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
    assert!(a.remove_team_model_key().await.unwrap());
    assert!(b.team_model_key_info().await.unwrap().is_none());
}

async fn chats_migrate_from_schema_4(db: Db) {
    use serde_json::json;
    use switchboard_store::MessageRole;
    let k = key();
    let store = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    assert_eq!(store.migrate_to(4).await.unwrap().version, 4);
    let ann = legacy_user(db.url(), "ann@example.com", "Ann", false).await;
    let a = store.for_user(&ann.id);
    a.put_model_key("gemini", &Secret::new("AIza-kept"))
        .await
        .unwrap();
    assert!(
        a.create_conversation("x").await.is_err(),
        "no chat tables at 4"
    );
    let report = store.migrate().await.unwrap();
    let versions: Vec<i64> = report.applied.iter().map(|m| m.version).collect();
    assert_eq!(
        (versions, report.version),
        ((5..=LATEST_VERSION).collect::<Vec<i64>>(), LATEST_VERSION)
    );
    assert_eq!(
        a.model_key().await.unwrap().unwrap().key.expose(),
        "AIza-kept"
    );
    let chat = a.create_conversation("after").await.unwrap();
    a.append_message(
        &chat.id,
        MessageRole::User,
        &json!({"parts": [{"text": "hi"}]}),
    )
    .await
    .unwrap();
    // Rotation: every chat row moves to the new key.
    let k2 = key();
    let rotated = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, Some(&k)));
    let r = rotated.reencrypt().await.unwrap();
    assert_eq!(r.resealed, 2, "{r:?}");
    let only_new = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, None));
    let msgs = only_new
        .for_user(&ann.id)
        .messages(&chat.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(msgs[0].content["parts"][0]["text"], "hi");
}

/// The gateway's authorization state: codes taken once, tokens found only by their hash
/// (a dump holds neither), refresh tokens rotated with reuse ending the grant, and every
/// token of a grant ending with the sign-in session that approved it; any store (another
/// instance) answers each step.
async fn gateway_grants_are_hashed_single_use_rotated_and_end_with_their_session(db: Db) {
    use switchboard_store::{GatewayApproval, RefreshOutcome, TokenLifetimes};
    let k = key();
    let one = db.store(keys(&k, None)).await;
    let two = db.store(keys(&k, None)).await;
    let ann = one
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let session = one
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();
    let client = one
        .register_gateway_client("cli", &["http://127.0.0.1:5/cb".to_owned()])
        .await
        .unwrap();
    assert_eq!(
        two.gateway_client(&client.client_id).await.unwrap(),
        Some(client.clone())
    );
    let approval = GatewayApproval {
        client_id: client.client_id.clone(),
        redirect_uri: "http://127.0.0.1:5/cb".into(),
        code_challenge: "challenge".into(),
        resource: "https://team.example/mcp".into(),
        scope: "mcp".into(),
    };
    let code = one
        .approve_gateway_grant(session.expose(), &approval, Duration::from_secs(60))
        .await
        .unwrap();
    let taken = two.take_gateway_code(&code).await.unwrap().unwrap();
    assert_eq!(taken.resource, "https://team.example/mcp");
    assert_eq!(
        one.take_gateway_code(&code).await.unwrap(),
        None,
        "taken once"
    );
    let life = TokenLifetimes {
        access: Duration::from_secs(600),
        refresh: Duration::from_secs(600),
    };
    let first = one.issue_gateway_tokens(&taken.grant, life).await.unwrap();
    let access = two
        .gateway_access(&first.access_token)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (access.user.id, access.resource.as_str()),
        (ann.id.clone(), "https://team.example/mcp")
    );
    assert_eq!(
        two.gateway_access(&first.refresh_token).await.unwrap(),
        None,
        "a refresh token is not an access token"
    );

    let dump = dump_hex(&db).await;
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02X}")).collect::<String>();
    assert!(
        dump.contains(&hex("https://team.example/mcp")),
        "the dump shows what is in clear"
    );
    for secret in [
        &code,
        &first.access_token,
        &first.refresh_token,
        session.expose(),
    ] {
        assert!(!dump.contains(&hex(secret)), "a gateway secret in clear");
    }

    // Rotation on the other store; another client cannot spend it; reuse ends the grant.
    assert_eq!(
        two.refresh_gateway_tokens(&first.refresh_token, "sbc_someone_else", life)
            .await
            .unwrap(),
        RefreshOutcome::Invalid
    );
    let RefreshOutcome::Issued(second) = two
        .refresh_gateway_tokens(&first.refresh_token, &client.client_id, life)
        .await
        .unwrap()
    else {
        panic!("the refresh token did not buy a new pair");
    };
    assert!(
        one.gateway_access(&second.access_token)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        one.refresh_gateway_tokens(&first.refresh_token, &client.client_id, life)
            .await
            .unwrap(),
        RefreshOutcome::Reused
    );
    assert_eq!(
        one.gateway_access(&second.access_token).await.unwrap(),
        None
    );
    assert_eq!(
        one.refresh_gateway_tokens(&second.refresh_token, &client.client_id, life)
            .await
            .unwrap(),
        RefreshOutcome::Invalid
    );

    // A new grant ends with its session (sign-out everywhere on any instance).
    let code = one
        .approve_gateway_grant(session.expose(), &approval, Duration::from_secs(60))
        .await
        .unwrap();
    let taken = one.take_gateway_code(&code).await.unwrap().unwrap();
    let third = one.issue_gateway_tokens(&taken.grant, life).await.unwrap();
    assert!(
        two.gateway_access(&third.access_token)
            .await
            .unwrap()
            .is_some()
    );
    two.end_all_sessions(&ann.id).await.unwrap();
    assert_eq!(one.gateway_access(&third.access_token).await.unwrap(), None);
    assert!(
        one.approve_gateway_grant(session.expose(), &approval, Duration::from_secs(60))
            .await
            .is_err()
    );
}

/// RFC 7009 revocation by the client that holds a token (an access token only itself, a
/// refresh token its whole grant; another client's token is left alone), and a user's
/// connected clients: listed with their last use, ended only by their own user, on any
/// instance.
async fn gateway_tokens_are_revoked_by_their_client_and_grants_by_their_user(db: Db) {
    use switchboard_store::{
        GatewayApproval, RefreshOutcome, Revocation, TokenHint, TokenLifetimes,
    };
    let k = key();
    let one = db.store(keys(&k, None)).await;
    let two = db.store(keys(&k, None)).await;
    let ann = one
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = one
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let session = one
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();
    let client = one
        .register_gateway_client("Editor", &["http://127.0.0.1:5/cb".to_owned()])
        .await
        .unwrap();
    let approval = GatewayApproval {
        client_id: client.client_id.clone(),
        redirect_uri: "http://127.0.0.1:5/cb".into(),
        code_challenge: "challenge".into(),
        resource: "https://team.example/mcp".into(),
        scope: "mcp".into(),
    };
    let life = TokenLifetimes {
        access: Duration::from_secs(600),
        refresh: Duration::from_secs(600),
    };
    let grant = |store: Store| {
        let approval = approval.clone();
        let session = session.expose().to_owned();
        async move {
            let code = store
                .approve_gateway_grant(&session, &approval, Duration::from_secs(60))
                .await
                .unwrap();
            let taken = store.take_gateway_code(&code).await.unwrap().unwrap();
            store
                .issue_gateway_tokens(&taken.grant, life)
                .await
                .unwrap()
        }
    };
    let first = grant(one.clone()).await;

    // Unknown tokens and another client's are answered without effect.
    assert_eq!(
        two.revoke_gateway_token("sbat_nothing", &client.client_id, None)
            .await
            .unwrap(),
        Revocation::Unknown
    );
    assert_eq!(
        two.revoke_gateway_token(&first.refresh_token, "sbc_other", None)
            .await
            .unwrap(),
        Revocation::OtherClient
    );
    assert!(
        one.gateway_access(&first.access_token)
            .await
            .unwrap()
            .is_some()
    );

    // Listed with its last use (the access check above recorded it); bob sees nothing.
    let listed = two.for_user(&ann.id).gateway_grants().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].client_name, "Editor");
    assert_eq!(listed[0].redirect_uris, ["http://127.0.0.1:5/cb"]);
    assert!(
        listed[0]
            .last_used_at
            .is_some_and(|t| t >= listed[0].created_at)
    );
    assert!(
        two.for_user(&bob.id)
            .gateway_grants()
            .await
            .unwrap()
            .is_empty()
    );

    // An access token (with the wrong hint: the other kind is searched too) goes alone.
    assert_eq!(
        two.revoke_gateway_token(
            &first.access_token,
            &client.client_id,
            Some(TokenHint::Refresh)
        )
        .await
        .unwrap(),
        Revocation::AccessToken
    );
    assert_eq!(one.gateway_access(&first.access_token).await.unwrap(), None);
    assert_eq!(
        one.revoke_gateway_token(&first.access_token, &client.client_id, None)
            .await
            .unwrap(),
        Revocation::Unknown,
        "revoked twice"
    );
    let RefreshOutcome::Issued(second) = one
        .refresh_gateway_tokens(&first.refresh_token, &client.client_id, life)
        .await
        .unwrap()
    else {
        panic!("the grant should outlive its access token's revocation");
    };
    // A refresh token ends its grant: the access token of the same grant dies too.
    assert_eq!(
        two.revoke_gateway_token(
            &second.refresh_token,
            &client.client_id,
            Some(TokenHint::Refresh)
        )
        .await
        .unwrap(),
        Revocation::Grant
    );
    assert_eq!(
        one.gateway_access(&second.access_token).await.unwrap(),
        None
    );
    assert!(
        one.for_user(&ann.id)
            .gateway_grants()
            .await
            .unwrap()
            .is_empty()
    );

    // The user ends a grant from the connected-clients list; bob cannot.
    let third = grant(two.clone()).await;
    let id = one.for_user(&ann.id).gateway_grants().await.unwrap()[0]
        .id
        .as_str()
        .to_owned();
    assert!(!one.for_user(&bob.id).end_gateway_grant(&id).await.unwrap());
    assert!(
        two.gateway_access(&third.access_token)
            .await
            .unwrap()
            .is_some()
    );
    assert!(two.for_user(&ann.id).end_gateway_grant(&id).await.unwrap());
    assert_eq!(one.gateway_access(&third.access_token).await.unwrap(), None);
    assert_eq!(
        one.refresh_gateway_tokens(&third.refresh_token, &client.client_id, life)
            .await
            .unwrap(),
        RefreshOutcome::Invalid
    );
    assert!(!two.for_user(&ann.id).end_gateway_grant(&id).await.unwrap());
}

/// A chat's turn lease: held by one turn on any instance (another store sees it held),
/// renewed only by its holder, given back, and free again once a lease left behind
/// (a killed instance) runs out; never taken for another user's chat.
async fn one_turn_at_a_time_in_a_chat_on_any_instance(db: Db) {
    let k = key();
    let one = db.store(keys(&k, None)).await;
    let two = db.store(keys(&k, None)).await;
    let ann = one
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = one
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let (a1, a2) = (one.for_user(&ann.id), two.for_user(&ann.id));
    let chat = a1.create_conversation("Plans").await.unwrap();
    let lease = Duration::from_secs(60);
    assert!(
        !two.for_user(&bob.id)
            .claim_turn(&chat.id, "b", lease)
            .await
            .unwrap()
    );
    assert!(a1.claim_turn(&chat.id, "t1", lease).await.unwrap());
    assert!(!a2.claim_turn(&chat.id, "t2", lease).await.unwrap());
    assert!(a2.renew_turn(&chat.id, "t1", lease).await.unwrap());
    assert!(!a2.renew_turn(&chat.id, "t2", lease).await.unwrap());
    a2.release_turn(&chat.id, "t2").await.unwrap();
    assert!(
        !a1.claim_turn(&chat.id, "t3", lease).await.unwrap(),
        "only the holder gives it back"
    );
    a1.release_turn(&chat.id, "t1").await.unwrap();
    assert!(
        a2.claim_turn(&chat.id, "t2", Duration::from_secs(1))
            .await
            .unwrap()
    );
    // Left behind by a killed instance: free once it has run out.
    assert!(!a1.claim_turn(&chat.id, "t4", lease).await.unwrap());
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(a1.claim_turn(&chat.id, "t4", lease).await.unwrap());
}

/// Saved workflows and their runs: per user (another user's are "not there"), the source
/// and the run log sealed (a dump shows neither; rotation re-seals both), a run visible
/// as running from another store (instance) until it finishes, at most three running and
/// the newest fifty kept; the tables arrive by migrating from schema 8.
async fn workflows_and_runs_are_their_users_sealed_and_capped(db: Db) {
    use serde_json::json;
    use switchboard_store::{MAX_RUNNING_PER_USER, MAX_RUNS_PER_USER, RunState};
    let k = key();
    let store = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    assert_eq!(store.migrate_to(8).await.unwrap().version, 8);
    let ann = legacy_user(db.url(), "ann@example.com", "Ann", false).await;
    let bob = legacy_user(db.url(), "bob@example.com", "Bob", false).await;
    let (a, b) = (store.for_user(&ann.id), store.for_user(&bob.id));
    assert!(a.put_workflow("w", "x").await.is_err(), "no tables at 8");
    let report = store.migrate().await.unwrap();
    let versions: Vec<i64> = report.applied.iter().map(|m| m.version).collect();
    assert_eq!(
        (versions, report.version),
        ((9..=LATEST_VERSION).collect::<Vec<i64>>(), LATEST_VERSION)
    );

    let source = "name: w\nnodes:\n  - id: a\n    type: http\n    url: https://x.example/?key=wf-source-secret-1\n";
    assert!(a.put_workflow("w", source).await.unwrap());
    assert!(a.put_workflow("bad name", source).await.is_err());
    assert!(
        a.put_workflow(
            "big",
            &"x".repeat(switchboard_store::MAX_WORKFLOW_BYTES + 1)
        )
        .await
        .is_err()
    );
    let saved = a.workflow("w").await.unwrap().unwrap();
    assert_eq!(saved.source, source);
    assert_eq!(a.workflows().await.unwrap().len(), 1);
    // Bob sees nothing of ann's, and his workflow of the same name is his own.
    assert!(b.workflows().await.unwrap().is_empty());
    assert!(b.workflow("w").await.unwrap().is_none());
    assert!(!b.delete_workflow("w").await.unwrap());
    assert!(b.put_workflow("w", "bob's").await.unwrap());
    assert_eq!(a.workflow("w").await.unwrap().unwrap().source, source);

    // A run: running for every instance until it finishes, then with its sealed log.
    let id = a
        .start_workflow_run("w", Duration::from_secs(600))
        .await
        .unwrap()
        .unwrap();
    let other = db.store(keys(&k, None)).await;
    let (run, log) = other
        .for_user(&ann.id)
        .workflow_run(&id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((run.state, log), (RunState::Running, None));
    assert!(b.workflow_run(&id).await.unwrap().is_none());
    assert!(!b.request_run_cancel(&id).await.unwrap());
    assert!(b.workflow_runs(None).await.unwrap().is_empty());
    assert!(
        !b.finish_workflow_run(&id, RunState::Ok, &json!({}))
            .await
            .unwrap()
    );
    assert!(
        other
            .for_user(&ann.id)
            .request_run_cancel(&id)
            .await
            .unwrap()
    );
    assert!(
        a.workflow_run(&id)
            .await
            .unwrap()
            .unwrap()
            .0
            .cancel_requested_at
            .is_some()
    );
    let log = json!({"status": "ok", "variables": {"out": "wf-log-secret-2"}});
    assert!(
        a.finish_workflow_run(&id, RunState::Ok, &log)
            .await
            .unwrap()
    );
    assert!(
        !a.finish_workflow_run(&id, RunState::Failed, &log)
            .await
            .unwrap(),
        "once"
    );
    assert!(
        a.finish_workflow_run(&id, RunState::Running, &log)
            .await
            .is_err()
    );
    let (run, got) = other
        .for_user(&ann.id)
        .workflow_run(&id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((run.state, got.as_ref()), (RunState::Ok, Some(&log)));
    assert!(run.finished_at.is_some());
    let big = json!({"x": "y".repeat(switchboard_store::MAX_RUN_LOG_BYTES)});
    let id2 = a
        .start_workflow_run("w", Duration::from_secs(600))
        .await
        .unwrap()
        .unwrap();
    assert!(
        a.finish_workflow_run(&id2, RunState::Failed, &big)
            .await
            .is_err()
    );
    assert!(
        a.finish_workflow_run(&id2, RunState::Failed, &json!({}))
            .await
            .unwrap()
    );

    // A run past its deadline without an outcome was left by a stopped instance.
    let lost = a
        .start_workflow_run("w", Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(
        a.workflow_run(&lost).await.unwrap().unwrap().0.state,
        RunState::Interrupted
    );
    // At most three running at once.
    let mut running = Vec::new();
    for _ in 0..MAX_RUNNING_PER_USER {
        running.push(
            a.start_workflow_run("w", Duration::from_secs(600))
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert!(
        a.start_workflow_run("w", Duration::from_secs(600))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        b.start_workflow_run("w", Duration::from_secs(600))
            .await
            .unwrap()
            .is_some()
    );
    for r in &running {
        a.finish_workflow_run(r, RunState::Cancelled, &json!({}))
            .await
            .unwrap();
    }

    // The dump shows neither the source nor the log; rotation re-seals both.
    let dump = dump_hex(&db).await;
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02X}")).collect::<String>();
    assert!(dump.contains(&hex("ann@example.com")));
    for secret in ["wf-source-secret-1", "wf-log-secret-2"] {
        assert!(
            !dump.contains(&hex(secret)),
            "{secret} is in the dump in clear"
        );
    }
    let k2 = key();
    let rotated = db.store(keys(&k2, Some(&k))).await;
    let r = rotated.reencrypt().await.unwrap();
    // Two workflows, and the logs of the runs finished (ok, failed, three cancelled).
    assert_eq!((r.resealed, r.unchanged), (7, 0), "{r:?}");
    let only_new = db.store(keys(&k2, None)).await;
    let an = only_new.for_user(&ann.id);
    assert_eq!(an.workflow("w").await.unwrap().unwrap().source, source);
    assert_eq!(an.workflow_run(&id).await.unwrap().unwrap().1, Some(log));

    // The newest fifty finished runs are kept; deleting the workflow drops its runs.
    for _ in 0..MAX_RUNS_PER_USER {
        let r = an
            .start_workflow_run("w", Duration::from_secs(600))
            .await
            .unwrap()
            .unwrap();
        an.finish_workflow_run(&r, RunState::Ok, &json!({}))
            .await
            .unwrap();
    }
    let runs = an.workflow_runs(Some("w")).await.unwrap();
    let finished = runs
        .iter()
        .filter(|r| r.state != RunState::Interrupted)
        .count();
    assert_eq!(finished, MAX_RUNS_PER_USER, "{runs:?}");
    assert!(
        an.workflow_run(&id).await.unwrap().is_none(),
        "the oldest went"
    );
    assert!(an.delete_workflow("w").await.unwrap());
    assert!(an.workflow("w").await.unwrap().is_none());
    let left = an.workflow_runs(None).await.unwrap();
    assert!(left.iter().all(|r| r.finished_at.is_none()), "{left:?}");
    assert_eq!(
        only_new
            .for_user(&bob.id)
            .workflow("w")
            .await
            .unwrap()
            .unwrap()
            .source,
        "bob's"
    );
}

/// MCP App sessions (migration 11): added to a schema-8 database with its chats kept;
/// bound to their user's own conversation (none in another user's), read, changed and
/// removed only by their user; the tool input and result sealed (a raw read holds
/// neither) and moved by re-encryption; gone with their conversation.
async fn app_sessions_are_their_users_sealed_and_migrate_from_8(db: Db) {
    use serde_json::json;
    use switchboard_store::{MessageRole, NewAppSession};
    const SECRET_ARG: &str = "app-input-secret-5b1f";
    const SECRET_RESULT: &str = "app-result-secret-c20e";
    let k = key();
    let store = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    assert_eq!(store.migrate_to(8).await.unwrap().version, 8);
    let ann = legacy_user(db.url(), "ann@example.com", "Ann", false).await;
    let bob = legacy_user(db.url(), "bob@example.com", "Bob", false).await;
    let a = store.for_user(&ann.id);
    let b = store.for_user(&bob.id);
    let chat = a.create_conversation("kept").await.unwrap();
    a.append_message(
        &chat.id,
        MessageRole::User,
        &json!({"parts": [{"text": "hi"}]}),
    )
    .await
    .unwrap();
    let report = store.migrate().await.unwrap();
    let versions: Vec<i64> = report.applied.iter().map(|m| m.version).collect();
    assert_eq!(
        (versions, report.version),
        ((9..=LATEST_VERSION).collect::<Vec<i64>>(), LATEST_VERSION)
    );
    assert_eq!(a.messages(&chat.id).await.unwrap().unwrap().len(), 1);

    let new = NewAppSession {
        conversation_id: chat.id.clone(),
        server: ServerRef::catalog("shared"),
        tool: "clock".into(),
        call_id: "call-0".into(),
        resource_uri: "ui://demo/clock.html".into(),
        allowed: vec!["tools/call".into(), "resources/read".into()],
        input: json!({"secret": SECRET_ARG}),
        result: json!({"content": [{"type": "text", "text": SECRET_RESULT}]}),
    };
    // Not in another user's conversation.
    assert_eq!(b.create_app_session(&new).await.unwrap(), None);
    let id = a.create_app_session(&new).await.unwrap().expect("created");
    let got = a.app_session(&id).await.unwrap().expect("readable");
    assert_eq!(got.server, ServerRef::catalog("shared"));
    assert_eq!(
        (got.tool.as_str(), got.call_id.as_str(), got.after_seq),
        ("clock", "call-0", 1)
    );
    assert!(got.allows("tools/call") && !got.allows("ui/message"));
    assert_eq!(got.input["secret"], SECRET_ARG);
    assert_eq!(got.result["content"][0]["text"], SECRET_RESULT);
    assert_eq!(got.csp_header, None);
    // Bob: not found, cannot change or remove it.
    assert_eq!(b.app_session(&id).await.unwrap(), None);
    assert!(b.app_sessions_of(&chat.id).await.unwrap().is_empty());
    assert!(!b.set_app_csp(&id, "default-src *").await.unwrap());
    assert!(!b.remove_app_session(&id).await.unwrap());
    assert!(a.set_app_csp(&id, "default-src 'none'").await.unwrap());
    let listed = a.app_sessions_of(&chat.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].csp_header.as_deref(), Some("default-src 'none'"));
    // A model context: sealed, bob cannot set it, taken once.
    assert!(!b.set_app_context(&id, "bob's words").await.unwrap());
    assert!(a.set_app_context(&id, SECRET_ARG).await.unwrap());
    assert!(b.take_app_contexts(&chat.id).await.unwrap().is_empty());
    assert_eq!(a.take_app_contexts(&chat.id).await.unwrap(), [SECRET_ARG]);
    assert!(a.take_app_contexts(&chat.id).await.unwrap().is_empty());
    assert!(
        a.set_app_context(&id, "kept for the next turn")
            .await
            .unwrap()
    );
    // Sealed at rest.
    let raw = db.raw().await;
    let row = sqlx::query("SELECT model_context FROM app_sessions")
        .fetch_one(&raw)
        .await
        .unwrap();
    let sealed: Vec<u8> = row.get(0);
    assert!(!String::from_utf8_lossy(&sealed).contains("kept for the next turn"));
    let row = sqlx::query("SELECT init FROM app_sessions")
        .fetch_one(&raw)
        .await
        .unwrap();
    let sealed: Vec<u8> = row.get(0);
    let text = String::from_utf8_lossy(&sealed);
    assert!(!text.contains(SECRET_ARG) && !text.contains(SECRET_RESULT));
    // Rotation: the session moves to the new key with the chat's rows.
    let k2 = key();
    let rotated = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, Some(&k)));
    let r = rotated.reencrypt().await.unwrap();
    assert_eq!(r.resealed, 3, "{r:?}");
    let only_new = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, None));
    assert_eq!(
        only_new
            .for_user(&ann.id)
            .take_app_contexts(&chat.id)
            .await
            .unwrap(),
        ["kept for the next turn"]
    );
    let back = only_new
        .for_user(&ann.id)
        .app_session(&id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.input["secret"], SECRET_ARG);
    // Removed by its user; gone with its conversation.
    let second = a.create_app_session(&new).await.unwrap().unwrap();
    assert!(a.remove_app_session(&id).await.unwrap());
    assert_eq!(a.app_session(&id).await.unwrap(), None);
    assert!(a.delete_conversation(&chat.id).await.unwrap());
    assert_eq!(
        only_new
            .for_user(&ann.id)
            .app_session(&second)
            .await
            .unwrap(),
        None
    );
}

/// Migration 10 on a schema-8 database keeps its chats; an elicitation written by one
/// store (the turn's instance) is listed and answered through another (any instance),
/// once; another user sees and answers nothing; an action other than accept carries no
/// content; request and content are sealed in the raw rows and re-encrypted on rotation.
async fn elicitations_migrate_from_schema_8_are_sealed_their_users_and_answered_once(db: Db) {
    use serde_json::json;
    use switchboard_store::{ElicitAction, ElicitAnswer, MessageRole};
    let k = key();
    let turn_side = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    assert_eq!(turn_side.migrate_to(8).await.unwrap().version, 8);
    let ann = legacy_user(db.url(), "ann@example.com", "Ann", false).await;
    let bob = legacy_user(db.url(), "bob@example.com", "Bob", false).await;
    let a = turn_side.for_user(&ann.id);
    let chat = a.create_conversation("before 10").await.unwrap();
    a.append_message(
        &chat.id,
        MessageRole::User,
        &json!({"parts": [{"text": "kept"}]}),
    )
    .await
    .unwrap();
    assert!(
        a.ask_elicitation(&chat.id, &json!({}), Duration::from_secs(60))
            .await
            .is_err(),
        "no elicitation table at 8"
    );
    let report = turn_side.migrate().await.unwrap();
    let versions: Vec<i64> = report.applied.iter().map(|m| m.version).collect();
    assert_eq!(
        (versions, report.version),
        ((9..=LATEST_VERSION).collect::<Vec<i64>>(), LATEST_VERSION)
    );
    assert_eq!(
        a.messages(&chat.id).await.unwrap().unwrap()[0].content["parts"][0]["text"],
        "kept"
    );

    let request = json!({"server": "srv", "mode": "form", "message": "Your PIN-HINT-4417?",
        "requestedSchema": {"type": "object", "properties": {"pin": {"type": "string"}}}});
    let eid = a
        .ask_elicitation(&chat.id, &request, Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    // Another user: nothing to see, nothing to answer, no chat to ask in.
    let b = turn_side.for_user(&bob.id);
    assert!(b.pending_elicitations(&chat.id).await.unwrap().is_empty());
    assert!(
        b.waiting_elicitation(&chat.id, &eid)
            .await
            .unwrap()
            .is_none()
    );
    let accept = ElicitAnswer {
        action: ElicitAction::Accept,
        content: Some(json!({"pin": "SECRET-PIN-9921"})),
    };
    assert!(!b.answer_elicitation(&chat.id, &eid, &accept).await.unwrap());
    assert!(
        b.ask_elicitation(&chat.id, &request, Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
    assert!(b.elicitation_answer(&eid).await.unwrap().is_none());

    // Through another store (another instance): listed, answered once.
    let other = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k, None));
    let a2 = other.for_user(&ann.id);
    let pending = a2.pending_elicitations(&chat.id).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].id.as_str(), &pending[0].request),
        (eid.as_str(), &request)
    );
    assert_eq!(
        a2.waiting_elicitation(&chat.id, &eid).await.unwrap(),
        Some(request.clone())
    );
    let bad = ElicitAnswer {
        action: ElicitAction::Decline,
        content: Some(json!({})),
    };
    assert!(a2.answer_elicitation(&chat.id, &eid, &bad).await.is_err());
    assert!(
        a.elicitation_answer(&eid).await.unwrap().is_none(),
        "still waiting"
    );
    assert!(
        a2.answer_elicitation(&chat.id, &eid, &accept)
            .await
            .unwrap()
    );
    assert!(
        !a2.answer_elicitation(
            &chat.id,
            &eid,
            &ElicitAnswer {
                action: ElicitAction::Cancel,
                content: None
            }
        )
        .await
        .unwrap(),
        "the first answer wins"
    );
    assert!(a2.pending_elicitations(&chat.id).await.unwrap().is_empty());
    assert_eq!(
        a.elicitation_answer(&eid).await.unwrap(),
        Some(accept.clone())
    );

    // Sealed at rest, and moved to a new key by re-encryption.
    assert_sealed(
        &db,
        "SELECT request, content FROM chat_elicitations",
        &["PIN-HINT-4417", "SECRET-PIN-9921"],
    )
    .await;
    let k2 = key();
    let rotated = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, Some(&k)));
    let r = rotated.reencrypt().await.unwrap();
    assert_eq!(
        r.resealed, 3,
        "one message, the request and the content: {r:?}"
    );
    let only_new = Store::open(db.url())
        .await
        .unwrap()
        .with_keys(keys(&k2, None));
    assert_eq!(
        only_new
            .for_user(&ann.id)
            .elicitation_answer(&eid)
            .await
            .unwrap(),
        Some(accept)
    );
    // Removed by the turn; gone with its chat too.
    a.finish_elicitation(&eid).await.unwrap();
    assert!(a.elicitation_answer(&eid).await.unwrap().is_none());
    let again = a
        .ask_elicitation(&chat.id, &request, Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert!(a.delete_conversation(&chat.id).await.unwrap());
    assert!(
        a.waiting_elicitation(&chat.id, &again)
            .await
            .unwrap()
            .is_none()
    );
    let n: i64 = sqlx::query("SELECT COUNT(*) FROM chat_elicitations")
        .fetch_one(&db.raw().await)
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

/// A chat takes `MAX_CHAT_MESSAGES` messages and refuses the next with `Full`, naming
/// the limit and "start a new chat"; another user's chat is still "not there".
async fn a_chat_stops_at_its_message_cap(db: Db) {
    use serde_json::json;
    use switchboard_store::{MAX_CHAT_MESSAGES, MessageRole};
    let store = db.store(keys(&key(), None)).await;
    let ann = store
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let bob = store
        .sign_in_user(&who("bob@example.com"), "Bob", false)
        .await
        .unwrap();
    let a = store.for_user(&ann.id);
    let chat = a.create_conversation("long").await.unwrap();
    let msg = json!({"parts": [{"text": "."}]});
    for _ in 0..MAX_CHAT_MESSAGES {
        a.append_message(&chat.id, MessageRole::User, &msg)
            .await
            .unwrap()
            .unwrap();
    }
    let size = a.chat_size(&chat.id).await.unwrap().unwrap();
    assert_eq!(size.messages, MAX_CHAT_MESSAGES);
    let err = a
        .append_message(&chat.id, MessageRole::User, &msg)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Full(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("2000 messages") && text.contains("start a new chat"),
        "{text}"
    );
    let b = store.for_user(&bob.id);
    assert!(b.chat_size(&chat.id).await.unwrap().is_none());
    assert!(
        b.append_message(&chat.id, MessageRole::User, &msg)
            .await
            .unwrap()
            .is_none()
    );
}

/// Dynamic registration is bounded in the store, across instances: registered clients
/// nobody approved (pending) never number more than the cap once registrations are done,
/// the oldest go first (never the one just registered), a client approved once is never
/// purged as pending, a metadata-document client is recorded granted, and approving a
/// client whose registration was purged says to register again.
async fn pending_gateway_clients_are_capped_oldest_first(db: Db) {
    use switchboard_store::{GatewayApproval, GatewayClient};
    let k = key();
    let one = db.store(keys(&k, None)).await;
    let two = db.store(keys(&k, None)).await;
    let uris = ["http://127.0.0.1:5/cb".to_owned()];
    let mut ids = Vec::new();
    let mut purged = 0;
    for i in 0..5 {
        let store = if i % 2 == 0 { &one } else { &two };
        let r = store
            .register_gateway_client_within(&format!("c{i}"), &uris, 3)
            .await
            .unwrap();
        purged += r.purged;
        ids.push(r.client.client_id);
        assert!(one.pending_gateway_clients().await.unwrap() <= 3);
    }
    assert_eq!(purged, 2);
    for (i, id) in ids.iter().enumerate() {
        let kept = two.gateway_client(id).await.unwrap().is_some();
        assert_eq!(kept, i >= 2, "client {i}: the two oldest are gone");
    }

    // The oldest kept one is approved: it is no longer pending and survives what follows.
    let ann = one
        .sign_in_user(&who("ann@example.com"), "Ann", false)
        .await
        .unwrap();
    let session = one
        .create_session(&ann.id, Duration::from_secs(600))
        .await
        .unwrap();
    let approval = |client_id: &str| GatewayApproval {
        client_id: client_id.to_owned(),
        redirect_uri: uris[0].clone(),
        code_challenge: "challenge".into(),
        resource: "https://team.example/mcp".into(),
        scope: "mcp".into(),
    };
    one.approve_gateway_grant(
        session.expose(),
        &approval(&ids[2]),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(one.pending_gateway_clients().await.unwrap(), 2);

    // Two instances registering: the cap holds when they are done.
    let burst = |store: Store| async move {
        for i in 0..6 {
            store
                .register_gateway_client_within(
                    &format!("burst{i}"),
                    &["http://127.0.0.1:5/cb".to_owned()],
                    3,
                )
                .await
                .unwrap();
        }
    };
    // (At once on PostgreSQL, the database replicas share; one after the other on an
    // SQLite file, whose writers wait on one lock.)
    let (x, y) = (
        db.store(keys(&k, None)).await,
        db.store(keys(&k, None)).await,
    );
    if db.backend() == Backend::Postgres {
        let (a, b) = tokio::join!(tokio::spawn(burst(x)), tokio::spawn(burst(y)));
        a.unwrap();
        b.unwrap();
    } else {
        burst(x).await;
        burst(y).await;
    }
    assert_eq!(one.pending_gateway_clients().await.unwrap(), 3);
    assert!(
        one.gateway_client(&ids[2]).await.unwrap().is_some(),
        "approved once: kept"
    );
    let raw = db.raw().await;
    let rows: i64 = sqlx::query("SELECT COUNT(*) FROM gateway_clients")
        .fetch_one(&raw)
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 4, "three pending and the approved one");

    // A purged registration cannot be approved: the client is told to register again.
    let err = one
        .approve_gateway_grant(
            session.expose(),
            &approval(&ids[0]),
            Duration::from_secs(60),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Invalid(why) if why.contains("register again")),
        "{err}"
    );

    // A metadata-document client: recorded granted (not pending), updated in place.
    let doc = GatewayClient {
        client_id: "https://app.example/client.json".into(),
        client_name: "App".into(),
        redirect_uris: uris.to_vec(),
        created_at: 0,
    };
    one.put_document_client(&doc).await.unwrap();
    two.put_document_client(&GatewayClient {
        client_name: "App 2".into(),
        ..doc.clone()
    })
    .await
    .unwrap();
    assert_eq!(one.pending_gateway_clients().await.unwrap(), 3);
    assert_eq!(
        one.gateway_client(&doc.client_id)
            .await
            .unwrap()
            .unwrap()
            .client_name,
        "App 2"
    );
    one.approve_gateway_grant(
        session.expose(),
        &approval(&doc.client_id),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    raw.close().await;
}

mod gateway_pending {
    use super::*;
    on_both!(pending_gateway_clients_are_capped_oldest_first);
}
