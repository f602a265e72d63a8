//! Per-user OAuth login to an MCP server in team mode, against the Python MCP SDK's
//! authorization and resource server, with two instances on one PostgreSQL database:
//! - a login started on instance A completes on instance B (the pending login is in the
//!   store), the user's tool calls then carry the user's token, and no answer (start,
//!   callback page, server list) shows a token;
//! - the callback refuses, storing nothing: bob's session on alice's `state` (and alice
//!   can still complete it afterwards: bob's attempt used nothing up), no session, an
//!   unknown `state`, and a replayed one;
//! - logout removes the user's tokens;
//! - refresh with the 5-minute buffer (half the lifetime for short-lived tokens, as the
//!   personal app): a token not yet due is used as is; a due one is refreshed before use, and two instances using them at once send ONE refresh request to the
//!   token endpoint (the peer rotates refresh tokens: a second refresh with the spent
//!   one would fail), after which the stored token works on both.
//!
//! The login scenario also runs on SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_store::{Store, UserId};
use team_support::{Browser, Db, Instance, InstanceOptions, sign_in};

/// Two instances of one deployment (one public origin) on `db`.
async fn pair(db: &Db) -> (Instance, Instance) {
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let opts = || InstanceOptions {
        public_origin: Some(origin.clone()),
        ..Default::default()
    };
    (
        Instance::start(db, opts()).await,
        Instance::start(db, opts()).await,
    )
}

/// Start a login on `on`, let the peer approve it, and return the callback path
/// (`/oauth/mcp/callback?code=…&state=…`) the browser would be sent to.
async fn start_login(b: &Browser, on: &Instance, server: &str) -> String {
    let (status, v) = b
        .post(
            &on.base,
            &format!("/api/servers/{server}/oauth/start"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let authorize = v["authorizeUrl"].as_str().unwrap().to_owned();
    let u = url::Url::parse(&authorize).unwrap();
    let q: std::collections::HashMap<_, _> = u.query_pairs().into_owned().collect();
    assert_eq!(
        q["redirect_uri"],
        format!("{}/oauth/mcp/callback", on.origin())
    );
    assert_eq!(q["code_challenge_method"], "S256");
    assert!(!q.contains_key("code_verifier"));
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

/// GET the callback page as `b` on `on`: status and body.
async fn callback(b: &Browser, on: &Instance, path: &str) -> (u16, String) {
    let r = b.request(Method::GET, &on.base, path).send().await.unwrap();
    let status = r.status().as_u16();
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("script-src 'sha256-"), "{csp}");
    (status, r.text().await.unwrap())
}

async fn saved_access(store: &Store, user: &UserId) -> Option<String> {
    let t = store.for_user(user).oauth_tokens("secure").await.unwrap()?;
    let v: Value = serde_json::from_str(t.tokens.expose()).unwrap();
    Some(v["accessToken"].as_str().unwrap().to_owned())
}

async fn stats(peer_base: &str) -> Value {
    reqwest::get(format!("{peer_base}/test/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_started_on_one_instance_completes_on_the_other_for_its_user_only() {
    login_between_instances(Db::postgres()).await;
}

/// The same on SQLite (the one-machine team: two instances on one file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_login_completes_for_its_user_only() {
    login_between_instances(Db::sqlite()).await;
}

async fn login_between_instances(db: Db) {
    let peer = switchboard_testkit::spawn_oauth_python(&[]).await;
    let (a, b) = pair(&db).await;
    let store = db.store().await;
    let (alice_id, alice_cookie) = sign_in(&store, "alice@example.com", false).await;
    let (bob_id, bob_cookie) = sign_in(&store, "bob@example.com", false).await;
    let alice = Browser::new(a.origin(), Some(&alice_cookie));
    let bob = Browser::new(a.origin(), Some(&bob_cookie));
    let nobody = Browser::new(a.origin(), None);
    for user in [&alice, &bob] {
        let (status, v) = user
            .post(
                &a.base,
                "/api/servers",
                &json!({"name": "secure", "url": peer.url}),
            )
            .await;
        assert_eq!(status, 201, "{v}");
    }
    // Bob cannot start a login for a server he does not have; nobody cannot start one.
    let (status, _) = bob
        .post(&a.base, "/api/servers/other/oauth/start", &json!({}))
        .await;
    assert_eq!(status, 404);
    let (status, _) = nobody
        .post(&a.base, "/api/servers/secure/oauth/start", &json!({}))
        .await;
    assert_eq!(status, 401);

    let path = start_login(&alice, &a, "secure").await;

    // Refused, nothing stored, nothing used up: bob's session, no session.
    let (status, page) = callback(&bob, &b, &path).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("\"ok\":false"), "{page}");
    let (status, page) = callback(&nobody, &b, &path).await;
    assert_eq!(status, 401, "{page}");
    assert_eq!(saved_access(&store, &alice_id).await, None);
    assert_eq!(saved_access(&store, &bob_id).await, None);
    // An unknown state.
    let (status, _) = callback(
        &alice,
        &b,
        "/oauth/mcp/callback?code=x&state=not-a-state-anyone-started",
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(saved_access(&store, &alice_id).await, None);

    // Alice completes on instance B.
    let (status, page) = callback(&alice, &b, &path).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("mcp-oauth-result") && page.contains("\"ok\":true"),
        "{page}"
    );
    assert!(page.contains("postMessage(m,d.origin)"), "{page}");
    assert!(
        page.contains(&format!("\"origin\":\"{}\"", a.origin())),
        "{page}"
    );
    let access = saved_access(&store, &alice_id)
        .await
        .expect("alice's tokens");
    assert!(!page.contains(&access), "the page showed the token");
    assert_eq!(saved_access(&store, &bob_id).await, None, "bob got nothing");

    // Replayed: refused, and the saved tokens are unchanged.
    let (status, _) = callback(&alice, &a, &path).await;
    assert_eq!(status, 400);
    assert_eq!(saved_access(&store, &alice_id).await, Some(access.clone()));

    // Her calls on instance A carry her token; bob's server is still not signed in.
    let (status, v) = alice
        .post(
            &a.base,
            "/api/servers/secure/call",
            &json!({"tool": "whoami"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("client="),
        "{v}"
    );
    assert!(!v.to_string().contains(&access));
    let (status, v) = alice.get(&b.base, "/api/servers").await;
    assert_eq!(
        (status, &v["servers"][0]["oauth"]),
        (200, &json!({"signedIn": true}))
    );
    assert!(!v.to_string().contains(&access));
    let (status, v) = bob.get(&b.base, "/api/servers/secure/tools").await;
    assert_eq!(
        (status, v["error"].as_str()),
        (502, Some("needs_oauth")),
        "{v}"
    );

    // Bob cannot log alice out; alice logs out on B.
    let (status, v) = bob
        .post(&a.base, "/api/servers/secure/oauth/logout", &json!({}))
        .await;
    assert_eq!((status, v["removed"].as_bool()), (200, Some(false)), "{v}");
    assert_eq!(saved_access(&store, &alice_id).await, Some(access.clone()));
    let (status, v) = alice
        .post(&b.base, "/api/servers/secure/oauth/logout", &json!({}))
        .await;
    assert_eq!((status, v["removed"].as_bool()), (200, Some(true)), "{v}");
    assert_eq!(saved_access(&store, &alice_id).await, None);
    let (status, v) = alice.get(&b.base, "/api/servers/secure/tools").await;
    assert_eq!(
        (status, v["error"].as_str()),
        (502, Some("needs_oauth")),
        "{v}"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_refreshing_at_once_send_one_refresh_and_keep_a_working_token() {
    // Access tokens live 4 s: due at half their lifetime (they live under 10 minutes).
    let peer = switchboard_testkit::spawn_oauth_python(&["--access-ttl", "4"]).await;
    let peer_base = peer.url.trim_end_matches("/mcp").to_owned();
    let db = Db::postgres();
    let (a, b) = pair(&db).await;
    let store = db.store().await;
    let (alice_id, alice_cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(a.origin(), Some(&alice_cookie));
    let (status, _) = alice
        .post(
            &a.base,
            "/api/servers",
            &json!({"name": "secure", "url": peer.url}),
        )
        .await;
    assert_eq!(status, 201);
    let path = start_login(&alice, &a, "secure").await;
    let (status, page) = callback(&alice, &b, &path).await;
    assert_eq!(status, 200, "{page}");
    let first = saved_access(&store, &alice_id).await.unwrap();
    let before = stats(&peer_base).await;
    assert_eq!(before["refreshes"], 0, "{before}");
    // Not due yet: used as is.
    let (status, v) = alice
        .post(
            &b.base,
            "/api/servers/secure/call",
            &json!({"tool": "whoami"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(stats(&peer_base).await["refreshes"], 0);
    tokio::time::sleep(std::time::Duration::from_millis(2_300)).await;

    // Both instances use the due token at once.
    let call = |on: &Instance| {
        let (alice, base) = (alice.clone(), on.base.clone());
        async move {
            alice
                .post(
                    &base,
                    "/api/servers/secure/call",
                    &json!({"tool": "whoami"}),
                )
                .await
        }
    };
    let ((sa, va), (sb, vb)) = tokio::join!(call(&a), call(&b));
    assert_eq!((sa, sb), (200, 200), "{va} {vb}");
    let after = stats(&peer_base).await;
    assert_eq!(
        after["refreshes"], 1,
        "one refresh reached the token endpoint: {after}"
    );
    assert_eq!(after["refresh_failures"], 0, "{after}");
    let second = saved_access(&store, &alice_id).await.unwrap();
    assert_ne!(first, second, "the refreshed token was stored");

    // The stored (rotated) refresh token is the live one: once the new token is due,
    // the next use refreshes with it and the peer accepts it.
    tokio::time::sleep(std::time::Duration::from_millis(2_300)).await;
    let (status, v) = call(&b).await;
    assert_eq!(status, 200, "{v}");
    let last = stats(&peer_base).await;
    assert_eq!(
        (&last["refreshes"], &last["refresh_failures"]),
        (&json!(2), &json!(0)),
        "{last}"
    );
    a.stop().await;
    b.stop().await;
}

/// `path` (`/oauth/mcp/callback?…`) with its `iss` replaced by `iss` (`None`: removed).
fn with_iss(path: &str, iss: Option<&str>) -> String {
    let u = url::Url::parse(&format!("http://x{path}")).unwrap();
    let mut out = url::Url::parse(&format!("http://x{}", u.path())).unwrap();
    {
        let mut q = out.query_pairs_mut();
        for (k, v) in u.query_pairs().filter(|(k, _)| k != "iss") {
            q.append_pair(&k, &v);
        }
        if let Some(iss) = iss {
            q.append_pair("iss", iss);
        }
    }
    format!("{}?{}", out.path(), out.query().unwrap())
}

/// RFC 9207, the mix-up defence: against a server whose metadata promises `iss`
/// (`authorization_response_iss_parameter_supported`), a callback without `iss`, or with
/// another server's issuer, is refused and saves nothing (the login is used up); the
/// response as the server sent it completes. Against a server that promises nothing, a
/// missing `iss` is fine but a wrong one is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callback_refuses_an_iss_from_another_issuer_or_a_missing_promised_one() {
    let strict = switchboard_testkit::spawn_oauth_python(&["--iss-parameter"]).await;
    let plain = switchboard_testkit::spawn_oauth_python(&[]).await;
    let strict_issuer = strict.url.trim_end_matches("/mcp").to_owned();
    let plain_issuer = plain.url.trim_end_matches("/mcp").to_owned();
    let db = Db::sqlite();
    let (a, b) = pair(&db).await;
    let store = db.store().await;
    let (alice_id, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(a.origin(), Some(&cookie));
    for (name, url) in [("secure", &strict.url), ("plain", &plain.url)] {
        let (status, v) = alice
            .post(&a.base, "/api/servers", &json!({"name": name, "url": url}))
            .await;
        assert_eq!(status, 201, "{v}");
    }
    let tokens = |name: &'static str| {
        let store = store.clone();
        let id = alice_id.clone();
        async move { store.for_user(&id).oauth_tokens(name).await.unwrap() }
    };

    // The promised `iss` is missing.
    let path = start_login(&alice, &a, "secure").await;
    assert!(
        path.contains(&format!(
            "iss={}",
            url::form_urlencoded::byte_serialize(strict_issuer.as_bytes()).collect::<String>()
        )),
        "{path}"
    );
    let (status, page) = callback(&alice, &b, &with_iss(&path, None)).await;
    assert_eq!(status, 400, "{page}");
    assert!(
        page.contains("RFC 9207") && page.contains("no `iss`"),
        "{page}"
    );
    assert!(tokens("secure").await.is_none());
    // The login was used up: the genuine answer no longer completes it.
    let (status, _) = callback(&alice, &b, &path).await;
    assert_eq!(status, 400);

    // Another server's issuer.
    let path = start_login(&alice, &a, "secure").await;
    let (status, page) = callback(&alice, &b, &with_iss(&path, Some(&plain_issuer))).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("RFC 9207"), "{page}");
    assert!(tokens("secure").await.is_none());

    // As the server sent it.
    let path = start_login(&alice, &a, "secure").await;
    let (status, page) = callback(&alice, &b, &path).await;
    assert_eq!(status, 200, "{page}");
    assert!(tokens("secure").await.is_some());

    // A server that promises nothing: a forged `iss` is still refused, none is fine.
    let path = start_login(&alice, &a, "plain").await;
    assert!(!path.contains("iss="), "{path}");
    let (status, page) = callback(&alice, &a, &with_iss(&path, Some(&strict_issuer))).await;
    assert_eq!(status, 400, "{page}");
    assert!(tokens("plain").await.is_none());
    let path = start_login(&alice, &a, "plain").await;
    let (status, page) = callback(&alice, &a, &path).await;
    assert_eq!(status, 200, "{page}");
    assert!(tokens("plain").await.is_some());
    a.stop().await;
    b.stop().await;
}

/// A refresh token the authorization server refuses (`invalid_grant`: here every token
/// was revoked) is dead: the use that tried it answers `needs_oauth` naming the next step
/// (sign in to the server again), the saved tokens are gone from the store, and the
/// server list says signed out; a later call does not send the dead token again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_refresh_token_removes_the_login_and_says_to_sign_in_again() {
    let peer = switchboard_testkit::spawn_oauth_python(&["--access-ttl", "4"]).await;
    let peer_base = peer.url.trim_end_matches("/mcp").to_owned();
    let db = Db::sqlite();
    let (a, b) = pair(&db).await;
    let store = db.store().await;
    let (alice_id, alice_cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(a.origin(), Some(&alice_cookie));
    let (status, _) = alice
        .post(
            &a.base,
            "/api/servers",
            &json!({"name": "secure", "url": peer.url}),
        )
        .await;
    assert_eq!(status, 201);
    let path = start_login(&alice, &a, "secure").await;
    let (status, page) = callback(&alice, &b, &path).await;
    assert_eq!(status, 200, "{page}");
    assert!(saved_access(&store, &alice_id).await.is_some());
    reqwest::Client::new()
        .post(format!("{peer_base}/test/revoke-all"))
        .send()
        .await
        .unwrap();
    // Due for a refresh after half its 4 s life.
    tokio::time::sleep(std::time::Duration::from_millis(2_300)).await;
    let (status, v) = alice
        .post(
            &b.base,
            "/api/servers/secure/call",
            &json!({"tool": "whoami"}),
        )
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (502, Some("needs_oauth")),
        "{v}"
    );
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("invalid_grant") && message.contains("sign in to `secure` again"),
        "{v}"
    );
    assert_eq!(
        saved_access(&store, &alice_id).await,
        None,
        "the dead tokens stay"
    );
    let (status, v) = alice.get(&a.base, "/api/servers").await;
    assert_eq!(
        (status, &v["servers"][0]["oauth"]),
        (200, &json!({"signedIn": false}))
    );
    let failures = stats(&peer_base).await["refresh_failures"].clone();
    let (status, v) = alice.get(&a.base, "/api/servers/secure/tools").await;
    assert_eq!(
        (status, v["error"].as_str()),
        (502, Some("needs_oauth")),
        "{v}"
    );
    assert_eq!(
        stats(&peer_base).await["refresh_failures"],
        failures,
        "the dead refresh token was sent again"
    );
    a.stop().await;
    b.stop().await;
}

/// A 401 to saved tokens (the server dropped every access token behind our back) during
/// a call on a cached connection: the tokens are refreshed once under the lease and the
/// call is retried once, and it succeeds with the new token. Against a server that
/// refuses every token, the retry's 401 is `needs_oauth` naming the login, after exactly
/// one refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_to_saved_tokens_refreshes_once_and_retries_once() {
    let peer = switchboard_testkit::spawn_oauth_python(&[]).await;
    let peer_base = peer.url.trim_end_matches("/mcp").to_owned();
    let refusing = switchboard_testkit::spawn_oauth_python(&["--refuse-tokens"]).await;
    let refusing_base = refusing.url.trim_end_matches("/mcp").to_owned();
    let db = Db::sqlite();
    let (a, b) = pair(&db).await;
    let store = db.store().await;
    let (alice_id, alice_cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(a.origin(), Some(&alice_cookie));
    for (name, url) in [("secure", &peer.url), ("refusing", &refusing.url)] {
        let (status, v) = alice
            .post(&a.base, "/api/servers", &json!({"name": name, "url": url}))
            .await;
        assert_eq!(status, 201, "{v}");
        let path = start_login(&alice, &a, name).await;
        let (status, page) = callback(&alice, &a, &path).await;
        assert_eq!(status, 200, "{page}");
    }
    let call = |server: &'static str| {
        let alice = alice.clone();
        let base = a.base.clone();
        async move {
            alice
                .post(
                    &base,
                    &format!("/api/servers/{server}/call"),
                    &json!({"tool": "whoami"}),
                )
                .await
        }
    };
    let (status, v) = call("secure").await;
    assert_eq!(status, 200, "{v}");
    let first = saved_access(&store, &alice_id).await.unwrap();
    assert_eq!(a.running.state.open_connections(), 1);

    // Every access token dropped: the cached connection's next request gets a 401.
    reqwest::Client::new()
        .post(format!("{peer_base}/test/expire-access"))
        .send()
        .await
        .unwrap();
    let (status, v) = call("secure").await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("client="),
        "{v}"
    );
    assert_eq!(stats(&peer_base).await["refreshes"], 1);
    assert_ne!(saved_access(&store, &alice_id).await.unwrap(), first);
    let (status, v) = alice.get(&a.base, "/api/servers/secure/tools").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(stats(&peer_base).await["refreshes"], 1, "refreshed again");

    // A server that refuses every token: one refresh, one retry, then a clear answer.
    let (status, v) = call("refusing").await;
    assert_eq!(
        (status, v["error"].as_str()),
        (502, Some("needs_oauth")),
        "{v}"
    );
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("sign in to `refusing` again") && message.contains("401"),
        "{v}"
    );
    assert_eq!(stats(&refusing_base).await["refreshes"], 1);
    a.stop().await;
    b.stop().await;
}
