//! `mcp-test` on an OAuth-protected server (the Python MCP SDK's authorization server
//! and resource server): the 401 answer carries GemiHub's `oauthDiscovery`, found by
//! RFC 9728 / RFC 8414 discovery, with a dynamically registered client, or the fixed
//! fallback client id when registration is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::common;

use common::{Api, Home, start_app};
use serde_json::json;
use switchboard_testkit::spawn_oauth_python;

fn base_of(url: &str) -> String {
    url.trim_end_matches("/mcp").to_string()
}

#[tokio::test]
async fn mcp_test_answers_401_with_the_oauth_discovery() {
    let peer = spawn_oauth_python(&[]).await;
    let base = base_of(&peer.url);
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);

    let (status, v) = api
        .post("/api/settings/mcp-test", &json!({"url": peer.url}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["success"], false, "{v}");
    assert_eq!(v["needsOAuth"], true, "{v}");
    assert_eq!(v["message"], "Server requires OAuth authentication.");
    let d = &v["oauthDiscovery"];
    let config = &d["config"];
    assert_eq!(
        config["authorizationUrl"],
        format!("{base}/authorize"),
        "{v}"
    );
    assert_eq!(config["tokenUrl"], format!("{base}/token"), "{v}");
    assert_eq!(config["scopes"], json!(["mcp"]), "{v}");
    assert_eq!(config["resource"], peer.url.as_str(), "{v}");
    assert_eq!(d["registrationUrl"], format!("{base}/register"), "{v}");
    // A client registered just now (not the fallback), and no secret for the page.
    let client_id = config["clientId"].as_str().unwrap();
    assert!(!client_id.is_empty() && client_id != "switchboard", "{v}");
    assert!(config.get("clientSecret").is_none(), "{v}");
    let keys: Vec<&String> = config.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "clientId",
            "authorizationUrl",
            "tokenUrl",
            "scopes",
            "resource"
        ],
        "{v}"
    );
    assert_eq!(
        switchboard_testkit::oauth_peer_stats(&base).await["registrations"],
        1
    );
}

#[tokio::test]
async fn refused_registration_falls_back_to_the_fixed_client_id() {
    let peer = spawn_oauth_python(&["--refuse-registration"]).await;
    let base = base_of(&peer.url);
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);

    let (status, v) = api
        .post("/api/settings/mcp-test", &json!({"url": peer.url}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["needsOAuth"], true, "{v}");
    let d = &v["oauthDiscovery"];
    assert_eq!(
        d["config"]["clientId"],
        switchboard_auth::FALLBACK_CLIENT_ID,
        "{v}"
    );
    assert_eq!(d["config"]["tokenUrl"], format!("{base}/token"), "{v}");
    assert_eq!(d["registrationUrl"], format!("{base}/register"), "{v}");
    assert!(v.get("oauthDiscoveryError").is_none(), "{v}");
}
