//! `switchboard-web`: the web app behind `switchboard serve`.
//!
//! A browser UI over the same host library as the CLI:
//! - **Settings › MCP Servers**: list, add, edit, delete, enable and disable servers in
//!   the same settings file as the CLI, and **Test** a server
//!   (`POST /api/settings/mcp-test`, GemiHub's contract);
//!   Servers found in the MCP Registry are added from the same page (`registry.rs`,
//!   through `switchboard-registry`).
//! - **Explorer**: every server's tools, resources and prompts with live status; call
//!   a tool from a form generated from its input schema, read resources, get prompts;
//! - **MCP Apps**: tool results with a UI resource render in a sandbox proxy served from
//!   a second loopback origin, bridged by the official host protocol;
//! - **Chat**: Gemini with the servers' tools, streamed over SSE.
//! - **Workflows**: the project's workflow files and the runs `switchboard run` saved
//!   (`switchboard_workflow::run_log`), with their MCP App UIs rendered again.
//!
//! Access control (`access.rs`): a random token printed at start becomes
//! an `HttpOnly; SameSite=Strict` cookie whose name carries the port; every `/api`
//! route needs the cookie or `Authorization: Bearer <token>`; state-changing requests
//! from a browser must carry an `Origin` exactly equal to the app's own.
//!
//! Team mode (`serve --team`, module `team`): many users signed in with OpenID Connect,
//! each with their own servers in the team store; see [`start_team`].
//!
//! Start with [`serve`] (prints the URL, runs until Ctrl-C) or [`start`] (returns a
//! handle, for tests and embedding); [`app`] is the router alone.

mod access;
mod apps;
mod assets;
mod chat;
mod dto;
mod error;
mod events;
mod explorer;
pub mod links;
mod oauth;
mod random;
mod registry;
mod serve;
mod settings;
mod state;
mod team;
mod test_conn;
mod workflows;

pub use apps::{CspSourceError, DEFAULT_CSP, build_csp, csp_origin, permissions_to_allow};
pub use error::WebError;
pub use oauth::{
    BeganLogin, CALLBACK_PATH, CompleteError, CompletedLogin, OAuthHandle, OAuthHooks, OpenUrlFn,
};
pub use serve::{
    DEFAULT_PORT, RunningServer, ServeOptions, app, interrupt, proxy_app, serve, start,
};
pub use settings::KEEP_UNCHANGED;
pub use state::{AppConfig, AppState};
pub use team::RegistrationLimits;
pub use team::{
    ALLOW_STDIO_FLAG, CHAT_CONFIRM_TIMEOUT, CHAT_POLL_EVERY, CacheLimits, LOGIN_TTL, MCP_LOGIN_TTL,
    MCP_OAUTH_CALLBACK_PATH, METRICS_TOKEN_MIN_LEN, MetricsToken, REFRESH_BUFFER, RouteAccess,
    RouteInfo, RunningTeam, SIGNIN_CALLBACK_PATH, SignInOptions, TeamModel, TeamOptions, TeamState,
    WORKFLOW_MAX_RUN_TIME, route_table, serve_team, start_team, team_app,
};
pub use team::{CHAT_ELICITATION_MAX_BYTES, CHAT_ELICITATION_TIMEOUT};
