//! Against the TypeScript SDK's `simpleStreamableHttp.js --oauth` example: an MCP
//! server plus a separate authorization server (URLs hard-coded to `localhost`).
//! Discovery crosses origins (resource on one port, authorization server on another),
//! the client registers, the user "approves" in a browser stand-in, and a tool call
//! goes through with the token. (The example issues no refresh tokens.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use switchboard_auth::TokenStore;
use switchboard_testkit::spawn_ts_oauth;

#[tokio::test]
async fn login_and_call_against_the_ts_sdk_example() {
    let peer = spawn_ts_oauth().await;
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("ts", &peer.url));

    let e = connect("ts", &peer.url, Arc::new(m.clone()))
        .await
        .unwrap_err();
    assert!(e.is_auth(), "{e}");

    let report = m
        .login("ts", &peer.url, &login_opts(following_browser()))
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- peer output ---\n{}", peer.stderr()));
    assert_eq!(report.scope.as_deref(), Some("mcp:tools"));
    assert!(!report.has_refresh_token, "the example issues none");
    let saved = TokenStore::in_home(dir.path()).load("ts").unwrap().unwrap();
    assert_eq!(saved.mcp_server_url, peer.url);
    assert_ne!(
        saved
            .token_url
            .as_deref()
            .map(|u| u.starts_with(peer.url.trim_end_matches("/mcp"))),
        Some(true),
        "the authorization server is on another port"
    );

    let conn = connect("ts", &peer.url, Arc::new(m.clone()))
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- peer output ---\n{}", peer.stderr()));
    let text = call_text(&conn, "greet", json!({"name": "Switchboard"})).await;
    assert!(text.contains("Switchboard"), "{text}");
    conn.close(Duration::from_millis(200)).await;
}
