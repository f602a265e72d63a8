//! Step-up authorization is bounded: against a server that keeps answering 403
//! `insufficient_scope`, one user action costs at most 3 authorizations in all (the
//! one that started it included), then fails with an error naming the server and the
//! scope it asks for.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use common::*;
use serde_json::json;
use switchboard_auth::{MAX_AUTHORIZATIONS, ServerAuth};
use switchboard_config::OAuthConfig;

const CHALLENGE: &str =
    r#"Bearer error="insufficient_scope", scope="mcp:admin", error_description="needs admin""#;

/// An MCP endpoint that answers every authorized request 403 `insufficient_scope`, and
/// a token endpoint that counts the tokens it issues.
async fn always_forbidden() -> (String, Arc<AtomicUsize>) {
    let issued = Arc::new(AtomicUsize::new(0));
    let count = issued.clone();
    let app = Router::new()
        .route(
            "/mcp",
            post(|headers: HeaderMap| async move {
                if headers.contains_key("authorization") {
                    (StatusCode::FORBIDDEN, [("www-authenticate", CHALLENGE)], "").into_response()
                } else {
                    (
                        StatusCode::UNAUTHORIZED,
                        [("www-authenticate", "Bearer")],
                        "",
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/token",
            post(move || {
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    (
                        [("content-type", "application/json")],
                        json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": 3600})
                            .to_string(),
                    )
                        .into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, issued)
}

#[tokio::test]
async fn step_up_stops_after_three_authorizations() {
    let (base, issued) = always_forbidden().await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    let mut sa = ServerAuth::adhoc("scoped", &url);
    sa.oauth = OAuthConfig {
        grant_type: Some("client_credentials".into()),
        client_id: Some("cid".into()),
        client_secret: Some("sec".into()),
        token_url: Some(format!("{base}/token")),
        ..Default::default()
    };
    m.add_server(sa);

    // One user action: connecting. The token it starts with is authorization 1.
    let Err(e) = connect("scoped", &url, Arc::new(m.clone())).await else {
        panic!("a server that always answers insufficient_scope cannot be used");
    };
    assert_eq!(issued.load(Ordering::SeqCst), 3);
    assert_eq!(MAX_AUTHORIZATIONS, 3);
    let text = e.to_string();
    assert!(text.contains("`scoped`"), "{text}");
    assert!(text.contains("insufficient_scope"), "{text}");
    assert!(text.contains("\"mcp:admin\""), "{text}");
    assert!(text.contains("after 3 authorizations"), "{text}");

    // The next action in the same process gets no new authorization until the user
    // logs in again, and says so.
    let Err(e) = connect("scoped", &url, Arc::new(m.clone())).await else {
        panic!("still refused");
    };
    assert_eq!(issued.load(Ordering::SeqCst), 3);
    let text = e.to_string();
    assert!(
        text.contains("`scoped`") && text.contains("mcp:admin"),
        "{text}"
    );
    assert!(
        text.contains("switchboard mcp login scoped --scope \"mcp:admin\""),
        "{text}"
    );
}
