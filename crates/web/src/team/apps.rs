//! MCP Apps in the team chat, with app sessions in the store (any instance serves them).
//!
//! - A team-chat tool result that links a `ui://` resource (the result's
//!   `_meta.ui.resourceUri`, else the tool's) opens an **app session**
//!   ([`open_for_tool_result`], called by the chat turn): a store row
//!   (`switchboard_store::AppSession`) bound to the signed-in user, the chat, the server
//!   (own, or `catalog:NAME`), the tool call, the resource and the host methods the app
//!   may use ([`APP_METHODS`]: what the personal mode's app host offers), with the tool's
//!   arguments and result sealed. The `tool-end` event names it (`app: {id}`).
//! - `POST /api/apps/{id}/open` reads the HTML resource through the user's own connection
//!   (`servers::on_server`: the client cache, the user's tokens, refresh on 401), builds
//!   the sandbox CSP with `crate::apps` (declared origins only) and stores it; answers
//!   the HTML, CSP, permissions and the tool's definition, input and result.
//! - `GET /apps/{id}/sandbox`: the sandbox proxy page (`crate::apps::sandbox_response`)
//!   under the stored CSP **plus `sandbox allow-scripts allow-forms`**: the page runs in
//!   an opaque origin although it is served from the team's one public origin (so it
//!   works behind one reverse-proxied host name), cannot read the session cookie, and
//!   every request it could make to the team app carries `Origin: null` /
//!   `Sec-Fetch-Site: cross-site`, which the session middleware refuses.
//!   `frame-ancestors` is the team origin only.
//! - The app's requests, each checked against the stored session of the signed-in user
//!   (another user's session is a 404) and its allowed methods:
//!   `POST /api/apps/{id}/tools/call` (only a tool of the session's server whose
//!   `_meta.ui.visibility` includes `app`), `POST /api/apps/{id}/resources/read`,
//!   `GET /api/apps/{id}/lists` (resources, templates, prompts of that server),
//!   `POST /api/apps/{id}/message` (`ui/message`: a turn in the session's chat, streamed
//!   as the chat's own send), `POST /api/apps/{id}/context`
//!   (`ui/update-model-context`: kept sealed on the session, replacing the app's previous
//!   one, and taken by the chat's next turn — [`user_message`] — on any instance, wrapped
//!   as untrusted app data), `DELETE /api/apps/{id}`; `GET /api/chats/{id}/apps` lists a
//!   chat's sessions so a reloaded page shows them again.
//!
//! Must not: take a server, URL or header from the app or the page (the server is the
//! session's), reach a session except through `Store::for_user(signed-in user)`, serve
//! the sandbox without a CSP, or offer an app more than the personal mode does.

use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_chat::{Untrusted, UntrustedKind};
use switchboard_mcp::CallOptions;
use switchboard_mcp::model::Tool as McpTool;
use switchboard_model::{Content, Part};
use switchboard_store::{AppSession, NewAppSession, ServerRef, UserStore};

use super::servers::{on_server, user_store};
use super::session::SignedIn;
use super::state::{TeamState, store_error};
use crate::access::ApiJson;
use crate::apps::{
    UiResource, build_csp, check_app_tool, permissions_to_allow, result_ui_uri, sandbox_response,
    tool_ui, ui_resource,
};
use crate::error::{ApiError, ApiResult};

/// The host methods an app session may use: what the personal mode's app host answers
/// (`ui/open-link` is confirmed and opened by the page itself).
pub const APP_METHODS: [&str; 8] = [
    "tools/call",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "ui/message",
    "ui/update-model-context",
    "ui/open-link",
];

/// The sandbox page's own confinement, on top of the app's CSP: an opaque origin.
pub const SANDBOX_DIRECTIVE: &str = "sandbox allow-scripts allow-forms";

/// A request an app makes through the host (upstream time limit).
const APP_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What the chat turn knows when a tool call ended with a result.
pub(super) struct ToolOutcome<'a> {
    pub us: &'a UserStore,
    pub chat_id: &'a str,
    /// The server as the chat names it (`name` or `catalog:NAME`).
    pub server: &'a str,
    pub tool: &'a McpTool,
    pub call_id: &'a str,
    pub args: &'a Value,
    pub result: &'a Value,
}

/// The server a chat's server name stands for (`catalog:NAME` is a catalog server).
fn server_ref(chat_name: &str) -> ServerRef {
    match chat_name.strip_prefix("catalog:") {
        Some(n) => ServerRef::catalog(n),
        None => ServerRef::own(chat_name),
    }
}

/// The chat's name of a session's server.
fn chat_name(server: &ServerRef) -> String {
    super::cache::server_key(server)
}

/// Opens an app session when the result (or the tool) links a `ui://` resource; its id,
/// or `None` (no app, or the store refused: logged, the chat goes on without the app).
pub(super) async fn open_for_tool_result(o: ToolOutcome<'_>) -> Option<String> {
    let tool_json = serde_json::to_value(o.tool).unwrap_or(Value::Null);
    let uri = result_ui_uri(o.result).or_else(|| {
        tool_json
            .get("_meta")
            .and_then(tool_ui)
            .and_then(|u| u.resource_uri)
    })?;
    let new = NewAppSession {
        conversation_id: o.chat_id.to_owned(),
        server: server_ref(o.server),
        tool: o.tool.name.to_string(),
        call_id: o.call_id.to_owned(),
        resource_uri: uri,
        allowed: APP_METHODS.iter().map(|m| (*m).to_owned()).collect(),
        input: o.args.clone(),
        result: o.result.clone(),
    };
    match o.us.create_app_session(&new).await {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!("team chat: saving an app session: {e}");
            None
        }
    }
}

fn no_session() -> ApiError {
    ApiError::not_found("no such app session: the app was closed, or never opened here")
}

/// The signed-in user's app session `id` (a 404 for anyone else's).
async fn signed_session(state: &TeamState, signed: &SignedIn, id: &str) -> ApiResult<AppSession> {
    session_or_404(&user_store(state, signed), id).await
}

async fn session_or_404(us: &UserStore, id: &str) -> ApiResult<AppSession> {
    us.app_session(id)
        .await
        .map_err(store_error)?
        .ok_or_else(no_session)
}

fn allowed(s: &AppSession, method: &str) -> ApiResult<()> {
    if s.allows(method) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "this app may not use `{method}`"
        )))
    }
}

fn timed() -> CallOptions {
    CallOptions {
        timeout: Some(APP_REQUEST_TIMEOUT),
        ..CallOptions::default()
    }
}

/// The session's server's tool `name`, as JSON (`None` when it has none).
async fn tool_of(
    state: &TeamState,
    signed: &SignedIn,
    s: &AppSession,
    name: &str,
) -> ApiResult<Option<Value>> {
    use super::metrics::McpMethod;
    let tools = on_server(
        state,
        signed,
        &s.server,
        (McpMethod::ListTools, |_| false),
        |conn| async move { conn.list_tools(&timed()).await },
    )
    .await?;
    Ok(tools
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| serde_json::to_value(t).ok()))
}

/// `POST /api/apps/{id}/open`: the app's HTML (read through the user's connection to
/// the session's server), its CSP (stored for the sandbox page) and what it starts with.
pub async fn open(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    use super::metrics::McpMethod;
    let us = user_store(&state, &signed);
    let s = session_or_404(&us, &id).await?;
    let uri = s.resource_uri.clone();
    let read = on_server(
        &state,
        &signed,
        &s.server,
        (McpMethod::ReadResource, |_| false),
        |conn| {
            let uri = uri.clone();
            async move { conn.read_resource(&uri, &timed()).await }
        },
    )
    .await?;
    let read = serde_json::to_value(&read).unwrap_or(Value::Null);
    let UiResource {
        html,
        mime_type,
        ui,
    } = ui_resource(&read, &s.resource_uri)?;
    // `_meta.ui` from the content, else from the resources/list entry.
    let ui = match ui {
        Some(ui) => Some(ui),
        None => {
            let listed = on_server(
                &state,
                &signed,
                &s.server,
                (McpMethod::ListOther, |_| false),
                |conn| async move { conn.list_resources(&timed()).await },
            )
            .await?;
            listed
                .iter()
                .filter_map(|r| serde_json::to_value(r).ok())
                .find(|r| r.get("uri").and_then(Value::as_str) == Some(s.resource_uri.as_str()))
                .and_then(|r| r.get("_meta").and_then(|m| m.get("ui")).cloned())
        }
    };
    let csp = ui.as_ref().and_then(|u| u.get("csp")).cloned();
    let permissions = ui.as_ref().and_then(|u| u.get("permissions")).cloned();
    let prefers_border = ui
        .as_ref()
        .and_then(|u| u.get("prefersBorder"))
        .and_then(Value::as_bool);
    let server = chat_name(&s.server);
    let app_name = format!("{} ({server})", s.resource_uri);
    let csp_header = format!(
        "{SANDBOX_DIRECTIVE}; {}",
        build_csp(csp.as_ref(), &state.cfg().app_origin, &app_name)
    );
    if !us
        .set_app_csp(&id, &csp_header)
        .await
        .map_err(store_error)?
    {
        return Err(no_session());
    }
    let tool = tool_of(&state, &signed, &s, &s.tool).await?;
    Ok(Json(json!({
        "appId": s.id,
        "chatId": s.conversation_id,
        "server": server,
        "tool": s.tool,
        "callId": s.call_id,
        "resourceUri": s.resource_uri,
        "html": html,
        "mimeType": mime_type,
        "csp": csp,
        "cspHeader": csp_header,
        "permissions": permissions,
        "allow": permissions_to_allow(permissions.as_ref()),
        "prefersBorder": prefers_border,
        "sandbox": "allow-scripts allow-forms",
        "proxyUrl": format!("/apps/{}/sandbox", s.id),
        // The sandbox page runs in an opaque origin: its messages come from "null".
        "proxyOrigin": "null",
        "toolDef": tool,
        "arguments": s.input,
        "result": s.result,
        "allowed": s.allowed,
    })))
}

/// `GET /apps/{id}/sandbox`: the sandbox proxy page under the stored CSP.
pub async fn sandbox(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> Response {
    let us = user_store(&state, &signed);
    let s = match session_or_404(&us, &id).await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let Some(csp) = s.csp_header.filter(|c| c.starts_with(SANDBOX_DIRECTIVE)) else {
        return ApiError::conflict(
            "the app is not open yet: open it first (POST /api/apps/{id}/open)",
        )
        .into_response();
    };
    sandbox_response(&state.cfg().app_origin, &csp)
}

/// `POST /api/apps/{id}/tools/call` `{name, arguments}`: a tool of the session's server
/// that is visible to apps.
pub async fn call_tool(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
    ApiJson(call): ApiJson<super::servers::RawCall>,
) -> ApiResult<Json<Value>> {
    let s = signed_session(&state, &signed, &id).await?;
    allowed(&s, "tools/call")?;
    let server = chat_name(&s.server);
    let tool = tool_of(&state, &signed, &s, call.tool()).await?;
    check_app_tool(tool.as_ref(), &server, call.tool())?;
    let Json(answer) = super::servers::call_on(&state, &signed, s.server.clone(), call).await?;
    Ok(Json(json!({"server": server, "result": answer["result"]})))
}

/// An app's `resources/read`.
#[derive(Debug, Deserialize)]
pub struct RawAppRead {
    uri: String,
}

/// `POST /api/apps/{id}/resources/read` `{uri}`: a resource of the session's server.
pub async fn read_resource(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
    ApiJson(raw): ApiJson<RawAppRead>,
) -> ApiResult<Json<Value>> {
    use super::metrics::McpMethod;
    let s = signed_session(&state, &signed, &id).await?;
    allowed(&s, "resources/read")?;
    if raw.uri.trim().is_empty() || raw.uri.len() > 4096 {
        return Err(ApiError::bad_request(
            "`uri` must name a resource (at most 4096 characters)",
        ));
    }
    let uri = raw.uri.clone();
    let result = on_server(
        &state,
        &signed,
        &s.server,
        (McpMethod::ReadResource, |_| false),
        |conn| {
            let uri = uri.clone();
            async move { conn.read_resource(&uri, &timed()).await }
        },
    )
    .await?;
    Ok(Json(json!({
        "server": chat_name(&s.server),
        "result": serde_json::to_value(&result).unwrap_or(Value::Null),
    })))
}

/// `GET /api/apps/{id}/lists`: the resources, resource templates and prompts of the
/// session's server (for the app's `resources/list`, `resources/templates/list`,
/// `prompts/list`).
pub async fn lists(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    use super::metrics::McpMethod;
    let s = signed_session(&state, &signed, &id).await?;
    for m in ["resources/list", "resources/templates/list", "prompts/list"] {
        allowed(&s, m)?;
    }
    // A server without resources or prompts answers "method not found": an empty list.
    let (resources, templates, prompts) = on_server(
        &state,
        &signed,
        &s.server,
        (McpMethod::ListOther, |_| false),
        |conn| async move {
            let resources = conn.list_resources(&timed()).await.unwrap_or_default();
            let templates = conn
                .list_resource_templates(&timed())
                .await
                .unwrap_or_default();
            let prompts = conn.list_prompts(&timed()).await.unwrap_or_default();
            Ok((resources, templates, prompts))
        },
    )
    .await?;
    Ok(Json(json!({
        "server": chat_name(&s.server),
        "resourceUri": s.resource_uri,
        "resources": resources,
        "resourceTemplates": templates,
        "prompts": prompts,
    })))
}

/// An app's `ui/message`.
#[derive(Debug, Deserialize)]
pub struct RawAppMessage {
    message: String,
}

/// `POST /api/apps/{id}/message` `{message}`: the app's message as the person's next
/// message in the session's chat; answers the turn's event stream (as the chat's send).
pub async fn message(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
    ApiJson(raw): ApiJson<RawAppMessage>,
) -> ApiResult<Response> {
    let s = signed_session(&state, &signed, &id).await?;
    allowed(&s, "ui/message")?;
    let send: super::chat::RawSend = serde_json::from_value(json!({"message": raw.message}))
        .map_err(|e| ApiError::bad_request(format!("the app's message: {e}")))?;
    super::chat::send(
        State(state),
        Extension(signed),
        Path(s.conversation_id),
        ApiJson(send),
    )
    .await
}

/// An app's `ui/update-model-context`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawAppContext {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    structured_content: Option<Value>,
}

/// `POST /api/apps/{id}/context` `{content?, structuredContent?}`: the app's model
/// context (its text blocks, then its structured content as JSON), for the next turn of
/// the session's chat.
pub async fn context(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
    ApiJson(raw): ApiJson<RawAppContext>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    let s = session_or_404(&us, &id).await?;
    allowed(&s, "ui/update-model-context")?;
    let mut text = String::new();
    if let Some(blocks) = raw.content.as_ref().and_then(Value::as_array) {
        for t in blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
        {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(t);
        }
    }
    if let Some(sc) = &raw.structured_content {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&sc.to_string());
    }
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("the context is empty"));
    }
    if text.len() > switchboard_store::MAX_APP_CONTEXT_BYTES {
        return Err(ApiError::bad_request(format!(
            "an app's model context is at most {} bytes",
            switchboard_store::MAX_APP_CONTEXT_BYTES
        )));
    }
    if !us.set_app_context(&id, &text).await.map_err(store_error)? {
        return Err(no_session());
    }
    Ok(Json(json!({"ok": true})))
}

/// The person's message for a turn of chat `chat_id`, led by the model contexts its apps
/// left (taken from the store, so on whichever instance runs the turn), each wrapped as
/// untrusted app data as in personal mode.
pub(super) async fn user_message(
    us: &UserStore,
    chat_id: &str,
    untrusted: &Untrusted,
    message: String,
) -> Content {
    let contexts = match us.take_app_contexts(chat_id).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("team chat: reading app model contexts: {e}");
            Vec::new()
        }
    };
    if contexts.is_empty() {
        return Content::user_text(message);
    }
    let ctx = untrusted.wrap(
        UntrustedKind::AppContext,
        "an MCP App",
        &contexts.join("\n"),
    );
    Content::user(vec![
        Part::text(format!("[Context from an app]\n{ctx}")),
        Part::text(message),
    ])
}

/// `DELETE /api/apps/{id}`: the person closed the app.
pub async fn close(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    if !us.remove_app_session(&id).await.map_err(store_error)? {
        return Err(no_session());
    }
    Ok(Json(json!({"ok": true})))
}

/// `GET /api/chats/{id}/apps`: the app sessions of the caller's chat, oldest first.
pub async fn of_chat(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    if us.conversation(&id).await.map_err(store_error)?.is_none() {
        return Err(ApiError::not_found("no such chat"));
    }
    let sessions = us.app_sessions_of(&id).await.map_err(store_error)?;
    let apps: Vec<Value> = sessions
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "server": chat_name(&s.server),
                "tool": s.tool,
                "callId": s.call_id,
                "resourceUri": s.resource_uri,
                "afterSeq": s.after_seq,
            })
        })
        .collect();
    Ok(Json(json!({"apps": apps})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_names_map_to_server_refs_and_back() {
        assert_eq!(server_ref("demo"), ServerRef::own("demo"));
        assert_eq!(server_ref("catalog:shared"), ServerRef::catalog("shared"));
        assert_eq!(chat_name(&server_ref("catalog:shared")), "catalog:shared");
        assert_eq!(chat_name(&server_ref("demo")), "demo");
    }

    #[test]
    fn the_sandbox_is_an_opaque_origin_with_the_apps_csp() {
        let csp = format!(
            "{SANDBOX_DIRECTIVE}; {}",
            build_csp(None, "https://team.example", "ui://x")
        );
        assert!(csp.starts_with("sandbox allow-scripts allow-forms; default-src 'none';"));
        assert!(!csp.contains("allow-same-origin"), "{csp}");
        assert!(
            csp.ends_with("frame-ancestors https://team.example"),
            "{csp}"
        );
    }
}
