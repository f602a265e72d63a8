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
//! strings) become [`ModelError::Api`] with [`ApiKind::OpenAi`]; 429 and 5xx are retried
//! with backoff like the Gemini client (`Retry-After` and `retry-after-ms` honoured).

mod convert;

use std::fmt;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::client::{ChunkStream, ModelClient};
use crate::error::{ApiKind, ModelError};
use crate::http::{
    DEFAULT_BACKOFF_BASE, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES, RetryCallback, RetryPolicy,
    Transport, env_value, mask, snippet,
};
use crate::sse::{self, ByteStream, EventStream};
use crate::types::{GenerateRequest, GenerateResponse};

pub use convert::{
    ChunkAssembler, from_chat_completion, map_finish_reason, stable_call_id, to_chat_request,
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
            max_retries: DEFAULT_MAX_RETRIES,
            backoff_base: DEFAULT_BACKOFF_BASE,
            max_backoff: DEFAULT_MAX_BACKOFF,
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
        let mut opts = Self {
            api_key: env_value(&get, API_KEY_ENV),
            ..Self::default()
        };
        if let Some(url) = env_value(&get, BASE_URL_ENV) {
            opts.base_url = url;
        }
        opts
    }
}

/// The API base as requests use it: trimmed, without a trailing `/` or
/// `/chat/completions`, `http(s)` with a host and no query or fragment.
pub fn normalize_base_url(raw: &str) -> Result<String, ModelError> {
    let invalid = |reason: &str| ModelError::InvalidBaseUrl {
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

/// A client for one OpenAI-compatible API base. Cheap to clone.
#[derive(Clone)]
pub struct OpenAiClient {
    transport: Transport,
    api_key: Option<String>,
    base_url: String,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("base_url", &self.base_url)
            .field("api_key", &mask(self.api_key.as_deref()))
            .field("max_retries", &self.transport.retry.max_retries)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// A client from `opts`. Fails only on a base URL that is not `http(s)`; no key is
    /// needed.
    pub fn new(opts: OpenAiOptions) -> Result<Self, ModelError> {
        let base_url = normalize_base_url(&opts.base_url)?;
        let retry = RetryPolicy {
            max_retries: opts.max_retries,
            backoff_base: opts.backoff_base,
            max_backoff: opts.max_backoff,
            on_retry: opts.on_retry,
        };
        Ok(Self {
            transport: Transport::new(ApiKind::OpenAi, opts.http, retry)?,
            api_key: opts
                .api_key
                .map(|k| k.trim().to_owned())
                .filter(|k| !k.is_empty()),
            base_url,
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
    ) -> Result<GenerateResponse, ModelError> {
        let body = to_chat_request(check_model(model)?, request, false);
        let url = self.endpoint();
        let response = self.send(&url, &body, false).await?;
        let bytes = self.transport.body(&url, response).await?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| ModelError::Decode {
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
    ) -> Result<ChunkStream, ModelError> {
        let body = to_chat_request(check_model(model)?, request, true);
        let response = self.send(&self.endpoint(), &body, true).await?;
        Ok(chunk_stream(Box::pin(response.bytes_stream())))
    }

    /// Sends with the key as a bearer token (when there is one), retrying as the policy
    /// says (`Retry-After` and `retry-after-ms` honoured).
    async fn send(
        &self,
        url: &str,
        body: &Value,
        sse: bool,
    ) -> Result<reqwest::Response, ModelError> {
        let body = self.transport.encode(body)?;
        let key = self.api_key.as_deref();
        self.transport
            .post(
                url,
                body,
                sse,
                |b| match key {
                    Some(key) => b.bearer_auth(key),
                    None => b,
                },
                |status, delay, body| parse_error(status, body, delay),
            )
            .await
    }
}

impl ModelClient for OpenAiClient {
    fn generate<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<GenerateResponse, ModelError>> {
        Box::pin(OpenAiClient::generate(self, model, request))
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<ChunkStream, ModelError>> {
        Box::pin(OpenAiClient::stream(self, model, request))
    }
}

/// Any non-empty model id is passed on as is (`llama3.2:3b`, `Qwen/Qwen3-8B`, …).
fn check_model(model: &str) -> Result<&str, ModelError> {
    let id = model.trim();
    if id.is_empty() {
        return Err(ModelError::InvalidModel {
            api: ApiKind::OpenAi,
            name: model.to_owned(),
        });
    }
    Ok(id)
}

/// The error of a non-2xx answer: `{"error": {"message", "type", "param", "code"}}`,
/// vLLM's flat `{"object": "error", "message", "type", "code"}`, `{"error": "text"}`,
/// `{"detail": "text"}`, or the body itself.
fn parse_error(status: u16, body: &str, header_delay: Option<Duration>) -> ModelError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error: Option<&Value> = parsed.as_ref().and_then(|v| match v.get("error") {
        Some(e) => Some(e),
        None if v.get("message").is_some() => Some(v),
        None => None,
    });
    api_error(status, error, parsed.as_ref(), body, header_delay)
}

pub(super) fn api_error(
    status: u16,
    error: Option<&Value>,
    whole: Option<&Value>,
    body: &str,
    header_delay: Option<Duration>,
) -> ModelError {
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
    ModelError::Api {
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

struct StreamState {
    events: EventStream,
    assembler: ChunkAssembler,
    done: bool,
}

/// The Gemini-shaped chunks of an SSE body of `chat.completion.chunk`s.
fn chunk_stream(body: ByteStream) -> ChunkStream {
    let state = StreamState {
        events: sse::events(ApiKind::OpenAi, body),
        assembler: ChunkAssembler::new(),
        done: false,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            let data = match st.events.next().await {
                Some(Ok(data)) => data,
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                None => {
                    st.done = true;
                    // Without `[DONE]`, a body that reached a finish reason is complete.
                    let last = if st.assembler.finished() {
                        st.assembler.finish()
                    } else {
                        Err(ModelError::Stream {
                            api: ApiKind::OpenAi,
                            message: "the chat/completions stream ended before `data: [DONE]`"
                                .into(),
                        })
                    };
                    return Some((last, st));
                }
            };
            let data = data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                st.done = true;
                return Some((st.assembler.finish(), st));
            }
            let item = serde_json::from_str::<Value>(data)
                .map_err(|e| ModelError::Decode {
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
    });
    Box::pin(stream)
}
