//! The Gemini REST client: `generateContent` and `streamGenerateContent?alt=sse` on
//! reqwest, with retries (exponential backoff with jitter, `Retry-After` and the API's
//! `RetryInfo` honoured) on 429 and 5xx, and errors that carry the API's own message.
//!
//! The base URL is the API root without the version path
//! ([`DEFAULT_BASE_URL`], or `GEMINI_BASE_URL` through [`GeminiOptions::from_env`]); a
//! trailing `/v1beta` is tolerated and stripped. The key goes in the `x-goog-api-key`
//! header.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::types::{GenerateRequest, GenerateResponse};

/// The API root used when nothing else is configured.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The API version path every endpoint lives under.
pub const API_VERSION: &str = "v1beta";

/// The model used when neither `--model` nor `model` in the settings names one:
/// Gemini 2.5 Flash, the current generally available Flash model (fast, cheap,
/// function calling and thinking supported).
pub const DEFAULT_MODEL: &str = "gemini-2.5-flash";

/// Environment variable holding the API key.
pub const API_KEY_ENV: &str = "GEMINI_API_KEY";

/// Environment variable overriding the API root (without the version path).
pub const BASE_URL_ENV: &str = "GEMINI_BASE_URL";

/// Statuses that are retried: rate limits and server-side failures.
const RETRY_STATUSES: [u16; 5] = [429, 500, 502, 503, 504];

/// How much of an unreadable error body is quoted.
const BODY_SNIPPET: usize = 300;

/// Told about each retry before its wait (to show "retrying in 2 s…").
#[derive(Debug, Clone)]
pub struct RetryNotice {
    /// 1 for the first retry.
    pub attempt: u32,
    /// The configured maximum number of retries.
    pub max_retries: u32,
    /// How long the client waits before the retry.
    pub delay: Duration,
    /// What failed, e.g. `429 RESOURCE_EXHAUSTED: Resource has been exhausted`.
    pub reason: String,
}

/// Callback for [`RetryNotice`]s.
pub type RetryCallback = Arc<dyn Fn(&RetryNotice) + Send + Sync>;

/// How to build a [`GeminiClient`].
#[derive(Clone)]
pub struct GeminiOptions {
    /// The API key (`GEMINI_API_KEY`), sent as `x-goog-api-key`.
    pub api_key: String,
    /// The API root without the version path; a trailing `/v1beta` is stripped.
    pub base_url: String,
    /// The HTTP client to use (one with a 15 s connect timeout is built otherwise).
    pub http: Option<reqwest::Client>,
    /// Retries after the first attempt on 429/500/502/503/504 and connection failures.
    pub max_retries: u32,
    /// The first retry waits about this long; each further retry doubles it (±20 %).
    pub backoff_base: Duration,
    /// Cap on one wait. A server asking (`Retry-After`, `RetryInfo`) for a longer wait
    /// than this is not retried: the error is returned at once.
    pub max_backoff: Duration,
    /// Told about every retry.
    pub on_retry: Option<RetryCallback>,
}

impl Default for GeminiOptions {
    fn default() -> Self {
        Self {
            api_key: String::new(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            http: None,
            max_retries: 3,
            backoff_base: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            on_retry: None,
        }
    }
}

impl fmt::Debug for GeminiOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiOptions")
            .field("api_key", &mask(&self.api_key))
            .field("base_url", &self.base_url)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("max_backoff", &self.max_backoff)
            .finish_non_exhaustive()
    }
}

impl GeminiOptions {
    /// Defaults, with the key from `GEMINI_API_KEY` and the base URL from
    /// `GEMINI_BASE_URL` when they are set and not empty.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`from_env`](Self::from_env), reading variables through `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Self {
        let mut opts = Self::default();
        if let Some(key) = get(API_KEY_ENV).filter(|k| !k.trim().is_empty()) {
            opts.api_key = key.trim().to_owned();
        }
        if let Some(url) = get(BASE_URL_ENV).filter(|u| !u.trim().is_empty()) {
            opts.base_url = url;
        }
        opts
    }
}

/// Which kind of model API an error came from: it picks the wording of the message and
/// the hints (`GEMINI_API_KEY` or `OPENAI_API_KEY`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApiKind {
    /// The Gemini REST API ([`GeminiClient`]).
    #[default]
    Gemini,
    /// An OpenAI-compatible chat-completions endpoint
    /// ([`OpenAiClient`](crate::openai::OpenAiClient)).
    OpenAi,
}

impl ApiKind {
    /// How the API is named in messages: `Gemini`, `the OpenAI-compatible API`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gemini => "Gemini",
            Self::OpenAi => "the OpenAI-compatible API",
        }
    }

    /// The API's short name: `Gemini`, `OpenAI-compatible`.
    pub fn short_name(self) -> &'static str {
        match self {
            Self::Gemini => "Gemini",
            Self::OpenAi => "OpenAI-compatible",
        }
    }

    /// The prefix of an API error: `Gemini API error`, `OpenAI-compatible API error`.
    fn error_label(self) -> &'static str {
        match self {
            Self::Gemini => "Gemini API error",
            Self::OpenAi => "OpenAI-compatible API error",
        }
    }
}

/// What went wrong talking to the model API (Gemini, or an OpenAI-compatible one).
#[derive(Debug, thiserror::Error)]
pub enum GeminiError {
    /// No API key was configured.
    #[error("no Gemini API key: set {API_KEY_ENV} (get one at https://aistudio.google.com/apikey)")]
    MissingApiKey,
    /// The base URL is not an `http(s)` URL.
    #[error("invalid {} base URL {url:?}: {reason}", api.short_name())]
    InvalidBaseUrl {
        /// Which API the URL was meant for.
        api: ApiKind,
        url: String,
        reason: String,
    },
    /// The model name cannot be put into the request path.
    #[error(
        "invalid Gemini model name {0:?}: use a model id such as {DEFAULT_MODEL:?} (letters, digits, '.', '-', '_')"
    )]
    InvalidModel(String),
    /// The API answered with an error status.
    #[error("{}", api_error_text(*api, *status, status_text, message, reason.as_deref()))]
    Api {
        /// Which API answered.
        api: ApiKind,
        /// HTTP status.
        status: u16,
        /// `error.code` (the HTTP status when the body had none).
        code: i64,
        /// `error.status`, e.g. `INVALID_ARGUMENT`.
        status_text: String,
        /// `error.message`, the API's own words.
        message: String,
        /// `ErrorInfo.reason` from `error.details`, e.g. `API_KEY_INVALID`.
        reason: Option<String>,
        /// The wait the server asked for (`Retry-After` or `RetryInfo.retryDelay`).
        retry_after: Option<Duration>,
    },
    /// The request could not be sent or its answer not read.
    #[error("could not reach {} at {url}: {message}", api.name())]
    Http {
        /// Which API was called.
        api: ApiKind,
        url: String,
        message: String,
        #[source]
        source: reqwest::Error,
    },
    /// No HTTP client could be built (an unreadable CA file, a bad proxy setting).
    #[error("could not build the HTTP client for {}: {message}", api.name())]
    HttpClient { api: ApiKind, message: String },
    /// The answer was not the JSON the API documents.
    #[error("unexpected answer from {}: {message}", api.name())]
    Decode {
        /// Which API answered.
        api: ApiKind,
        message: String,
    },
    /// The request could not be encoded.
    #[error("could not encode the Gemini request: {0}")]
    Encode(#[source] serde_json::Error),
    /// A stream broke off after it had started.
    #[error("the {} stream broke off: {message}", api.short_name())]
    Stream {
        /// Which API was streaming.
        api: ApiKind,
        message: String,
    },
}

impl GeminiError {
    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the client retries this error.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Api { status, reason, .. } => {
                // A 429 for an exhausted quota (OpenAI) does not get better by waiting.
                RETRY_STATUSES.contains(status) && reason.as_deref() != Some("insufficient_quota")
            }
            Self::Http { source, .. } => source.is_connect() || source.is_timeout(),
            _ => false,
        }
    }

    /// What the person can do about it, when there is something.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Self::Api {
                api,
                status,
                reason,
                ..
            } => hint_for(*api, *status, reason.as_deref()),
            Self::MissingApiKey => Some("check GEMINI_API_KEY"),
            _ => None,
        }
    }
}

fn hint_for(api: ApiKind, status: u16, reason: Option<&str>) -> Option<&'static str> {
    if api == ApiKind::OpenAi {
        return crate::openai::hint_for(status, reason);
    }
    let key_reason = reason.is_some_and(|r| r.starts_with("API_KEY"));
    match status {
        401 | 403 => Some("check GEMINI_API_KEY"),
        400 if key_reason => Some("check GEMINI_API_KEY"),
        404 => Some("check the model name (--model, or `model` in the settings)"),
        429 => Some("rate limit or quota reached: wait a little, or check your plan and quota"),
        500..=599 => Some("the Gemini service had a problem: try again in a moment"),
        _ => None,
    }
}

fn api_error_text(
    api: ApiKind,
    status: u16,
    status_text: &str,
    message: &str,
    reason: Option<&str>,
) -> String {
    let mut out = format!("{} {status}", api.error_label());
    if !status_text.is_empty() {
        out.push_str(&format!(" {status_text}"));
    }
    out.push_str(&format!(": {message}"));
    if let Some(hint) = hint_for(api, status, reason) {
        out.push_str(&format!(" ({hint})"));
    }
    out
}

/// Masks a secret for logs: its length only.
fn mask(secret: &str) -> String {
    if secret.is_empty() {
        "<unset>".into()
    } else {
        format!("<{} chars>", secret.len())
    }
}

/// A client for one API key and base URL. Cheap to clone.
#[derive(Clone)]
pub struct GeminiClient {
    http: reqwest::Client,
    api_key: String,
    base_url: String,
    max_retries: u32,
    backoff_base: Duration,
    max_backoff: Duration,
    on_retry: Option<RetryCallback>,
}

impl fmt::Debug for GeminiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiClient")
            .field("api_key", &mask(&self.api_key))
            .field("base_url", &self.base_url)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

/// The API root without the version path: trailing `/` and `/v1beta` stripped.
pub fn normalize_base_url(raw: &str) -> Result<String, GeminiError> {
    let invalid = |reason: &str| GeminiError::InvalidBaseUrl {
        api: ApiKind::Gemini,
        url: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let mut url = raw.trim().trim_end_matches('/');
    if let Some(stripped) = url.strip_suffix(&format!("/{API_VERSION}")) {
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

/// The model id as it goes into the path: a leading `models/` is dropped.
fn model_path(model: &str) -> Result<&str, GeminiError> {
    let id = model.trim();
    let id = id.strip_prefix("models/").unwrap_or(id);
    let ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(id)
    } else {
        Err(GeminiError::InvalidModel(model.to_owned()))
    }
}

impl GeminiClient {
    /// A client from `opts`. Fails without an API key or with a base URL that is not
    /// `http(s)`.
    pub fn new(opts: GeminiOptions) -> Result<Self, GeminiError> {
        if opts.api_key.trim().is_empty() {
            return Err(GeminiError::MissingApiKey);
        }
        let base_url = normalize_base_url(&opts.base_url)?;
        let http = match opts.http {
            Some(http) => http,
            None => default_http(ApiKind::Gemini)?,
        };
        Ok(Self {
            http,
            api_key: opts.api_key.trim().to_owned(),
            base_url,
            max_retries: opts.max_retries,
            backoff_base: opts.backoff_base,
            max_backoff: opts.max_backoff,
            on_retry: opts.on_retry,
        })
    }

    /// The API root in use (without the version path).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The URL of `method` (`generateContent`, `streamGenerateContent`) for `model`.
    pub fn endpoint(&self, model: &str, method: &str) -> Result<String, GeminiError> {
        let model = model_path(model)?;
        Ok(format!(
            "{}/{API_VERSION}/models/{model}:{method}",
            self.base_url
        ))
    }

    /// `POST …/models/{model}:generateContent`.
    pub async fn generate(
        &self,
        model: &str,
        request: &GenerateRequest,
    ) -> Result<GenerateResponse, GeminiError> {
        let url = self.endpoint(model, "generateContent")?;
        let body = encode(request)?;
        let response = self.send(&url, body, false).await?;
        let bytes = response.bytes().await.map_err(|source| GeminiError::Http {
            api: ApiKind::Gemini,
            url: url.clone(),
            message: format!("reading the answer failed: {source}"),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| GeminiError::Decode {
            api: ApiKind::Gemini,
            message: format!(
                "the generateContent answer is not a GenerateContentResponse ({e}): {}",
                snippet(&String::from_utf8_lossy(&bytes))
            ),
        })
    }

    /// `POST …/models/{model}:streamGenerateContent?alt=sse`. Each item is one chunk (a
    /// complete response holding the next increment); fold them with
    /// [`StreamAccumulator`](crate::types::StreamAccumulator). Only the opening of the
    /// stream is retried.
    pub async fn stream(
        &self,
        model: &str,
        request: &GenerateRequest,
    ) -> Result<GenerateStream, GeminiError> {
        let url = format!("{}?alt=sse", self.endpoint(model, "streamGenerateContent")?);
        let body = encode(request)?;
        let response = self.send(&url, body, true).await?;
        Ok(GenerateStream::from_bytes(Box::pin(
            response.bytes_stream(),
        )))
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
            tracing::debug!(url, attempt, "Gemini request");
            let mut builder = self
                .http
                .post(url)
                .header("x-goog-api-key", &self.api_key)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            if sse {
                builder = builder.header(reqwest::header::ACCEPT, "text/event-stream");
            }
            let error = match builder.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let header_delay = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    let text = response.text().await.unwrap_or_default();
                    parse_api_error(status, &text, header_delay)
                }
                Err(source) => GeminiError::Http {
                    api: ApiKind::Gemini,
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
                        tracing::debug!(?wait, "Gemini asked for a longer wait than allowed");
                        return Err(error);
                    }
                    *wait
                }
                _ => self.backoff(attempt),
            };
            attempt += 1;
            tracing::debug!(%error, ?delay, attempt, "retrying Gemini request");
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

/// A random factor in [0.8, 1.2].
pub(crate) fn jitter() -> f64 {
    use std::hash::BuildHasher;
    let hash = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    0.8 + (hash % 4001) as f64 / 10_000.0
}

fn encode(request: &GenerateRequest) -> Result<Bytes, GeminiError> {
    serde_json::to_vec(request)
        .map(Bytes::from)
        .map_err(GeminiError::Encode)
}

pub(crate) fn describe_reqwest(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    message
}

pub(crate) fn snippet(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= BODY_SNIPPET {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(BODY_SNIPPET).collect();
        format!("{cut}…")
    }
}

/// `Retry-After` in seconds (fractions tolerated). HTTP dates are not honoured.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// A protobuf JSON duration such as `"37s"` or `"0.250s"`.
fn parse_proto_duration(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

fn canonical_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "NOT_IMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "",
    }
}

/// The error of a non-2xx answer: `{"error":{"code","message","status","details"}}`
/// (also inside a one-element array), or the body itself when it is not that.
fn parse_api_error(status: u16, body: &str, header_delay: Option<Duration>) -> GeminiError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let parsed = match parsed {
        Some(Value::Array(mut items)) if !items.is_empty() => Some(items.swap_remove(0)),
        other => other,
    };
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    api_error_from(status, error, body, header_delay)
}

fn api_error_from(
    status: u16,
    error: Option<&Value>,
    body: &str,
    header_delay: Option<Duration>,
) -> GeminiError {
    let field = |name: &str| error.and_then(|e| e.get(name));
    let code = field("code")
        .and_then(Value::as_i64)
        .unwrap_or(i64::from(status));
    let status_text = field("status")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| canonical_status(status).to_owned());
    let message = match field("message").and_then(Value::as_str) {
        Some(m) if !m.trim().is_empty() => m.trim().to_owned(),
        _ if !body.trim().is_empty() => snippet(body),
        _ => reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_owned(),
    };
    let details = field("details").and_then(Value::as_array);
    let detail = |kind: &str, key: &str| {
        details.and_then(|ds| {
            ds.iter()
                .filter(|d| {
                    d.get("@type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.ends_with(kind))
                })
                .find_map(|d| d.get(key).and_then(Value::as_str))
        })
    };
    let reason = detail("google.rpc.ErrorInfo", "reason").map(str::to_owned);
    let retry_after = header_delay
        .or_else(|| detail("google.rpc.RetryInfo", "retryDelay").and_then(parse_proto_duration));
    GeminiError::Api {
        api: ApiKind::Gemini,
        status,
        code,
        status_text,
        message,
        reason,
        retry_after,
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;
type ItemStream = Pin<Box<dyn Stream<Item = Result<GenerateResponse, GeminiError>> + Send>>;

/// The chunks of a streamed answer, in order. Ends after the last event.
pub struct GenerateStream {
    inner: ItemStream,
}

impl fmt::Debug for GenerateStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenerateStream").finish_non_exhaustive()
    }
}

struct SseState {
    body: ByteStream,
    parser: SseParser,
    events: VecDeque<String>,
    done: bool,
}

impl GenerateStream {
    fn from_bytes(body: ByteStream) -> Self {
        let state = SseState {
            body,
            parser: SseParser::default(),
            events: VecDeque::new(),
            done: false,
        };
        let inner = futures::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(data) = st.events.pop_front() {
                    match decode_event(&data) {
                        Some(item) => return Some((item, st)),
                        None => continue,
                    }
                }
                if st.done {
                    return None;
                }
                match st.body.next().await {
                    Some(Ok(bytes)) => st.parser.feed(&bytes, &mut st.events),
                    Some(Err(source)) => {
                        st.done = true;
                        st.events.clear();
                        let message = describe_reqwest(&source);
                        return Some((
                            Err(GeminiError::Stream {
                                api: ApiKind::Gemini,
                                message,
                            }),
                            st,
                        ));
                    }
                    None => {
                        st.parser.finish(&mut st.events);
                        st.done = true;
                    }
                }
            }
        });
        Self {
            inner: Box::pin(inner),
        }
    }
}

impl Stream for GenerateStream {
    type Item = Result<GenerateResponse, GeminiError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// One event's data: a response chunk, an in-stream error, or nothing (blank data).
fn decode_event(data: &str) -> Option<Result<GenerateResponse, GeminiError>> {
    let data = data.trim();
    if data.is_empty() || data == "[DONE]" {
        return None;
    }
    let value: Value = match serde_json::from_str(data) {
        Ok(v) => v,
        Err(e) => {
            return Some(Err(GeminiError::Decode {
                api: ApiKind::Gemini,
                message: format!("a stream event is not JSON ({e}): {}", snippet(data)),
            }));
        }
    };
    if let Some(error) = value
        .get("error")
        .filter(|_| value.get("candidates").is_none())
    {
        let status = error
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(500);
        return Some(Err(api_error_from(status, Some(error), data, None)));
    }
    Some(
        serde_json::from_value(value).map_err(|e| GeminiError::Decode {
            api: ApiKind::Gemini,
            message: format!(
                "a stream event is not a GenerateContentResponse ({e}): {}",
                snippet(data)
            ),
        }),
    )
}

/// A server-sent-events parser: lines end in `\n`, `\r` or `\r\n`, a blank line ends an
/// event, and input may be split anywhere (even between `\r` and `\n`). Only `data`
/// fields matter here; comments and other fields are skipped.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    /// The last byte seen was `\r`: a `\n` right after it belongs to the same line end.
    skip_lf: bool,
}

impl SseParser {
    /// Feeds bytes; completed events' data go to `out`.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], out: &mut VecDeque<String>) {
        while !bytes.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|b| matches!(b, b'\n' | b'\r')) {
                None => {
                    self.line.extend_from_slice(bytes);
                    break;
                }
                Some(end) => {
                    self.line.extend_from_slice(&bytes[..end]);
                    self.skip_lf = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.process_line(&line, out);
                    self.line = line;
                    self.line.clear();
                }
            }
        }
    }

    /// End of input: a last event without its blank line is still delivered.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<String>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.process_line(b"", out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut VecDeque<String>) {
        if line.is_empty() {
            if self.has_data {
                out.push_back(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(&String::from_utf8_lossy(value));
            self.has_data = true;
        }
    }
}

/// The HTTP client a model client uses when the caller gives none: one from
/// `switchboard-net` (the only door to the network) with the `local` policy, so a
/// local model server on loopback or the LAN works and link-local and cloud metadata
/// addresses stay blocked.
pub(crate) fn default_http(api: ApiKind) -> Result<reqwest::Client, GeminiError> {
    let mut opts = switchboard_net::ClientOptions::new(switchboard_net::UrlPolicy::Local);
    opts.connect_timeout = Duration::from_secs(15);
    switchboard_net::http_client(opts).map_err(|e| GeminiError::HttpClient {
        api,
        message: e.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parse_split(input: &[u8], cuts: &[usize]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut out = VecDeque::new();
        let mut start = 0;
        for &cut in cuts {
            parser.feed(&input[start..cut], &mut out);
            start = cut;
        }
        parser.feed(&input[start..], &mut out);
        parser.finish(&mut out);
        out.into_iter().collect()
    }

    #[test]
    fn sse_every_separator_and_every_split_point() {
        for sep in ["\n\n", "\r\r", "\r\n\r\n"] {
            let input = format!(
                "data: {{\"a\":1}}{sep}: comment{sep}event: x\ndata: {{\"b\":\"é\"}}{sep}data: {{\"c\":3}}{sep}"
            );
            let bytes = input.as_bytes();
            let want = vec![r#"{"a":1}"#, r#"{"b":"é"}"#, r#"{"c":3}"#];
            assert_eq!(parse_split(bytes, &[]), want, "sep {sep:?}");
            for cut in 0..=bytes.len() {
                assert_eq!(parse_split(bytes, &[cut]), want, "sep {sep:?} cut {cut}");
            }
            let every: Vec<usize> = (1..bytes.len()).collect();
            assert_eq!(parse_split(bytes, &every), want, "sep {sep:?} byte by byte");
        }
    }

    #[test]
    fn sse_multiline_data_and_missing_final_blank_line() {
        let got = parse_split(b"data: {\"a\":\ndata: 1}\n\ndata:{\"b\":2}", &[]);
        assert_eq!(got, vec!["{\"a\":\n1}", "{\"b\":2}"]);
    }

    #[test]
    fn base_url_normalization() {
        let ok = |raw: &str| normalize_base_url(raw).unwrap();
        assert_eq!(ok("https://x.example"), "https://x.example");
        assert_eq!(ok("https://x.example/"), "https://x.example");
        assert_eq!(ok("https://x.example/v1beta"), "https://x.example");
        assert_eq!(ok("https://x.example/v1beta/"), "https://x.example");
        assert_eq!(
            ok("http://127.0.0.1:8080/proxy/v1beta"),
            "http://127.0.0.1:8080/proxy"
        );
        assert!(normalize_base_url("ftp://x").is_err());
        assert!(normalize_base_url("not a url").is_err());
        assert!(normalize_base_url("https://x.example/?key=1").is_err());
    }

    #[test]
    fn env_options() {
        let vars = |name: &str| match name {
            API_KEY_ENV => Some(" secret-key-123 ".to_owned()),
            BASE_URL_ENV => Some("http://localhost:1/v1beta".to_owned()),
            _ => None,
        };
        let opts = GeminiOptions::from_vars(vars);
        assert_eq!(opts.api_key, "secret-key-123");
        assert!(!format!("{opts:?}").contains("secret"));
        let client = GeminiClient::new(opts).unwrap();
        assert_eq!(client.base_url(), "http://localhost:1");
        assert!(!format!("{client:?}").contains("secret"));
        let none = GeminiOptions::from_vars(|_| None);
        assert_eq!(none.base_url, DEFAULT_BASE_URL);
        assert!(matches!(
            GeminiClient::new(none),
            Err(GeminiError::MissingApiKey)
        ));
    }

    #[test]
    fn model_paths() {
        assert_eq!(
            model_path("models/gemini-2.5-flash").unwrap(),
            "gemini-2.5-flash"
        );
        assert_eq!(model_path(DEFAULT_MODEL).unwrap(), DEFAULT_MODEL);
        assert!(model_path("gemini 2.5").is_err());
        assert!(model_path("../x").is_err());
        assert!(model_path("").is_err());
    }

    #[test]
    fn error_bodies() {
        let body = r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.5s"}]}}"#;
        let e = parse_api_error(429, body, None);
        assert!(e.is_retryable());
        match &e {
            GeminiError::Api {
                code,
                status_text,
                message,
                retry_after,
                ..
            } => {
                assert_eq!(*code, 429);
                assert_eq!(status_text, "RESOURCE_EXHAUSTED");
                assert_eq!(message, "Resource has been exhausted");
                assert_eq!(*retry_after, Some(Duration::from_millis(500)));
            }
            other => panic!("{other:?}"),
        }
        let e = parse_api_error(
            502,
            "<html>bad gateway</html>",
            Some(Duration::from_secs(2)),
        );
        assert!(e.to_string().contains("<html>bad gateway</html>"), "{e}");
        assert!(e.to_string().contains("error 502:"), "{e}");
        let key = r#"[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}]"#;
        let e = parse_api_error(400, key, None);
        assert_eq!(e.hint(), Some("check GEMINI_API_KEY"));
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("API key not valid"));
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let client = GeminiClient::new(GeminiOptions {
            api_key: "k".into(),
            backoff_base: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
            ..GeminiOptions::default()
        })
        .unwrap();
        let d0 = client.backoff(0);
        assert!(d0 >= Duration::from_millis(80) && d0 <= Duration::from_millis(120));
        let d2 = client.backoff(2);
        assert!(d2 >= Duration::from_millis(320) && d2 <= Duration::from_millis(480));
        let d9 = client.backoff(9);
        assert!(d9 <= Duration::from_millis(600));
    }
}
