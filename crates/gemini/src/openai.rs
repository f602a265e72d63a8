//! An OpenAI-compatible chat-completions provider (`POST {base}/chat/completions`), so a
//! chat can run on local models (llama.cpp's `llama-server`, Ollama, vLLM, LM Studio…)
//! or any hosted API that speaks the same wire format, with the same MCP tools.
//!
//! [`OpenAiClient`] implements [`ModelClient`]: the chat loop keeps building Gemini-shaped
//! [`GenerateRequest`]s, and this module translates them on the way out and the answers
//! on the way back ([`to_chat_request`], [`from_chat_completion`], [`ChunkAssembler`]):
//!
//! | Gemini request | chat-completions message |
//! |---|---|
//! | `systemInstruction` | one `system` message |
//! | `user` text / `inlineData` parts | a `user` message (text, or `text` + `image_url` data-URI / `input_audio` parts) |
//! | `model` turn | an `assistant` message: `content` text, `tool_calls` `[{id, type: "function", function: {name, arguments: "<JSON>"}}]` (thought parts dropped) |
//! | `functionResponse` parts | one `tool` message each: `{tool_call_id, content: "<JSON of response>"}` |
//! | `inlineData` next to (or inside) function responses | a `user` message after the `tool` messages |
//! | `tools[].functionDeclarations` | `tools: [{type: "function", function: {name, description, parameters}}]` |
//! | `toolConfig` / `generationConfig` | `tool_choice`; `temperature`, `top_p`, `max_tokens`, `stop` |
//!
//! A function call without an id gets a stable one (9 letters and digits, derived from
//! its position, so the same history always translates to the same ids), and the
//! function response that answers it is given the same id. Answers come back as one
//! candidate: a thought part for `reasoning_content`, a text part, then one
//! `functionCall` part per tool call (ids kept, arguments parsed); `finish_reason` is
//! mapped (`stop`/`tool_calls` → `STOP`, `length` → `MAX_TOKENS`, `content_filter` →
//! `SAFETY`).
//!
//! Streamed (`stream: true`), each SSE `data:` event is a `chat.completion.chunk`; text
//! increments are passed on as they come, tool-call fragments are joined by `index`, and
//! the complete calls arrive in one final chunk when `data: [DONE]` (or the end of the
//! body after a `finish_reason`) is reached.
//!
//! Errors (`{"error": {"message", "type", "code"}}`, also vLLM's flat form and plain
//! strings) become [`GeminiError::Api`] with [`ApiKind::OpenAi`]; 429 and 5xx are retried
//! with backoff like the Gemini client (`Retry-After` and `retry-after-ms` honoured).

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::client::{
    ApiKind, GeminiError, RetryCallback, RetryNotice, SseParser, describe_reqwest, jitter,
    parse_retry_after, snippet,
};
use crate::provider::{ChunkStream, ModelClient};
use crate::types::{
    Candidate, Content, FunctionCall, FunctionCallingMode, FunctionDeclaration, GenerateRequest,
    GenerateResponse, Part, UsageMetadata,
};

/// The API base used when nothing else is configured (OpenAI's own).
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Environment variable holding the API key (optional: local servers need none).
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Environment variable holding the API base (the path up to and including `/v1`).
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// How to build an [`OpenAiClient`].
#[derive(Clone)]
pub struct OpenAiOptions {
    /// The API base: the path up to and including `/v1`, e.g.
    /// `http://127.0.0.1:8080/v1` (llama.cpp), `http://localhost:11434/v1` (Ollama),
    /// `http://localhost:8000/v1` (vLLM). A trailing `/` or `/chat/completions` is
    /// stripped.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set and not empty.
    pub api_key: Option<String>,
    /// The HTTP client to use (one with a 15 s connect timeout is built otherwise).
    pub http: Option<reqwest::Client>,
    /// Retries after the first attempt on 429/500/502/503/504 and connection failures.
    pub max_retries: u32,
    /// The first retry waits about this long; each further retry doubles it (±20 %).
    pub backoff_base: Duration,
    /// Cap on one wait. A server asking for a longer wait than this is not retried.
    pub max_backoff: Duration,
    /// Told about every retry.
    pub on_retry: Option<RetryCallback>,
}

impl Default for OpenAiOptions {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            http: None,
            max_retries: 3,
            backoff_base: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            on_retry: None,
        }
    }
}

impl fmt::Debug for OpenAiOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiOptions")
            .field("base_url", &self.base_url)
            .field("api_key", &mask(self.api_key.as_deref()))
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("max_backoff", &self.max_backoff)
            .finish_non_exhaustive()
    }
}

impl OpenAiOptions {
    /// Defaults, with the key from `OPENAI_API_KEY` and the base from `OPENAI_BASE_URL`
    /// when they are set and not empty.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`from_env`](Self::from_env), reading variables through `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Self {
        let mut opts = Self::default();
        if let Some(key) = get(API_KEY_ENV).filter(|k| !k.trim().is_empty()) {
            opts.api_key = Some(key.trim().to_owned());
        }
        if let Some(url) = get(BASE_URL_ENV).filter(|u| !u.trim().is_empty()) {
            opts.base_url = url.trim().to_owned();
        }
        opts
    }
}

fn mask(secret: Option<&str>) -> String {
    match secret {
        Some(s) if !s.is_empty() => format!("<{} chars>", s.len()),
        _ => "<unset>".into(),
    }
}

/// The API base as requests use it: trimmed, without a trailing `/` or
/// `/chat/completions`, `http(s)` with a host and no query or fragment.
pub fn normalize_base_url(raw: &str) -> Result<String, GeminiError> {
    let invalid = |reason: &str| GeminiError::InvalidBaseUrl {
        api: ApiKind::OpenAi,
        url: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let mut url = raw.trim().trim_end_matches('/');
    if let Some(stripped) = url.strip_suffix("/chat/completions") {
        url = stripped.trim_end_matches('/');
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("the URL has no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("the URL must not have a query or fragment"));
    }
    Ok(url.to_owned())
}

/// What the person can do about an API error from an OpenAI-compatible server.
pub(crate) fn hint_for(status: u16, reason: Option<&str>) -> Option<&'static str> {
    match (status, reason) {
        (401 | 403, _) => Some("check OPENAI_API_KEY; local servers usually need none"),
        (404, _) => Some(
            "check the model name (--model) and the base URL (--base-url or OPENAI_BASE_URL: the path up to and including /v1)",
        ),
        (400, Some("context_length_exceeded")) => {
            Some("the conversation no longer fits the model's context: start a new chat")
        }
        (429, Some("insufficient_quota")) => {
            Some("the quota is used up: check the plan and billing")
        }
        (429, _) => Some("rate limit reached: wait a little and try again"),
        (500..=599, _) => Some("the model server had a problem: try again in a moment"),
        _ => None,
    }
}

/// A client for one OpenAI-compatible API base. Cheap to clone.
#[derive(Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    api_key: Option<String>,
    base_url: String,
    max_retries: u32,
    backoff_base: Duration,
    max_backoff: Duration,
    on_retry: Option<RetryCallback>,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("base_url", &self.base_url)
            .field("api_key", &mask(self.api_key.as_deref()))
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// A client from `opts`. Fails only on a base URL that is not `http(s)`; no key is
    /// needed.
    pub fn new(opts: OpenAiOptions) -> Result<Self, GeminiError> {
        let base_url = normalize_base_url(&opts.base_url)?;
        let http = match opts.http {
            Some(http) => http,
            None => crate::client::default_http(ApiKind::OpenAi)?,
        };
        Ok(Self {
            http,
            api_key: opts
                .api_key
                .map(|k| k.trim().to_owned())
                .filter(|k| !k.is_empty()),
            base_url,
            max_retries: opts.max_retries,
            backoff_base: opts.backoff_base,
            max_backoff: opts.max_backoff,
            on_retry: opts.on_retry,
        })
    }

    /// The API base in use.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `{base}/chat/completions`.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    /// One whole answer (`stream: false`).
    pub async fn generate(
        &self,
        model: &str,
        request: &GenerateRequest,
    ) -> Result<GenerateResponse, GeminiError> {
        let body = encode(&to_chat_request(check_model(model)?, request, false))?;
        let url = self.endpoint();
        let response = self.send(&url, body, false).await?;
        let bytes = response.bytes().await.map_err(|source| GeminiError::Http {
            api: ApiKind::OpenAi,
            url: url.clone(),
            message: format!("reading the answer failed: {source}"),
            source,
        })?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| GeminiError::Decode {
            api: ApiKind::OpenAi,
            message: format!(
                "the chat/completions answer is not JSON ({e}): {}",
                snippet(&String::from_utf8_lossy(&bytes))
            ),
        })?;
        from_chat_completion(&value)
    }

    /// The answer as it is produced (`stream: true`): text increments as they come, the
    /// complete function calls in one final chunk. Only the opening is retried.
    pub async fn stream(
        &self,
        model: &str,
        request: &GenerateRequest,
    ) -> Result<ChunkStream, GeminiError> {
        let body = encode(&to_chat_request(check_model(model)?, request, true))?;
        let response = self.send(&self.endpoint(), body, true).await?;
        Ok(chunk_stream(Box::pin(response.bytes_stream())))
    }

    /// Sends with retries; returns the first successful response or the last error.
    async fn send(
        &self,
        url: &str,
        body: Bytes,
        sse: bool,
    ) -> Result<reqwest::Response, GeminiError> {
        let mut attempt: u32 = 0;
        loop {
            tracing::debug!(url, attempt, "chat/completions request");
            let mut builder = self
                .http
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            if let Some(key) = &self.api_key {
                builder = builder.bearer_auth(key);
            }
            if sse {
                builder = builder.header(reqwest::header::ACCEPT, "text/event-stream");
            }
            let error = match builder.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let headers = response.headers();
                    let header_delay = headers
                        .get("retry-after-ms")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .filter(|ms| ms.is_finite() && *ms >= 0.0)
                        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                        .or_else(|| {
                            headers
                                .get(reqwest::header::RETRY_AFTER)
                                .and_then(|v| v.to_str().ok())
                                .and_then(parse_retry_after)
                        });
                    let text = response.text().await.unwrap_or_default();
                    parse_error(status, &text, header_delay)
                }
                Err(source) => GeminiError::Http {
                    api: ApiKind::OpenAi,
                    url: url.to_owned(),
                    message: describe_reqwest(&source),
                    source,
                },
            };
            if attempt >= self.max_retries || !error.is_retryable() {
                return Err(error);
            }
            let delay = match &error {
                GeminiError::Api {
                    retry_after: Some(wait),
                    ..
                } => {
                    if *wait > self.max_backoff {
                        tracing::debug!(?wait, "the server asked for a longer wait than allowed");
                        return Err(error);
                    }
                    *wait
                }
                _ => self.backoff(attempt),
            };
            attempt += 1;
            tracing::debug!(%error, ?delay, attempt, "retrying chat/completions request");
            if let Some(cb) = &self.on_retry {
                cb(&RetryNotice {
                    attempt,
                    max_retries: self.max_retries,
                    delay,
                    reason: error.to_string(),
                });
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// The wait before retry number `attempt + 1`: base·2^attempt, capped, ±20 %.
    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(20));
        let raw = self
            .backoff_base
            .saturating_mul(factor)
            .min(self.max_backoff);
        raw.mul_f64(jitter())
    }
}

impl ModelClient for OpenAiClient {
    fn generate<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<GenerateResponse, GeminiError>> {
        Box::pin(OpenAiClient::generate(self, model, request))
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<ChunkStream, GeminiError>> {
        Box::pin(OpenAiClient::stream(self, model, request))
    }
}

/// Any non-empty model id is passed on as is (`llama3.2:3b`, `Qwen/Qwen3-8B`, …).
fn check_model(model: &str) -> Result<&str, GeminiError> {
    let id = model.trim();
    if id.is_empty() {
        return Err(GeminiError::InvalidModel(model.to_owned()));
    }
    Ok(id)
}

fn encode(body: &Value) -> Result<Bytes, GeminiError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(GeminiError::Encode)
}

/// The error of a non-2xx answer: `{"error": {"message", "type", "param", "code"}}`,
/// vLLM's flat `{"object": "error", "message", "type", "code"}`, `{"error": "text"}`,
/// `{"detail": "text"}`, or the body itself.
fn parse_error(status: u16, body: &str, header_delay: Option<Duration>) -> GeminiError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error: Option<&Value> = parsed.as_ref().and_then(|v| match v.get("error") {
        Some(e) => Some(e),
        None if v.get("message").is_some() => Some(v),
        None => None,
    });
    api_error(status, error, parsed.as_ref(), body, header_delay)
}

fn api_error(
    status: u16,
    error: Option<&Value>,
    whole: Option<&Value>,
    body: &str,
    header_delay: Option<Duration>,
) -> GeminiError {
    let field = |name: &str| error.and_then(|e| e.get(name));
    let message = match (error, field("message").and_then(Value::as_str)) {
        (_, Some(m)) if !m.trim().is_empty() => m.trim().to_owned(),
        (Some(Value::String(m)), _) if !m.trim().is_empty() => m.trim().to_owned(),
        _ => match whole.and_then(|w| w.get("detail")).and_then(Value::as_str) {
            Some(d) if !d.trim().is_empty() => d.trim().to_owned(),
            _ if !body.trim().is_empty() => snippet(body),
            _ => reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("no message")
                .to_owned(),
        },
    };
    let code_field = field("code");
    GeminiError::Api {
        api: ApiKind::OpenAi,
        status,
        code: code_field
            .and_then(Value::as_i64)
            .unwrap_or(i64::from(status)),
        status_text: field("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        message,
        reason: code_field
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
        retry_after: header_delay,
    }
}

// ---------------------------------------------------------------------------------------
// Gemini request → chat-completions request

const ALNUM: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// 9 letters and digits from a hash of `seed` (the strictest tool-call id format in use,
/// Mistral's, accepts exactly that).
fn alnum_id(seed: &str) -> String {
    Sha256::digest(seed.as_bytes())
        .iter()
        .take(9)
        .map(|b| char::from(ALNUM[usize::from(*b) % ALNUM.len()]))
        .collect()
}

/// The id given to call `call` of history entry `content` when the call has none: the
/// same history always translates to the same ids.
pub fn stable_call_id(content: usize, call: usize, name: &str) -> String {
    alnum_id(&format!("switchboard/call/{content}/{call}/{name}"))
}

/// A fresh id for a tool call the server sent without one.
fn fresh_call_id() -> String {
    use std::hash::BuildHasher;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let salt = std::collections::hash_map::RandomState::new().hash_one(n);
    alnum_id(&format!("switchboard/fresh/{n}/{salt}"))
}

/// The calls of the last assistant message, waiting for their `tool` messages.
#[derive(Debug, Default)]
struct PendingCalls {
    calls: Vec<(String, String, bool)>,
}

impl PendingCalls {
    /// The id the response to `name` (with `id`, if it has one) answers, marking that
    /// call answered: its own id, else the first unanswered call of that name, else the
    /// first unanswered call, else a stable id from the name.
    fn answer(&mut self, id: Option<&str>, name: &str, content: usize, k: usize) -> String {
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            if let Some(c) = self.calls.iter_mut().find(|c| c.0 == id) {
                c.2 = true;
            }
            return id.to_owned();
        }
        let slot = self
            .calls
            .iter()
            .position(|c| !c.2 && c.1 == name)
            .or_else(|| self.calls.iter().position(|c| !c.2));
        match slot.and_then(|i| self.calls.get_mut(i)) {
            Some(c) => {
                c.2 = true;
                c.0.clone()
            }
            None => stable_call_id(content, k, name),
        }
    }
}

/// The `chat/completions` body for `request` (see the module docs for the mapping).
/// `stream` sets `"stream": true`.
pub fn to_chat_request(model: &str, request: &GenerateRequest, stream: bool) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system_instruction {
        let text = plain_text(&system.parts, "\n");
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    let mut pending = PendingCalls::default();
    for (i, content) in request.contents.iter().enumerate() {
        if content.role.as_deref() == Some("model") {
            messages.push(assistant_message(i, content, &mut pending));
        } else {
            user_messages(i, content, &mut pending, &mut messages);
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    let tools = tools_of(request);
    let has_tools = !tools.is_empty();
    if has_tools {
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice(request) {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(config) = &request.generation_config {
        if let Some(t) = config.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = config.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(m) = config.max_output_tokens {
            body.insert("max_tokens".into(), json!(m));
        }
        if let Some(stop) = config.stop_sequences.as_ref().filter(|s| !s.is_empty()) {
            body.insert("stop".into(), json!(stop));
        }
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The text of the non-thought text parts, joined with `sep`.
fn plain_text(parts: &[Part], sep: &str) -> String {
    parts
        .iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text.as_deref())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(sep)
}

fn assistant_message(index: usize, content: &Content, pending: &mut PendingCalls) -> Value {
    let text: String = content
        .parts
        .iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text.as_deref())
        .collect();
    pending.calls.clear();
    let mut tool_calls = Vec::new();
    for (k, call) in content.function_calls().into_iter().enumerate() {
        let id = call
            .id
            .clone()
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| stable_call_id(index, k, &call.name));
        let arguments =
            serde_json::to_string(&call.args_value()).unwrap_or_else(|_| "{}".to_owned());
        pending.calls.push((id.clone(), call.name.clone(), false));
        tool_calls.push(json!({
            "id": id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments},
        }));
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    if tool_calls.is_empty() {
        message.insert("content".into(), json!(text));
    } else {
        let content = if text.is_empty() {
            Value::Null
        } else {
            json!(text)
        };
        message.insert("content".into(), content);
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    Value::Object(message)
}

/// A user content: `tool` messages for its function responses, then one `user` message
/// with the rest (text, images, audio).
fn user_messages(
    index: usize,
    content: &Content,
    pending: &mut PendingCalls,
    out: &mut Vec<Value>,
) {
    let mut rest: Vec<&Part> = Vec::new();
    let mut attached: Vec<Part> = Vec::new();
    let mut answered = 0usize;
    for part in &content.parts {
        let Some(fr) = &part.function_response else {
            rest.push(part);
            continue;
        };
        let id = pending.answer(fr.id.as_deref(), &fr.name, index, answered);
        answered += 1;
        let text = serde_json::to_string(&fr.response).unwrap_or_else(|_| "{}".to_owned());
        out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
        for inner in fr.parts.iter().flatten() {
            if let Some(blob) = &inner.inline_data {
                attached.push(Part {
                    inline_data: Some(blob.clone()),
                    ..Part::default()
                });
            }
        }
    }
    let mut pieces: Vec<Value> = Vec::new();
    if answered > 0 && (!attached.is_empty() || rest.iter().any(|p| p.text.is_none())) {
        pieces.push(json!({"type": "text", "text": "Content returned by the tool calls above:"}));
    }
    for part in attached.iter().chain(rest.iter().copied()) {
        if let Some(piece) = user_piece(part) {
            pieces.push(piece);
        }
    }
    if pieces.is_empty() {
        return;
    }
    let text_only = pieces
        .iter()
        .all(|p| p.get("type").and_then(Value::as_str) == Some("text"));
    let content = if text_only {
        let texts: Vec<&str> = pieces
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        json!(texts.join("\n"))
    } else {
        Value::Array(pieces)
    };
    out.push(json!({"role": "user", "content": content}));
}

/// One content part of a user message, or `None` for a part that carries nothing here
/// (thoughts, empty text).
fn user_piece(part: &Part) -> Option<Value> {
    if part.thought == Some(true) {
        return None;
    }
    if let Some(text) = &part.text {
        return (!text.is_empty()).then(|| json!({"type": "text", "text": text}));
    }
    if let Some(blob) = &part.inline_data {
        let mime = blob.mime_type.to_ascii_lowercase();
        if mime.starts_with("image/") {
            return Some(json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{mime};base64,{}", blob.data)},
            }));
        }
        let format = match mime.as_str() {
            "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
            "audio/mpeg" | "audio/mp3" => Some("mp3"),
            _ => None,
        };
        return Some(match format {
            Some(format) => json!({
                "type": "input_audio",
                "input_audio": {"data": blob.data, "format": format},
            }),
            None => json!({
                "type": "text",
                "text": format!("[{mime} content left out: this model API takes only images and wav/mp3 audio]"),
            }),
        });
    }
    if let Some(file) = part.extra.get("fileData") {
        let uri = file.get("fileUri").and_then(Value::as_str).unwrap_or("");
        let mime = file.get("mimeType").and_then(Value::as_str).unwrap_or("");
        if mime.starts_with("image/") && (uri.starts_with("https://") || uri.starts_with("http://"))
        {
            return Some(json!({"type": "image_url", "image_url": {"url": uri}}));
        }
        return Some(json!({"type": "text", "text": format!("[file {uri} ({mime})]")}));
    }
    None
}

fn tools_of(request: &GenerateRequest) -> Vec<Value> {
    request
        .tools
        .iter()
        .flatten()
        .filter_map(|t| t.function_declarations.as_ref())
        .flatten()
        .map(tool_of)
        .collect()
}

fn tool_of(decl: &FunctionDeclaration) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(decl.name));
    if let Some(d) = decl.description.as_ref().filter(|d| !d.is_empty()) {
        function.insert("description".into(), json!(d));
    }
    let schema = match (&decl.parameters_json_schema, &decl.parameters) {
        (Some(s), _) => s.clone(),
        (None, Some(openapi)) => openapi_to_json_schema(openapi),
        (None, None) => json!({}),
    };
    function.insert("parameters".into(), object_schema(schema));
    json!({"type": "function", "function": function})
}

/// `parameters` must be an object schema: a missing `type` becomes `"object"`, missing
/// `properties` an empty map; anything that is not a JSON object becomes `{}`'s form.
fn object_schema(schema: Value) -> Value {
    let mut map = match schema {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if !map.contains_key("type") {
        map.insert("type".into(), json!("object"));
    }
    if map.get("type").and_then(Value::as_str) == Some("object") && !map.contains_key("properties")
    {
        map.insert("properties".into(), json!({}));
    }
    Value::Object(map)
}

/// The OpenAPI subset Gemini takes (`"type": "STRING"`, `nullable`) back to JSON Schema.
fn openapi_to_json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            let nullable = map.get("nullable").and_then(Value::as_bool) == Some(true);
            for (k, v) in map {
                match k.as_str() {
                    "nullable" | "propertyOrdering" => {}
                    "type" => {
                        let t = v.as_str().map(str::to_ascii_lowercase);
                        let t = match t.as_deref() {
                            Some("type_unspecified") | None => continue,
                            Some(t) => t.to_owned(),
                        };
                        out.insert(
                            "type".into(),
                            if nullable {
                                json!([t, "null"])
                            } else {
                                json!(t)
                            },
                        );
                    }
                    "properties" => {
                        let props = v
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(name, s)| (name.clone(), openapi_to_json_schema(s)))
                                    .collect::<Map<_, _>>()
                            })
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "items" => {
                        out.insert(k.clone(), openapi_to_json_schema(v));
                    }
                    "anyOf" => {
                        let items = v
                            .as_array()
                            .map(|a| a.iter().map(openapi_to_json_schema).collect())
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Array(items));
                    }
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn tool_choice(request: &GenerateRequest) -> Option<Value> {
    let config = request
        .tool_config
        .as_ref()?
        .function_calling_config
        .as_ref()?;
    match config.mode? {
        FunctionCallingMode::Auto | FunctionCallingMode::Validated => Some(json!("auto")),
        FunctionCallingMode::None => Some(json!("none")),
        FunctionCallingMode::Any => match config.allowed_function_names.as_deref() {
            Some([only]) => Some(json!({"type": "function", "function": {"name": only}})),
            _ => Some(json!("required")),
        },
        FunctionCallingMode::ModeUnspecified => None,
    }
}

// ---------------------------------------------------------------------------------------
// chat-completions answer → Gemini response

/// A `finish_reason` in Gemini's words.
pub fn map_finish_reason(reason: &str) -> String {
    match reason {
        "stop" | "tool_calls" | "function_call" | "eos" => "STOP".into(),
        "length" => "MAX_TOKENS".into(),
        "content_filter" => "SAFETY".into(),
        other => other.to_ascii_uppercase(),
    }
}

fn usage_of(usage: &Value) -> Option<UsageMetadata> {
    let obj = usage.as_object()?;
    let n = |k: &str| obj.get(k).and_then(Value::as_u64);
    let reasoning = obj
        .get("completion_tokens_details")
        .and_then(|d| d.get("reasoning_tokens"))
        .and_then(Value::as_u64);
    Some(UsageMetadata {
        prompt_token_count: n("prompt_tokens"),
        candidates_token_count: n("completion_tokens"),
        thoughts_token_count: reasoning,
        total_token_count: n("total_tokens"),
        extra: Map::new(),
    })
}

/// The reasoning text some servers add (`reasoning_content`: DeepSeek, vLLM,
/// llama.cpp; `reasoning`: Ollama, OpenRouter).
fn reasoning_of(message: &Value) -> Option<&str> {
    ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| message.get(*k).and_then(Value::as_str))
        .filter(|r| !r.is_empty())
}

/// `content` as text: a string, or the text of an array of `{type: "text"}` parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Tool-call arguments as an object: a JSON string (empty means `{}`), or an object
/// some servers send as is.
fn parse_arguments(name: &str, raw: Option<&Value>) -> Result<Map<String, Value>, GeminiError> {
    let bad = |what: String| GeminiError::Decode {
        api: ApiKind::OpenAi,
        message: format!(
            "the arguments of the model's call to `{name}` are not a JSON object: {what}"
        ),
    };
    match raw {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(Value::Null) => Ok(Map::new()),
            Ok(other) => Err(bad(snippet(&other.to_string()))),
            Err(e) => Err(bad(format!("{e}: {}", snippet(s)))),
        },
        Some(other) => Err(bad(snippet(&other.to_string()))),
    }
}

fn call_part(id: Option<&str>, name: &str, args: Map<String, Value>) -> Part {
    let id = id
        .filter(|i| !i.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(fresh_call_id);
    Part::function_call(FunctionCall {
        id: Some(id),
        name: name.to_owned(),
        args: Some(args),
        extra: Map::new(),
    })
}

fn response_of(
    parts: Vec<Part>,
    finish_reason: Option<String>,
    usage: Option<UsageMetadata>,
    model: Option<String>,
    id: Option<String>,
) -> GenerateResponse {
    GenerateResponse {
        candidates: vec![Candidate {
            content: Some(Content::model(parts)),
            finish_reason,
            finish_message: None,
            extra: Map::new(),
        }],
        prompt_feedback: None,
        usage_metadata: usage,
        model_version: model,
        response_id: id,
        extra: Map::new(),
    }
}

/// A `chat.completion` answer as a Gemini-shaped response: one candidate holding a
/// thought part (`reasoning_content`), a text part, then one `functionCall` per tool call
/// (ids kept, arguments parsed), with `finishReason` mapped.
pub fn from_chat_completion(body: &Value) -> Result<GenerateResponse, GeminiError> {
    if let Some(error) = body.get("error") {
        return Err(stream_error(error));
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|x| x.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        })
        .ok_or_else(|| GeminiError::Decode {
            api: ApiKind::OpenAi,
            message: format!(
                "the chat/completions answer has no choices: {}",
                snippet(&body.to_string())
            ),
        })?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut parts = Vec::new();
    if let Some(reasoning) = reasoning_of(message) {
        parts.push(Part {
            text: Some(reasoning.to_owned()),
            thought: Some(true),
            ..Part::default()
        });
    }
    let mut text = content_text(message.get("content"));
    if text.is_empty()
        && let Some(refusal) = message.get("refusal").and_then(Value::as_str)
    {
        text = refusal.to_owned();
    }
    if !text.is_empty() {
        parts.push(Part::text(text));
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if call
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "function")
        {
            continue;
        }
        let function = call.get("function").unwrap_or(&Value::Null);
        let name = function.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            return Err(GeminiError::Decode {
                api: ApiKind::OpenAi,
                message: format!(
                    "a tool call has no function name: {}",
                    snippet(&call.to_string())
                ),
            });
        }
        let args = parse_arguments(name, function.get("arguments"))?;
        parts.push(call_part(
            call.get("id").and_then(Value::as_str),
            name,
            args,
        ));
    }
    if let Some(legacy) = message.get("function_call")
        && let Some(name) = legacy.get("name").and_then(Value::as_str)
    {
        let args = parse_arguments(name, legacy.get("arguments"))?;
        parts.push(call_part(None, name, args));
    }
    Ok(response_of(
        parts,
        choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(map_finish_reason),
        body.get("usage").and_then(usage_of),
        body.get("model").and_then(Value::as_str).map(str::to_owned),
        body.get("id").and_then(Value::as_str).map(str::to_owned),
    ))
}

/// An `error` object inside an answer or a stream.
fn stream_error(error: &Value) -> GeminiError {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..=599).contains(c))
        .unwrap_or(500);
    api_error(status, Some(error), None, &error.to_string(), None)
}

#[derive(Debug, Default, Clone)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

/// Folds the `chat.completion.chunk`s of a streamed answer: [`push`](Self::push) gives
/// each chunk's text (and reasoning) increment as a Gemini-shaped chunk;
/// [`finish`](Self::finish) gives the final chunk with the complete function calls (tool
/// call fragments joined by `index`), the finish reason and usage.
#[derive(Debug, Default)]
pub struct ChunkAssembler {
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<UsageMetadata>,
    model: Option<String>,
    id: Option<String>,
}

impl ChunkAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a chunk carried a `finish_reason`.
    pub fn finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Adds one chunk; returns the text increment it carried, if any. An `error` event
    /// is returned as the error.
    pub fn push(&mut self, chunk: &Value) -> Result<Option<GenerateResponse>, GeminiError> {
        if let Some(error) = chunk.get("error") {
            return Err(stream_error(error));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(id) = chunk.get("id").and_then(Value::as_str) {
            self.id = Some(id.to_owned());
        }
        if let Some(usage) = chunk.get("usage").and_then(usage_of) {
            self.usage = Some(usage);
        }
        let mut parts = Vec::new();
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(reasoning) = reasoning_of(delta) {
                parts.push(Part {
                    text: Some(reasoning.to_owned()),
                    thought: Some(true),
                    ..Part::default()
                });
            }
            let text = content_text(delta.get("content"));
            if !text.is_empty() {
                parts.push(Part::text(text));
            }
            for fragment in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.push_fragment(fragment);
            }
            if let Some(legacy) = delta.get("function_call") {
                let fragment = json!({"index": 0, "function": legacy});
                self.push_fragment(&fragment);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(map_finish_reason(reason));
            }
        }
        if parts.is_empty() {
            return Ok(None);
        }
        Ok(Some(response_of(
            parts,
            None,
            None,
            self.model.clone(),
            self.id.clone(),
        )))
    }

    fn push_fragment(&mut self, fragment: &Value) {
        let id = fragment
            .get("id")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty());
        let index = fragment.get("index").and_then(Value::as_u64).or_else(|| {
            // No index (some servers): the call with this id, a new call for a new id,
            // else the last call.
            match id {
                Some(id) => Some(
                    self.calls
                        .iter()
                        .find(|c| c.id == id)
                        .map(|c| c.index)
                        .unwrap_or(self.calls.len() as u64),
                ),
                None => self.calls.last().map(|c| c.index),
            }
        });
        let index = index.unwrap_or(0);
        let slot = match self.calls.iter().position(|c| c.index == index) {
            Some(i) => i,
            None => {
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            }
        };
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        let function = fragment.get("function").unwrap_or(&Value::Null);
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Object(whole)) => {
                call.arguments = Value::Object(whole.clone()).to_string();
            }
            _ => {}
        }
    }

    /// The final chunk: every function call, complete, in `index` order, with the
    /// finish reason and usage.
    pub fn finish(&mut self) -> Result<GenerateResponse, GeminiError> {
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|c| c.index);
        let mut parts = Vec::with_capacity(calls.len());
        for call in calls {
            if call.name.is_empty() {
                return Err(GeminiError::Decode {
                    api: ApiKind::OpenAi,
                    message: format!(
                        "streamed tool call #{} has no function name (arguments {})",
                        call.index,
                        snippet(&call.arguments)
                    ),
                });
            }
            let args = parse_arguments(&call.name, Some(&Value::String(call.arguments)))?;
            parts.push(call_part(Some(&call.id), &call.name, args));
        }
        Ok(response_of(
            parts,
            self.finish_reason.clone(),
            self.usage.clone(),
            self.model.clone(),
            self.id.clone(),
        ))
    }
}

type ByteStream = std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<Bytes>> + Send>>;

struct StreamState {
    body: ByteStream,
    parser: SseParser,
    events: VecDeque<String>,
    assembler: ChunkAssembler,
    eof: bool,
    done: bool,
}

/// The Gemini-shaped chunks of an SSE body of `chat.completion.chunk`s.
fn chunk_stream(body: ByteStream) -> ChunkStream {
    let state = StreamState {
        body,
        parser: SseParser::default(),
        events: VecDeque::new(),
        assembler: ChunkAssembler::new(),
        eof: false,
        done: false,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(data) = st.events.pop_front() {
                let data = data.trim();
                if data.is_empty() {
                    continue;
                }
                if data == "[DONE]" {
                    st.done = true;
                    return Some((st.assembler.finish(), st));
                }
                let item = serde_json::from_str::<Value>(data)
                    .map_err(|e| GeminiError::Decode {
                        api: ApiKind::OpenAi,
                        message: format!("a stream event is not JSON ({e}): {}", snippet(data)),
                    })
                    .and_then(|chunk| st.assembler.push(&chunk));
                match item {
                    Ok(Some(chunk)) => return Some((Ok(chunk), st)),
                    Ok(None) => continue,
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                }
            }
            if st.eof {
                st.done = true;
                // Without `[DONE]`, a body that reached a finish reason is complete.
                let last = if st.assembler.finished() {
                    st.assembler.finish()
                } else {
                    Err(GeminiError::Stream {
                        api: ApiKind::OpenAi,
                        message: "the chat/completions stream ended before `data: [DONE]`".into(),
                    })
                };
                return Some((last, st));
            }
            match st.body.next().await {
                Some(Ok(bytes)) => st.parser.feed(&bytes, &mut st.events),
                Some(Err(source)) => {
                    st.done = true;
                    let message = describe_reqwest(&source);
                    return Some((
                        Err(GeminiError::Stream {
                            api: ApiKind::OpenAi,
                            message,
                        }),
                        st,
                    ));
                }
                None => {
                    st.parser.finish(&mut st.events);
                    st.eof = true;
                }
            }
        }
    });
    Box::pin(stream)
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
