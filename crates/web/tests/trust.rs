//! The web API's trust boundary, tried as an attacker would: values that arrive in a
//! web request are data, never references. Each attack runs against a
//! `RecordingListener` on 127.0.0.1 that records every byte it receives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Api, Home, demo_http, start_app, wait_connected};
use reqwest::Method;
use serde_json::json;
use switchboard_testkit::RecordingListener;
use switchboard_web::KEEP_UNCHANGED;

/// An environment variable every test process has, standing in for an API key.
const ENV_VAR: &str = "CARGO_MANIFEST_DIR";

#[tokio::test]
async fn browser_values_are_stored_literally_and_never_expanded() {
    let secret = std::env::var(ENV_VAR).unwrap();
    let listener = RecordingListener::start().await;
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    let (status, v) = api
        .post(
            "/api/settings/mcp-servers",
            &json!({"name": "leak", "transport": "http", "url": listener.url("/mcp/${CARGO_MANIFEST_DIR}"),
                    "headers": {"X-Leak": "${CARGO_MANIFEST_DIR}", "X-Leak2": "$CARGO_MANIFEST_DIR"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // The rebuilt host connects; what arrives is the text as typed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !listener.received().contains("x-leak") && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    listener.assert_never_saw(&secret);
    let got = listener.received();
    assert!(got.contains("x-leak: ${CARGO_MANIFEST_DIR}"), "{got}");
    assert!(
        got.contains("/mcp/$%7BCARGO_MANIFEST_DIR%7D")
            || got.contains("/mcp/${CARGO_MANIFEST_DIR}"),
        "{got}"
    );
    let saved = home.settings()["mcpServers"]["leak"].clone();
    assert_eq!(saved["headers"]["X-Leak"], "$${CARGO_MANIFEST_DIR}");
    assert_eq!(
        saved["httpUrl"],
        listener.url("/mcp/$${CARGO_MANIFEST_DIR}")
    );
    app.shutdown().await;
}

#[tokio::test]
async fn local_files_cannot_be_referenced_from_the_browser() {
    let listener = RecordingListener::start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("id-token");
    std::fs::write(&secret_file, "file-secret-contents-88").unwrap();
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    for oauth in [
        json!({"grantType": "urn:ietf:params:oauth:grant-type:jwt-bearer", "clientId": "c",
               "tokenUrl": listener.url("/token"),
               "idp": {"tokenEndpoint": listener.url("/idp"), "clientId": "c",
                       "idToken": format!("file:{}", secret_file.display())}}),
        json!({"grantType": "client_credentials", "clientId": "c", "tokenUrl": listener.url("/token"),
               "tokenEndpointAuthMethod": "private_key_jwt", "privateKeyFile": secret_file.display().to_string()}),
    ] {
        let (status, v) = api
            .post(
                "/api/settings/mcp-servers",
                &json!({"name": "sso", "transport": "http", "url": listener.url("/mcp"), "oauth": oauth}),
            )
            .await;
        assert_eq!(status, 400, "{v}");
        assert!(
            v["message"].as_str().unwrap().contains("written by hand"),
            "{v}"
        );
    }
    assert!(home.settings()["mcpServers"].get("sso").is_none());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(listener.connections(), 0, "{}", listener.received());
    app.shutdown().await;
}

#[tokio::test]
async fn saved_secrets_never_follow_a_url_typed_in_the_browser() {
    let demo = demo_http().await;
    let listener = RecordingListener::start().await;
    let home = Home::new(Some(&json!({"mcpServers": {
        "gh": {"httpUrl": demo, "headers": {"Authorization": "Bearer user-header-secret-51d2"},
               "oauth": {"clientId": "c", "clientSecret": "client-secret-9e1", "tokenUrl": format!("{demo}/token")}}
    }})));
    let app = start_app(&home, None).await;
    wait_connected(&app, &["gh"]).await;
    let api = Api::new(&app);

    // Editing the server to point at another URL while keeping the saved header.
    let (status, v) = api
        .send(
            Method::PUT,
            "/api/settings/mcp-servers/gh",
            &json!({"name": "gh", "transport": "http", "url": listener.url("/steal"),
                    "headers": {"Authorization": KEEP_UNCHANGED}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("enter the value again"),
        "{v}"
    );
    // Or keeping the client secret while moving its token endpoint.
    let (status, v) = api
        .send(
            Method::PUT,
            "/api/settings/mcp-servers/gh",
            &json!({"name": "gh", "transport": "http", "url": demo,
                    "headers": {"Authorization": KEEP_UNCHANGED},
                    "oauth": {"clientId": "c", "clientSecret": KEEP_UNCHANGED, "tokenUrl": listener.url("/token")}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    // Testing another URL with the saved header.
    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"name": "gh", "url": listener.url("/steal"), "headers": {"Authorization": KEEP_UNCHANGED}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    // Testing another URL under the saved server's name: its login is not sent either.
    let (_, _) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"name": "gh", "url": listener.url("/steal2"), "transport": "http"}),
        )
        .await;
    assert!(listener.received().contains("/steal2"));
    listener.assert_never_saw("user-header-secret-51d2");
    listener.assert_never_saw("client-secret-9e1");
    listener.assert_never_saw("Authorization");
    assert!(listener.received().matches("POST").count() >= 1);
    assert_eq!(
        home.settings()["mcpServers"]["gh"]["httpUrl"],
        demo,
        "nothing was saved"
    );
    // The same URL keeps working with the saved header.
    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"name": "gh", "url": demo, "headers": {"Authorization": KEEP_UNCHANGED}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    app.shutdown().await;
}

#[tokio::test]
async fn ignored_project_settings_are_shown_on_the_settings_page() {
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let project_file = home.dir.path().join("project/.switchboard/settings.json");
    std::fs::create_dir_all(project_file.parent().unwrap()).unwrap();
    std::fs::write(
        &project_file,
        json!({"mcpServers": {"repo": {"httpUrl": "http://127.0.0.1:9/mcp"}}}).to_string(),
    )
    .unwrap();
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    let (status, v) = api.get("/api/settings/mcp-servers").await;
    assert_eq!(status, 200, "{v}");
    assert!(v["servers"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["ignoredProjectSettings"]["servers"], json!(["repo"]));
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("not trusted")),
        "{v}"
    );
    app.shutdown().await;
}
