//! `switchboard-gemini`: the Gemini side of `switchboard chat`.
//!
//! - [`client`]: the REST client (`generateContent`, `streamGenerateContent?alt=sse`),
//!   retries and errors; [`types`]: the wire types.
//! - [`commands`]: chat input rules (prompts as slash commands, `@server:uri`).
//! - [`naming`]: the model-facing tool registry (`mcp_{server}_{tool}` names, the
//!   lookup table back to MCP, the per-request cap and `search_tools`).
//! - [`schema`]: MCP input schemas → what Gemini accepts (`parametersJsonSchema`, or
//!   the OpenAPI `parameters` form), and validators for what the API rejects.
//! - [`args`]: the argument check against a tool's own `inputSchema` before a call.
//! - [`results`]: an MCP `CallToolResult` → Gemini `functionResponse` and parts, plus a
//!   display form for the person.
//! - [`untrusted`]: the marking of server text as untrusted data for the model (a
//!   per-conversation nonce tag, the system rule), shared by both providers.
//! - `fake` (cargo feature `fake`): a fake Gemini API server for tests.
//! - [`openai`]: an OpenAI-compatible chat-completions provider (llama.cpp, Ollama,
//!   vLLM…) behind the same [`ModelClient`] trait; `fake_openai` (feature `fake`): a
//!   fake chat-completions server for tests.
//! - [`factory`]: the one way every front end (CLI, web app, workflow runner) builds its
//!   `Arc<dyn ModelClient>`: [`ModelConfig`] (provider, both providers' options) and the
//!   provider/model precedence ([`Provider`]).

pub mod args;
pub mod chat;
pub mod chat_input;
pub mod client;
pub mod commands;
pub mod factory;
#[cfg(feature = "fake")]
pub mod fake;
#[cfg(feature = "fake")]
pub mod fake_openai;
pub mod naming;
pub mod openai;
pub mod provider;
pub mod results;
pub mod schema;
pub mod types;
pub mod untrusted;

pub use args::{ArgsChecker, check_args};
pub use chat::{
    AlwaysApprove, Chat, ChatError, ChatEvent, ChatOptions, ConfirmRequest, Confirmer, Decision,
};
pub use client::ApiKind;
pub use client::{DEFAULT_MODEL, GeminiClient, GeminiError, GeminiOptions};
pub use client::{GenerateStream, RetryNotice};
pub use factory::{ModelConfig, ModelConfigError, Provider};
pub use naming::{
    DEFAULT_MAX_DECLARATIONS, Decl, Omitted, RegisteredTool, SEARCH_TOOLS_NAME, SearchHit,
    ToolRegistry,
};
pub use openai::{OpenAiClient, OpenAiOptions};
pub use provider::{ChunkStream, ModelClient};
pub use results::{Mapped, map_call_result, map_result};
pub use schema::{
    Normalized, normalize, to_openapi, validate_for_gemini, validate_function_declaration,
    validate_openapi_for_gemini,
};
pub use types::{
    Content, FunctionCall, FunctionDeclaration, FunctionResponse, GenerateRequest,
    GenerateResponse, Part, StreamAccumulator, Tool, ToolConfig,
};
pub use untrusted::Untrusted;
