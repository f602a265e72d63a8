//! The HTTP layer both model clients share: the client from `switchboard-net` (the only
//! door to the network), one POST of a JSON body with retries (exponential backoff with
//! jitter, the server's requested wait honoured up to a cap, [`RetryNotice`]s for the
//! person), and the small helpers every error message uses.
//!
//! A provider supplies only what differs: how the request is authorized and how an
//! error body is read ([`Transport::post`]'s `authorize` and `parse_error`).
//!
//! Limits: a whole answer is read up to 64 MiB and an error body up to 64 KiB (one
//! streamed event: 32 MiB, in `sse.rs`); past that the request ends with an error naming
//! the limit, since a local model server is as untrusted as any other answer. Retries: 3
//! after the first attempt by default, waiting 1 s · 2^n ± 20 %, at most 60 s; a
//! requested wait (`Retry-After`, `RetryInfo`) longer than that cap ends the request
//! instead. Without a client of its own, a provider gets `switchboard_net::http_client`
//! with the `local` policy.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use serde::Serialize;
use switchboard_net::{LimitedBody, read_limited};

use crate::error::{ApiKind, ModelError};

/// How much of an unreadable error body is quoted.
const BODY_SNIPPET: usize = 300;

/// The most a whole (not streamed) answer may hold: 64 MiB. A model server is not
/// trusted to keep its answers small.
pub(crate) const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// The most of an error answer that is read: its message is at the start.
const MAX_ERROR_BYTES: usize = 64 * 1024;

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

/// A random factor in [0.8, 1.2].
pub(crate) fn jitter() -> f64 {
    use std::hash::BuildHasher;
    let hash = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    0.8 + (hash % 4001) as f64 / 10_000.0
}

/// A reqwest error with its whole chain of causes.
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

/// At most [`BODY_SNIPPET`] characters of a body, for a message.
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

/// Retries after the first attempt, unless the options say otherwise.
pub(crate) const DEFAULT_MAX_RETRIES: u32 = 3;
/// The first retry's wait, unless the options say otherwise.
pub(crate) const DEFAULT_BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest wait before a retry, unless the options say otherwise.
pub(crate) const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(60);

/// An environment variable through `get`, trimmed, when it is set and not blank.
pub(crate) fn env_value(get: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    get(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// When and how often a failed request is tried again.
#[derive(Clone)]
pub(crate) struct RetryPolicy {
    /// Retries after the first attempt.
    pub(crate) max_retries: u32,
    /// The first retry waits about this long; each further retry doubles it (±20 %).
    pub(crate) backoff_base: Duration,
    /// Cap on one wait; a server asking for longer is not retried.
    pub(crate) max_backoff: Duration,
    /// Told about every retry.
    pub(crate) on_retry: Option<RetryCallback>,
}

impl RetryPolicy {
    /// The wait before retry number `attempt + 1`: base·2^attempt, capped, ±20 %.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(20));
        let raw = self
            .backoff_base
            .saturating_mul(factor)
            .min(self.max_backoff);
        raw.mul_f64(jitter())
    }
}

/// One API's HTTP client and retry policy. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) api: ApiKind,
    pub(crate) http: reqwest::Client,
    pub(crate) retry: RetryPolicy,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("api", &self.api)
            .field("max_retries", &self.retry.max_retries)
            .finish_non_exhaustive()
    }
}

/// Reads a non-2xx answer into the provider's [`ModelError::Api`]: status, the wait the
/// headers asked for, and the body text.
pub(crate) type ErrorParser = fn(u16, Option<Duration>, &str) -> ModelError;

impl Transport {
    /// A transport on `http`, or on a client from `switchboard-net` with the `local`
    /// policy when `http` is `None`, so a local model server on loopback or the LAN works
    /// and link-local and cloud metadata addresses stay blocked.
    pub(crate) fn new(
        api: ApiKind,
        http: Option<reqwest::Client>,
        retry: RetryPolicy,
    ) -> Result<Self, ModelError> {
        let http = match http {
            Some(http) => http,
            None => {
                let mut opts =
                    switchboard_net::ClientOptions::new(switchboard_net::UrlPolicy::Local);
                opts.connect_timeout = Duration::from_secs(15);
                switchboard_net::http_client(opts).map_err(|e| ModelError::HttpClient {
                    api,
                    message: e.to_string(),
                })?
            }
        };
        Ok(Self { api, http, retry })
    }

    /// JSON-encodes a request body.
    pub(crate) fn encode(&self, body: &impl Serialize) -> Result<Bytes, ModelError> {
        serde_json::to_vec(body)
            .map(Bytes::from)
            .map_err(|source| ModelError::Encode {
                api: self.api,
                source,
            })
    }

    /// POSTs `body` to `url` with retries; returns the first successful response or the
    /// last error. `sse` asks for `text/event-stream`.
    pub(crate) async fn post(
        &self,
        url: &str,
        body: Bytes,
        sse: bool,
        authorize: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
        parse_error: ErrorParser,
    ) -> Result<reqwest::Response, ModelError> {
        let api = self.api.short_name();
        let retry = &self.retry;
        let mut attempt: u32 = 0;
        loop {
            tracing::debug!(url, attempt, api, "model request");
            let mut builder = authorize(self.http.post(url))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            if sse {
                builder = builder.header(reqwest::header::ACCEPT, "text/event-stream");
            }
            let error = match builder.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let delay = requested_delay(response.headers());
                    // An error body that cannot be read in full is judged by what arrived.
                    let text = match read_limited(response, MAX_ERROR_BYTES).await {
                        Ok(body) => String::from_utf8_lossy(body.bytes()).into_owned(),
                        Err(_) => String::new(),
                    };
                    parse_error(status, delay, &text)
                }
                Err(source) => ModelError::Http {
                    api: self.api,
                    url: url.to_owned(),
                    message: describe_reqwest(&source),
                    source,
                },
            };
            if attempt >= retry.max_retries || !error.is_retryable() {
                return Err(error);
            }
            let delay = match &error {
                ModelError::Api {
                    retry_after: Some(wait),
                    ..
                } => {
                    if *wait > retry.max_backoff {
                        tracing::debug!(
                            ?wait,
                            api,
                            "the server asked for a longer wait than allowed"
                        );
                        return Err(error);
                    }
                    *wait
                }
                _ => retry.backoff(attempt),
            };
            attempt += 1;
            tracing::debug!(%error, ?delay, attempt, api, "retrying model request");
            if let Some(cb) = &retry.on_retry {
                cb(&RetryNotice {
                    attempt,
                    max_retries: retry.max_retries,
                    delay,
                    reason: error.to_string(),
                });
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// Reads a whole successful answer's body, at most [`MAX_ANSWER_BYTES`].
    pub(crate) async fn body(
        &self,
        url: &str,
        response: reqwest::Response,
    ) -> Result<Bytes, ModelError> {
        let limit = MAX_ANSWER_BYTES;
        match read_limited(response, limit).await {
            Ok(LimitedBody::Whole(bytes)) => Ok(Bytes::from(bytes)),
            Ok(LimitedBody::Cut(_)) => Err(ModelError::Decode {
                api: self.api,
                message: format!(
                    "the answer is larger than {} MiB; the server is not answering as the API does",
                    limit / (1024 * 1024)
                ),
            }),
            Err(source) => Err(ModelError::Http {
                api: self.api,
                url: url.to_owned(),
                message: format!("reading the answer failed: {source}"),
                source,
            }),
        }
    }
}

/// The wait a non-2xx answer asks for: `retry-after-ms` (OpenAI), else `Retry-After` in
/// seconds (fractions tolerated; HTTP dates are not honoured).
fn requested_delay(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| header(reqwest::header::RETRY_AFTER.as_str()).and_then(parse_retry_after))
}

/// Masks a secret for logs: its length only.
pub(crate) fn mask(secret: Option<&str>) -> String {
    match secret {
        Some(s) if !s.is_empty() => format!("<{} chars>", s.len()),
        _ => "<unset>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy {
            max_retries: 3,
            backoff_base: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
            on_retry: None,
        };
        let d0 = policy.backoff(0);
        assert!(d0 >= Duration::from_millis(80) && d0 <= Duration::from_millis(120));
        let d2 = policy.backoff(2);
        assert!(d2 >= Duration::from_millis(320) && d2 <= Duration::from_millis(480));
        let d9 = policy.backoff(9);
        assert!(d9 <= Duration::from_millis(600));
    }

    #[test]
    fn requested_delays() {
        let mut h = HeaderMap::new();
        assert_eq!(requested_delay(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(requested_delay(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(requested_delay(&h), Some(Duration::from_millis(250)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
