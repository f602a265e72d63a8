//! What can go wrong talking to a model API, for either provider: [`ModelError`], tagged
//! with the [`ApiKind`] it came from so that messages and hints name the right API and
//! the right setting (`GEMINI_API_KEY` or `OPENAI_API_KEY`), and the one rule of which
//! errors are retried.

use std::time::Duration;

use crate::gemini::{API_KEY_ENV as GEMINI_KEY_ENV, DEFAULT_MODEL};

/// Statuses that are retried: rate limits and server-side failures.
const RETRY_STATUSES: [u16; 5] = [429, 500, 502, 503, 504];

/// Which kind of model API an error came from: it picks the wording of the message and
/// the hints (`GEMINI_API_KEY` or `OPENAI_API_KEY`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApiKind {
    /// The Gemini REST API ([`GeminiClient`](crate::GeminiClient)).
    #[default]
    Gemini,
    /// An OpenAI-compatible chat-completions endpoint
    /// ([`OpenAiClient`](crate::OpenAiClient)).
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
pub enum ModelError {
    /// No API key was configured.
    #[error(
        "no Gemini API key: set {GEMINI_KEY_ENV} (get one at https://aistudio.google.com/apikey)"
    )]
    MissingApiKey,
    /// The base URL is not an `http(s)` URL.
    #[error("invalid {} base URL {url:?}: {reason}", api.short_name())]
    InvalidBaseUrl {
        /// Which API the URL was meant for.
        api: ApiKind,
        url: String,
        reason: String,
    },
    /// The model name cannot be put into the request path (Gemini), or is empty.
    #[error("{}", invalid_model_text(*api, name))]
    InvalidModel {
        /// Which API the model was meant for.
        api: ApiKind,
        /// The name as given.
        name: String,
    },
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
    #[error("could not encode the {} request: {source}", api.short_name())]
    Encode {
        /// Which API the request was for.
        api: ApiKind,
        #[source]
        source: serde_json::Error,
    },
    /// A stream broke off after it had started.
    #[error("the {} stream broke off: {message}", api.short_name())]
    Stream {
        /// Which API was streaming.
        api: ApiKind,
        message: String,
    },
}

impl ModelError {
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
        return openai_hint(status, reason);
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

/// What the person can do about an API error from an OpenAI-compatible server.
fn openai_hint(status: u16, reason: Option<&str>) -> Option<&'static str> {
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

fn invalid_model_text(api: ApiKind, name: &str) -> String {
    match api {
        ApiKind::Gemini => format!(
            "invalid Gemini model name {name:?}: use a model id such as {DEFAULT_MODEL:?} (letters, digits, '.', '-', '_')"
        ),
        ApiKind::OpenAi => format!(
            "invalid model name {name:?} for the OpenAI-compatible API: give the model id the server lists (e.g. `llama3.2:3b`)"
        ),
    }
}
