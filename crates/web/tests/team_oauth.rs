//! A user's OAuth-protected server in team mode, against the Python MCP SDK's
//! authorization and resource server: Test answers `needsOAuth` with the discovery hint;
//! without saved tokens the server is not reachable; with the user's tokens in the
//! store (a real access token from a real code + PKCE exchange) tools and calls work, the
//! list says `signedIn` and shows no token; a new token replaces the cached connection;
//! another user's server at the same URL never gets the first user's token.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_store::Secret;
use team_support::{Browser, Db, Instance, InstanceOptions, sign_in};

/// A real access token from the peer: dynamic registration, `/authorize` (the peer
/// approves at once), and the code exchange with PKCE.
async fn access_token(base: &str, resource: &str) -> (String, String) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let redirect = "http://127.0.0.1:9/callback";
    let reg: Value = http
        .post(format!("{base}/register"))
        .json(&json!({
            "redirect_uris": [redirect],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "scope": "mcp",
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = reg["client_id"].as_str().unwrap().to_owned();
    let verifier = format!("{:0>64}", switchboard_testkit::free_port());
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    let mut authorize = url::Url::parse(&format!("{base}/authorize")).unwrap();
    authorize
        .query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client_id)
        .append_pair("redirect_uri", redirect)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", "s")
        .append_pair("scope", "mcp")
        .append_pair("resource", resource);
    let r = http.get(authorize).send().await.unwrap();
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    let code = url::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("no code in {location}"));
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "authorization_code")
        .append_pair("code", &code)
        .append_pair("redirect_uri", redirect)
        .append_pair("client_id", &client_id)
        .append_pair("code_verifier", &verifier)
        .append_pair("resource", resource);
    let token: Value = http
        .post(format!("{base}/token"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form.finish())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access = token["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("{token}"))
        .to_owned();
    (access, client_id)
}

fn token_set(access: &str) -> Secret {
    let set = switchboard_auth::TokenSet {
        access_token: access.into(),
        refresh_token: None,
        expires_at: None,
        token_type: "Bearer".into(),
        scope: Some("mcp".into()),
    };
    Secret::new(serde_json::to_string(&set).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_servers_use_only_their_users_saved_tokens() {
    let peer = switchboard_testkit::spawn_oauth_python(&[]).await;
    let base = peer.url.trim_end_matches("/mcp").to_owned();
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (alice_id, alice_cookie) = sign_in(&store, "alice@example.com", false).await;
    let (_, bob_cookie) = sign_in(&store, "bob@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&alice_cookie));
    let bob = Browser::new(app.origin(), Some(&bob_cookie));

    // Test: the 401 becomes GemiHub's hint, found through the URL guard.
    let (status, v) = alice
        .post(&app.base, "/api/mcp-test", &json!({"url": peer.url}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["success"].as_bool(), v["needsOAuth"].as_bool()),
        (Some(false), Some(true)),
        "{v}"
    );
    assert_eq!(
        v["oauthDiscovery"]["config"]["authorizationUrl"],
        format!("{base}/authorize"),
        "{v}"
    );
    assert_eq!(
        v["oauthDiscovery"]["config"]["tokenUrl"],
        format!("{base}/token"),
        "{v}"
    );

    // Saved without tokens: not reachable, and nothing cached.
    for b in [&alice, &bob] {
        let (status, _) = b
            .post(
                &app.base,
                "/api/servers",
                &json!({"name": "secure", "url": peer.url}),
            )
            .await;
        assert_eq!(status, 201);
    }
    let (status, v) = alice.get(&app.base, "/api/servers/secure/tools").await;
    assert_eq!(
        (status, v["error"].as_str()),
        (502, Some("needs_oauth")),
        "{v}"
    );
    assert_eq!(app.running.state.open_connections(), 0);

    // Alice's tokens in the store: her calls carry them.
    let (access, client_id) = access_token(&base, &peer.url).await;
    store
        .for_user(&alice_id)
        .put_oauth_tokens("secure", &token_set(&access), None)
        .await
        .unwrap();
    let (status, v) = alice.get(&app.base, "/api/servers/secure/tools").await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "whoami"),
        "{v}"
    );
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers/secure/call",
            &json!({"tool": "whoami"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["result"]["content"][0]["text"],
        format!("client={client_id} scopes=mcp")
    );
    let (status, v) = alice.get(&app.base, "/api/servers").await;
    assert_eq!(
        (status, &v["servers"][0]["oauth"]),
        (200, &json!({"signedIn": true}))
    );
    assert!(!v.to_string().contains(&access), "{v}");
    let (status, v) = alice
        .post(&app.base, "/api/mcp-test", &json!({"name": "secure"}))
        .await;
    assert_eq!((status, v["success"].as_bool()), (200, Some(true)), "{v}");
    assert!(!v.to_string().contains(&access));

    // Bob's server at the same URL: her token is never his.
    let (status, v) = bob.get(&app.base, "/api/servers/secure/tools").await;
    assert_eq!(
        (status, v["error"].as_str()),
        (502, Some("needs_oauth")),
        "{v}"
    );
    let (status, v) = bob
        .post(&app.base, "/api/mcp-test", &json!({"name": "secure"}))
        .await;
    assert_eq!(
        (status, v["needsOAuth"].as_bool()),
        (200, Some(true)),
        "{v}"
    );
    assert_eq!(app.running.state.open_connections(), 1);

    // Her token is revoked and she gets a new one: the new token is a new cache key, so
    // the next call connects with it (the cached connection would carry the dead one).
    reqwest::Client::new()
        .post(format!("{base}/test/revoke-all"))
        .send()
        .await
        .unwrap();
    let (second, _) = access_token(&base, &peer.url).await;
    store
        .for_user(&alice_id)
        .put_oauth_tokens("secure", &token_set(&second), None)
        .await
        .unwrap();
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers/secure/call",
            &json!({"tool": "whoami"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        app.running.state.open_connections(),
        1,
        "replaced, not kept beside"
    );
    app.stop().await;
}
