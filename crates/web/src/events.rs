//! Live updates for the browser and server-initiated requests.
//!
//! - `GET /api/events`: Server-Sent Events of host events (status, re-listed,
//!   reconnecting, log), settings changes, and elicitation requests; the first event
//!   lists the elicitations still waiting (for pages opened later).
//! - [`WebHooks`]: the host's [`ClientHooks`]; an elicitation becomes a pending record
//!   and an event, and waits (at most [`ELICITATION_TIMEOUT`]) for
//!   `POST /api/elicitation/{id}` `{action, content?}`. A URL-mode request's event
//!   carries `link`: `{href}` only for a URL [`crate::links::link_target`] accepts,
//!   else `{refused}` (the page shows the URL as inert text with that reason).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_mcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use switchboard_mcp::{ClientHooks, ServerEvent, decline_elicitation};
use tokio::sync::{broadcast, oneshot};

use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::random::random_id;
use crate::state::AppState;

/// How long a server's elicitation waits for an answer before it is cancelled.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

struct Pending {
    server: String,
    request: Value,
    /// For a URL-mode request: `{href}` when it may be a link, else `{refused}`.
    link: Value,
    tx: oneshot::Sender<ElicitResult>,
}

/// What the page may do with a URL-mode request's `url`: `{"href": <normalised>}`
/// when it passes [`crate::links::link_target`], else `{"refused": <why>}`;
/// `null` for a form request.
fn link_for(request: &Value) -> Value {
    if request.get("mode").and_then(Value::as_str) != Some("url") {
        return Value::Null;
    }
    crate::links::link_json(request.get("url").and_then(Value::as_str).unwrap_or(""))
}

/// Elicitations waiting for the person.
pub struct ElicitationHub {
    events: broadcast::Sender<Value>,
    pending: Mutex<HashMap<String, Pending>>,
}

impl ElicitationHub {
    pub fn new(events: broadcast::Sender<Value>) -> Self {
        Self {
            events,
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn ask(
        self: &Arc<Self>,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let id = random_id();
        let value = serde_json::to_value(&request).unwrap_or(Value::Null);
        let link = link_for(&value);
        if let Some(why) = link.get("refused").and_then(Value::as_str) {
            tracing::warn!(server, "elicitation URL refused as a link: {why}");
        }
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(
                id.clone(),
                Pending {
                    server: server.to_string(),
                    request: value.clone(),
                    link: link.clone(),
                    tx,
                },
            );
        }
        let _ = self.events.send(json!({
            "type": "elicitation", "id": id, "server": server, "request": value, "link": link,
        }));
        let hub = self.clone();
        Box::pin(async move {
            let answer = tokio::time::timeout(ELICITATION_TIMEOUT, rx).await;
            if let Ok(mut p) = hub.pending.lock() {
                p.remove(&id);
            }
            let _ = hub
                .events
                .send(json!({"type": "elicitation-done", "id": id}));
            match answer {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => ElicitResult::new(ElicitationAction::Cancel),
                Err(_) => ElicitResult::new(ElicitationAction::Cancel),
            }
        })
    }

    /// Answers a pending elicitation; false when there is none with this id.
    pub fn answer(&self, id: &str, result: ElicitResult) -> bool {
        let pending = self.pending.lock().ok().and_then(|mut p| p.remove(id));
        match pending {
            Some(p) => p.tx.send(result).is_ok(),
            None => false,
        }
    }

    /// The elicitations still waiting, as events.
    pub fn list(&self) -> Vec<Value> {
        self.pending
            .lock()
            .map(|p| {
                p.iter()
                    .map(|(id, e)| {
                        json!({"type": "elicitation", "id": id, "server": e.server, "request": e.request, "link": e.link})
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Cancels every pending elicitation (shutdown).
    pub fn cancel_all(&self) {
        let all: Vec<Pending> = self
            .pending
            .lock()
            .map(|mut p| p.drain().map(|(_, v)| v).collect())
            .unwrap_or_default();
        for p in all {
            let _ = p.tx.send(ElicitResult::new(ElicitationAction::Cancel));
        }
    }
}

/// The host's hooks in the web app.
pub struct WebHooks {
    hub: Arc<ElicitationHub>,
}

impl WebHooks {
    pub fn new(hub: Arc<ElicitationHub>) -> Self {
        Self { hub }
    }
}

impl ClientHooks for WebHooks {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        self.hub.ask(server, request)
    }

    fn on_event(&self, server: &str, event: ServerEvent) {
        if let ServerEvent::Log { level, data, .. } = event {
            tracing::debug!(server, level, "{data}");
        }
    }
}

/// `GET /api/events`.
pub async fn events(
    State(state): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = state.inner.events.subscribe();
    let mut first = vec![json!({"type": "hello", "generation": state.generation()})];
    first.extend(state.inner.elicitations.list());
    let head = futures::stream::iter(first.into_iter().map(to_event));
    let tail = futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(v) => return Some((to_event(v), rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(head.chain(tail)).keep_alive(KeepAlive::default())
}

fn to_event(v: Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(v.to_string()))
}

#[derive(Debug, Deserialize)]
pub struct ElicitAnswer {
    action: String,
    #[serde(default)]
    content: Option<Value>,
}

/// `POST /api/elicitation/{id}` `{action: accept|decline|cancel, content?}`.
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ElicitAnswer>,
) -> ApiResult<Json<Value>> {
    let result = match body.action.as_str() {
        "accept" => {
            let content = body.content.unwrap_or_else(|| json!({}));
            if !content.is_object() {
                return Err(ApiError::bad_request("`content` must be a JSON object"));
            }
            ElicitResult::new(ElicitationAction::Accept).with_content(content)
        }
        "decline" => decline_elicitation(),
        "cancel" => ElicitResult::new(ElicitationAction::Cancel),
        other => {
            return Err(ApiError::bad_request(format!(
                "`action` must be accept, decline or cancel, not `{other}`"
            )));
        }
    };
    if state.inner.elicitations.answer(&id, result) {
        Ok(Json(json!({"ok": true})))
    } else {
        Err(ApiError::not_found(
            "no such elicitation (it was answered, timed out or the server went away)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn event_for(url: &str) -> Value {
        let (tx, mut rx) = broadcast::channel(8);
        let hub = Arc::new(ElicitationHub::new(tx));
        let request: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "Sign in", "url": url, "elicitationId": "e1",
        }))
        .unwrap();
        let waiting = hub.ask("srv", request);
        let ev = rx.recv().await.unwrap();
        assert_eq!(
            hub.list()[0]["link"],
            ev["link"],
            "pages opened later see it too"
        );
        hub.cancel_all();
        let _ = waiting.await;
        ev
    }

    #[tokio::test]
    async fn url_elicitations_carry_a_link_only_for_safe_urls() {
        let ev = event_for("https://auth.example.com/login?s=1").await;
        assert_eq!(ev["link"]["href"], "https://auth.example.com/login?s=1");
        assert!(ev["link"].get("refused").is_none());
        for hostile in [
            "javascript:alert(document.cookie)",
            "data:text/html,<script>alert(1)</script>",
            "file:///etc/passwd",
            "http://evil.example/phish",
            "not a url",
        ] {
            let ev = event_for(hostile).await;
            assert!(ev["link"].get("href").is_none(), "{hostile}: {ev}");
            let why = ev["link"]["refused"].as_str().unwrap();
            assert!(why.contains("will not open"), "{why}");
        }
        let ev = event_for("http://127.0.0.1:9/cb").await;
        assert_eq!(ev["link"]["href"], "http://127.0.0.1:9/cb");
    }
}
