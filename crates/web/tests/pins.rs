//! Tool pinning in `switchboard serve`: a tool whose definition differs from its pin in
//! the home's `pins.json` is marked in the explorer's server list and refused by the
//! explorer's tool call (409, with the reason and `switchboard mcp pins`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

mod common;

use common::{Api, Home, demo_http, start_app, wait_connected};
use serde_json::json;
use switchboard_host::{PinStore, ServerKey};
use switchboard_mcp::Target;
use switchboard_mcp::model::Tool;

#[tokio::test]
async fn a_changed_tool_is_marked_and_cannot_be_called_from_the_explorer() {
    let demo = demo_http().await;
    let home = Home::new(Some(&json!({"mcpServers": {"demo": {"httpUrl": demo}}})));
    // `echo` was pinned with another definition than the demo server's.
    let store = PinStore::in_home(&home.load().home);
    let pinned: Tool = serde_json::from_value(json!({
        "name": "echo",
        "description": "An older echo.",
        "inputSchema": {"type": "object"}
    }))
    .unwrap();
    let key = ServerKey::new(
        "demo",
        &Target::Http {
            url: demo.clone(),
            headers: Vec::new(),
        },
    );
    store.review(&key, &[pinned]).unwrap();

    let app = start_app(&home, None).await;
    wait_connected(&app, &["demo"]).await;
    let api = Api::new(&app);
    let (status, v) = api.get("/api/mcp/servers").await;
    assert_eq!(status, 200);
    let server = &v["servers"][0];
    assert_eq!(server["withheldTools"][0]["name"], "echo", "{server}");
    assert_eq!(server["withheldTools"][0]["why"], "changed since pinned");
    assert!(
        server["withheldTools"][0]["message"]
            .as_str()
            .unwrap()
            .contains("switchboard mcp pins demo")
    );
    let tools: Vec<&str> = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        !tools.contains(&"echo") && tools.contains(&"add"),
        "{tools:?}"
    );

    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "demo", "tool": "echo", "args": {"message": "hi"}}),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(v.to_string().contains("changed since it was pinned"), "{v}");
    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "demo", "tool": "add", "args": {"a": 1, "b": 2}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    app.shutdown().await;
}
