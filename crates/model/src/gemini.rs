//! The Gemini REST client: `generateContent` and `streamGenerateContent?alt=sse` on
//! reqwest, with retries (exponential backoff with jitter, `Retry-After` and the API's
//! `RetryInfo` honoured) on 429 and 5xx, and errors that carry the API's own message.
//!
//! The base URL is the API root without the version path
//! ([`DEFAULT_BASE_URL`], or `GEMINI_BASE_URL` through [`GeminiOptions::from_env`]); a
//! trailing `/v1beta` is tolerated and stripped. The key goes in the `x-goog-api-key`
//! header.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::error::{ApiKind, ModelError};
use crate::http::{
    DEFAULT_BACKOFF_BASE, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES, RetryCallback, RetryPolicy,
    Transport, env_value, mask, snippet,
};
use crate::sse::{self, ByteStream};
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
            max_retries: DEFAULT_MAX_RETRIES,
            backoff_base: DEFAULT_BACKOFF_BASE,
            max_backoff: DEFAULT_MAX_BACKOFF,
            on_retry: None,
        }
    }
}

impl fmt::Debug for GeminiOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiOptions")
            .field("api_key", &mask(Some(&self.api_key)))
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
        if let Some(key) = env_value(&get, API_KEY_ENV) {
            opts.api_key = key;
        }
        if let Some(url) = env_value(&get, BASE_URL_ENV) {
            opts.base_url = url;
        }
        opts
    }
}

/// A client for one API key and base URL. Cheap to clone.
#[derive(Clone)]
pub struct GeminiClient {
    transport: Transport,
    api_key: String,
    base_url: String,
}

impl fmt::Debug for GeminiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiClient")
            .field("api_key", &mask(Some(&self.api_key)))
            .field("base_url", &self.base_url)
            .field("max_retries", &self.transport.retry.max_retries)
            .finish_non_exhaustive()
    }
}

/// The API root without the version path: trailing `/` and `/v1beta` stripped.
pub fn normalize_base_url(raw: &str) -> Result<String, ModelError> {
    let invalid = |reason: &str| ModelError::InvalidBaseUrl {
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
fn model_path(model: &str) -> Result<&str, ModelError> {
    let id = model.trim();
    let id = id.strip_prefix("models/").unwrap_or(id);
    let ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(id)
    } else {
        Err(ModelError::InvalidModel {
            api: ApiKind::Gemini,
            name: model.to_owned(),
        })
    }
}

impl GeminiClient {
    /// A client from `opts`. Fails without an API key or with a base URL that is not
    /// `http(s)`.
    pub fn new(opts: GeminiOptions) -> Result<Self, ModelError> {
        if opts.api_key.trim().is_empty() {
            return Err(ModelError::MissingApiKey);
        }
        let base_url = normalize_base_url(&opts.base_url)?;
        let retry = RetryPolicy {
            max_retries: opts.max_retries,
            backoff_base: opts.backoff_base,
            max_backoff: opts.max_backoff,
            on_retry: opts.on_retry,
        };
        Ok(Self {
            transport: Transport::new(ApiKind::Gemini, opts.http, retry)?,
            api_key: opts.api_key.trim().to_owned(),
            base_url,
        })
    }

    /// The API root in use (without the version path).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The URL of `method` (`generateContent`, `streamGenerateContent`) for `model`.
    pub fn endpoint(&self, model: &str, method: &str) -> Result<String, ModelError> {
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
    ) -> Result<GenerateResponse, ModelError> {
        let url = self.endpoint(model, "generateContent")?;
        let response = self.send(&url, request, false).await?;
        let bytes = self.transport.body(&url, response).await?;
        serde_json::from_slice(&bytes).map_err(|e| ModelError::Decode {
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
    ) -> Result<GenerateStream, ModelError> {
        let url = format!("{}?alt=sse", self.endpoint(model, "streamGenerateContent")?);
        let response = self.send(&url, request, true).await?;
        Ok(GenerateStream::from_bytes(Box::pin(
            response.bytes_stream(),
        )))
    }

    /// Sends with the key in `x-goog-api-key`, retrying as the policy says.
    async fn send(
        &self,
        url: &str,
        request: &GenerateRequest,
        sse: bool,
    ) -> Result<reqwest::Response, ModelError> {
        let body = self.transport.encode(request)?;
        let key = &self.api_key;
        self.transport
            .post(
                url,
                body,
                sse,
                |b| b.header("x-goog-api-key", key),
                |status, delay, body| parse_api_error(status, body, delay),
            )
            .await
    }
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
fn parse_api_error(status: u16, body: &str, header_delay: Option<Duration>) -> ModelError {
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
) -> ModelError {
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
    ModelError::Api {
        api: ApiKind::Gemini,
        status,
        code,
        status_text,
        message,
        reason,
        retry_after,
    }
}

type ItemStream = Pin<Box<dyn Stream<Item = Result<GenerateResponse, ModelError>> + Send>>;

/// The chunks of a streamed answer, in order. Ends after the last event.
pub struct GenerateStream {
    inner: ItemStream,
}

impl fmt::Debug for GenerateStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenerateStream").finish_non_exhaustive()
    }
}

impl GenerateStream {
    fn from_bytes(body: ByteStream) -> Self {
        let inner = sse::events(ApiKind::Gemini, body).filter_map(|event| {
            std::future::ready(match event {
                Ok(data) => decode_event(&data),
                Err(e) => Some(Err(e)),
            })
        });
        Self {
            inner: Box::pin(inner),
        }
    }
}

impl Stream for GenerateStream {
    type Item = Result<GenerateResponse, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// One event's data: a response chunk, an in-stream error, or nothing (blank data).
fn decode_event(data: &str) -> Option<Result<GenerateResponse, ModelError>> {
    let data = data.trim();
    if data.is_empty() || data == "[DONE]" {
        return None;
    }
    let value: Value = match serde_json::from_str(data) {
        Ok(v) => v,
        Err(e) => {
            return Some(Err(ModelError::Decode {
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
        serde_json::from_value(value).map_err(|e| ModelError::Decode {
            api: ApiKind::Gemini,
            message: format!(
                "a stream event is not a GenerateContentResponse ({e}): {}",
                snippet(data)
            ),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Err(ModelError::MissingApiKey)
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
            ModelError::Api {
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
    }
}
