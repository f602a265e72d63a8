//! A local MCP Registry on 127.0.0.1 ([`RegistryServer`]) implementing the documented
//! `/v0.1` endpoints (`/servers` with `search`, `limit` and cursor pagination;
//! `/servers/{name}/versions/latest` and `/versions/{version}`; 404 JSON problem
//! bodies) over `server.json` examples from the registry's docs
//! (`fixtures/registry/`), plus hostile registries under their own prefixes:
//! `/huge` (a 9 MiB answer), `/endless` (a body that never ends), `/malformed` (not
//! JSON) and `/slow` (a body that trickles one byte a second); MCPB bundles given by a
//! test are served at `/bundles/FILE`. Stopped on drop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

/// The fake registry's page size cap (the real one caps `limit` at 100): small, so that
/// a search spans pages.
pub const REGISTRY_PAGE: usize = 2;

/// The `server.json` examples, by file name.
const FIXTURES: &[(&str, &str)] = &[
    (
        "brave-search.json",
        include_str!("../fixtures/registry/brave-search.json"),
    ),
    (
        "weather-mcp.json",
        include_str!("../fixtures/registry/weather-mcp.json"),
    ),
    (
        "filesystem.json",
        include_str!("../fixtures/registry/filesystem.json"),
    ),
    (
        "database-manager.json",
        include_str!("../fixtures/registry/database-manager.json"),
    ),
    (
        "mcp-fs-remote.json",
        include_str!("../fixtures/registry/mcp-fs-remote.json"),
    ),
    (
        "text-editor-mcpb.json",
        include_str!("../fixtures/registry/text-editor-mcpb.json"),
    ),
    (
        "everything.json",
        include_str!("../fixtures/registry/everything.json"),
    ),
];

/// One `server.json` example (`brave-search.json`, …).
pub fn registry_fixture(name: &str) -> Value {
    let (_, text) = FIXTURES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no registry fixture {name}"));
    serde_json::from_str(text).unwrap()
}

/// The registry's list: the examples, all active, then `everything` again as a
/// deprecated `io.modelcontextprotocol/everything-old`.
pub fn default_registry_servers() -> Vec<(Value, String)> {
    let mut out: Vec<(Value, String)> = FIXTURES
        .iter()
        .map(|(n, _)| (registry_fixture(n), "active".to_string()))
        .collect();
    let mut deprecated = registry_fixture("everything.json");
    deprecated["name"] = json!("io.modelcontextprotocol/everything-old");
    out.push((deprecated, "deprecated".into()));
    out
}

#[derive(Clone)]
struct Reg {
    servers: Arc<Vec<(Value, String)>>,
    bundles: Arc<HashMap<String, Vec<u8>>>,
    seen: Arc<Mutex<Vec<String>>>,
}

fn item(server: &Value, status: &str) -> Value {
    json!({
        "server": server,
        "_meta": {"io.modelcontextprotocol.registry/official": {
            "status": status,
            "publishedAt": "2025-10-01T00:00:00Z",
            "updatedAt": "2025-10-01T00:00:00Z",
            "isLatest": true
        }}
    })
}

fn problem(status: StatusCode, detail: &str) -> Response {
    (
        status,
        Json(json!({"title": status.canonical_reason(), "status": status.as_u16(), "detail": detail})),
    )
        .into_response()
}

async fn list(State(reg): State<Reg>, Query(q): Query<HashMap<String, String>>) -> Response {
    reg.seen.lock().unwrap().push(format!("{q:?}"));
    let search = q.get("search").cloned().unwrap_or_default().to_lowercase();
    let start: usize = match q.get("cursor") {
        None => 0,
        Some(c) => match c.strip_prefix("page-").and_then(|n| n.parse().ok()) {
            Some(n) => n,
            None => return problem(StatusCode::BAD_REQUEST, "invalid cursor"),
        },
    };
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(30)
        .min(REGISTRY_PAGE);
    let matching: Vec<Value> = reg
        .servers
        .iter()
        .filter(|(s, _)| {
            s["name"]
                .as_str()
                .unwrap_or_default()
                .to_lowercase()
                .contains(&search)
        })
        .map(|(s, st)| item(s, st))
        .collect();
    let page: Vec<Value> = matching.iter().skip(start).take(limit).cloned().collect();
    let mut metadata = json!({"count": page.len()});
    if start + limit < matching.len() {
        metadata["nextCursor"] = json!(format!("page-{}", start + limit));
    }
    Json(json!({"servers": page, "metadata": metadata})).into_response()
}

async fn version(
    State(reg): State<Reg>,
    UrlPath((name, version)): UrlPath<(String, String)>,
) -> Response {
    reg.seen.lock().unwrap().push(format!("{name}@{version}"));
    let Some((s, st)) = reg.servers.iter().find(|(s, _)| s["name"] == name.as_str()) else {
        return problem(StatusCode::NOT_FOUND, "Server not found");
    };
    if version != "latest" && s["version"] != version.as_str() {
        return problem(StatusCode::NOT_FOUND, "Server version not found");
    }
    Json(item(s, st)).into_response()
}

/// A body of 64 KiB chunks that never ends.
fn endless() -> Response {
    let chunk = Bytes::from(vec![b'['; 64 * 1024]);
    let stream = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
    Body::from_stream(stream).into_response()
}

/// A body that sends one byte a second, forever.
fn slow() -> Response {
    let stream = futures::stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), ()))
    });
    Body::from_stream(stream).into_response()
}

/// A running local registry; stopped when dropped.
pub struct RegistryServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RegistryServer {
    /// The registry over [`default_registry_servers`].
    pub fn start() -> Self {
        Self::with_servers(default_registry_servers())
    }

    /// The registry over `servers` (`server.json`, status), on its own thread and
    /// runtime, so that blocking and async tests can use it alike.
    pub fn with_servers(servers: Vec<(Value, String)>) -> Self {
        Self::with_bundles(servers, Vec::new())
    }

    /// The registry over `servers`, also serving each `(file, bytes)` of `bundles` at
    /// `/bundles/FILE` (MCPB downloads; any other file is a 404). A package
    /// `identifier` written as a path (`/bundles/FILE`) is listed as this registry's
    /// URL of it.
    pub fn with_bundles(
        mut servers: Vec<(Value, String)>,
        bundles: Vec<(String, Vec<u8>)>,
    ) -> Self {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        for (server, _) in &mut servers {
            if let Some(packages) = server.get_mut("packages").and_then(Value::as_array_mut) {
                for p in packages {
                    if let Some(path) = p["identifier"].as_str().filter(|i| i.starts_with('/')) {
                        p["identifier"] = json!(format!("http://{addr}{path}"));
                    }
                }
            }
        }
        let reg = Reg {
            servers: Arc::new(servers),
            bundles: Arc::new(bundles.into_iter().collect()),
            seen: Arc::default(),
        };
        let app = Router::new()
            .route("/v0.1/servers", get(list))
            .route("/v0.1/servers/{name}/versions/{version}", get(version))
            .route(
                "/huge/v0.1/servers",
                get(|| async { "x".repeat(9 * 1024 * 1024) }),
            )
            .route(
                "/huge/v0.1/servers/{name}/versions/{version}",
                get(|| async { "x".repeat(9 * 1024 * 1024) }),
            )
            .route("/endless/v0.1/servers", get(|| async { endless() }))
            .route(
                "/endless/v0.1/servers/{name}/versions/{version}",
                get(|| async { endless() }),
            )
            .route(
                "/malformed/v0.1/servers",
                get(|| async { "{\"servers\": [oops" }),
            )
            .route(
                "/malformed/v0.1/servers/{name}/versions/{version}",
                get(|| async { "<html>not a registry</html>" }),
            )
            .route("/slow/v0.1/servers", get(|| async { slow() }))
            .route(
                "/bundles/{file}",
                get(
                    |State(reg): State<Reg>, UrlPath(file): UrlPath<String>| async move {
                        match reg.bundles.get(&file) {
                            Some(b) => b.clone().into_response(),
                            None => StatusCode::NOT_FOUND.into_response(),
                        }
                    },
                ),
            )
            .with_state(reg.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Self {
            url: format!("http://{addr}"),
            seen: reg.seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Every request seen: a `/servers` query (`{"search": …}`) or `name@version`.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Graceful shutdown waits for open connections (an endless body); the thread
        // is left to end with them rather than block the test.
        drop(self.thread.take());
    }
}
