//! Shared fixtures for the web app's tests: the demo server over Streamable HTTP, a
//! small hand-written MCP server with an MCP App and an app-hidden tool (and an
//! OAuth-protected variant that answers 401), and the web app itself on a fresh home.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use switchboard_config::LoadOptions;
use switchboard_web::{RunningServer, ServeOptions};

/// The HTML of the fake server's app: answers the handshake and shows "fake app".
pub const FAKE_APP_HTML: &str = r#"<!doctype html><html><body><p id="t">fake app</p><script>
var n = 1;
window.addEventListener("message", function (e) {
  var m = e.data;
  if (m && m.id === 1 && m.result) parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}}, "*");
  if (m && m.method === "ui/resource-teardown") parent.postMessage({jsonrpc: "2.0", id: m.id, result: {}}, "*");
});
parent.postMessage({jsonrpc: "2.0", id: n++, method: "ui/initialize", params: {appInfo: {name: "fake", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"}}, "*");
</script></body></html>"#;

pub const FAKE_APP_URI: &str = "ui://fake/app.html";

/// An app in GemiHub's older style: no `ui/initialize`; it waits for a `toolResult`
/// message and sends `context/update`.
pub const LEGACY_APP_HTML: &str = r#"<!doctype html><html><body><p id="r">waiting</p><p id="c">no context</p><script>
window.addEventListener("message", function (e) {
  var m = e.data;
  if (!m) return;
  if (m.method === "toolResult") {
    document.getElementById("r").textContent = "legacy got: " + m.params.content[0].text;
    parent.postMessage({jsonrpc: "2.0", id: 5, method: "context/update", params: {note: "hi"}}, "*");
  }
  if (m.id === 5 && m.result) document.getElementById("c").textContent = "context ok: " + m.result.ok;
});
</script></body></html>"#;

pub const LEGACY_APP_URI: &str = "ui://fake/legacy.html";

/// Starts the bundled demo server over Streamable HTTP; returns its `/mcp` URL.
pub async fn demo_http() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = switchboard_demo_server::serve_http(
            listener,
            switchboard_demo_server::DemoOptions::default(),
        )
        .await;
    });
    format!("http://{addr}/mcp")
}

#[derive(Clone)]
struct Fake {
    auth: bool,
    base: String,
}

fn rpc_result(id: &Value, result: Value) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

async fn fake_post(State(fake): State<Fake>, _headers: HeaderMap, body: Bytes) -> Response {
    if fake.auth {
        return (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                format!(
                    "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
                    fake.base
                ),
            )],
            "unauthorized",
        )
            .into_response();
    }
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
    };
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    match method {
        "initialize" => rpc_result(
            &id,
            json!({
                "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-06-18")),
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "fake-app-server", "version": "1.0.0"},
            }),
        ),
        "ping" => rpc_result(&id, json!({})),
        "tools/list" => rpc_result(
            &id,
            json!({"tools": [
                {"name": "visible", "description": "Callable by the model and apps.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                 "_meta": {"ui": {"resourceUri": FAKE_APP_URI, "visibility": ["model", "app"]}}},
                {"name": "hidden", "description": "Model only.", "inputSchema": {"type": "object"},
                 "_meta": {"ui": {"visibility": ["model"]}}},
                {"name": "app_only", "description": "Apps only.", "inputSchema": {"type": "object"},
                 "_meta": {"ui": {"visibility": ["app"]}}},
                {"name": "legacy", "description": "Has a GemiHub-style app.", "inputSchema": {"type": "object"},
                 "_meta": {"ui/resourceUri": LEGACY_APP_URI}},
            ]}),
        ),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("?");
            rpc_result(
                &id,
                json!({"content": [{"type": "text", "text": format!("called {name}")}], "isError": false}),
            )
        }
        "resources/list" => rpc_result(
            &id,
            json!({"resources": [{"uri": FAKE_APP_URI, "name": "fake app", "mimeType": "text/html;profile=mcp-app"}]}),
        ),
        "resources/templates/list" => rpc_result(&id, json!({"resourceTemplates": []})),
        "resources/read"
            if params.get("uri").and_then(Value::as_str) == Some(LEGACY_APP_URI) =>
        {
            rpc_result(
                &id,
                json!({"contents": [{"uri": LEGACY_APP_URI, "mimeType": "text/html;profile=mcp-app", "text": LEGACY_APP_HTML}]}),
            )
        }
        "resources/read" => rpc_result(
            &id,
            json!({"contents": [{
                "uri": FAKE_APP_URI, "mimeType": "text/html;profile=mcp-app", "text": FAKE_APP_HTML,
                "_meta": {"ui": {"csp": {
                    "connectDomains": ["https://api.example.com", "https:", "*", "https://evil.example.com/steal", "https://x.example.com; script-src *"],
                    "resourceDomains": ["data:", "blob:", "https://cdn.example.com"],
                }, "permissions": {"clipboardWrite": {}}}},
            }]}),
        ),
        _ => axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}))
            .into_response(),
    }
}

/// Starts the hand-written MCP server (`auth`: every request gets 401); returns its URL.
pub async fn fake_mcp(auth: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let base = format!("http://{addr}");
    let router = Router::new()
        .route(
            "/mcp",
            post(fake_post)
                .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                .delete(|| async { StatusCode::OK }),
        )
        .with_state(Fake {
            auth,
            base: base.clone(),
        });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("{base}/mcp")
}

/// A fresh home with `settings` (a JSON value) as its user settings file.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new(settings: Option<&Value>) -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        if let Some(s) = settings {
            std::fs::write(
                dir.path().join("home").join("settings.json"),
                serde_json::to_string_pretty(s).unwrap(),
            )
            .unwrap();
        }
        Home { dir }
    }

    pub fn settings_path(&self) -> PathBuf {
        self.dir.path().join("home").join("settings.json")
    }

    pub fn settings(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.settings_path()).unwrap()).unwrap()
    }

    pub fn load(&self) -> LoadOptions {
        LoadOptions {
            home: self.dir.path().join("home"),
            project_dir: self.dir.path().join("project"),
            config_file: None,
        }
    }
}

/// Starts the web app on free ports over `home`.
pub async fn start_app(
    home: &Home,
    gemini: Option<switchboard_model::GeminiOptions>,
) -> RunningServer {
    let mut opts = ServeOptions::new(home.load());
    opts.port = 0;
    opts.model = gemini.map(switchboard_model::ModelConfig::gemini);
    switchboard_web::start(opts).await.unwrap()
}

/// Waits (10 s at most) until every named server is connected.
pub async fn wait_connected(app: &RunningServer, names: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let host = app.state.host();
        let snap = host.snapshot();
        let all = names.iter().all(|n| {
            snap.iter()
                .any(|s| s.name == *n && s.status == switchboard_host::ServerStatus::Connected)
        });
        if all {
            return;
        }
        if std::time::Instant::now() > deadline {
            let states: Vec<String> = snap
                .iter()
                .map(|s| format!("{}={} {:?}", s.name, s.status, s.error))
                .collect();
            panic!("servers not connected in time: {states:?}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A client that speaks to the app's API.
pub struct Api {
    pub base: String,
    pub token: String,
    pub origin: String,
    pub http: reqwest::Client,
}

impl Api {
    pub fn new(app: &RunningServer) -> Api {
        Api {
            base: app.app_origin.clone(),
            token: app.token.clone(),
            origin: app.app_origin.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    /// A request authenticated by the bearer token.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.req(reqwest::Method::GET, path).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .req(method, path)
            .header("Origin", &self.origin)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, body).await
    }
}

/// A `server.json` for the demo server as a registry remote (Streamable HTTP), with a
/// required secret header and a header with a default.
pub fn demo_server_json(demo_url: &str) -> Value {
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-10-17/server.schema.json",
        "name": "io.github.switchboard/demo",
        "title": "Switchboard demo",
        "description": "The bundled demo server over Streamable HTTP",
        "version": "1.0.0",
        "remotes": [{
            "type": "streamable-http",
            "url": demo_url,
            "headers": [
                {"name": "X-Demo-Key", "description": "Demo API key", "isRequired": true, "isSecret": true},
                {"name": "X-Region", "description": "Region", "default": "eu-west-1", "choices": ["eu-west-1", "us-east-1"]}
            ]
        }]
    })
}

/// A local registry over the documented examples plus the demo server as a remote.
pub fn registry_with_demo(demo_url: &str) -> switchboard_testkit::RegistryServer {
    let mut servers = switchboard_testkit::default_registry_servers();
    servers.push((demo_server_json(demo_url), "active".into()));
    switchboard_testkit::RegistryServer::with_servers(servers)
}
