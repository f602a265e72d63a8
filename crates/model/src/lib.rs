//! `switchboard-model`: the model behind a chat, for any provider.
//!
//! The chat side builds Gemini-shaped requests ([`GenerateRequest`]: contents, parts,
//! function declarations) and reads Gemini-shaped answers; a [`ModelClient`] sends them
//! to a model API. Two providers implement it:
//! - [`GeminiClient`]: the Gemini REST API (`generateContent`,
//!   `streamGenerateContent?alt=sse`), natively;
//! - [`OpenAiClient`]: any OpenAI-compatible chat-completions endpoint (llama.cpp,
//!   Ollama, vLLM, hosted APIs), translating on the way out and back.
//!
//! Both share one HTTP layer (the client from `switchboard-net`, retries with backoff,
//! the server's requested wait honoured up to a cap, [`RetryNotice`]s), one SSE reader
//! and one error type, [`ModelError`], tagged with the [`ApiKind`] so messages name the
//! right API and setting. [`ModelConfig`] is the one way every front end builds its
//! `Arc<dyn ModelClient>`. The [declaration rules](validate_function_declaration) say
//! what the Gemini API accepts as a tool declaration; they are the one copy the chat
//! side's normalizer and the test fakes use.
//!
//! This crate knows nothing of MCP: it must not depend on `switchboard-mcp` or
//! `switchboard-host`; tools reach it only as function declarations.

mod capabilities;
mod client;
mod declarations;
mod error;
mod factory;
mod gemini;
mod http;
mod openai;
mod sse;
mod types;

pub use capabilities::{model_supports_tools, supports_multimodal_function_response};
pub use client::{ChunkStream, ModelClient};
pub use declarations::{
    ACCEPTED_KEYWORDS, ACCEPTED_STRING_FORMATS, ACCEPTED_TYPES, FUNCTION_DECLARATION_FIELDS,
    MAX_FUNCTION_NAME_LEN, MAX_PROPERTY_NAME_LEN, is_valid_function_name, is_valid_property_name,
    validate_for_gemini, validate_function_declaration, validate_openapi_for_gemini,
};
pub use error::{ApiKind, ModelError};
pub use factory::{ModelConfig, ModelConfigError, Provider};
pub use gemini::{GeminiClient, GeminiOptions, GenerateStream};
pub use http::{RetryCallback, RetryNotice};
pub use types::*;

/// Gemini API specifics: its defaults, environment variables and URL rules.
pub mod gemini_api {
    pub use crate::gemini::{
        API_KEY_ENV, API_VERSION, BASE_URL_ENV, DEFAULT_BASE_URL, normalize_base_url,
    };
}

/// OpenAI-compatible API specifics: defaults, environment variables, and the wire
/// translation (useful to test a server's answers).
pub mod openai_api {
    pub use crate::openai::{
        API_KEY_ENV, BASE_URL_ENV, ChunkAssembler, DEFAULT_BASE_URL, from_chat_completion,
        map_finish_reason, normalize_base_url, stable_call_id, to_chat_request,
    };
}

pub use gemini::DEFAULT_MODEL;
pub use openai::{OpenAiClient, OpenAiOptions};
