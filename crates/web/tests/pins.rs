//! Tool pinning in `switchboard serve`: a tool whose definition differs from its pin in
//! the home's `pins.json` is marked in the explorer's server list and refused by the
//! explorer's tool call (409, with the reason and `switchboard mcp pins`) until the
//! explorer's "Accept change" (`POST /api/mcp/servers/{name}/pins/accept`) accepts it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::common;

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

    // The change with its diff, as `switchboard mcp pins demo` shows it.
    let (status, v) = api.get("/api/mcp/servers/demo/pins").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["changes"][0]["name"], "echo", "{v}");
    let diff = v["changes"][0]["diff"].as_str().unwrap();
    assert!(
        diff.contains("--- pinned echo") && diff.contains("+++ now echo"),
        "{diff}"
    );
    assert!(
        diff.contains("-  \"description\": \"An older echo.\""),
        "{diff}"
    );
    let (status, _) = api.get("/api/mcp/servers/nope/pins").await;
    assert_eq!(status, 404);

    // Accepting: a tool with no change waiting is refused, so is an empty request and an
    // unknown server; `echo` is then offered and callable at once, and the pin is the
    // server's definition now.
    let (status, v) = api
        .post("/api/mcp/servers/demo/pins/accept", &json!({"tool": "add"}))
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(v.to_string().contains("no change of `add`"), "{v}");
    let (status, v) = api
        .post("/api/mcp/servers/demo/pins/accept", &json!({}))
        .await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = api
        .post("/api/mcp/servers/nope/pins/accept", &json!({"all": true}))
        .await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = api
        .post(
            "/api/mcp/servers/demo/pins/accept",
            &json!({"tool": "echo"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["accepted"], json!(["echo"]), "{v}");
    let (_, v) = api.get("/api/mcp/servers").await;
    let server = &v["servers"][0];
    assert_eq!(server["withheldTools"], json!([]), "{server}");
    let (_, v) = api.get("/api/mcp/servers/demo/pins").await;
    assert_eq!(v["changes"], json!([]), "{v}");
    assert!(server["tools"].to_string().contains("\"echo\""), "{server}");
    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "demo", "tool": "echo", "args": {"message": "hi"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let pins = std::fs::read_to_string(store.path()).unwrap();
    assert!(!pins.contains("An older echo."), "{pins}");
    app.shutdown().await;
}
