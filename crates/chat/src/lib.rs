//! `switchboard-chat`: the chat side of Switchboard, between the person, the model and
//! the MCP servers.
//!
//! - [`Chat`] (`chat.rs`): the chat loop — one turn sends the conversation and the tool
//!   declarations to the model, runs the function calls it asks for (with confirmation
//!   and argument checks), feeds the results back, and repeats until the model answers.
//! - [`ToolRegistry`] (`registry.rs`): the model-facing tool names (`mcp_{server}_{tool}`),
//!   the table back to MCP, the per-request declaration cap and `search_tools`.
//! - [`normalize`] (`schema/`): MCP input schemas → the subset Gemini accepts (and the
//!   OpenAPI form); the rules it writes to live in `switchboard-model`. The registry
//!   normalizes each schema once per content, through a bounded cache (`schema_cache.rs`).
//! - [`check_args`] (`args.rs`): the arguments a model gives, checked against the tool's
//!   own `inputSchema` before a call.
//! - [`map_call_result`] (`results.rs`): an MCP `CallToolResult` → the function response
//!   and parts the model reads, plus a display form for the person.
//! - [`Untrusted`] (`untrusted.rs`): server text marked as untrusted data for the model (a
//!   per-conversation nonce tag, the system rule).
//! - [`expand_input`] / [`prompt_command_name`] (`chat_input.rs`, `commands.rs`): what a
//!   person types — prompts as slash commands, `@server:uri` resources.
//!
//! The model itself comes from `switchboard-model` ([`switchboard_model::ModelClient`]);
//! this crate must not talk HTTP to a model API or build a model client, and must not
//! open connections to MCP servers (it uses the `switchboard-host` it is given).

mod args;
mod chat;
mod chat_input;
mod commands;
mod registry;
mod results;
mod schema;
mod schema_cache;
mod untrusted;

pub use args::{ArgsChecker, MAX_LISTED_ERRORS, check_args};
pub use chat::{
    AlwaysApprove, Chat, ChatError, ChatEvent, ChatOptions, ConfirmRequest, Confirmer, Decision,
    ONE_SHOT_DISCOVERY_LIMIT,
};
pub use chat_input::{Expanded, content_to_parts, expand_input, prompt_commands_help};
pub use commands::{
    PromptArg, ResourceRef, find_resource_refs, parse_prompt_args, prompt_command_name, prompt_help,
};
pub use registry::{
    DEFAULT_MAX_DECLARATIONS, Decl, MAX_NAME_LEN, Omitted, RegisteredTool, SEARCH_TOOLS_NAME,
    SearchHit, ToolRegistry, sanitize, visible_to_model,
};
pub use results::{DEFAULT_LIMIT_CHARS, Mapped, map_call_result, map_result};
pub use schema::{
    MAX_DEPTH, MAX_NODES, MAX_REF_REPEAT, Normalized, Renames, normalize, to_openapi,
};
pub use untrusted::{Kind as UntrustedKind, Untrusted, neutralize, neutralize_json};
