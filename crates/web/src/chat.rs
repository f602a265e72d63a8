//! The chat page's API: the model (Gemini, or an OpenAI-compatible server when the
//! settings say `provider: "openai"`, built by `switchboard_model::ModelConfig` as in
//! the CLI) with the MCP servers' tools (`switchboard_chat::Chat`), streamed to the
//! browser as Server-Sent Events.
//!
//! - `GET /api/chat/status`: whether the chat can start (else how to fix it) and the
//!   model;
//! - `POST /api/chat/send` `{sessionId?, message, model?, webSearch?, servers?: {name:
//!   bool}}` → an SSE stream of `session`, `text`, `notice`, `tool-start`,
//!   `tool-progress`, `tool-end` (with the raw result and its MCP App, if any),
//!   `confirm`, `reply`, `error` and `done` events;
//! - `POST /api/chat/confirm` `{sessionId, id, decision: once|tool|server|cancel}`
//!   answers a confirmation (tools of servers without `trust` ask first);
//! - `POST /api/chat/cancel`, `POST /api/chat/context` (an app's
//!   `ui/update-model-context`, fed into the next model turn), `POST /api/chat/reset`.
//!
//! Each session's `Chat` sits behind an async mutex held for a whole turn (one turn at a
//! time per session; a second send gets 409). When the host is rebuilt after a settings
//! change, the session's chat is moved onto the new host before its next turn.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_chat::{Chat, ChatEvent, ChatOptions, ConfirmRequest, Confirmer, Decision};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::access::ApiJson;
use crate::apps::{result_ui_uri, tool_ui};
use crate::error::{ApiError, ApiResult};
use crate::random::random_id;
use crate::state::AppState;
use switchboard_chat::{Expanded, expand_input};

/// How long a confirmation waits for the person before it counts as "cancel".
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(600);
/// At most this many chat sessions are kept; the least recently used go first.
const MAX_SESSIONS: usize = 50;

/// Asks the browser, through the running turn's event stream.
#[derive(Default)]
struct WebConfirmer {
    sink: Mutex<Option<mpsc::UnboundedSender<Value>>>,
    pending: Mutex<HashMap<String, oneshot::Sender<Decision>>>,
}

impl Confirmer for WebConfirmer {
    fn confirm(&self, r: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let sink = self.sink.lock().ok().and_then(|s| s.clone());
        let Some(sink) = sink else {
            return Box::pin(async { Decision::Cancel });
        };
        let id = random_id();
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.clone(), tx);
        }
        let _ = sink.send(json!({
            "type": "confirm", "id": id, "server": r.server, "tool": r.tool, "args": r.args,
            "readOnly": r.read_only, "destructive": r.destructive, "title": r.title,
        }));
        Box::pin(async move {
            match tokio::time::timeout(CONFIRM_TIMEOUT, rx).await {
                Ok(Ok(d)) => d,
                _ => Decision::Cancel,
            }
        })
    }
}

/// One conversation.
pub struct ChatSession {
    chat: Arc<tokio::sync::Mutex<Chat>>,
    generation: AtomicU64,
    context: Mutex<Vec<String>>,
    confirmer: Arc<WebConfirmer>,
    cancel: Mutex<Option<CancellationToken>>,
    used: Mutex<Instant>,
}

/// `GET /api/chat/status`: `available`, `model`, `provider` (`gemini`, `openai`, or
/// what the settings say), and when unavailable a `message` with the fix.
pub async fn status(State(state): State<AppState>) -> Json<Value> {
    let provider = state
        .load_settings()
        .ok()
        .and_then(|s| s.provider)
        .map_or_else(|| "gemini".to_string(), |p| p.trim().to_ascii_lowercase());
    match state.model_client(None) {
        Ok((_, model)) => Json(json!({"available": true, "model": model, "provider": provider})),
        Err(why) => Json(json!({
            "available": false,
            "model": default_model(&state),
            "provider": provider,
            "message": why.to_string(),
        })),
    }
}

/// The model shown when the chat is unavailable: `model` in the settings, else Gemini's
/// default.
fn default_model(state: &AppState) -> String {
    state
        .load_settings()
        .ok()
        .and_then(|s| s.model)
        .unwrap_or_else(|| switchboard_model::DEFAULT_MODEL.to_string())
}

fn session(state: &AppState, id: &str) -> Option<Arc<ChatSession>> {
    let s = state.inner.chats.lock().ok()?.get(id).cloned()?;
    if let Ok(mut u) = s.used.lock() {
        *u = Instant::now();
    }
    Some(s)
}

fn create_session(
    state: &AppState,
    requested_model: Option<&str>,
) -> ApiResult<(String, Arc<ChatSession>)> {
    let (client, model) = state
        .model_client(requested_model)
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let confirmer = Arc::new(WebConfirmer::default());
    let opts = ChatOptions {
        model,
        ..Default::default()
    };
    let chat = Chat::new(state.host(), client, opts, confirmer.clone());
    let session = Arc::new(ChatSession {
        chat: Arc::new(tokio::sync::Mutex::new(chat)),
        generation: AtomicU64::new(state.generation()),
        context: Mutex::new(Vec::new()),
        confirmer,
        cancel: Mutex::new(None),
        used: Mutex::new(Instant::now()),
    });
    let id = random_id();
    let mut chats = state
        .inner
        .chats
        .lock()
        .map_err(|_| ApiError::internal("chat sessions are unavailable"))?;
    if chats.len() >= MAX_SESSIONS
        && let Some(oldest) = chats
            .iter()
            .min_by_key(|(_, s)| s.used.lock().map(|u| *u).unwrap_or_else(|_| Instant::now()))
            .map(|(k, _)| k.clone())
    {
        chats.remove(&oldest);
    }
    chats.insert(id.clone(), session.clone());
    Ok((id, session))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendRequest {
    #[serde(default)]
    session_id: Option<String>,
    message: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    web_search: Option<bool>,
    /// Per-server switches (the checkboxes).
    #[serde(default)]
    servers: Option<HashMap<String, bool>>,
}

/// `POST /api/chat/send`.
pub async fn send(State(state): State<AppState>, ApiJson(req): ApiJson<SendRequest>) -> Response {
    match send_inner(state, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn send_inner(state: AppState, req: SendRequest) -> ApiResult<Response> {
    if req.message.trim().is_empty() {
        return Err(ApiError::bad_request("the message is empty"));
    }
    let (id, session) = match req.session_id.as_deref().and_then(|id| session(&state, id)) {
        Some(s) => (req.session_id.clone().unwrap_or_default(), s),
        None => create_session(&state, req.model.as_deref())?,
    };
    let mut chat = session.chat.clone().try_lock_owned().map_err(|_| {
        ApiError::conflict("a turn is already running in this chat; wait for it or cancel it")
    })?;
    let (tx, rx) = mpsc::unbounded_channel::<Value>();
    let _ = tx.send(json!({"type": "session", "id": id}));
    let cancel = CancellationToken::new();
    if let Ok(mut c) = session.cancel.lock() {
        *c = Some(cancel.clone());
    }
    if let Ok(mut s) = session.confirmer.sink.lock() {
        *s = Some(tx.clone());
    }
    let host_now = state.host();
    let generation = state.generation();
    tokio::spawn(async move {
        if session.generation.swap(generation, Ordering::SeqCst) != generation {
            chat.set_host(host_now.clone());
        }
        if let Some(m) = req
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
        {
            chat.options_mut().model = m.to_string();
        }
        if let Some(w) = req.web_search {
            chat.options_mut().web_search = w;
        }
        if let Some(servers) = &req.servers {
            for (name, on) in servers {
                chat.set_server_enabled(name, *on);
            }
        }
        let contexts: Vec<String> = session
            .context
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        for c in contexts {
            chat.add_model_context(c);
        }
        match expand_input(&host_now, req.message.trim(), chat.untrusted()).await {
            Err(e) => {
                let _ = tx.send(json!({"type": "error", "message": e}));
            }
            Ok(Expanded::Reply(text)) => {
                let _ = tx.send(json!({"type": "reply", "text": text}));
                let _ = tx.send(json!({"type": "done", "text": ""}));
            }
            Ok(Expanded::Parts(parts)) => {
                let (etx, mut erx) = mpsc::unbounded_channel::<ChatEvent>();
                let forward = {
                    let tx = tx.clone();
                    let host = host_now.clone();
                    tokio::spawn(async move {
                        while let Some(ev) = erx.recv().await {
                            let _ = tx.send(event_json(&host, ev));
                        }
                    })
                };
                let outcome = chat.send(parts, &etx, &cancel).await;
                drop(etx);
                let _ = forward.await;
                match outcome {
                    Ok(text) => {
                        let _ = tx.send(json!({"type": "done", "text": text}));
                    }
                    Err(e) => {
                        let _ = tx.send(json!({"type": "error", "message": e.to_string()}));
                    }
                }
            }
        }
        if let Ok(mut s) = session.confirmer.sink.lock() {
            *s = None;
        }
        if let Ok(mut p) = session.confirmer.pending.lock() {
            p.clear();
        }
        if let Ok(mut c) = session.cancel.lock() {
            *c = None;
        }
        drop(chat);
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|v| {
            (
                Ok::<Event, Infallible>(Event::default().data(v.to_string())),
                rx,
            )
        })
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// A chat event → the browser's JSON.
fn event_json(host: &switchboard_host::Host, ev: ChatEvent) -> Value {
    match ev {
        ChatEvent::Text(t) => json!({"type": "text", "text": t}),
        ChatEvent::Notice(n) => json!({"type": "notice", "text": n}),
        ChatEvent::ToolStart {
            id,
            server,
            tool,
            args,
        } => {
            let ui = tool_resource(host, &server, &tool);
            json!({"type": "tool-start", "id": id, "server": server, "tool": tool, "args": args, "ui": ui.map(|u| json!({"resourceUri": u}))})
        }
        ChatEvent::ToolProgress {
            id,
            progress,
            total,
            message,
        } => {
            json!({"type": "tool-progress", "id": id, "progress": progress, "total": total, "message": message})
        }
        ChatEvent::ToolEnd {
            id,
            server,
            tool,
            display,
            is_error,
            result,
        } => {
            let ui = result
                .as_ref()
                .and_then(result_ui_uri)
                .or_else(|| tool_resource(host, &server, &tool));
            json!({
                "type": "tool-end", "id": id, "server": server, "tool": tool, "display": display,
                "isError": is_error, "result": result, "ui": ui.map(|u| json!({"resourceUri": u})),
            })
        }
    }
}

fn tool_resource(host: &switchboard_host::Host, server: &str, tool: &str) -> Option<String> {
    let snap = host.server(server)?;
    let t = snap.tools.iter().find(|t| t.name == tool)?;
    let v = serde_json::to_value(t).ok()?;
    v.get("_meta")
        .and_then(tool_ui)
        .and_then(|u| u.resource_uri)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmAnswer {
    session_id: String,
    id: String,
    decision: String,
}

/// `POST /api/chat/confirm`.
pub async fn confirm(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ConfirmAnswer>,
) -> ApiResult<Json<Value>> {
    let decision = match req.decision.as_str() {
        "once" => Decision::ProceedOnce,
        "tool" => Decision::AlwaysTool,
        "server" => Decision::AlwaysServer,
        "cancel" => Decision::Cancel,
        other => {
            return Err(ApiError::bad_request(format!(
                "`decision` must be once, tool, server or cancel, not `{other}`"
            )));
        }
    };
    let s = session(&state, &req.session_id)
        .ok_or_else(|| ApiError::not_found("no such chat session"))?;
    let tx = s
        .confirmer
        .pending
        .lock()
        .ok()
        .and_then(|mut p| p.remove(&req.id))
        .ok_or_else(|| ApiError::not_found("no such confirmation (answered or expired)"))?;
    let _ = tx.send(decision);
    Ok(Json(json!({"ok": true})))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRef {
    session_id: String,
}

/// `POST /api/chat/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<SessionRef>,
) -> ApiResult<Json<Value>> {
    let s = session(&state, &req.session_id)
        .ok_or_else(|| ApiError::not_found("no such chat session"))?;
    let token = s.cancel.lock().ok().and_then(|c| c.clone());
    if let Some(t) = &token {
        t.cancel();
    }
    Ok(Json(json!({"ok": true, "cancelled": token.is_some()})))
}

/// `POST /api/chat/reset`: forget a conversation.
pub async fn reset(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<SessionRef>,
) -> ApiResult<Json<Value>> {
    let removed = state
        .inner
        .chats
        .lock()
        .ok()
        .and_then(|mut c| c.remove(&req.session_id));
    if let Some(s) = &removed
        && let Some(t) = s.cancel.lock().ok().and_then(|c| c.clone())
    {
        t.cancel();
    }
    Ok(Json(json!({"ok": removed.is_some()})))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextUpdate {
    session_id: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    structured_content: Option<Value>,
}

/// `POST /api/chat/context`: an app's model context, for the next turn.
pub async fn context(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ContextUpdate>,
) -> ApiResult<Json<Value>> {
    let s = session(&state, &req.session_id)
        .ok_or_else(|| ApiError::not_found("no such chat session"))?;
    let mut text = req.text.unwrap_or_default();
    if let Some(blocks) = req.content.as_ref().and_then(Value::as_array) {
        for b in blocks {
            if let Some(t) = b.get("text").and_then(Value::as_str) {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(t);
            }
        }
    }
    if let Some(sc) = &req.structured_content {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&sc.to_string());
    }
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("the context is empty"));
    }
    if let Ok(mut c) = s.context.lock() {
        c.push(text);
    }
    Ok(Json(json!({"ok": true})))
}
