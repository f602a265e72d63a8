//! The team catalog on real parts (SQLite and PostgreSQL, the demo server over HTTP and
//! as a stdio process, the Python MCP SDK's OAuth server):
//! - only admins publish; a non-admin gets 403 and nothing of the catalog; stdio entries
//!   are refused (naming `--allow-catalog-stdio`) by an instance without the flag, and
//!   such an instance does not run one another instance published;
//! - users see no header, env value or command line; they enable a server, list its
//!   tools, call `echo` and Test it; a user's own server of the same name is another
//!   server; a stdio catalog server is one process per user, closed by the idle sweep;
//! - edits keep `<unchanged>` secrets, unpublishing removes it for everyone;
//! - two users log in to an OAuth-protected catalog server with their own tokens (popup
//!   flow across two instances), one's logout leaves the other's login, and a due token
//!   is refreshed (5-minute buffer; half the lifetime of a short-lived token).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_store::{ServerRef, Store, UserId};
use switchboard_web::CacheLimits;
use team_support::{Browser, Db, Instance, InstanceOptions, demo_http, sign_in};

on_both!(admins_publish_and_users_use_the_catalog);

const HEADER_SECRET: &str = "team-header-secret-4410";
const ENV_SECRET: &str = "team-env-secret-8812";

/// The processes whose whole environment is `DEMO_KEY=<key>`: the catalog's stdio
/// servers of this test run, and proof that they got the admin's env and nothing else.
fn catalog_processes(key: &str) -> usize {
    let want = format!("DEMO_KEY={key}");
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = environ
            .split(|b| *b == 0)
            .filter(|v| !v.is_empty())
            .collect();
        if vars.contains(&want.as_bytes()) {
            assert_eq!(
                vars.len(),
                1,
                "the process inherited more than the admin's env"
            );
            n += 1;
        }
    }
    n
}

fn echo(v: &Value) -> Option<&str> {
    v["result"]["content"][0]["text"].as_str()
}

async fn admins_publish_and_users_use_the_catalog(db: Db) {
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    // Two instances of one deployment: `plain` without the stdio flag, `runner` with it
    // (and a short idle time, to see processes closed).
    let plain = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin.clone()),
            ..Default::default()
        },
    )
    .await;
    let runner = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin.clone()),
            allow_catalog_stdio: true,
            cache: CacheLimits {
                max_entries: 16,
                idle: Duration::from_secs(2),
            },
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let demo = demo_http().await;
    let (_, admin_cookie) = sign_in(&store, "admin@example.com", true).await;
    let (ann_id, ann_cookie) = sign_in(&store, "ann@example.com", false).await;
    let (_, bob_cookie) = sign_in(&store, "bob@example.com", false).await;
    let admin = Browser::new(plain.origin(), Some(&admin_cookie));
    let ann = Browser::new(plain.origin(), Some(&ann_cookie));
    let bob = Browser::new(plain.origin(), Some(&bob_cookie));

    // A non-admin publishes nothing and reads nothing of the admin view.
    let entry = json!({"name": "demo", "description": "The demo", "url": demo,
                       "headers": {"X-Team": HEADER_SECRET}});
    let (status, v) = ann.post(&plain.base, "/api/admin/catalog", &entry).await;
    assert_eq!(
        (status, v["message"].as_str()),
        (403, Some("only a team admin may do this")),
        "{v}"
    );
    assert_eq!(ann.get(&plain.base, "/api/admin/catalog").await.0, 403);
    assert!(store.catalog_servers().await.unwrap().is_empty());

    // The admin publishes the demo server over HTTP; the header never comes back.
    let (status, v) = admin.post(&plain.base, "/api/admin/catalog", &entry).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["headers"]["X-Team"], "<unchanged>", "{v}");
    let (status, _) = admin.post(&plain.base, "/api/admin/catalog", &entry).await;
    assert_eq!(status, 409, "a name is published once");

    // stdio: refused without the flag, naming it; accepted with it.
    let bin = switchboard_testkit::demo_server_bin().display().to_string();
    // Unique to this run (SQLite and PostgreSQL runs go at once), to find its processes.
    let env_key = format!("{ENV_SECRET}-{}", switchboard_testkit::free_port());
    let local = json!({"name": "local", "description": "Runs here", "command": bin,
                       "args": ["stdio"], "env": {"DEMO_KEY": env_key}});
    let (status, v) = admin.post(&plain.base, "/api/admin/catalog", &local).await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("--allow-catalog-stdio"),
        "{v}"
    );
    let (status, v) = admin.post(&runner.base, "/api/admin/catalog", &local).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["env"]["DEMO_KEY"], "<unchanged>", "{v}");
    assert_eq!(v["command"], bin.as_str(), "the admin sees the command");
    let (status, v) = admin.get(&plain.base, "/api/admin/catalog").await;
    assert_eq!(status, 200);
    assert_eq!(v["servers"].as_array().unwrap().len(), 2, "{v}");
    assert!(!v.to_string().contains(HEADER_SECRET) && !v.to_string().contains(ENV_SECRET));

    // Users see the catalog without secrets or command lines.
    for (on, runs_stdio) in [(&plain, false), (&runner, true)] {
        let (status, v) = ann.get(&on.base, "/api/catalog").await;
        assert_eq!(status, 200, "{v}");
        let text = v.to_string();
        for hidden in [
            HEADER_SECRET,
            ENV_SECRET,
            bin.as_str(),
            "DEMO_KEY",
            "X-Team",
        ] {
            assert!(!text.contains(hidden), "a user saw `{hidden}`: {text}");
        }
        let servers = v["servers"].as_array().unwrap();
        assert_eq!(servers[0]["name"], "demo");
        assert_eq!(servers[0]["url"], demo.as_str());
        assert_eq!(servers[0]["enabled"], false);
        assert_eq!(servers[1]["runsOnServer"], true);
        assert_eq!(servers[1]["available"], runs_stdio, "{v}");
    }

    // Not enabled: 409; unknown: 404.
    let (status, v) = ann.get(&plain.base, "/api/catalog/demo/tools").await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(
        ann.post(&plain.base, "/api/catalog/nope/enable", &json!({}))
            .await
            .0,
        404
    );
    let (status, v) = ann
        .post(&plain.base, "/api/catalog/demo/enable", &json!({}))
        .await;
    assert_eq!((status, &v["enabled"]), (200, &json!(true)), "{v}");
    let (status, v) = ann.get(&plain.base, "/api/catalog/demo/tools").await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo"),
        "{v}"
    );
    let (status, v) = ann
        .post(
            &runner.base,
            "/api/catalog/demo/call",
            &json!({"tool": "echo", "args": {"message": "from the catalog"}}),
        )
        .await;
    assert_eq!(
        (status, echo(&v)),
        (200, Some("Echo: from the catalog")),
        "{v}"
    );
    let (status, v) = ann
        .post(&plain.base, "/api/catalog/demo/test", &json!({}))
        .await;
    assert_eq!((status, &v["success"]), (200, &json!(true)), "{v}");
    assert!(!v.to_string().contains(HEADER_SECRET));

    // Ann's own server named `demo` is another server (another demo instance).
    let own = demo_http().await;
    let (status, _) = ann
        .post(
            &plain.base,
            "/api/servers",
            &json!({"name": "demo", "url": own}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, v) = ann
        .post(
            &plain.base,
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": {"message": "mine"}}),
        )
        .await;
    assert_eq!((status, echo(&v)), (200, Some("Echo: mine")), "{v}");
    assert_eq!(
        plain.running.state.open_connections(),
        2,
        "the catalog `demo` and ann's `demo` are two connections"
    );
    let (_, v) = ann.get(&plain.base, "/api/catalog").await;
    assert_eq!(v["servers"][0]["enabled"], true, "{v}");
    // Bob has not enabled it.
    let (_, v) = bob.get(&plain.base, "/api/catalog").await;
    assert_eq!(v["servers"][0]["enabled"], false, "{v}");

    // stdio: one process per user on the instance with the flag; the other refuses.
    for user in [&ann, &bob] {
        let (status, _) = user
            .post(&runner.base, "/api/catalog/local/enable", &json!({}))
            .await;
        assert_eq!(status, 200);
        let (status, v) = user
            .post(
                &runner.base,
                "/api/catalog/local/call",
                &json!({"tool": "echo", "args": {"message": "stdio"}}),
            )
            .await;
        assert_eq!((status, echo(&v)), (200, Some("Echo: stdio")), "{v}");
    }
    assert_eq!(
        runner.running.state.open_connections(),
        3,
        "ann's and bob's processes, and ann's demo connection"
    );
    assert_eq!(catalog_processes(&env_key), 2, "one process per user");
    let (status, v) = ann
        .post(
            &plain.base,
            "/api/catalog/local/call",
            &json!({"tool": "echo", "args": {"message": "x"}}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("--allow-catalog-stdio")
    );
    let (status, v) = ann
        .post(&runner.base, "/api/catalog/local/test", &json!({}))
        .await;
    assert_eq!((status, &v["success"]), (200, &json!(true)), "{v}");
    // A stdio server has no OAuth login.
    let (status, _) = ann
        .post(&runner.base, "/api/catalog/local/oauth/start", &json!({}))
        .await;
    assert_eq!(status, 400);
    // Idle processes are closed by the sweep.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    runner.running.state.sweep_idle();
    assert_eq!(runner.running.state.open_connections(), 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while catalog_processes(&env_key) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle sweep left a stdio process running"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Edits: `<unchanged>` keeps the header while the URL stays; a new URL needs it again.
    let (status, v) = admin
        .put(
            &plain.base,
            "/api/admin/catalog/demo",
            &json!({"description": "Renamed", "headers": {"X-Team": "<unchanged>"}}),
        )
        .await;
    assert_eq!((status, &v["description"]), (200, &json!("Renamed")), "{v}");
    let record = store.catalog_server("demo").await.unwrap().unwrap();
    assert!(format!("{:?}", record.server.launch).contains("X-Team"));
    let (status, v) = admin
        .put(
            &plain.base,
            "/api/admin/catalog/demo",
            &json!({"url": own, "headers": {"X-Team": "<unchanged>"}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    let (status, _) = ann
        .put(&plain.base, "/api/admin/catalog/demo", &json!({"url": own}))
        .await;
    assert_eq!(status, 403);

    // Disable, then unpublish: gone for everyone.
    let (status, v) = bob
        .post(&runner.base, "/api/catalog/local/disable", &json!({}))
        .await;
    assert_eq!((status, &v["enabled"]), (200, &json!(false)), "{v}");
    assert_eq!(
        bob.get(&runner.base, "/api/catalog/local/tools").await.0,
        409
    );
    assert_eq!(
        ann.delete(&plain.base, "/api/admin/catalog/demo").await.0,
        403
    );
    let (status, _) = admin.delete(&plain.base, "/api/admin/catalog/demo").await;
    assert_eq!(status, 200);
    assert_eq!(ann.get(&plain.base, "/api/catalog/demo/tools").await.0, 404);
    assert_eq!(
        admin.delete(&plain.base, "/api/admin/catalog/demo").await.0,
        404
    );
    // Ann's own `demo` is untouched.
    assert!(
        store
            .for_user(&ann_id)
            .server("demo")
            .await
            .unwrap()
            .is_some()
    );
    plain.stop().await;
    runner.stop().await;
}

/// Start a catalog login on `on` as `b`, let the peer approve it, and return the
/// callback path the browser would be sent to.
async fn start_login(b: &Browser, on: &Instance, server: &str) -> String {
    let (status, v) = b
        .post(
            &on.base,
            &format!("/api/catalog/{server}/oauth/start"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let authorize = v["authorizeUrl"].as_str().unwrap().to_owned();
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&authorize)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 302);
    let location = url::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(location.path(), "/oauth/mcp/callback");
    format!("{}?{}", location.path(), location.query().unwrap())
}

async fn callback(b: &Browser, on: &Instance, path: &str) -> (u16, String) {
    let r = b.request(Method::GET, &on.base, path).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

async fn access(store: &Store, user: &UserId) -> Option<String> {
    let t = store
        .for_user(user)
        .tokens(&ServerRef::catalog("secure"))
        .await
        .unwrap()?;
    let v: Value = serde_json::from_str(t.tokens.expose()).unwrap();
    Some(v["accessToken"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_log_in_to_an_oauth_catalog_server_with_their_own_tokens() {
    oauth_catalog(Db::postgres()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_users_log_in_to_an_oauth_catalog_server() {
    oauth_catalog(Db::sqlite()).await;
}

async fn oauth_catalog(db: Db) {
    // Access tokens live 4 s: due for refresh at half their lifetime.
    let peer = switchboard_testkit::spawn_oauth_python(&["--access-ttl", "4"]).await;
    let peer_base = peer.url.trim_end_matches("/mcp").to_owned();
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let opts = || InstanceOptions {
        public_origin: Some(origin.clone()),
        ..Default::default()
    };
    let (a, b) = (
        Instance::start(&db, opts()).await,
        Instance::start(&db, opts()).await,
    );
    let store = db.store().await;
    let (_, admin_cookie) = sign_in(&store, "admin@example.com", true).await;
    let (alice_id, alice_cookie) = sign_in(&store, "alice@example.com", false).await;
    let (bob_id, bob_cookie) = sign_in(&store, "bob@example.com", false).await;
    let admin = Browser::new(a.origin(), Some(&admin_cookie));
    let alice = Browser::new(a.origin(), Some(&alice_cookie));
    let bob = Browser::new(a.origin(), Some(&bob_cookie));
    let (status, v) = admin
        .post(
            &a.base,
            "/api/admin/catalog",
            &json!({"name": "secure", "url": peer.url, "description": "OAuth"}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    // Not enabled: no login.
    assert_eq!(
        alice
            .post(&a.base, "/api/catalog/secure/oauth/start", &json!({}))
            .await
            .0,
        409
    );
    for user in [&alice, &bob] {
        assert_eq!(
            user.post(&b.base, "/api/catalog/secure/enable", &json!({}))
                .await
                .0,
            200
        );
        // Test: needs OAuth, with the discovery hint for this app's callback.
        let (status, v) = user
            .post(&a.base, "/api/catalog/secure/test", &json!({}))
            .await;
        assert_eq!((status, &v["needsOAuth"]), (200, &json!(true)), "{v}");
        assert!(v.to_string().contains("oauth"), "{v}");
        let (status, v) = user.get(&a.base, "/api/catalog/secure/tools").await;
        assert_eq!(
            (status, v["error"].as_str()),
            (502, Some("needs_oauth")),
            "{v}"
        );
    }

    // Alice's login, started on A: bob's session cannot complete it; she does, on B.
    let path = start_login(&alice, &a, "secure").await;
    let (status, page) = callback(&bob, &b, &path).await;
    assert_eq!(status, 400, "{page}");
    assert_eq!(access(&store, &bob_id).await, None);
    let (status, page) = callback(&alice, &b, &path).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("\"server\":\"catalog:secure\""), "{page}");
    let alice_token = access(&store, &alice_id).await.expect("alice's tokens");
    assert!(!page.contains(&alice_token));
    assert_eq!(access(&store, &bob_id).await, None, "bob got nothing");
    // Bob's own login gives him his own token.
    let path = start_login(&bob, &b, "secure").await;
    let (status, _) = callback(&bob, &a, &path).await;
    assert_eq!(status, 200);
    let bob_token = access(&store, &bob_id).await.expect("bob's tokens");
    assert_ne!(alice_token, bob_token);
    for user in [&alice, &bob] {
        let (status, v) = user
            .post(
                &b.base,
                "/api/catalog/secure/call",
                &json!({"tool": "whoami"}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        let (_, v) = user.get(&a.base, "/api/catalog").await;
        assert_eq!(v["servers"][0]["oauth"]["signedIn"], true, "{v}");
        assert!(!v.to_string().contains(&alice_token) && !v.to_string().contains(&bob_token));
    }

    // Refresh: once due, alice's next use refreshes her token (not bob's).
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    let before: Value = reqwest::get(format!("{peer_base}/test/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (status, v) = alice
        .post(
            &a.base,
            "/api/catalog/secure/call",
            &json!({"tool": "whoami"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let after: Value = reqwest::get(format!("{peer_base}/test/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        after["refreshes"].as_i64().unwrap(),
        before["refreshes"].as_i64().unwrap() + 1,
        "{before} {after}"
    );
    let refreshed = access(&store, &alice_id).await.unwrap();
    assert_ne!(refreshed, alice_token);
    assert_eq!(access(&store, &bob_id).await, Some(bob_token.clone()));

    // Alice logs out: her tokens go, bob's stay.
    let (status, v) = alice
        .post(&b.base, "/api/catalog/secure/oauth/logout", &json!({}))
        .await;
    assert_eq!((status, &v["removed"]), (200, &json!(true)), "{v}");
    assert_eq!(access(&store, &alice_id).await, None);
    assert_eq!(access(&store, &bob_id).await, Some(bob_token));
    a.stop().await;
    b.stop().await;
}
