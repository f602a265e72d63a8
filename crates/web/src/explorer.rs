//! The tool explorer's API (works with no API key):
//! - `GET /api/mcp/servers`: every server with status and what it offers;
//! - `POST /api/mcp/tool-call` `{server, tool, args}` → `{result, ui}`;
//! - `POST /api/mcp/resource-read` `{server, uri}` → `{result}`;
//! - `POST /api/mcp/prompt-get` `{server, name, args}` → `{result}`;
//! - `POST /api/mcp/servers/{name}/restart`;
//! - `GET /api/mcp/servers/{name}/pins` → `{changes: [{name, renamedFrom?, diff}]}`:
//!   the tools withheld because their definition changed since pinned, each with a
//!   unified diff of the pinned and the new definition (what `switchboard mcp pins`
//!   shows);
//! - `POST /api/mcp/servers/{name}/pins/accept` `{tool}` or `{all: true}` accepts a
//!   tool whose definition changed since pinned (what `switchboard mcp pins accept`
//!   does) and offers it again at once → `{accepted: [names]}`.
//!
//! `tool-call` and `resource-read` also serve MCP Apps: with `appId` instead of
//! `server`, the server is the one the app session is bound to (see [`crate::apps`]),
//! and `tool-call` refuses tools whose visibility lacks `"app"`.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_host::ServerStatus;
use switchboard_mcp::{CallOptions, Connection, RequestError};

use crate::access::ApiJson;
use crate::apps::{check_app_tool, result_ui_uri, session, tool_ui};
use crate::dto::ServerDto;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `GET /api/mcp/servers`.
pub async fn servers(State(state): State<AppState>) -> Json<Value> {
    let host = state.host();
    let servers: Vec<ServerDto> = host
        .snapshot()
        .iter()
        .map(ServerDto::from_snapshot)
        .collect();
    let warnings = state
        .inner
        .settings_warnings
        .lock()
        .map(|w| w.clone())
        .unwrap_or_default();
    Json(json!({"servers": servers, "generation": state.generation(), "warnings": warnings}))
}

fn connection(state: &AppState, server: &str) -> ApiResult<std::sync::Arc<Connection>> {
    let host = state.host();
    let snap = host
        .server(server)
        .ok_or_else(|| ApiError::not_found(format!("no server named `{server}`")))?;
    if snap.status != ServerStatus::Connected {
        let why = snap.error.map(|e| format!(": {e}")).unwrap_or_default();
        return Err(ApiError::conflict(format!(
            "server `{server}` is {}{why}",
            snap.status
        )));
    }
    host.connection(server)
        .ok_or_else(|| ApiError::conflict(format!("server `{server}` is not connected")))
}

fn request_error(e: RequestError) -> ApiError {
    match e {
        RequestError::Server { code, message, .. } => {
            ApiError::upstream(format!("the server answered with error {code}: {message}"))
        }
        other => ApiError::upstream(other.to_string()),
    }
}

/// Which server a request goes to: the app session's, or the one named.
fn resolve_server(
    state: &AppState,
    server: Option<&str>,
    app_id: Option<&str>,
) -> ApiResult<(String, bool)> {
    if let Some(app_id) = app_id {
        let s = session(state, app_id)?;
        if let Some(named) = server
            && named != s.server
        {
            return Err(ApiError::forbidden(format!(
                "an app may only reach the server that produced it (`{}`), not `{named}`",
                s.server
            )));
        }
        return Ok((s.server, true));
    }
    match server {
        Some(s) if !s.is_empty() => Ok((s.to_string(), false)),
        _ => Err(ApiError::bad_request("name the `server`")),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    app_id: Option<String>,
    #[serde(alias = "name", alias = "toolName")]
    tool: String,
    #[serde(default, alias = "arguments")]
    args: Option<Value>,
}

/// `POST /api/mcp/tool-call`.
pub async fn tool_call(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ToolCall>,
) -> ApiResult<Json<Value>> {
    let (server, from_app) = resolve_server(&state, req.server.as_deref(), req.app_id.as_deref())?;
    let snap = state
        .host()
        .server(&server)
        .ok_or_else(|| ApiError::not_found(format!("no server named `{server}`")))?;
    let tool = snap
        .tools
        .iter()
        .find(|t| t.name == req.tool.as_str())
        .and_then(|t| serde_json::to_value(t).ok());
    if from_app {
        check_app_tool(tool.as_ref(), &server, &req.tool)?;
    }
    if let Some(w) = state.host().withheld_tool(&server, &req.tool) {
        return Err(ApiError::conflict(w.message(&server)));
    }
    let args: Option<Map<String, Value>> = match req.args {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err(ApiError::bad_request("`args` must be a JSON object")),
    };
    let conn = connection(&state, &server)?;
    let result = conn
        .call_tool(&req.tool, args, &CallOptions::default())
        .await
        .map_err(request_error)?;
    let result = serde_json::to_value(&result).unwrap_or(Value::Null);
    let ui_uri = result_ui_uri(&result).or_else(|| {
        tool.as_ref()
            .and_then(|t| t.get("_meta"))
            .and_then(tool_ui)
            .and_then(|u| u.resource_uri)
    });
    Ok(Json(json!({
        "server": server,
        "tool": req.tool,
        "result": result,
        "ui": ui_uri.map(|u| json!({"resourceUri": u})),
    })))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRead {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    app_id: Option<String>,
    #[serde(alias = "resourceUri")]
    uri: String,
}

/// `POST /api/mcp/resource-read`.
pub async fn resource_read(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ResourceRead>,
) -> ApiResult<Json<Value>> {
    let (server, _) = resolve_server(&state, req.server.as_deref(), req.app_id.as_deref())?;
    let conn = connection(&state, &server)?;
    let result = conn
        .read_resource(&req.uri, &CallOptions::default())
        .await
        .map_err(request_error)?;
    Ok(Json(json!({
        "server": server,
        "result": serde_json::to_value(&result).unwrap_or(Value::Null),
    })))
}

#[derive(Debug, Deserialize)]
pub struct PromptGet {
    server: String,
    name: String,
    #[serde(default, alias = "arguments")]
    args: Option<Map<String, Value>>,
}

/// `POST /api/mcp/prompt-get`.
pub async fn prompt_get(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PromptGet>,
) -> ApiResult<Json<Value>> {
    let conn = connection(&state, &req.server)?;
    // Prompt arguments are strings on the wire.
    let args: Map<String, Value> = req
        .args
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            Value::String(s) => (k, Value::String(s)),
            other => (k, Value::String(other.to_string())),
        })
        .collect();
    let result = conn
        .get_prompt(&req.name, args, &CallOptions::default())
        .await
        .map_err(request_error)?;
    Ok(Json(json!({
        "server": req.server,
        "result": serde_json::to_value(&result).unwrap_or(Value::Null),
    })))
}

/// `POST /api/mcp/servers/{name}/restart`: reconnect one server.
pub async fn restart(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let host = state.host();
    let snap = host
        .server(&name)
        .ok_or_else(|| ApiError::not_found(format!("no server named `{name}`")))?;
    if matches!(snap.status, ServerStatus::Blocked | ServerStatus::Disabled) {
        return Err(ApiError::conflict(format!(
            "server `{name}` is {}; it cannot be restarted{}",
            snap.status,
            snap.error.map(|e| format!(": {e}")).unwrap_or_default()
        )));
    }
    tokio::spawn(async move {
        host.restart(&name).await;
    });
    Ok(Json(json!({"ok": true})))
}

/// `GET /api/mcp/servers/{name}/pins`: the explorer's "Show change".
pub async fn pending_pins(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let host = state.host();
    if host.server(&name).is_none() {
        return Err(ApiError::not_found(format!("no server named `{name}`")));
    }
    let changes = host
        .pending_changes(&name)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(json!({"changes": changes})))
}

#[derive(Deserialize)]
pub struct AcceptPinsReq {
    tool: Option<String>,
    #[serde(default)]
    all: bool,
}

/// `POST /api/mcp/servers/{name}/pins/accept`: the explorer's "Accept change" button.
pub async fn accept_pins(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<AcceptPinsReq>,
) -> ApiResult<Json<Value>> {
    let host = state.host();
    if host.server(&name).is_none() {
        return Err(ApiError::not_found(format!("no server named `{name}`")));
    }
    let which = match (req.tool, req.all) {
        (Some(tool), false) => switchboard_host::Accept::Tool(tool),
        (None, true) => switchboard_host::Accept::All,
        _ => {
            return Err(ApiError::bad_request(
                "name one changed tool (`{\"tool\": NAME}`) or send `{\"all\": true}`",
            ));
        }
    };
    let accepted = host.accept_pins(&name, which).await.map_err(|e| match e {
        switchboard_host::PinError::NothingToAccept { .. } => ApiError::conflict(e.to_string()),
        other => ApiError::internal(other.to_string()),
    })?;
    Ok(Json(json!({"accepted": accepted})))
}
