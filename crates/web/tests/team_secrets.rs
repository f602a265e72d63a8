//! No secret of a real team session is in the database in clear: after alice signs in
//! through the real OpenID provider, saves a server with a secret header, and logs in to
//! an OAuth-protected server (the Python MCP SDK's authorization server), the raw
//! database — `pg_dump` of the PostgreSQL database (Debian's binaries), or the bytes of
//! the SQLite file with its `-wal` and `-shm` files, read while the instance runs and
//! after it stopped — holds none of: the session token, the header's value, the OAuth
//! access and refresh tokens. What is stored in clear (her email, the server URL) is
//! there, so the dump is readable and a missing secret means it is sealed or hashed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use reqwest::Method;
use serde_json::{Value, json};
use team_support::{Browser, Db, Instance, InstanceOptions, oidc_provider_for, sign_in_options};

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Everything the database holds, raw: the dump, or the SQLite files' bytes.
fn raw_bytes(db: &Db) -> Vec<u8> {
    match db {
        Db::Postgres(cluster, url) => {
            let name = url.rsplit('/').next().unwrap();
            cluster.dump(name)
        }
        Db::Sqlite(dir, _) => {
            let mut all = Vec::new();
            for suffix in ["", "-wal", "-shm"] {
                if let Ok(b) = std::fs::read(dir.path().join(format!("team.db{suffix}"))) {
                    all.extend(b);
                }
            }
            all
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn assert_sealed(raw: &[u8], secrets: &[(&str, &str)], clear: &[&str], when: &str) {
    for c in clear {
        assert!(
            contains(raw, c),
            "{when}: `{c}` (stored in clear) is not in the raw data"
        );
    }
    for (what, secret) in secrets {
        assert!(secret.len() >= 16, "{what} is too short to search for");
        assert!(
            !contains(raw, secret),
            "{when}: the {what} is in the database in clear"
        );
    }
}

async fn a_real_session_leaves_no_secret_in_clear(db: Db) {
    let port = switchboard_testkit::free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let peer = oidc_provider_for(&format!("{origin}/auth/callback")).await;
    let app = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin.clone()),
            sign_in: Some(sign_in_options(&peer, "alice@example.com")),
            ..Default::default()
        },
    )
    .await;

    // Sign-in through the provider.
    let r = no_redirects()
        .get(format!("{}/auth/login", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    let authorize = r.headers()["location"].to_str().unwrap().to_owned();
    let login = r.headers()["set-cookie"].to_str().unwrap();
    let login = login.split(';').next().unwrap().to_owned();
    let back = peer.drive_login(&authorize, "alice").await;
    let r = no_redirects()
        .get(format!("{}/auth/callback?{}", app.base, back.query))
        .header("Cookie", login)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    let session = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find_map(|c| c.strip_prefix("switchboard_session="))
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let alice = Browser::new(app.origin(), Some(&session));

    // A server with a secret header (it is used: the demo server ignores the header).
    let header_secret = format!("hdr-{}", "s3cr3t-value-".repeat(2));
    let demo = team_support::demo_http().await;
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo, "headers": {"X-Api-Key": header_secret}}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": {"message": "hi"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");

    // An OAuth login to the Python SDK's server.
    let oauth = switchboard_testkit::spawn_oauth_python(&[]).await;
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": "secure", "url": oauth.url}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = alice
        .post(&app.base, "/api/servers/secure/oauth/start", &json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let r = no_redirects()
        .get(v["authorizeUrl"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    let location = url::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let r = alice
        .request(
            Method::GET,
            &app.base,
            &format!("{}?{}", location.path(), location.query().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers/secure/call",
            &json!({"tool": "whoami"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");

    // The secrets, as the store decrypts them.
    let store = db.store().await;
    let user = store.session_user(&session).await.unwrap().unwrap();
    let tokens = store
        .for_user(&user.id)
        .oauth_tokens("secure")
        .await
        .unwrap()
        .unwrap();
    let tokens: Value = serde_json::from_str(tokens.tokens.expose()).unwrap();
    let access = tokens["accessToken"].as_str().unwrap().to_owned();
    let refresh = tokens["refreshToken"].as_str().unwrap().to_owned();
    let secrets = [
        ("session token", session.as_str()),
        ("secret header value", header_secret.as_str()),
        ("OAuth access token", access.as_str()),
        ("OAuth refresh token", refresh.as_str()),
    ];
    let clear = ["alice@example.com", demo.as_str(), oauth.url.as_str()];
    assert_sealed(&raw_bytes(&db), &secrets, &clear, "while running");
    app.stop().await;
    drop(store);
    assert_sealed(&raw_bytes(&db), &secrets, &clear, "after stopping");
}

on_both!(a_real_session_leaves_no_secret_in_clear);
