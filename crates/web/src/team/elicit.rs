//! Elicitation in team chats: a server asking the person for input (`elicitation/create`)
//! during a chat's tool call, kept in the store like the chat's confirmations so that
//! any instance can show and answer it.
//!
//! - [`ElicitRouter`]: this instance's chat tool calls in flight, and gateway calls of
//!   clients on 2026-07-28 (which take questions as an `InputRequiredResult`), by user
//!   and server (the client cache's key: `NAME` or `catalog:NAME`). The cache gives
//!   every connection it opens [`TeamHooks`] for its user and server; an elicitation
//!   arriving on it goes to the one call of that user running on that server here.
//!   With none (a gateway call of an older client, a Test, a call that already ended),
//!   or more than one (two of the user's calls to the same server at once: which one
//!   asked cannot be told), it is declined, as before.
//! - The turn's side ([`ChatAsker::ask`]): the request (server, message, mode, the
//!   requested schema or URL) is written to the store sealed, shown as an
//!   `elicitation` event on the chat's stream, and the store is polled every
//!   [`POLL_EVERY`] for the answer; `TeamOptions::elicitation_timeout` (default
//!   [`ELICITATION_TIMEOUT`]) or the turn's cancel answers `cancel`. Then the row is
//!   removed and an `elicitation-done` event sent.
//! - `POST /api/chats/{id}/elicitation` `{id, action: accept|decline|cancel, content?}`
//!   ([`answer`]), on any instance: at most [`MAX_ANSWER_BYTES`], parsed in two steps,
//!   `content` checked against the requested schema ([`check_content`]), written to the
//!   store for the instance running the turn.
//!
//! - Sampling and roots ([`TeamHooks`]): a gateway call of a client on 2026-07-28
//!   hands a server's `sampling/createMessage` and `roots/list` to that client like an
//!   elicitation (answered, or refused when the client did not declare the
//!   capability). Anywhere else — a chat, a Test, an older client's call — sampling is
//!   refused with an error that says why, and `roots/list` gets an empty list: a team
//!   instance has no roots of its user's to offer, and its own working directory is
//!   the server machine's, never to be shown to a user's server.
//!
//! Must not: answer for a user other than the signed-in one (the answer is written only
//! through `Store::for_user`, so another user's elicitation is a 404), hand a server
//! content the requested schema does not allow, or make a URL clickable that
//! [`crate::links::link_target`] refuses.
#![allow(deprecated)] // sampling and roots: deprecated by SEP-2577, still asked by servers

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_gateway::Forwarded;
use switchboard_mcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, ErrorCode, ErrorData, Root,
};
use switchboard_mcp::{ClientHooks, ServerEvent, decline_elicitation};
use switchboard_store::{ElicitAction, ElicitAnswer, UserStore};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::session::SignedIn;
use super::state::{TeamState, store_error};
use crate::access::parse_json;
use crate::error::{ApiError, ApiResult};

/// How long an elicitation waits for its answer before the server is told `cancel`:
/// below the chat's 120 s tool-call limit, so the server hears the answer while its
/// call can still finish.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(100);
/// How often the turn reads the store for the answer.
pub const POLL_EVERY: Duration = Duration::from_millis(250);
/// The largest answer body taken.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The longest string value an answer may hold (characters), whatever the schema says.
const MAX_STRING_CHARS: usize = 10_000;
/// At most this many fields in a form.
const MAX_FIELDS: usize = 100;

/// Where an elicitation of one chat call goes: the turn's store, chat, event stream and
/// cancel.
#[derive(Clone)]
pub(crate) struct ChatAsker {
    pub us: UserStore,
    pub chat_id: String,
    pub events: mpsc::UnboundedSender<Value>,
    pub cancel: CancellationToken,
}

/// Where the elicitations of one registered call go.
#[derive(Clone)]
pub(crate) enum Asker {
    /// A chat's tool call: asked through the store (see the module doc).
    Chat(ChatAsker),
    /// A gateway call of a client on 2026-07-28: handed to its relay, which asks the
    /// client (`switchboard_gateway::InputTable`).
    Gateway(mpsc::UnboundedSender<Forwarded>),
}

struct Active {
    seq: u64,
    user: String,
    server: String,
    asker: Asker,
}

/// This instance's chat tool calls in flight, for routing elicitations to them.
pub struct ElicitRouter {
    timeout: Duration,
    active: Mutex<(u64, Vec<Active>)>,
}

impl std::fmt::Debug for ElicitRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitRouter")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A chat call registered with the router; dropping it removes the registration.
pub(crate) struct ActiveCall {
    router: Arc<ElicitRouter>,
    seq: u64,
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        if let Ok(mut a) = self.router.active.lock() {
            a.1.retain(|c| c.seq != self.seq);
        }
    }
}

impl ElicitRouter {
    /// A router whose elicitations wait at most `timeout` for an answer.
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            active: Mutex::new((0, Vec::new())),
        }
    }

    /// Registers a chat call of `user` on `server` (the cache key) for as long as the
    /// returned guard lives.
    pub(crate) fn enter(self: &Arc<Self>, user: &str, server: &str, asker: Asker) -> ActiveCall {
        let seq = match self.active.lock() {
            Ok(mut a) => {
                a.0 += 1;
                let seq = a.0;
                a.1.push(Active {
                    seq,
                    user: user.to_owned(),
                    server: server.to_owned(),
                    asker,
                });
                seq
            }
            Err(_) => 0,
        };
        ActiveCall {
            router: Arc::clone(self),
            seq,
        }
    }

    /// The hooks for a connection of `user` to `server` (the cache key).
    pub(crate) fn hooks_for(self: &Arc<Self>, user: &str, server: &str) -> Arc<dyn ClientHooks> {
        Arc::new(TeamHooks {
            router: Arc::clone(self),
            user: user.to_owned(),
            server: server.to_owned(),
        })
    }

    /// The one chat call of `user` on `server` running here, if exactly one is; else
    /// how many there are (0, or 2 for "more than one").
    fn target(&self, user: &str, server: &str) -> Result<Asker, usize> {
        let a = self.active.lock().map_err(|_| 0usize)?;
        pick(
            a.1.iter()
                .map(|c| (c.user.as_str(), c.server.as_str(), &c.asker)),
            user,
            server,
        )
        .cloned()
    }
}

/// The one item registered for (`user`, `server`), else how many there are (0, or 2
/// for "more than one").
fn pick<'a, T>(
    items: impl Iterator<Item = (&'a str, &'a str, T)>,
    user: &str,
    server: &str,
) -> Result<T, usize> {
    let mut found = items.filter(|(u, s, _)| *u == user && *s == server);
    match (found.next(), found.next()) {
        (Some((_, _, one)), None) => Ok(one),
        (None, _) => Err(0),
        (Some(_), Some(_)) => Err(2),
    }
}

/// The client hooks of a cached team connection: elicitations go to the chat or
/// gateway call running on it, sampling and roots only to a gateway call's client
/// (see the module doc).
struct TeamHooks {
    router: Arc<ElicitRouter>,
    user: String,
    server: String,
}

impl ClientHooks for TeamHooks {
    fn elicit(
        &self,
        _server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let server = self.server.clone();
        match self.router.target(&self.user, &server) {
            Ok(Asker::Chat(asker)) => {
                let timeout = self.router.timeout;
                Box::pin(async move { asker.ask(&server, request, timeout).await })
            }
            Ok(Asker::Gateway(relay)) => ask_gateway_client(
                &relay,
                |tx| Forwarded::Elicit(request, tx),
                decline_elicitation,
            ),
            Err(n) => {
                tracing::info!("{}", no_asker("elicitation", &server, n));
                Box::pin(async { decline_elicitation() })
            }
        }
    }

    fn sample(
        &self,
        _server: &str,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>> {
        let server = self.server.clone();
        let relay = match self.router.target(&self.user, &server) {
            Ok(Asker::Gateway(relay)) => relay,
            Ok(Asker::Chat(_)) => {
                return refused(format!(
                    "sampling declined: server `{server}` asked during a team chat, and team \
                     chats do not run the model for servers"
                ));
            }
            Err(n) => {
                return refused(format!(
                    "{} (sampling is answered only by a team gateway client on protocol \
                     2026-07-28 that declared it)",
                    no_asker("sampling", &server, n)
                ));
            }
        };
        ask_gateway_client(
            &relay,
            |tx| Forwarded::Sample(params, tx),
            || Err(refusal("sampling declined: the gateway call ended".into())),
        )
    }

    fn supports_sampling(&self) -> bool {
        // Declared so that a gateway client that samples can be asked; every other
        // call is refused with a reason (see `sample`).
        true
    }

    fn list_roots(&self, _server: &str) -> BoxFuture<'static, Result<Vec<Root>, ErrorData>> {
        match self.router.target(&self.user, &self.server) {
            Ok(Asker::Gateway(relay)) => {
                ask_gateway_client(&relay, Forwarded::Roots, || Ok(Vec::new()))
            }
            _ => Box::pin(std::future::ready(Ok(Vec::new()))),
        }
    }

    fn roots(&self) -> Vec<Root> {
        // Never the default (this process's working directory, on the team's machine).
        Vec::new()
    }

    fn on_event(&self, server: &str, event: ServerEvent) {
        if let ServerEvent::Log { level, data, .. } = event {
            tracing::debug!(server, level, "{data}");
        }
    }
}

/// Hands a server's question to the gateway call `relay` (its client answers it);
/// `ended` is the answer when the call is gone before it answers.
fn ask_gateway_client<T: Send + 'static>(
    relay: &mpsc::UnboundedSender<Forwarded>,
    question: impl FnOnce(oneshot::Sender<T>) -> Forwarded,
    ended: impl FnOnce() -> T + Send + 'static,
) -> BoxFuture<'static, T> {
    let (tx, rx) = oneshot::channel();
    let sent = relay.send(question(tx)).is_ok();
    Box::pin(async move {
        match sent {
            true => rx.await.unwrap_or_else(|_| ended()),
            false => ended(),
        }
    })
}

/// Why a server's question has no call to go to: none of this user's calls that can
/// ask runs on `server` here (`n` = 0), or more than one does.
fn no_asker(what: &str, server: &str, n: usize) -> String {
    let why = if n == 0 {
        "no call of this user that can ask runs on this server here"
    } else {
        "more than one call of this user runs on this server at once"
    };
    format!("{what} declined for server `{server}`: {why}")
}

fn refusal(message: String) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_REQUEST, message, None)
}

fn refused(message: String) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>> {
    tracing::info!("{message}");
    Box::pin(std::future::ready(Err(refusal(message))))
}

/// What is stored and shown for a request: `{server, mode, message}` and the requested
/// schema (form) or the URL with what the page may do with it (`link`: `{href}` or
/// `{refused}`).
fn request_value(server: &str, request: &ElicitRequestParams) -> Value {
    match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => json!({
            "server": server, "mode": "form", "message": message,
            "requestedSchema": serde_json::to_value(requested_schema).unwrap_or(Value::Null),
        }),
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            let link = crate::links::link_json(url);
            json!({"server": server, "mode": "url", "message": message, "url": url, "link": link})
        }
        other => json!({
            "server": server, "mode": "unknown",
            "message": serde_json::to_value(other).ok().and_then(|v| v.get("message").cloned()),
        }),
    }
}

/// Removes the stored request and tells the page, however the wait ended (an answer, a
/// timeout, the turn's cancel, or the server dropping its request).
struct Finish {
    us: UserStore,
    events: mpsc::UnboundedSender<Value>,
    id: String,
    action: &'static str,
}

impl Drop for Finish {
    fn drop(&mut self) {
        let _ = self
            .events
            .send(json!({"type": "elicitation-done", "id": self.id, "action": self.action}));
        let us = self.us.clone();
        let id = std::mem::take(&mut self.id);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = us.finish_elicitation(&id).await {
                    tracing::warn!("team chat: removing an elicitation: {e}");
                }
            });
        }
    }
}

impl ChatAsker {
    /// Asks through the store and waits for the answer (see the module doc).
    async fn ask(
        self,
        server: &str,
        request: ElicitRequestParams,
        timeout: Duration,
    ) -> ElicitResult {
        let value = request_value(server, &request);
        let id = match self
            .us
            .ask_elicitation(&self.chat_id, &value, timeout)
            .await
        {
            Ok(Some(id)) => id,
            Ok(None) => return ElicitResult::new(ElicitationAction::Cancel),
            Err(e) => {
                tracing::warn!("team chat: saving an elicitation: {e}");
                return decline_elicitation();
            }
        };
        let mut event = value;
        if let Value::Object(m) = &mut event {
            m.insert("type".into(), json!("elicitation"));
            m.insert("id".into(), json!(id));
        }
        let _ = self.events.send(event);
        let mut finish = Finish {
            us: self.us.clone(),
            events: self.events.clone(),
            id: id.clone(),
            action: "cancel",
        };
        let deadline = Instant::now() + timeout;
        let answer = loop {
            if self.cancel.is_cancelled() || Instant::now() >= deadline {
                break None;
            }
            match self.us.elicitation_answer(&id).await {
                Ok(Some(a)) => break Some(a),
                Ok(None) => {}
                Err(e) => tracing::warn!("team chat: reading an elicitation answer: {e}"),
            }
            tokio::select! {
                () = tokio::time::sleep(POLL_EVERY.min(deadline.saturating_duration_since(Instant::now()))) => {}
                () = self.cancel.cancelled() => {}
            }
        };
        match answer {
            Some(ElicitAnswer {
                action: ElicitAction::Accept,
                content,
            }) => {
                finish.action = "accept";
                let mut r = ElicitResult::new(ElicitationAction::Accept);
                if let Some(c) = content {
                    r = r.with_content(c);
                }
                r
            }
            Some(ElicitAnswer {
                action: ElicitAction::Decline,
                ..
            }) => {
                finish.action = "decline";
                decline_elicitation()
            }
            _ => ElicitResult::new(ElicitationAction::Cancel),
        }
    }
}

/// An answer as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnswer {
    id: String,
    action: String,
    #[serde(default)]
    content: Option<Value>,
}

/// `POST /api/chats/{id}/elicitation`.
pub async fn answer(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(chat): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    if body.len() > MAX_ANSWER_BYTES {
        return Err(ApiError::new(
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "an elicitation answer is at most {MAX_ANSWER_BYTES} bytes; shorten the values"
            ),
        ));
    }
    let raw: RawAnswer = parse_json(&body)?;
    let action = ElicitAction::parse(&raw.action).map_err(store_error)?;
    let us = state.store().for_user(&signed.user.id);
    let gone = || {
        ApiError::not_found(
            "no such elicitation waiting in this chat (answered, timed out, or its turn ended)",
        )
    };
    let request = us
        .waiting_elicitation(&chat, &raw.id)
        .await
        .map_err(store_error)?
        .ok_or_else(gone)?;
    let content = match (action, raw.content) {
        (ElicitAction::Accept, content) => {
            if request["mode"] == "form" {
                let content = content.unwrap_or_else(|| json!({}));
                Some(
                    check_content(&request["requestedSchema"], &content)
                        .map_err(ApiError::bad_request)?,
                )
            } else if content.is_some() {
                return Err(ApiError::bad_request(
                    "a URL elicitation is accepted without `content`",
                ));
            } else {
                None
            }
        }
        (_, Some(_)) => {
            return Err(ApiError::bad_request(
                "only an `accept` answer carries `content`",
            ));
        }
        (_, None) => None,
    };
    let answered = us
        .answer_elicitation(&chat, &raw.id, &ElicitAnswer { action, content })
        .await
        .map_err(store_error)?;
    if !answered {
        return Err(gone());
    }
    Ok(Json(json!({"ok": true})))
}

/// The waiting elicitations of the caller's chat `id`, as `GET /api/chats/{id}` lists
/// them.
pub(crate) async fn pending_json(us: &UserStore, id: &str) -> ApiResult<Value> {
    let pending = us.pending_elicitations(id).await.map_err(store_error)?;
    Ok(Value::Array(
        pending
            .iter()
            .map(|p| json!({"id": p.id, "request": p.request}))
            .collect(),
    ))
}

/// `content` as the requested schema allows it: an object whose every key is one of
/// the schema's properties, with every required one, each value of its property's
/// restricted type (string with its length, format and choices; number or integer in
/// its range; boolean; an array of choices). The error names the field and the rule.
pub(crate) fn check_content(schema: &Value, content: &Value) -> Result<Value, String> {
    let Some(given) = content.as_object() else {
        return Err("`content` must be a JSON object of field → value".into());
    };
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if given.len() > MAX_FIELDS {
        return Err(format!("a form has at most {MAX_FIELDS} fields"));
    }
    for (name, value) in given {
        let Some(prop) = props.get(name) else {
            return Err(format!("`{name}` is not a field of this form"));
        };
        check_field(name, prop, value)?;
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !given.contains_key(r) {
                return Err(format!("`{r}` is required"));
            }
        }
    }
    Ok(content.clone())
}

/// The allowed values of a choice: `enum`, or the `const`s of `oneOf` / `anyOf`.
fn choices(schema: &Value) -> Option<Vec<&str>> {
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return Some(e.iter().filter_map(Value::as_str).collect());
    }
    ["oneOf", "anyOf"].iter().find_map(|k| {
        schema.get(*k).and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(|o| o.get("const").and_then(Value::as_str))
                .collect()
        })
    })
}

fn bound(schema: &Value, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn check_range(name: &str, schema: &Value, n: f64) -> Result<(), String> {
    if let Some(min) = bound(schema, "minimum")
        && n < min
    {
        return Err(format!("`{name}` must be at least {min}"));
    }
    if let Some(max) = bound(schema, "maximum")
        && n > max
    {
        return Err(format!("`{name}` must be at most {max}"));
    }
    Ok(())
}

fn check_field(name: &str, prop: &Value, value: &Value) -> Result<(), String> {
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("");
    match ty {
        "string" => {
            let Some(s) = value.as_str() else {
                return Err(format!("`{name}` must be a string"));
            };
            let n = s.chars().count();
            if n > MAX_STRING_CHARS {
                return Err(format!(
                    "`{name}` is longer than {MAX_STRING_CHARS} characters"
                ));
            }
            if let Some(min) = prop.get("minLength").and_then(Value::as_u64)
                && (n as u64) < min
            {
                return Err(format!("`{name}` must be at least {min} characters"));
            }
            if let Some(max) = prop.get("maxLength").and_then(Value::as_u64)
                && (n as u64) > max
            {
                return Err(format!("`{name}` must be at most {max} characters"));
            }
            if let Some(allowed) = choices(prop)
                && !allowed.contains(&s)
            {
                return Err(format!("`{name}` must be one of {}", allowed.join(", ")));
            }
            check_format(name, prop.get("format").and_then(Value::as_str), s)
        }
        "number" => match value.as_f64() {
            Some(n) if n.is_finite() => check_range(name, prop, n),
            _ => Err(format!("`{name}` must be a number")),
        },
        "integer" => {
            if !(value.is_i64() || value.is_u64()) {
                return Err(format!("`{name}` must be a whole number"));
            }
            check_range(name, prop, value.as_f64().unwrap_or(0.0))
        }
        "boolean" => {
            if value.is_boolean() {
                Ok(())
            } else {
                Err(format!("`{name}` must be true or false"))
            }
        }
        "array" => {
            let allowed = prop.get("items").and_then(choices).ok_or_else(|| {
                format!("`{name}` is a list without choices, which a form cannot ask for")
            })?;
            let Some(items) = value.as_array() else {
                return Err(format!("`{name}` must be a list of choices"));
            };
            let mut seen: Vec<&str> = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(s) if allowed.contains(&s) && !seen.contains(&s) => seen.push(s),
                    _ => {
                        return Err(format!(
                            "`{name}` must list distinct choices among {}",
                            allowed.join(", ")
                        ));
                    }
                }
            }
            let n = items.len() as u64;
            if let Some(min) = prop.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                return Err(format!("`{name}` needs at least {min} choices"));
            }
            if let Some(max) = prop.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                return Err(format!("`{name}` takes at most {max} choices"));
            }
            Ok(())
        }
        other => Err(format!(
            "`{name}` has type `{other}`, which an elicitation form cannot ask for"
        )),
    }
}

fn check_format(name: &str, format: Option<&str>, s: &str) -> Result<(), String> {
    let ok = match format {
        Some("email") => s.split_once('@').is_some_and(|(l, d)| {
            !l.is_empty() && d.contains('.') && !s.contains(char::is_whitespace)
        }),
        Some("uri") => url::Url::parse(s).is_ok(),
        Some("date") => is_date(s),
        Some("date-time") => s.len() > 10 && is_date(&s[..10]) && s.as_bytes()[10] == b'T',
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a valid {}",
            format.unwrap_or("value")
        ))
    }
}

/// `YYYY-MM-DD` with a month 1–12 and a day 1–31.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|t| t.parse::<u32>().ok());
    matches!((num(0..4), num(5..7), num(8..10)), (Some(_), Some(m), Some(d)) if (1..=12).contains(&m) && (1..=31).contains(&d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 20},
            "email": {"type": "string", "format": "email"},
            "when": {"type": "string", "format": "date"},
            "n": {"type": "integer", "minimum": 1, "maximum": 100},
            "x": {"type": "number", "minimum": 0, "maximum": 1000},
            "ok": {"type": "boolean"},
            "friend": {"type": "string", "enum": ["Monica", "Ross"]},
            "hero": {"type": "string", "oneOf": [{"const": "hero-1", "title": "Superman"}]},
            "tools": {"type": "array", "minItems": 1, "maxItems": 2,
                "items": {"anyOf": [{"const": "a"}, {"const": "b"}, {"const": "c"}]}},
        }})
    }

    #[test]
    fn answers_are_checked_against_the_requested_schema() {
        let s = schema();
        let good = json!({"name": "Ada", "email": "ada@example.com", "when": "1815-12-10",
            "n": 42, "x": 3.5, "ok": true, "friend": "Ross", "hero": "hero-1", "tools": ["a", "c"]});
        assert_eq!(check_content(&s, &good).unwrap(), good);
        for (bad, why) in [
            (json!([]), "JSON object"),
            (json!({}), "`name` is required"),
            (json!({"name": "Ada", "extra": 1}), "not a field"),
            (json!({"name": ""}), "at least 1"),
            (json!({"name": 7}), "must be a string"),
            (json!({"name": "A", "email": "nope"}), "valid email"),
            (json!({"name": "A", "when": "1815-13-10"}), "valid date"),
            (json!({"name": "A", "n": 2.5}), "whole number"),
            (json!({"name": "A", "n": 101}), "at most 100"),
            (json!({"name": "A", "x": -1}), "at least 0"),
            (json!({"name": "A", "ok": "yes"}), "true or false"),
            (
                json!({"name": "A", "friend": "Joey"}),
                "one of Monica, Ross",
            ),
            (json!({"name": "A", "hero": "hero-2"}), "one of hero-1"),
            (json!({"name": "A", "tools": []}), "at least 1"),
            (json!({"name": "A", "tools": ["a", "a"]}), "distinct"),
            (json!({"name": "A", "tools": ["a", "b", "c"]}), "at most 2"),
        ] {
            let err = check_content(&s, &bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let odd = json!({"properties": {"o": {"type": "object"}}});
        assert!(
            check_content(&odd, &json!({"o": {}}))
                .unwrap_err()
                .contains("cannot ask for")
        );
    }

    #[test]
    fn url_requests_carry_a_link_only_for_safe_urls() {
        let req = |url: &str| -> ElicitRequestParams {
            serde_json::from_value(
                json!({"mode": "url", "message": "m", "url": url, "elicitationId": "e"}),
            )
            .unwrap()
        };
        let v = request_value("s", &req("https://auth.example.com/x"));
        assert_eq!(v["link"]["href"], "https://auth.example.com/x");
        let v = request_value("s", &req("javascript:alert(1)"));
        assert!(v["link"].get("href").is_none(), "{v}");
        assert!(
            v["link"]["refused"]
                .as_str()
                .unwrap()
                .contains("will not open")
        );
    }

    /// Sampling and roots reach only a gateway call's client; without one, sampling is
    /// refused with its reason and the roots are empty (never this process's directory).
    #[tokio::test]
    async fn sampling_and_roots_go_only_to_a_gateway_call() {
        let router = Arc::new(ElicitRouter::new(Duration::from_secs(5)));
        let hooks = router.hooks_for("u", "s");
        assert!(hooks.supports_sampling());
        assert!(hooks.roots().is_empty());
        assert!(hooks.list_roots("s").await.unwrap().is_empty());
        let params: CreateMessageRequestParams = serde_json::from_value(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 5,
        }))
        .unwrap();
        let err = hooks.sample("s", params.clone()).await.unwrap_err();
        assert!(err.message.contains("no call of this user"), "{err:?}");

        let (tx, mut rx) = mpsc::unbounded_channel();
        let _call = router.enter("u", "s", Asker::Gateway(tx));
        let answered = tokio::spawn({
            let hooks = Arc::clone(&hooks);
            async move { hooks.sample("s", params).await }
        });
        let Some(Forwarded::Sample(asked, reply)) = rx.recv().await else {
            panic!("the sampling request reached the gateway call");
        };
        assert_eq!(asked.max_tokens, 5);
        let result: CreateMessageResult = serde_json::from_value(json!({
            "role": "assistant", "model": "m",
            "content": {"type": "text", "text": "sampled"},
        }))
        .unwrap();
        reply.send(Ok(result)).unwrap();
        assert_eq!(answered.await.unwrap().unwrap().model, "m");

        let roots = tokio::spawn({
            let hooks = Arc::clone(&hooks);
            async move { hooks.list_roots("s").await }
        });
        let Some(Forwarded::Roots(reply)) = rx.recv().await else {
            panic!("roots/list reached the gateway call");
        };
        reply
            .send(Ok(vec![Root::new("file:///home/u/project")]))
            .unwrap();
        assert_eq!(
            roots.await.unwrap().unwrap()[0].uri,
            "file:///home/u/project"
        );
        // Another user's call is not this user's.
        let other = router.hooks_for("v", "s");
        assert!(other.list_roots("s").await.unwrap().is_empty());
    }

    #[test]
    fn an_elicitation_goes_to_the_one_chat_call_on_its_server() {
        let calls = |list: &[(&'static str, &'static str, &'static str)]| list.to_vec();
        let one = calls(&[("u", "s", "c1"), ("v", "s", "c9"), ("u", "t", "c8")]);
        assert_eq!(pick(one.into_iter(), "u", "s"), Ok("c1"));
        let none = calls(&[("v", "s", "c9")]);
        assert_eq!(
            pick(none.into_iter(), "u", "s"),
            Err(0),
            "another user's call"
        );
        let two = calls(&[("u", "s", "c1"), ("u", "s", "c2")]);
        assert_eq!(
            pick(two.into_iter(), "u", "s"),
            Err(2),
            "which chat asked is unknown"
        );
    }
}
