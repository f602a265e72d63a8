//! Against a real OAuth-protected MCP server: the Python SDK's auth routes
//! (`tests/peers/python/oauth_server.py`, MCP server and authorization server in one
//! process). Login through the loopback callback, tool calls with the token, expiry
//! and refresh with rotation, a 401 mid-session, revocation, concurrent refreshes,
//! step-up, the legacy SSE transport, and the error cases the real server produces.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use switchboard_auth::{AuthError, TokenStore};
use switchboard_mcp::{TokenSource, TokenStatus};
use switchboard_testkit::spawn_oauth_python;

fn base(url: &str) -> String {
    url.trim_end_matches("/mcp").to_string()
}

#[tokio::test]
async fn login_then_call_with_the_token() {
    let peer = spawn_oauth_python(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));

    // Without a login the server refuses, and says how to fix it.
    let e = connect("py", &peer.url, Arc::new(m.clone()))
        .await
        .unwrap_err();
    assert!(e.is_auth(), "{e}");
    assert!(e.to_string().contains("switchboard mcp login py"), "{e}");

    let report = m
        .login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap();
    assert_eq!(report.scope.as_deref(), Some("mcp"));
    assert!(report.has_refresh_token);
    assert_eq!(m.status("py", &peer.url), Some(TokenStatus::Authenticated));

    let saved = TokenStore::in_home(dir.path()).load("py").unwrap().unwrap();
    assert_eq!(saved.mcp_server_url, peer.url);
    assert_eq!(saved.resource.as_deref(), Some(peer.url.as_str()));
    assert_eq!(saved.token_endpoint_auth_method.as_deref(), Some("none"));
    assert!(saved.client_id.is_some());

    let conn = connect("py", &peer.url, Arc::new(m.clone())).await.unwrap();
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "hi"})).await,
        "hi"
    );
    let who = call_text(&conn, "whoami", json!({})).await;
    assert!(who.contains("scopes=mcp"), "{who}");
    conn.close(Duration::from_millis(200)).await;

    let stats = get_json(&format!("{}/test/stats", base(&peer.url))).await;
    assert_eq!(stats["registrations"], 1);
    assert_eq!(stats["code_exchanges"], 1);

    // The token is never sent to another URL of the same name.
    assert_eq!(m.token("py", "http://127.0.0.1:1/mcp").await.unwrap(), None);
}

#[tokio::test]
async fn expiry_refreshes_with_rotation_mid_session() {
    // Access tokens live 4 s: refreshed at half their lifetime.
    let peer = spawn_oauth_python(&["--access-ttl", "4"]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    m.login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap();
    let store = TokenStore::in_home(dir.path());
    let first = store.load("py").unwrap().unwrap();

    let conn = connect("py", &peer.url, Arc::new(m.clone())).await.unwrap();
    assert_eq!(call_text(&conn, "echo", json!({"message": "a"})).await, "a");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // Same connection, new token: asked per request, refreshed before use.
    assert_eq!(call_text(&conn, "echo", json!({"message": "b"})).await, "b");
    let second = store.load("py").unwrap().unwrap();
    assert_ne!(second.token.access_token, first.token.access_token);
    assert_ne!(second.token.refresh_token, first.token.refresh_token);
    assert_eq!(
        second.client_id, first.client_id,
        "the stored client id is reused"
    );

    // The rotated-out refresh token is dead on the server.
    let resp = reqwest::Client::new()
        .post(format!("{}/token", base(&peer.url)))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            url::form_urlencoded::Serializer::new(String::new())
                .append_pair("grant_type", "refresh_token")
                .append_pair(
                    "refresh_token",
                    first.token.refresh_token.as_deref().unwrap(),
                )
                .append_pair("client_id", first.client_id.as_deref().unwrap())
                .finish(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "invalid_grant");

    // Well past expiry: still working.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(call_text(&conn, "echo", json!({"message": "c"})).await, "c");
    let stats = get_json(&format!("{}/test/stats", base(&peer.url))).await;
    assert!(stats["refreshes"].as_u64().unwrap() >= 2, "{stats}");
    conn.close(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_401_mid_session_refreshes_once_and_retries() {
    let peer = spawn_oauth_python(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    m.login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap();
    let conn = connect("py", &peer.url, Arc::new(m.clone())).await.unwrap();
    assert_eq!(call_text(&conn, "echo", json!({"message": "a"})).await, "a");
    // The server forgets every access token (refresh tokens stay).
    post(&format!("{}/test/expire-access", base(&peer.url))).await;
    assert_eq!(call_text(&conn, "echo", json!({"message": "b"})).await, "b");
    let stats = get_json(&format!("{}/test/stats", base(&peer.url))).await;
    assert_eq!(stats["refreshes"], 1, "{stats}");
    conn.close(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn revoked_refresh_token_says_log_in_again() {
    let peer = spawn_oauth_python(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    m.login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap();
    post(&format!("{}/test/revoke-all", base(&peer.url))).await;

    let e = connect("py", &peer.url, Arc::new(m.clone()))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("no longer valid"), "{text}");
    assert!(text.contains("invalid_grant"), "{text}");
    assert!(text.contains("switchboard mcp login py"), "{text}");
    // The dead login is gone; the next attempt asks for a login plainly.
    assert!(
        TokenStore::in_home(dir.path())
            .load("py")
            .unwrap()
            .is_none()
    );
    let e = connect("py", &peer.url, Arc::new(m.clone()))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("switchboard mcp login py"), "{e}");
}

#[tokio::test]
async fn two_managers_refreshing_at_once_keep_the_token() {
    // Two managers (as two processes would: separate caches) share one store file.
    let peer = spawn_oauth_python(&["--access-ttl", "2"]).await;
    let dir = tempfile::tempdir().unwrap();
    let a = manager(dir.path());
    a.add_server(server("py", &peer.url));
    a.login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap();
    let b = manager(dir.path());
    b.add_server(server("py", &peer.url));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (ta, tb) = tokio::join!(a.token("py", &peer.url), b.token("py", &peer.url));
    let (ta, tb) = (ta.unwrap().unwrap(), tb.unwrap().unwrap());
    assert_eq!(
        ta, tb,
        "the second one found the first one's refreshed token"
    );
    let stats = get_json(&format!("{}/test/stats", base(&peer.url))).await;
    assert_eq!(stats["refreshes"], 1, "{stats}");
    assert_eq!(stats["refresh_failures"], 0, "{stats}");
    // And the saved refresh token still works.
    let conn = connect("py", &peer.url, Arc::new(b.clone())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(call_text(&conn, "echo", json!({"message": "x"})).await, "x");
    conn.close(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn wrong_state_is_refused() {
    let peer = spawn_oauth_python(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    let e = m
        .login(
            "py",
            &peer.url,
            &login_opts(forging_browser("forged-state")),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, AuthError::StateMismatch { .. }), "{e}");
    assert!(e.to_string().contains("state"), "{e}");
    assert!(
        TokenStore::in_home(dir.path())
            .load("py")
            .unwrap()
            .is_none()
    );
    let stats = get_json(&format!("{}/test/stats", base(&peer.url))).await;
    assert_eq!(stats["code_exchanges"], 0, "no code was redeemed");
}

#[tokio::test]
async fn wrong_verifier_is_a_clear_error() {
    let peer = spawn_oauth_python(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    let mut opts = login_opts(following_browser());
    opts.verifier_override = Some("x".repeat(64));
    let e = m.login("py", &peer.url, &opts).await.unwrap_err();
    let text = e.to_string();
    assert!(text.contains("invalid_grant"), "{text}");
    assert!(text.contains("PKCE code verifier"), "{text}");
    assert!(!text.contains(&"x".repeat(64)), "{text}");
}

#[tokio::test]
async fn registration_refused_is_a_clear_error() {
    let peer = spawn_oauth_python(&["--refuse-registration"]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    let e = m
        .login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, AuthError::RegistrationRefused { .. }), "{text}");
    assert!(text.contains("registration is closed"), "{text}");
    assert!(text.contains("invalid_client_metadata"), "{text}");
}

#[tokio::test]
async fn insufficient_scope_steps_up() {
    let peer = spawn_oauth_python(&["--step-up"]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    m.login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap();
    let conn = connect("py", &peer.url, Arc::new(m.clone())).await.unwrap();

    // Without a login UI, the error says what to run.
    let r = conn
        .call_tool("admin", None, &Default::default())
        .await
        .unwrap_err();
    assert!(r.to_string().contains("--scope \"mcp mcp:admin\""), "{r}");

    // With one, the user re-authorizes with the wider scope and the call goes on.
    m.set_login_ui(Some(login_opts(following_browser())));
    let text = call_text(&conn, "admin", json!({})).await;
    assert_eq!(text, "admin ok (mcp mcp:admin)");
    let saved = TokenStore::in_home(dir.path()).load("py").unwrap().unwrap();
    assert_eq!(saved.token.scope.as_deref(), Some("mcp mcp:admin"));
    conn.close(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn logout_forgets_the_token() {
    let peer = spawn_oauth_python(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("py", &peer.url));
    m.login("py", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap();
    assert!(m.logout("py").await.unwrap());
    assert!(!m.logout("py").await.unwrap());
    assert_eq!(m.status("py", &peer.url), None);
    assert!(TokenSource::status(&m, "py", &peer.url).is_none());
    assert!(
        connect("py", &peer.url, Arc::new(m.clone()))
            .await
            .unwrap_err()
            .is_auth()
    );
}

#[tokio::test]
async fn legacy_sse_server_with_oauth() {
    let mut peer = spawn_oauth_python(&["--transport", "sse"]).await;
    peer.url = peer.url.replace("/mcp", "/sse");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("sse", &peer.url));
    m.login("sse", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", peer.stderr()));
    let mut opts = switchboard_mcp::ConnectOptions::new(
        "sse",
        switchboard_mcp::Target::Sse {
            url: peer.url.clone(),
            headers: vec![],
        },
    );
    opts.guard = Some(guard());
    opts.token_source = Some(Arc::new(m.clone()));
    let conn = switchboard_mcp::Connection::connect(opts).await.unwrap();
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "over sse"})).await,
        "over sse"
    );
    conn.close(Duration::from_millis(200)).await;

    // A rejected token at connect time is refreshed once.
    post(&format!(
        "{}/test/expire-access",
        peer.url.trim_end_matches("/sse")
    ))
    .await;
    let mut opts = switchboard_mcp::ConnectOptions::new(
        "sse",
        switchboard_mcp::Target::Sse {
            url: peer.url.clone(),
            headers: vec![],
        },
    );
    opts.guard = Some(guard());
    opts.token_source = Some(Arc::new(m.clone()));
    let conn = switchboard_mcp::Connection::connect(opts).await.unwrap();
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "again"})).await,
        "again"
    );
    let stats = get_json(&format!("{}/test/stats", peer.url.trim_end_matches("/sse"))).await;
    assert_eq!(stats["refreshes"], 1, "{stats}");
    conn.close(Duration::from_millis(200)).await;
}

/// The split flow for an app's own callback page: `begin_authorization` registers the
/// app's redirect URI and keeps the verifier; the "browser" brings back a code that
/// `complete_authorization` exchanges and saves, once.
#[tokio::test]
async fn split_flow_comes_back_to_the_apps_callback_once() {
    let peer = spawn_oauth_python(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let pending = switchboard_auth::PendingAuthorizations::default();
    let m = switchboard_auth::AuthManager::with_pending(
        TokenStore::in_home(dir.path()),
        guard(),
        pending.clone(),
    );
    m.add_server(switchboard_auth::ServerAuth::adhoc("py", &peer.url));
    assert!(!m.needs_loopback("py", &peer.url));
    let redirect = "http://127.0.0.1:9/auth/mcp-oauth-callback";
    let a = m
        .begin_authorization("py", &peer.url, redirect, None)
        .await
        .unwrap();
    let auth_url = url::Url::parse(&a.authorize_url).unwrap();
    let q: std::collections::HashMap<_, _> = auth_url.query_pairs().into_owned().collect();
    assert_eq!(q["redirect_uri"], redirect);
    assert_eq!(q["state"], a.state);
    assert!(!a.authorize_url.contains("code_verifier"));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = client.get(&a.authorize_url).send().await.unwrap();
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    assert!(location.starts_with(redirect), "{location}");
    let back: std::collections::HashMap<_, _> = url::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(back["state"], a.state);

    // An unknown state changes nothing.
    let e = m
        .complete_authorization("nope", &back["code"], None)
        .await
        .unwrap_err();
    assert!(matches!(e, AuthError::UnknownState), "{e}");

    // Another manager sharing the pending logins completes it.
    let other = switchboard_auth::AuthManager::with_pending(
        TokenStore::in_home(dir.path()),
        guard(),
        pending,
    );
    let done = other
        .complete_authorization(&a.state, &back["code"], back.get("iss").map(String::as_str))
        .await
        .unwrap();
    assert_eq!(done.server, "py");
    assert!(done.expires_at.is_some());
    assert_eq!(m.status("py", &peer.url), Some(TokenStatus::Authenticated));
    let conn = connect("py", &peer.url, Arc::new(m.clone())).await.unwrap();
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "split"})).await,
        "split"
    );
    conn.close(Duration::from_millis(200)).await;

    // A used state is refused.
    let e = m
        .complete_authorization(&a.state, &back["code"], None)
        .await
        .unwrap_err();
    assert!(matches!(e, AuthError::UnknownState), "{e}");
}

/// RFC 9207 in the split flow (the personal app's callback page): when the server's
/// metadata promises `iss`, a response without it or with another issuer's is refused
/// before any code exchange (the waiting login is used up); the response as sent
/// completes.
#[tokio::test]
async fn split_flow_refuses_a_missing_promised_or_foreign_iss() {
    let peer = spawn_oauth_python(&["--iss-parameter"]).await;
    let dir = tempfile::tempdir().unwrap();
    let m = switchboard_auth::AuthManager::with_pending(
        TokenStore::in_home(dir.path()),
        guard(),
        switchboard_auth::PendingAuthorizations::default(),
    );
    m.add_server(switchboard_auth::ServerAuth::adhoc("py", &peer.url));
    let redirect = "http://127.0.0.1:9/auth/mcp-oauth-callback";
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let issuer = peer.url.trim_end_matches("/mcp").to_owned();
    let mut outcomes = Vec::new();
    for forged in [Some(None), Some(Some("http://127.0.0.1:9")), None] {
        let a = m
            .begin_authorization("py", &peer.url, redirect, None)
            .await
            .unwrap();
        let resp = client.get(&a.authorize_url).send().await.unwrap();
        let location = resp.headers()["location"].to_str().unwrap().to_string();
        let back: std::collections::HashMap<_, _> = url::Url::parse(&location)
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect();
        assert_eq!(back.get("iss"), Some(&issuer), "{location}");
        let iss = match forged {
            Some(f) => f.map(str::to_owned),
            None => back.get("iss").cloned(),
        };
        let done = m
            .complete_authorization(&a.state, &back["code"], iss.as_deref())
            .await;
        if let Err(e) = &done {
            assert!(matches!(e, AuthError::IssuerMismatch { .. }), "{e}");
            // Used up: the genuine answer no longer completes it.
            let again = m
                .complete_authorization(
                    &a.state,
                    &back["code"],
                    back.get("iss").map(String::as_str),
                )
                .await
                .unwrap_err();
            assert!(matches!(again, AuthError::UnknownState), "{again}");
        }
        outcomes.push(done.is_ok());
    }
    assert_eq!(outcomes, [false, false, true]);
    assert_eq!(m.status("py", &peer.url), Some(TokenStatus::Authenticated));
}
