//! The web app's HTTP API against real servers: access control (token, cookie,
//! origin, malformed JSON), settings CRUD, `mcp-test`, the explorer's calls, MCP App
//! sessions bound to their server, elicitation and chat over SSE.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use crate::common;

use common::{Api, FAKE_APP_URI, Home, demo_http, fake_mcp, start_app, wait_connected};
use reqwest::Method;
use serde_json::{Value, json};

async fn app_with_demo_and_fake() -> (switchboard_web::RunningServer, Home, Api) {
    let demo = demo_http().await;
    let fake = fake_mcp(false).await;
    let home = Home::new(Some(&json!({
        "theme": "dark",
        "mcpServers": {
            "demo": {"httpUrl": demo, "trust": true},
            "fake": {"httpUrl": fake},
        },
        "zzz": {"keep": [1, 2]},
    })));
    let app = start_app(&home, None).await;
    wait_connected(&app, &["demo", "fake"]).await;
    let api = Api::new(&app);
    (app, home, api)
}

#[tokio::test]
async fn requests_without_the_token_get_401_with_a_clear_body() {
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    let r = api
        .http
        .get(format!("{}/api/mcp/servers", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized");
    assert!(
        body["message"].as_str().unwrap().contains("?token="),
        "{body}"
    );

    let r = api
        .http
        .get(format!("{}/api/mcp/servers", api.base))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // A cookie from another port's app is not this one's.
    let r = api
        .http
        .get(format!("{}/api/mcp/servers", api.base))
        .header("Cookie", format!("switchboard_token_1={}", app.token))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    let (status, _) = api.get("/api/mcp/servers").await;
    assert_eq!(status, 200);
    app.shutdown().await;
}

#[tokio::test]
async fn the_printed_link_sets_an_httponly_samesite_cookie_named_by_port() {
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    assert!(app.url.starts_with("http://127.0.0.1:"), "{}", app.url);
    assert!(app.url.contains("/?token="), "{}", app.url);

    let r = api.http.get(&app.url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let cookie = r
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let name = format!("switchboard_token_{}=", app.addr.port());
    assert!(cookie.starts_with(&name), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let csp = r
        .headers()
        .get("content-security-policy")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains(&format!("frame-src {}", app.proxy_origin)),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");

    // The cookie alone opens the API.
    let pair = cookie.split(';').next().unwrap().to_string();
    let r = api
        .http
        .get(format!("{}/api/config", api.base))
        .header("Cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Pages without the cookie explain how to get in.
    let r = api
        .http
        .get(format!("{}/explorer", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("switchboard serve"));
    let r = api
        .http
        .get(format!("{}/?token=nope", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("set-cookie").is_none());

    // The proxy's host name differs from the app's, so the cookie never goes there.
    assert!(
        app.proxy_origin.starts_with("http://localhost:"),
        "{}",
        app.proxy_origin
    );
    app.shutdown().await;
}

#[tokio::test]
async fn state_changing_requests_need_the_apps_own_origin() {
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    let cookie = format!("switchboard_token_{}={}", app.addr.port(), app.token);
    let url = format!("{}/api/settings/mcp-test", api.base);
    let body = json!({"url": "http://169.254.169.254/mcp"});
    for (origin, want) in [
        (Some("http://evil.example"), 403),
        (Some("null"), 403),
        (Some("http://localhost:1"), 403),
        (None, 403),
        (Some(app.app_origin.as_str()), 400),
    ] {
        let mut r = api.http.post(&url).header("Cookie", &cookie).json(&body);
        if let Some(o) = origin {
            r = r.header("Origin", o);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), want, "origin {origin:?}");
        let v: Value = r.json().await.unwrap();
        if want == 403 {
            assert!(
                v["error"] == "bad_origin" || v["error"] == "missing_origin",
                "{v}"
            );
            assert!(!v["message"].as_str().unwrap().is_empty());
        }
    }
    // Scripts with the bearer token and no Origin are fine; a foreign Origin is not.
    let r = api
        .req(Method::POST, "/api/settings/mcp-test")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = api
        .req(Method::POST, "/api/settings/mcp-test")
        .header("Origin", "http://evil.example")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // A foreign Host header (DNS rebinding) is refused.
    let r = api
        .http
        .get(format!("{}/api/config", api.base))
        .bearer_auth(&app.token)
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    app.shutdown().await;
}

#[tokio::test]
async fn malformed_json_is_400_with_the_parse_error() {
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    for path in [
        "/api/mcp/tool-call",
        "/api/settings/mcp-test",
        "/api/settings/mcp-servers",
    ] {
        let r = api
            .req(Method::POST, path)
            .header("Content-Type", "application/json")
            .body("{\"server\": ")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "malformed_json", "{path}: {v}");
        assert!(v["message"].as_str().unwrap().contains("line 1"), "{v}");
    }
    let (status, v) = api.post("/api/mcp/tool-call", &json!({"server": 3})).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"], "invalid_request", "{v}");
    let (status, v) = api.get("/api/nope").await;
    assert_eq!(status, 404, "{v}");
    app.shutdown().await;
}

#[tokio::test]
async fn settings_crud_keeps_unknown_fields_and_masks_secrets() {
    let (app, home, api) = app_with_demo_and_fake().await;
    let demo_url = home.settings()["mcpServers"]["demo"]["httpUrl"].clone();

    // Add.
    let (status, v) = api
        .post(
            "/api/settings/mcp-servers",
            &json!({"name": "extra", "transport": "http", "url": demo_url,
                    "headers": {"Authorization": "Bearer s3cret-value", "X-Team": "blue"},
                    "oauth": {"clientId": "cid", "clientSecret": "client-s3cret"},
                    "description": "added from the browser"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let s = home.settings();
    assert_eq!(s["theme"], "dark");
    assert_eq!(s["zzz"], json!({"keep": [1, 2]}));
    assert_eq!(
        s["mcpServers"]["extra"]["headers"]["Authorization"],
        "Bearer s3cret-value"
    );

    // A duplicate name is refused.
    let (status, _) = api
        .post(
            "/api/settings/mcp-servers",
            &json!({"name": "extra", "url": demo_url}),
        )
        .await;
    assert_eq!(status, 409);

    // List: secrets masked.
    let (status, v) = api.get("/api/settings/mcp-servers").await;
    assert_eq!(status, 200);
    let text = v.to_string();
    assert!(!text.contains("s3cret"), "{text}");
    let extra = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "extra")
        .unwrap()
        .clone();
    assert_eq!(
        extra["headers"]["Authorization"],
        switchboard_web::KEEP_UNCHANGED
    );
    assert_eq!(
        extra["oauth"]["clientSecret"],
        switchboard_web::KEEP_UNCHANGED
    );
    assert_eq!(extra["transport"], "http");

    // Edit with the masked values sent back: kept; an unknown field added by hand is kept.
    let mut raw = home.settings();
    raw["mcpServers"]["extra"]["myExtra"] = json!({"x": 1});
    std::fs::write(
        home.settings_path(),
        serde_json::to_string_pretty(&raw).unwrap(),
    )
    .unwrap();
    let (status, v) = api
        .send(
            Method::PUT,
            "/api/settings/mcp-servers/extra",
            &json!({"name": "extra", "transport": "http", "url": demo_url,
                    "headers": extra["headers"], "oauth": extra["oauth"], "timeout": 5000}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let s = home.settings();
    let e = &s["mcpServers"]["extra"];
    assert_eq!(e["headers"]["Authorization"], "Bearer s3cret-value");
    assert_eq!(e["headers"]["X-Team"], "blue");
    assert_eq!(e["oauth"]["clientSecret"], "client-s3cret");
    assert_eq!(e["myExtra"], json!({"x": 1}));
    assert_eq!(e["timeout"], 5000);
    assert!(e.get("description").is_none());
    assert_eq!(s["zzz"], json!({"keep": [1, 2]}));

    // Disable, enable.
    let (status, _) = api
        .post(
            "/api/settings/mcp-servers/extra/enabled",
            &json!({"enabled": false}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(home.settings()["mcpServers"]["extra"]["disabled"], true);
    let (_, servers) = api.get("/api/mcp/servers").await;
    let st = servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "extra")
        .unwrap()["status"]
        .clone();
    assert_eq!(st, "disabled");
    let (status, _) = api
        .post(
            "/api/settings/mcp-servers/extra/enabled",
            &json!({"enabled": true}),
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        home.settings()["mcpServers"]["extra"]
            .get("disabled")
            .is_none()
    );

    // Rename, then delete.
    let (status, v) = api
        .send(
            Method::PUT,
            "/api/settings/mcp-servers/extra",
            &json!({"name": "renamed", "transport": "sse", "url": "http://127.0.0.1:9/sse"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let s = home.settings();
    assert!(s["mcpServers"].get("extra").is_none());
    assert_eq!(s["mcpServers"]["renamed"]["type"], "sse");
    assert_eq!(s["mcpServers"]["renamed"]["myExtra"], json!({"x": 1}));
    let (status, _) = api
        .send(
            Method::DELETE,
            "/api/settings/mcp-servers/renamed",
            &json!({}),
        )
        .await;
    assert_eq!(status, 200);
    assert!(home.settings()["mcpServers"].get("renamed").is_none());
    let (status, _) = api
        .send(
            Method::DELETE,
            "/api/settings/mcp-servers/renamed",
            &json!({}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(home.settings()["theme"], "dark");

    // Bad input is a 400 that names the field.
    let (status, v) = api
        .post(
            "/api/settings/mcp-servers",
            &json!({"name": "x", "url": "ftp://nope"}),
        )
        .await;
    assert_eq!(status, 400);
    assert!(v["message"].as_str().unwrap().contains("ftp://nope"), "{v}");
    let (status, v) = api
        .post(
            "/api/settings/mcp-servers",
            &json!({"name": "x", "url": "http://a", "headers": "{not json"}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    app.shutdown().await;
}

#[tokio::test]
async fn mcp_test_success_401_failure_and_ssrf() {
    let demo = demo_http().await;
    let locked = fake_mcp(true).await;
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);

    let (status, v) = api
        .post("/api/settings/mcp-test", &json!({"url": demo}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["success"], true);
    assert_eq!(v["message"], "Connected. Found 7 tool(s).");
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"clock") && names.contains(&"echo"),
        "{names:?}"
    );

    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"url": locked, "headers": {"Authorization": "Bearer not-a-valid-token"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["success"], false);
    assert_eq!(v["needsOAuth"], true);
    assert_eq!(v["message"], "Server requires OAuth authentication.");
    assert!(v.get("tokens").is_none());
    assert!(!v.to_string().contains("not-a-valid-token"));

    // Nothing listens on port 9 (discard) on loopback here.
    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"url": "http://127.0.0.1:9/mcp"}),
        )
        .await;
    assert_eq!(status, 500, "{v}");
    assert_eq!(v["success"], false);
    assert!(!v["message"].as_str().unwrap().is_empty());
    assert!(v["error"].is_string());

    for url in [
        "http://169.254.169.254/latest/meta-data",
        "http://metadata.google.internal/mcp",
        "file:///etc/passwd",
    ] {
        let (status, v) = api
            .post("/api/settings/mcp-test", &json!({"url": url}))
            .await;
        assert_eq!(status, 400, "{url}: {v}");
        assert_eq!(v["success"], false);
        assert_eq!(v["error"], "SSRF blocked", "{url}: {v}");
        assert!(v["message"].as_str().unwrap().contains("blocked"), "{v}");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn mcp_test_uses_saved_headers_for_masked_values() {
    let demo = demo_http().await;
    let home = Home::new(Some(&json!({"mcpServers": {
        "d": {"httpUrl": demo, "headers": {"X-Secret": "abc"}}
    }})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"name": "d", "url": demo, "headers": {"X-Secret": switchboard_web::KEEP_UNCHANGED}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["success"], true);
    // Without a saved value the marker is an error, not a literal header.
    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"url": demo, "headers": {"X-Secret": switchboard_web::KEEP_UNCHANGED}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    app.shutdown().await;
}

#[tokio::test]
async fn explorer_calls_tools_reads_resources_and_gets_prompts() {
    let (app, _home, api) = app_with_demo_and_fake().await;
    let (status, v) = api.get("/api/mcp/servers").await;
    assert_eq!(status, 200);
    let demo = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "demo")
        .unwrap()
        .clone();
    assert_eq!(demo["status"], "connected");
    let clock = demo["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "clock")
        .unwrap()
        .clone();
    assert_eq!(
        clock["ui"]["resourceUri"],
        "ui://switchboard-demo/clock.html"
    );

    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "demo", "tool": "echo", "args": {"message": "hi"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["content"][0]["text"], "Echo: hi");
    assert_eq!(v["ui"], Value::Null);

    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "demo", "tool": "clock"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(v["result"]["structuredContent"]["time"].is_string(), "{v}");
    assert_eq!(v["ui"]["resourceUri"], "ui://switchboard-demo/clock.html");

    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "demo", "tool": "fail", "args": {"message": "boom"}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["isError"], true);

    let (status, v) = api
        .post(
            "/api/mcp/resource-read",
            &json!({"server": "demo", "uri": "demo://readme"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("demo server")
    );

    let (status, v) = api
        .post(
            "/api/mcp/prompt-get",
            &json!({"server": "demo", "name": "greet", "args": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(v["result"]["messages"].to_string().contains("Ada"), "{v}");

    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "nope", "tool": "echo"}),
        )
        .await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"server": "demo", "tool": "echo", "args": [1]}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    app.shutdown().await;
}

#[tokio::test]
async fn an_app_may_reach_only_its_own_server_and_app_visible_tools() {
    let (app, _home, api) = app_with_demo_and_fake().await;
    let (status, opened) = api
        .post(
            "/api/apps",
            &json!({"server": "fake", "resourceUri": FAKE_APP_URI, "tool": "visible"}),
        )
        .await;
    assert_eq!(status, 200, "{opened}");
    let app_id = opened["appId"].as_str().unwrap().to_string();
    assert!(opened["html"].as_str().unwrap().contains("fake app"));
    assert_eq!(opened["allow"], "clipboard-write");
    let csp = opened["cspHeader"].as_str().unwrap();
    // Declared origins are kept; bare schemes, `*`, paths and injected directives
    // are dropped.
    assert!(
        csp.contains("connect-src 'self' https://api.example.com;"),
        "{csp}"
    );
    assert!(
        csp.contains("img-src 'self' data: https://cdn.example.com;"),
        "{csp}"
    );
    for dropped in [
        "https:;",
        " * ",
        "evil",
        "x.example.com",
        "blob:",
        "script-src *",
    ] {
        assert!(!csp.contains(dropped), "{dropped} in {csp}");
    }
    assert!(
        csp.contains(&format!("frame-ancestors {}", app.app_origin)),
        "{csp}"
    );
    assert!(
        opened["proxyUrl"]
            .as_str()
            .unwrap()
            .starts_with(&app.proxy_origin)
    );

    // Its own tools with "app" in their visibility: allowed.
    for tool in ["visible", "app_only"] {
        let (status, v) = api
            .post(
                "/api/mcp/tool-call",
                &json!({"appId": app_id, "tool": tool, "args": {}}),
            )
            .await;
        assert_eq!(status, 200, "{tool}: {v}");
        assert_eq!(v["result"]["content"][0]["text"], format!("called {tool}"));
    }
    // A tool hidden from apps: refused.
    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"appId": app_id, "tool": "hidden"}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("not visible to apps"),
        "{v}"
    );
    // Another server: refused, whether named or reached through a tool it lacks.
    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"appId": app_id, "server": "demo", "tool": "echo", "args": {"message": "x"}}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("only reach the server"),
        "{v}"
    );
    let (status, v) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"appId": app_id, "tool": "echo", "args": {"message": "x"}}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    let (status, v) = api
        .post(
            "/api/mcp/resource-read",
            &json!({"appId": app_id, "server": "demo", "uri": "demo://readme"}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    let (status, v) = api
        .post(
            "/api/mcp/resource-read",
            &json!({"appId": app_id, "uri": FAKE_APP_URI}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // An unknown app session: refused.
    let (status, _) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"appId": "forged", "tool": "visible"}),
        )
        .await;
    assert_eq!(status, 403);

    // The sandbox proxy serves the session's CSP as a header, on its own host name only.
    let proxy_url = opened["proxyUrl"].as_str().unwrap();
    let r = api.http.get(proxy_url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()
            .get("content-security-policy")
            .unwrap()
            .to_str()
            .unwrap(),
        csp
    );
    assert!(r.headers().get("set-cookie").is_none());
    let body = r.text().await.unwrap();
    assert!(
        body.contains(&format!("\"{}\"", app.app_origin)),
        "the proxy knows the host origin"
    );
    assert!(!body.contains(&app.token));
    let r = api
        .http
        .get(proxy_url.replace("localhost", "127.0.0.1"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        403,
        "the proxy answers only under its own host name"
    );
    let r = api
        .http
        .get(format!("{}/sandbox/forged", app.proxy_origin))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // The demo clock's resource has no _meta: the default CSP applies.
    let (status, opened) = api
        .post("/api/apps", &json!({"server": "demo", "resourceUri": "ui://switchboard-demo/clock.html", "tool": "clock"}))
        .await;
    assert_eq!(status, 200, "{opened}");
    assert!(
        opened["cspHeader"]
            .as_str()
            .unwrap()
            .starts_with(switchboard_web::DEFAULT_CSP)
    );
    // Closing the app ends its session.
    let (status, _) = api
        .send(Method::DELETE, &format!("/api/apps/{app_id}"), &json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = api
        .post(
            "/api/mcp/tool-call",
            &json!({"appId": app_id, "tool": "visible"}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = api
        .post(
            "/api/apps",
            &json!({"server": "demo", "resourceUri": "demo://readme"}),
        )
        .await;
    assert_eq!(status, 400);
    app.shutdown().await;
}

/// Reads a text/event-stream body, returning each `data:` JSON as it arrives.
struct SseReader {
    resp: reqwest::Response,
    buf: String,
}

impl SseReader {
    fn new(resp: reqwest::Response) -> Self {
        Self {
            resp,
            buf: String::new(),
        }
    }

    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..i + 2).collect();
                let data: Vec<&str> = raw
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return serde_json::from_str(&data.join("\n")).ok();
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), self.resp.chunk())
                .await
                .expect("an SSE event within 30 s")
                .ok()??;
            self.buf
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }
}

#[tokio::test]
async fn chat_streams_tool_calls_with_confirmation_and_the_app_link() {
    use switchboard_model_fakes::gemini::{FakeGemini, FakeTurn, declared_function_names};
    let fake = FakeGemini::start(vec![
        FakeTurn::dynamic(|req| {
            let name = declared_function_names(req)
                .into_iter()
                .find(|n| n.ends_with("_clock"))
                .unwrap_or_else(|| "missing_clock".into());
            FakeTurn::call(name, json!({}))
        }),
        FakeTurn::text("The clock app shows the time."),
    ])
    .await;
    let demo = demo_http().await;
    let home = Home::new(Some(&json!({"mcpServers": {"demo": {"httpUrl": demo}}})));
    let app = start_app(&home, Some(fake.options())).await;
    wait_connected(&app, &["demo"]).await;
    let api = Api::new(&app);
    let (status, v) = api.get("/api/chat/status").await;
    assert_eq!(status, 200);
    assert_eq!(v["available"], true);

    let resp = api
        .req(Method::POST, "/api/chat/send")
        .header("Origin", &api.origin)
        .json(&json!({"message": "What time is it?", "servers": {"demo": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let mut session = String::new();
    let mut seen = Vec::new();
    let mut end = Value::Null;
    let mut text = String::new();
    while let Some(ev) = sse.next().await {
        let ty = ev["type"].as_str().unwrap_or("").to_string();
        seen.push(ty.clone());
        match ty.as_str() {
            "session" => session = ev["id"].as_str().unwrap().to_string(),
            "confirm" => {
                assert_eq!(ev["server"], "demo");
                assert_eq!(ev["tool"], "clock");
                let (status, v) = api
                    .post(
                        "/api/chat/confirm",
                        &json!({"sessionId": session, "id": ev["id"], "decision": "once"}),
                    )
                    .await;
                assert_eq!(status, 200, "{v}");
            }
            "tool-end" => end = ev.clone(),
            "text" => text.push_str(ev["text"].as_str().unwrap()),
            "done" | "error" => break,
            _ => {}
        }
    }
    assert!(seen.contains(&"confirm".to_string()), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("done"), "{seen:?}");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(end["ui"]["resourceUri"], "ui://switchboard-demo/clock.html");
    assert!(
        end["result"]["structuredContent"]["time"].is_string(),
        "{end}"
    );
    assert_eq!(text, "The clock app shows the time.");

    // An app's model context goes into the next turn.
    let (status, _) = api
        .post(
            "/api/chat/context",
            &json!({"sessionId": session, "content": [{"type": "text", "text": "clock says noon"}]}),
        )
        .await;
    assert_eq!(status, 200);
    fake.push(FakeTurn::text("ok"));
    let resp = api
        .req(Method::POST, "/api/chat/send")
        .header("Origin", &api.origin)
        .json(&json!({"sessionId": session, "message": "and now?"}))
        .send()
        .await
        .unwrap();
    let mut sse = SseReader::new(resp);
    while let Some(ev) = sse.next().await {
        if ev["type"] == "done" || ev["type"] == "error" {
            assert_eq!(ev["type"], "done", "{ev}");
            break;
        }
    }
    let last = fake.requests().last().cloned().unwrap();
    assert!(last.to_string().contains("clock says noon"), "{last}");

    // Local help does not reach the model.
    let before = fake.requests().len();
    let resp = api
        .req(Method::POST, "/api/chat/send")
        .header("Origin", &api.origin)
        .json(&json!({"sessionId": session, "message": "/help"}))
        .send()
        .await
        .unwrap();
    let mut sse = SseReader::new(resp);
    let mut reply = String::new();
    while let Some(ev) = sse.next().await {
        if ev["type"] == "reply" {
            reply = ev["text"].as_str().unwrap().to_string();
        }
        if ev["type"] == "done" {
            break;
        }
    }
    assert!(reply.contains("/greet"), "{reply}");
    assert_eq!(fake.requests().len(), before);
    app.shutdown().await;
}

#[tokio::test]
async fn chat_without_a_key_says_how_to_set_it() {
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let app = start_app(&home, None).await;
    let api = Api::new(&app);
    let (status, v) = api.get("/api/chat/status").await;
    assert_eq!(status, 200);
    assert_eq!(v["available"], false);
    assert!(
        v["message"].as_str().unwrap().contains("GEMINI_API_KEY"),
        "{v}"
    );
    let (status, v) = api.post("/api/chat/send", &json!({"message": "hi"})).await;
    assert_eq!(status, 503, "{v}");
    app.shutdown().await;
}

/// `provider: "openai"` in the settings: the web chat builds its model through the same
/// factory as the CLI and talks to an OpenAI-compatible server (the fake), tools and
/// all, with no Gemini key anywhere.
#[tokio::test]
async fn chat_uses_an_openai_compatible_model_when_the_settings_say_so() {
    use switchboard_model_fakes::gemini::FakeTurn;
    use switchboard_model_fakes::openai::{FakeOpenAi, declared_tool_names, last_tool_messages};
    let fake = FakeOpenAi::start(vec![
        FakeTurn::call("mcp_demo_echo", json!({"message": "via openai"})),
        FakeTurn::text("The echo came back."),
    ])
    .await;
    let demo = demo_http().await;
    let home = Home::new(Some(&json!({
        "provider": "openai",
        "model": "local-model",
        "mcpServers": {"demo": {"httpUrl": demo, "trust": true}}
    })));
    let mut opts = switchboard_web::ServeOptions::new(home.load());
    opts.port = 0;
    // What `switchboard serve` passes: both providers from the environment, Gemini
    // without a key; the settings choose.
    opts.model = Some(switchboard_model::ModelConfig {
        openai: fake.options(),
        ..Default::default()
    });
    let app = switchboard_web::start(opts).await.unwrap();
    wait_connected(&app, &["demo"]).await;
    let api = Api::new(&app);
    let (status, v) = api.get("/api/chat/status").await;
    assert_eq!(status, 200);
    assert_eq!(v["available"], true, "{v}");
    assert_eq!(v["model"], "local-model");
    assert_eq!(v["provider"], "openai");

    let resp = api
        .req(Method::POST, "/api/chat/send")
        .header("Origin", &api.origin)
        .json(&json!({"message": "echo something", "servers": {"demo": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let mut text = String::new();
    let mut end = Value::Null;
    let mut last = Value::Null;
    while let Some(ev) = sse.next().await {
        match ev["type"].as_str().unwrap_or("") {
            "text" => text.push_str(ev["text"].as_str().unwrap()),
            "tool-end" => end = ev.clone(),
            "done" | "error" => {
                last = ev;
                break;
            }
            _ => {}
        }
    }
    assert_eq!(last["type"], "done", "{last}");
    assert_eq!(text, "The echo came back.");
    assert_eq!(end["isError"], false, "{end}");
    let rec = fake.recorded();
    assert_eq!(rec.len(), 2);
    assert!(rec.iter().all(|r| r.model == "local-model"));
    assert!(declared_tool_names(&rec[0].body).contains(&"mcp_demo_echo".to_string()));
    let tool = last_tool_messages(&rec[1].body);
    assert!(tool[0].to_string().contains("via openai"), "{tool:?}");

    // Without a model the page says what the OpenAI-compatible provider needs, and
    // does not ask for a Gemini key.
    std::fs::write(
        home.settings_path(),
        json!({"provider": "openai", "mcpServers": {}}).to_string(),
    )
    .unwrap();
    let (_, v) = api.get("/api/chat/status").await;
    assert_eq!(v["available"], false, "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("OpenAI-compatible"), "{message}");
    assert!(!message.contains("GEMINI_API_KEY"), "{message}");
    app.shutdown().await;
}

#[tokio::test]
async fn elicitation_requests_reach_the_browser_and_the_answer_reaches_the_server() {
    let (program, args) = switchboard_testkit::everything_stdio_command();
    let home = Home::new(Some(&json!({"mcpServers": {
        "everything": {"command": program, "args": args, "trust": true}
    }})));
    let app = start_app(&home, None).await;
    wait_connected(&app, &["everything"]).await;
    let api = Api::new(&app);
    let events = api.req(Method::GET, "/api/events").send().await.unwrap();
    assert_eq!(events.status(), 200);
    let mut events = SseReader::new(events);
    let first = events.next().await.unwrap();
    assert_eq!(first["type"], "hello");

    let call = {
        let api_base = api.base.clone();
        let token = api.token.clone();
        let origin = api.origin.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{api_base}/api/mcp/tool-call"))
                .bearer_auth(token)
                .header("Origin", origin)
                .json(&json!({"server": "everything", "tool": "trigger-elicitation-request", "args": {}}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let request = loop {
        let ev = events.next().await.expect("an elicitation event");
        if ev["type"] == "elicitation" {
            break ev;
        }
    };
    assert_eq!(request["server"], "everything");
    assert!(
        request["request"]["requestedSchema"]["properties"]["name"].is_object(),
        "{request}"
    );
    let id = request["id"].as_str().unwrap();
    let (status, v) = api
        .post(
            &format!("/api/elicitation/{id}"),
            &json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let result = tokio::time::timeout(std::time::Duration::from_secs(30), call)
        .await
        .unwrap()
        .unwrap();
    let text = result["result"].to_string();
    assert!(text.contains("Ada Lovelace"), "{text}");
    // Answering twice is a 404.
    let (status, _) = api
        .post(
            &format!("/api/elicitation/{id}"),
            &json!({"action": "decline"}),
        )
        .await;
    assert_eq!(status, 404);
    app.shutdown().await;
}

#[tokio::test]
async fn served_beyond_loopback_stdio_servers_cannot_be_added_or_edited() {
    use switchboard_net::UrlPolicy;
    use switchboard_web::{AppConfig, AppState};
    let home = Home::new(Some(&json!({"mcpServers": {"local": {"command": "true"}}})));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = AppConfig {
        token: "t0ken".into(),
        port: addr.port(),
        app_origin: format!("http://{addr}"),
        origin_from_host: false,
        proxy_origin: "http://127.0.0.1:1".into(),
        proxy_port: 1,
        remote: true,
        allowed_hosts: Vec::new(),
        load: home.load(),
        url_policy: UrlPolicy::Strict,
        default_servers: Vec::new(),
        model: None,
        transport_cache: None,
        oauth: None,
    };
    let state = AppState::new(cfg).unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, switchboard_web::app(state)).await;
    });
    let api = Api {
        base: format!("http://{addr}"),
        token: "t0ken".into(),
        origin: format!("http://{addr}"),
        http: reqwest::Client::new(),
    };
    let (status, v) = api
        .post(
            "/api/settings/mcp-servers",
            &json!({"name": "x", "transport": "stdio", "command": "rm", "args": ["-rf", "/"]}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(v["message"].as_str().unwrap().contains("stdio"), "{v}");
    let (status, _) = api
        .send(
            Method::PUT,
            "/api/settings/mcp-servers/local",
            &json!({"name": "local", "transport": "stdio", "command": "sh"}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = api
        .post(
            "/api/settings/mcp-servers/local/enabled",
            &json!({"enabled": true}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"command": "sh", "args": ["-c", "id"]}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    let (_, list) = api.get("/api/settings/mcp-servers").await;
    assert_eq!(list["servers"][0]["editable"], false);
    assert_eq!(list["remote"], true);
    assert_eq!(list["urlPolicy"], "strict");
    // Remote URLs are fine to add; under strict, a loopback URL fails the test with 400.
    let (status, v) = api
        .post(
            "/api/settings/mcp-servers",
            &json!({"name": "remote", "url": "https://mcp.example.com/mcp"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = api
        .post(
            "/api/settings/mcp-test",
            &json!({"url": "http://127.0.0.1:1/mcp"}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "SSRF blocked");
}

/// OAuth hooks that stand in for `switchboard-auth`: one login waiting under the
/// state `st-1` (its "verifier" never leaves here), completed once.
struct FakeOAuth {
    redirect: std::sync::Mutex<Option<String>>,
    used: std::sync::Mutex<bool>,
}

impl switchboard_web::OAuthHooks for FakeOAuth {
    fn token_source(
        &self,
        _settings: &switchboard_config::Settings,
        _guard: &switchboard_net::GuardedClient,
    ) -> Option<std::sync::Arc<dyn switchboard_mcp::TokenSource>> {
        None
    }

    fn login(
        &self,
        _settings: &switchboard_config::Settings,
        _guard: &switchboard_net::GuardedClient,
        _server: &str,
        _url: &str,
        _open: switchboard_web::OpenUrlFn,
    ) -> futures::future::BoxFuture<'static, Result<String, String>> {
        Box::pin(async { Err("loopback login not expected".to_string()) })
    }

    fn begin_login(
        &self,
        _settings: &switchboard_config::Settings,
        _guard: &switchboard_net::GuardedClient,
        _server: &str,
        _url: &str,
        redirect_uri: &str,
    ) -> futures::future::BoxFuture<'static, Result<Option<switchboard_web::BeganLogin>, String>>
    {
        *self.redirect.lock().unwrap() = Some(redirect_uri.to_string());
        let url = format!("http://127.0.0.1:9/authorize?state=st-1&redirect_uri={redirect_uri}");
        Box::pin(async move {
            Ok(Some(switchboard_web::BeganLogin {
                authorization_url: url,
                state: "st-1".into(),
            }))
        })
    }

    fn complete_login(
        &self,
        _settings: &switchboard_config::Settings,
        _guard: &switchboard_net::GuardedClient,
        state: &str,
        code: &str,
        _iss: Option<&str>,
    ) -> futures::future::BoxFuture<
        'static,
        Result<switchboard_web::CompletedLogin, switchboard_web::CompleteError>,
    > {
        let mut used = self.used.lock().unwrap();
        let out = if state == "st-1" && code == "good-code" && !*used {
            *used = true;
            Ok(switchboard_web::CompletedLogin {
                server: "secure".into(),
                expires_at: Some(4_102_444_800_000),
            })
        } else {
            Err(switchboard_web::CompleteError::UnknownState(
                "no login is waiting for this `state`: it is unknown, expired or already used"
                    .into(),
            ))
        };
        Box::pin(async move { out })
    }
}

#[tokio::test]
async fn oauth_callback_flow_checks_state_and_never_returns_tokens() {
    let secure = fake_mcp(true).await;
    let home = Home::new(Some(
        &json!({"mcpServers": {"secure": {"httpUrl": secure}}}),
    ));
    let hooks = std::sync::Arc::new(FakeOAuth {
        redirect: std::sync::Mutex::new(None),
        used: std::sync::Mutex::new(false),
    });
    let mut opts = switchboard_web::ServeOptions::new(home.load());
    opts.port = 0;
    opts.oauth = Some(switchboard_web::OAuthHandle(hooks.clone()));
    let app = switchboard_web::start(opts).await.unwrap();
    let api = Api::new(&app);

    // The login comes back to the app's own callback page.
    let (status, v) = api
        .post("/api/settings/mcp-login", &json!({"name": "secure"}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["flow"], "callback");
    assert_eq!(v["state"], "st-1");
    let redirect = hooks.redirect.lock().unwrap().clone().unwrap();
    assert_eq!(
        redirect,
        format!("{}/auth/mcp-oauth-callback", app.app_origin)
    );

    // The callback page works without the cookie (a cross-site redirect carries none)
    // and holds nothing secret.
    let r = api
        .http
        .get(format!("{redirect}?code=good-code&state=st-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let html = r.text().await.unwrap();
    assert!(html.contains("/assets/oauth-callback.js"), "{html}");
    assert!(!html.contains(&app.token));
    let js = api
        .http
        .get(format!("{}/assets/oauth-callback.js", app.app_origin))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(js.contains("mcp-oauth-callback") && js.contains("mcp-oauth-return=1"));

    // The token endpoint needs the token (or cookie) and the app's Origin.
    let body = json!({"state": "st-1", "code": "good-code"});
    let r = api
        .http
        .post(format!("{}/api/settings/mcp-oauth-token", api.base))
        .header("Origin", &app.app_origin)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let cookie = format!("switchboard_token_{}={}", app.addr.port(), app.token);
    let r = api
        .http
        .post(format!("{}/api/settings/mcp-oauth-token", api.base))
        .header("Cookie", &cookie)
        .header("Origin", "http://evil.example")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Missing fields and an unknown state: 400 with a clear body.
    let (status, v) = api
        .post("/api/settings/mcp-oauth-token", &json!({"state": "st-1"}))
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["message"].as_str().unwrap().contains("`code`"), "{v}");
    let (status, v) = api
        .post(
            "/api/settings/mcp-oauth-token",
            &json!({"state": "forged", "code": "good-code"}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "unknown_state");
    assert!(
        v["message"].as_str().unwrap().contains("already used"),
        "{v}"
    );

    // The right one: {ok, expiresAt}, no token in it.
    let r = api
        .req(Method::POST, "/api/settings/mcp-oauth-token")
        .header("Origin", &app.app_origin)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["expiresAt"], 4_102_444_800_000u64);
    let lower = text.to_lowercase();
    assert!(
        !lower.contains("token\"") && !lower.contains("access") && !lower.contains("verifier"),
        "{text}"
    );

    // Used once: a replay is refused.
    let (status, v) = api.post("/api/settings/mcp-oauth-token", &body).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "unknown_state");
    app.shutdown().await;
}
