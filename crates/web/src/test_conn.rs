//! `POST /api/settings/mcp-test`: try a server before (or after) saving it, with
//! GemiHub's contract.
//!
//! In: `{url, headers?, transport?, name?}` (or `{command, args?, env?}` for a stdio
//! server when served on loopback). `headers` values equal to
//! [`KEEP_UNCHANGED`](crate::KEEP_UNCHANGED) take the saved values of server `name`.
//!
//! Out:
//! - URL refused by the URL guard: 400 `{success:false, message, error:"SSRF blocked"}`;
//! - connected and listed: 200 `{success:true, message:"Connected. Found N tool(s).",
//!   tools}`;
//! - the server wants authorization (HTTP 401): 200 `{success:false, needsOAuth:true,
//!   message:"Server requires OAuth authentication.", oauthDiscovery?:{config:{clientId,
//!   authorizationUrl, tokenUrl, scopes, resource?}, registrationUrl?}}` (see
//!   [`oauth_discovery`]; when discovery fails, `oauthDiscoveryError` says why instead);
//! - anything else: 500 `{success:false, message, error}`.
//!
//! Tokens never appear in the answer.
//!
//! The connecting and answering part ([`run_test`]), the URL guard's verdict
//! ([`preflight`]) and OAuth discovery ([`discover_oauth`]) are shared with team mode's
//! Test (`POST /api/mcp-test` in `team::servers`), which builds the connection from the
//! signed-in user's own server instead of the settings files.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_auth::{BrowserClientOptions, DiscoveryClient, Overrides};
use switchboard_config::{EnvPolicy, child_env};
use switchboard_mcp::{CallOptions, ConnectError, ConnectOptions, Connection, StdioTarget, Target};

use crate::access::ApiJson;
use crate::dto::tool_dto;
use crate::oauth::CALLBACK_PATH;
use crate::settings::resolve_headers;
use crate::state::AppState;

/// How long a test may take to connect, and to list tools.
const TEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestRequest {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: Option<Value>,
    #[serde(default)]
    transport: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Value>,
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

pub(crate) fn failure(status: StatusCode, message: impl Into<String>, error: &str) -> Response {
    answer(
        status,
        json!({"success": false, "message": message.into(), "error": error}),
    )
}

/// The time limit of the whole OAuth discovery (each request has its own, shorter one).
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(20);

/// OAuth discovery after a 401 (RFC 9728 → RFC 8414 → dynamic registration, done by
/// `switchboard-auth` through the app's URL guard): the `oauthDiscovery` object for
/// the browser, or why there is none. A saved server's `oauth.clientId`, `scopes`,
/// `authorizationUrl` and `tokenUrl` are used as configured; otherwise the client is
/// registered for the app's own callback page (`redirect_uri`), or the fixed
/// [`switchboard_auth::FALLBACK_CLIENT_ID`] is offered. No secret is in the answer.
pub async fn oauth_discovery(
    state: &AppState,
    name: Option<&str>,
    url: &str,
    www_authenticate: Option<&str>,
    redirect_uri: &str,
) -> Result<Value, String> {
    let mut options = BrowserClientOptions::default();
    if let Some(name) = name
        && let Ok(settings) = state.load_settings()
        && let Some(Ok(cfg)) = settings.server(name).map(|e| e.config.as_ref())
        && cfg.transport.url() == Some(url)
        && let Some(oauth) = &cfg.oauth
    {
        options.client_id = oauth.client_id.clone();
        options.scopes = oauth.scopes.clone();
        options.overrides = Overrides {
            authorization_url: oauth.authorization_url.clone(),
            token_url: oauth.token_url.clone(),
        };
    }
    discover_oauth(
        &state.inner.guard,
        &Discovery {
            name,
            url,
            www_authenticate,
            redirect_uri,
        },
        &options,
    )
    .await
}

/// What OAuth discovery starts from: the server (its name and URL), its 401's
/// `WWW-Authenticate`, and the redirect URI a registered client gets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Discovery<'a> {
    pub name: Option<&'a str>,
    pub url: &'a str,
    pub www_authenticate: Option<&'a str>,
    pub redirect_uri: &'a str,
}

/// OAuth discovery through `guard` with the given client `options` (the core of
/// [`oauth_discovery`], shared with team mode, where `options` stay the defaults).
pub(crate) async fn discover_oauth(
    guard: &switchboard_net::GuardedClient,
    d: &Discovery<'_>,
    options: &BrowserClientOptions,
) -> Result<Value, String> {
    let client = DiscoveryClient::new(guard.clone());
    let found = tokio::time::timeout(
        DISCOVERY_TIMEOUT,
        client.browser_client(
            d.name.unwrap_or("test"),
            d.url,
            d.www_authenticate,
            d.redirect_uri,
            options,
        ),
    )
    .await
    .map_err(|_| {
        format!(
            "OAuth discovery took longer than {} s; check that the server's authorization server answers",
            DISCOVERY_TIMEOUT.as_secs()
        )
    })?
    .map_err(|e| e.to_string())?;
    serde_json::to_value(found).map_err(|e| format!("cannot encode the OAuth discovery: {e}"))
}

/// `POST /api/settings/mcp-test`.
pub async fn mcp_test(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<TestRequest>,
) -> Response {
    let target = match build_target(&state, &req).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let mut opts = ConnectOptions::new(req.name.clone().unwrap_or_else(|| "test".into()), target);
    opts.guard = Some(state.inner.guard.clone());
    // A saved server: its OAuth login (if any) applies, as in the host.
    if let (Some(name), Some(hooks)) = (&req.name, &state.cfg().oauth)
        && let Ok(settings) = state.load_settings()
        && settings.server(name).is_some()
    {
        opts.token_source = hooks.0.token_source(&settings, &state.inner.guard);
    }
    let redirect_uri = format!("{}{CALLBACK_PATH}", state.app_origin_for(&headers));
    let name = req.name.clone();
    run_test(opts, |url, www_authenticate| async move {
        oauth_discovery(
            &state,
            name.as_deref(),
            &url,
            www_authenticate.as_deref(),
            &redirect_uri,
        )
        .await
    })
    .await
}

/// Connect with `opts` (under [`TEST_TIMEOUT`]), list the tools and answer with the
/// contract above; on a 401, `discover(url, www_authenticate)` makes the
/// `oauthDiscovery` hint. Shared by the personal Settings and team mode.
pub(crate) async fn run_test<F, Fut>(mut opts: ConnectOptions, discover: F) -> Response
where
    F: FnOnce(String, Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Value, String>>,
{
    let url = match &opts.target {
        Target::Http { url, .. } | Target::Sse { url, .. } | Target::Auto { url, .. } => {
            Some(url.clone())
        }
        Target::Stdio(_) => None,
    };
    opts.startup_timeout = TEST_TIMEOUT;
    opts.request_timeout = TEST_TIMEOUT;
    opts.ui_extension = true;
    let conn = match Connection::connect(opts).await {
        Ok(c) => c,
        Err(ConnectError::AuthRequired {
            www_authenticate, ..
        }) => {
            let mut body = json!({
                "success": false,
                "needsOAuth": true,
                "message": "Server requires OAuth authentication.",
            });
            if let Some(url) = url {
                match discover(url, www_authenticate).await {
                    Ok(d) => body["oauthDiscovery"] = d,
                    Err(why) => body["oauthDiscoveryError"] = Value::from(why),
                }
            }
            return answer(StatusCode::OK, body);
        }
        Err(ConnectError::Blocked { reason, .. }) => {
            return failure(StatusCode::BAD_REQUEST, reason, "SSRF blocked");
        }
        Err(e) => {
            let kind = match &e {
                ConnectError::Unreachable { .. } => "unreachable",
                ConnectError::StartupTimeout { .. } => "timeout",
                ConnectError::BadHeader { .. } | ConnectError::BadUrl { .. } => "bad request",
                ConnectError::CommandNotFound { .. } | ConnectError::Spawn { .. } => "spawn failed",
                _ => "connection failed",
            };
            return failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), kind);
        }
    };
    let listed = if conn.capabilities().tools.is_some() {
        conn.list_tools(&CallOptions {
            timeout: Some(TEST_TIMEOUT),
            ..Default::default()
        })
        .await
        .map(Some)
    } else {
        Ok(None)
    };
    conn.close(Duration::from_millis(500)).await;
    match listed {
        Ok(tools) => {
            let tools: Vec<Value> = tools
                .unwrap_or_default()
                .iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .filter_map(|t| serde_json::to_value(tool_dto(&t)).ok())
                .collect();
            let n = tools.len();
            answer(
                StatusCode::OK,
                json!({
                    "success": true,
                    "message": format!("Connected. Found {n} tool(s)."),
                    "tools": tools,
                }),
            )
        }
        Err(e) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("connected, but listing tools failed: {e}"),
            "tools/list failed",
        ),
    }
}

/// The URL guard's verdict before anything is sent: a refused URL is a 400
/// `SSRF blocked`.
pub(crate) async fn preflight(
    guard: &switchboard_net::GuardedClient,
    url: &str,
) -> Result<(), Response> {
    guard
        .preflight(url)
        .await
        .map(drop)
        .map_err(|blocked| failure(StatusCode::BAD_REQUEST, blocked.to_string(), "SSRF blocked"))
}

/// The target for an HTTP server: `transport` `http`, `sse`, or anything else (none) to
/// try Streamable HTTP, then SSE.
pub(crate) fn http_target(
    url: &str,
    transport: Option<&str>,
    headers: Vec<(String, String)>,
) -> Target {
    match transport {
        Some("http") => Target::Http {
            url: url.into(),
            headers,
        },
        Some("sse") => Target::Sse {
            url: url.into(),
            headers,
        },
        _ => Target::Auto {
            url: url.into(),
            headers,
        },
    }
}

async fn build_target(state: &AppState, req: &TestRequest) -> Result<Target, Response> {
    if let Some(command) = req.command.as_deref().filter(|c| !c.trim().is_empty()) {
        if state.cfg().remote {
            return Err(failure(
                StatusCode::FORBIDDEN,
                "stdio servers cannot be tested from the browser when Switchboard is served beyond loopback",
                "forbidden",
            ));
        }
        let mut configured = IndexMap::new();
        if let Some(Value::Object(env)) = &req.env {
            for (k, v) in env {
                if let Some(v) = v.as_str().filter(|v| *v != crate::KEEP_UNCHANGED) {
                    configured.insert(k.clone(), v.to_string());
                }
            }
        }
        return Ok(Target::Stdio(StdioTarget {
            program: command.trim().to_string(),
            args: req.args.clone().unwrap_or_default(),
            env: child_env(EnvPolicy::Filtered, std::env::vars(), &configured),
            cwd: None,
        }));
    }
    let Some(url) = req.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
        return Err(failure(
            StatusCode::BAD_REQUEST,
            "give the server's `url` (or a `command` for a stdio server)",
            "bad request",
        ));
    };
    preflight(&state.inner.guard, url).await?;
    let headers = resolve_headers(state, req.headers.as_ref(), req.name.as_deref(), url)
        .map_err(|e| failure(StatusCode::BAD_REQUEST, e.message, "bad request"))?;
    Ok(http_target(url, req.transport.as_deref(), headers))
}
