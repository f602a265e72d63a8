//! Team mode (`switchboard serve --team`): one Switchboard for many people who sign in
//! with OpenID Connect; each has their own MCP servers (HTTP/SSE only) and secrets in the
//! team store (`switchboard-store`, SQLite or PostgreSQL). Any number of instances may
//! serve one database: nothing a request needs lives only in one process.
//!
//! Owns: the team router ([`team_app`], built from one route table, [`route_table`]),
//! sign-in and sessions (`signin`, `session`), the per-user server API (`servers`), the
//! per-instance MCP client cache (`cache`), per-user OAuth logins to servers and token
//! refresh (`mcp_oauth`), `/healthz` and `/readyz` (`health`), the pages a browser uses
//! (`pages`: `/` and `/assets/{file}`);
//! Prometheus `/metrics` for the operator's scraper (`metrics`); the model key of a user
//! and the team key admins set (`model_key`), chats kept in the store (`chat`); the team catalog
//! (`catalog`: admins publish servers, each user enables them with their own login);
//! saved workflows and their runs (`workflows`: kept in the store, run over a per-run host
//! of the caller's servers with the caller's tokens, behind the team's URL guard).
//! MCP Apps in the chat with their sessions in the store (`apps`).
//! Prometheus `/metrics` for the operator's scraper (`metrics`); the team gateway `/mcp`
//! (`gateway`: the token's user's servers as one MCP server, stateless) and the team
//! server as its OAuth 2.1 authorization server (`gateway_auth`: RFC 9728/8414/7591,
//! consent, code + PKCE, tokens bound to `/mcp`, RFC 7009 revocation, and each user's
//! connected clients; registration bounded per field, per address (`rate_limit`) and in
//! pending clients; Client ID Metadata Documents fetched through the URL guard
//! (`client_document`)); CORS for browser MCP clients on exactly those bearer-token and
//! public OAuth endpoints (`cors`), never on a cookie route.
//! Must not: keep any user state in memory that another instance would need (sessions,
//! logins in flight and servers are read from the store on every request; the client
//! cache is only a cache), run a command for a browser user (no stdio servers of users;
//! only stdio catalog servers an admin published, on an instance started with
//! `--allow-catalog-stdio`, with the admin's argv and env and nothing of the user's), send a
//! secret (header value, token) back to the page, or reach a user's rows except through
//! `Store::for_user` with the signed-in user's id.
//!
//! # Isolation (the rule every route keeps)
//!
//! **One user can never see, call, test, edit, remove or open anything of another
//! user's, by any route.** Concretely:
//! - a route acts for exactly one user: the one whose session cookie the middleware
//!   resolved through the store (`session::require_session`); no route takes a user id
//!   from the request, and per-user data is reached only through
//!   `Store::for_user(&signed_in.user.id)`, whose queries all name that user;
//! - a server is named only within its user: `{name}` in a path or a body is looked up
//!   among the signed-in user's servers, so another user's server is "not found" (404),
//!   never "forbidden" (which would confirm it exists);
//! - a saved secret (`<unchanged>` in a form) is taken only from the signed-in user's own
//!   server of that name and only for the URL it was saved for;
//! - cached MCP connections are keyed by user id + server name + a digest of the record
//!   and credentials, so one user's request never finds another's connection;
//! - public routes (`/healthz`, `/readyz`, `/auth/login`, `/auth/callback`, the pages
//!   `/` and `/assets/{file}`) answer nothing about any user's data;
//!   `/oauth/mcp/callback` is public only because the
//!   authorization server redirects to it, and acts solely for the user whose session
//!   cookie arrives (a pending server login is taken only by its own user).
//! - the catalog is shared, but nothing per user in it is: enablement and OAuth tokens
//!   for a catalog server are the signed-in user's own (`ServerRef::Catalog` through
//!   `for_user`), connections are cached per user (`catalog:NAME`), and a user sees no
//!   header, env value, command or argument of a catalog server; only an admin (`Admin`
//!   routes) writes the catalog, and the store checks the admin flag again at the write;
//! - `/mcp` acts only for the user whose access token the store resolves (hashed,
//!   unexpired, for exactly this gateway's `/mcp` URL, its approving session alive), and
//!   reaches only that user's servers, by name through the gateway's table; the
//!   authorization routes (`/oauth/register`, `/oauth/token`, the metadata) are public
//!   and answer nothing about anyone's data; `GET /oauth/authorize` names only the
//!   signed-in user; its POST records an approval only for the session's user;
//! - an MCP App session is its user's row (`Store::for_user`): another user's session
//!   id is a 404 on every `/api/apps/{id}` route and on the sandbox page; the app reaches
//!   only the session's server, with the signed-in user's own tokens, and only tools
//!   visible to apps; its sandbox page runs in an opaque origin, so nothing it loads can
//!   use the session cookie;
//! - a user's connected clients (`/api/gateway/grants`) are their own grants: listed and
//!   ended through `for_user`, another user's grant id is "not found"; `/oauth/revoke`
//!   revokes a token only for the client it was issued to;
//! - CORS (`cors`) opens only `/mcp` and the public OAuth endpoints to other origins, none
//!   of which reads a cookie; a cross-origin request to a cookie route is still refused by
//!   the session middleware's Origin check;
//! - `/metrics` answers only the operator's scraper (the metrics bearer token, never a
//!   session), with counts whose labels name no user, server, URL or tool.
//!
//! `tests/team_isolation.rs` checks the rule on every route of [`route_table`]: a route
//! without a case there fails it.

mod apps;
mod cache;
mod catalog;
mod chat;
mod client_document;
mod cors;
mod elicit;
mod gateway;
mod gateway_auth;
mod gateway_input;
mod health;
mod limits;
mod mcp_oauth;
mod metrics;
mod model_key;
mod pages;
mod progress;
mod rate_limit;
mod servers;
mod session;
mod signin;
mod start;
mod state;
mod workflows;

use axum::Router;
use axum::http::Method;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};

use crate::error::ApiError;

pub use cache::CacheLimits;
pub use catalog::ALLOW_STDIO_FLAG;
pub use chat::{CONFIRM_TIMEOUT as CHAT_CONFIRM_TIMEOUT, POLL_EVERY as CHAT_POLL_EVERY};
pub use elicit::{
    ELICITATION_TIMEOUT as CHAT_ELICITATION_TIMEOUT, MAX_ANSWER_BYTES as CHAT_ELICITATION_MAX_BYTES,
};
pub use gateway_auth::RegistrationLimits;
pub use mcp_oauth::{
    CALLBACK_PATH as MCP_OAUTH_CALLBACK_PATH, LOGIN_TTL as MCP_LOGIN_TTL, REFRESH_BUFFER,
};
pub use metrics::{METRICS_TOKEN_MIN_LEN, MetricsToken};
pub use model_key::TeamModel;
pub use signin::{LOGIN_TTL, SignInOptions};
pub use start::{RunningTeam, SIGNIN_CALLBACK_PATH, TeamOptions, serve_team, start_team};
pub use state::TeamState;
pub use workflows::MAX_RUN_TIME as WORKFLOW_MAX_RUN_TIME;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteAccess {
    /// Anyone: answers nothing about any user's data.
    Public,
    /// A signed-in user (a session cookie the store knows), acting only on their own data.
    Session,
    /// A signed-in user who is an admin (the store's `is_admin` flag, from `--admin`):
    /// team-wide settings (the team model key, the catalog's writes). Anyone else signed
    /// in gets 403 "only a team admin may do this" (nothing about what is behind it);
    /// without a session 401.
    Admin,
    /// An MCP client of the gateway: an access token this team's authorization server
    /// issued for the gateway's `/mcp` URL, whose approving session lives; acts only for
    /// the user who approved it.
    McpToken,
    /// The operator's monitoring: the metrics bearer token (no session); answers counts
    /// only, never a user's data.
    Operator,
}

/// One route of the team app, as [`route_table`] lists it.
#[derive(Debug, Clone)]
pub struct RouteInfo {
    /// The HTTP method.
    pub method: Method,
    /// The path (axum syntax: `{name}` is a parameter).
    pub path: &'static str,
    /// Who may call it.
    pub access: RouteAccess,
    /// What it may read or change.
    pub touches: &'static str,
}

struct Route {
    info: RouteInfo,
    handler: MethodRouter<TeamState>,
}

macro_rules! route {
    ($method:ident, $path:literal, $access:ident, $touches:literal, $handler:expr) => {
        Route {
            info: RouteInfo {
                method: Method::$method,
                path: $path,
                access: RouteAccess::$access,
                touches: $touches,
            },
            handler: on(MethodFilter::$method, $handler),
        }
    };
}

/// The one list the router is built from.
fn routes() -> Vec<Route> {
    vec![
        route!(
            GET,
            "/",
            Public,
            "reads whether the session cookie is live, to pick the static sign-in page or the static app shell (no user data in either)",
            pages::page
        ),
        route!(
            GET,
            "/assets/{file}",
            Public,
            "nothing: the pages' embedded CSS, JavaScript and icon",
            pages::asset
        ),
        route!(
            GET,
            "/healthz",
            Public,
            "nothing: the process answers",
            health::healthz
        ),
        route!(
            GET,
            "/readyz",
            Public,
            "one cheap query on the store",
            health::readyz
        ),
        route!(
            GET,
            "/metrics",
            Operator,
            "this instance's counters, histograms and open MCP sessions (labels: route templates, methods, status classes, outcomes)",
            metrics::scrape
        ),
        route!(
            GET,
            "/auth/login",
            Public,
            "stores a login in flight (state hash, sealed PKCE verifier, nonce); redirects to the issuer",
            signin::login
        ),
        route!(
            GET,
            "/auth/callback",
            Public,
            "takes the login in flight once; creates or updates the user the issuer vouched for and a session",
            signin::callback
        ),
        route!(
            POST,
            "/auth/logout",
            Session,
            "ends the caller's session (with ?everywhere=1 all the caller's sessions)",
            signin::logout
        ),
        route!(
            GET,
            "/api/me",
            Session,
            "the caller's email, name, admin flag",
            signin::me
        ),
        route!(
            GET,
            "/api/servers",
            Session,
            "the caller's servers, secrets masked",
            servers::list
        ),
        route!(
            POST,
            "/api/servers",
            Session,
            "adds a server of the caller's",
            servers::add
        ),
        route!(
            PUT,
            "/api/servers/{name}",
            Session,
            "edits the caller's server `name`",
            servers::edit
        ),
        route!(
            DELETE,
            "/api/servers/{name}",
            Session,
            "removes the caller's server `name` and its tokens",
            servers::remove
        ),
        route!(
            POST,
            "/api/mcp-test",
            Session,
            "connects to a URL (or the caller's server `name`) through the URL guard and lists its tools",
            servers::test
        ),
        route!(
            GET,
            "/api/servers/{name}/tools",
            Session,
            "lists the tools of the caller's server `name` (cached connection)",
            servers::tools
        ),
        route!(
            POST,
            "/api/servers/{name}/call",
            Session,
            "calls a tool on the caller's server `name` (cached connection)",
            servers::call
        ),
        route!(
            POST,
            "/api/servers/{name}/oauth/start",
            Session,
            "discovers the caller's server `name`'s authorization server; stores a pending server login of the caller's (state hash, sealed PKCE verifier, server name + URL); answers the authorization URL",
            mcp_oauth::start
        ),
        route!(
            GET,
            "/oauth/mcp/callback",
            Public,
            "takes the pending server login of the user whose session cookie arrives (none without a session; another user's is left alone) once; exchanges the code and saves that user's tokens; answers a page for the opener, no token",
            mcp_oauth::callback
        ),
        route!(
            POST,
            "/api/servers/{name}/oauth/logout",
            Session,
            "removes the caller's OAuth tokens for their server `name`",
            mcp_oauth::logout
        ),
        route!(
            GET,
            "/api/model-key",
            Session,
            "whether the caller's own key and the team key are set, and their providers (never a key)",
            model_key::status
        ),
        route!(
            PUT,
            "/api/model-key",
            Session,
            "saves the caller's own model key (sealed)",
            model_key::put_own
        ),
        route!(
            DELETE,
            "/api/model-key",
            Session,
            "removes the caller's own model key",
            model_key::delete_own
        ),
        route!(
            PUT,
            "/api/admin/model-key",
            Admin,
            "saves the team model key (sealed); admins only",
            model_key::put_team
        ),
        route!(
            DELETE,
            "/api/admin/model-key",
            Admin,
            "removes the team model key; admins only",
            model_key::delete_team
        ),
        route!(
            GET,
            "/api/chats",
            Session,
            "the caller's conversations (titles, switches, times)",
            chat::list
        ),
        route!(
            POST,
            "/api/chats",
            Session,
            "creates a conversation of the caller's",
            chat::create
        ),
        route!(
            GET,
            "/api/chats/{id}",
            Session,
            "the caller's conversation `id`: its saved messages and waiting confirmations",
            chat::get
        ),
        route!(
            PUT,
            "/api/chats/{id}",
            Session,
            "renames the caller's conversation `id`",
            chat::rename
        ),
        route!(
            DELETE,
            "/api/chats/{id}",
            Session,
            "deletes the caller's conversation `id` with its messages (a running turn stops)",
            chat::remove
        ),
        route!(
            PUT,
            "/api/chats/{id}/servers",
            Session,
            "sets the per-chat server switches of the caller's conversation `id`",
            chat::toggles
        ),
        route!(
            POST,
            "/api/chats/{id}/send",
            Session,
            "runs a turn in the caller's conversation `id` with the caller's model key and enabled servers (cached connections); saves each message as it is produced; streams events",
            chat::send
        ),
        route!(
            POST,
            "/api/chats/{id}/confirm",
            Session,
            "answers a confirmation waiting in the caller's conversation `id` (written to the store for the instance running the turn)",
            chat::confirm
        ),
        route!(
            POST,
            "/api/chats/{id}/elicitation",
            Session,
            "answers a server's request for input (elicitation) waiting in the caller's conversation `id`, checked against its requested schema (written to the store for the instance running the turn)",
            elicit::answer
        ),
        route!(
            POST,
            "/api/chats/{id}/cancel",
            Session,
            "asks the turn running in the caller's conversation `id` (on any instance) to stop",
            chat::cancel
        ),
        route!(
            GET,
            "/api/workflows",
            Session,
            "the names and times of the caller's saved workflows",
            workflows::list
        ),
        route!(
            GET,
            "/api/workflows/{name}",
            Session,
            "the caller's workflow `name` with its source",
            workflows::get
        ),
        route!(
            PUT,
            "/api/workflows/{name}",
            Session,
            "saves the caller's workflow `name` (source sealed); answers its problems against the caller's servers",
            workflows::save
        ),
        route!(
            DELETE,
            "/api/workflows/{name}",
            Session,
            "removes the caller's workflow `name` with its finished runs",
            workflows::remove
        ),
        route!(
            POST,
            "/api/validate-workflow",
            Session,
            "validates a workflow source against the names of the caller's usable servers (reads nothing else)",
            workflows::check
        ),
        route!(
            POST,
            "/api/workflows/{name}/run",
            Session,
            "runs the caller's workflow `name` on this instance against the caller's enabled servers and catalog servers, with the caller's tokens and model key, behind the URL guard; records the run and saves its sealed log",
            workflows::start
        ),
        route!(
            GET,
            "/api/workflow-runs",
            Session,
            "the caller's runs (states and times)",
            workflows::runs
        ),
        route!(
            GET,
            "/api/workflow-runs/{id}",
            Session,
            "the caller's run `id` with its saved log",
            workflows::run
        ),
        route!(
            GET,
            "/api/workflow-runs/{id}/events",
            Session,
            "the caller's run `id`: its state, live events (on the instance running it) and saved log",
            workflows::events
        ),
        route!(
            POST,
            "/api/workflow-runs/{id}/cancel",
            Session,
            "asks the caller's run `id` (on any instance) to stop",
            workflows::cancel
        ),
        route!(
            GET,
            "/api/chats/{id}/apps",
            Session,
            "the MCP App sessions of the caller's conversation `id` (ids, server, tool, resource; no input or result)",
            apps::of_chat
        ),
        route!(
            POST,
            "/api/apps/{id}/open",
            Session,
            "reads the UI resource of the caller's app session `id` through the caller's own connection to its server; stores the sandbox CSP; answers the HTML, CSP and the tool's input and result",
            apps::open
        ),
        route!(
            GET,
            "/apps/{id}/sandbox",
            Session,
            "the sandbox proxy page of the caller's app session `id`, under its stored CSP with `sandbox allow-scripts allow-forms` (an opaque origin) and frame-ancestors the team origin",
            apps::sandbox
        ),
        route!(
            POST,
            "/api/apps/{id}/tools/call",
            Session,
            "calls a tool visible to apps on the server of the caller's app session `id`, with the caller's tokens",
            apps::call_tool
        ),
        route!(
            POST,
            "/api/apps/{id}/resources/read",
            Session,
            "reads a resource of the server of the caller's app session `id`, with the caller's tokens",
            apps::read_resource
        ),
        route!(
            GET,
            "/api/apps/{id}/lists",
            Session,
            "lists the resources, templates and prompts of the server of the caller's app session `id`",
            apps::lists
        ),
        route!(
            POST,
            "/api/apps/{id}/message",
            Session,
            "the app's ui/message: runs a turn in the chat of the caller's app session `id` (as its send; streams events)",
            apps::message
        ),
        route!(
            POST,
            "/api/apps/{id}/context",
            Session,
            "the app's ui/update-model-context: stores it (sealed) on the caller's app session `id` for the next turn of its chat",
            apps::context
        ),
        route!(
            DELETE,
            "/api/apps/{id}",
            Session,
            "removes the caller's app session `id`",
            apps::close
        ),
        route!(
            GET,
            "/api/admin/catalog",
            Admin,
            "every catalog server (header and env values masked)",
            catalog::admin_list
        ),
        route!(
            POST,
            "/api/admin/catalog",
            Admin,
            "publishes a catalog server (stdio only with --allow-catalog-stdio)",
            catalog::publish
        ),
        route!(
            PUT,
            "/api/admin/catalog/{name}",
            Admin,
            "edits catalog server `name` (a new address or command drops every user's tokens for it)",
            catalog::edit
        ),
        route!(
            DELETE,
            "/api/admin/catalog/{name}",
            Admin,
            "unpublishes catalog server `name` with every user's enablement and tokens for it",
            catalog::unpublish
        ),
        route!(
            GET,
            "/api/catalog",
            Session,
            "the catalog (no secret, no command line) with the caller's enablement and whether the caller has tokens",
            catalog::list
        ),
        route!(
            POST,
            "/api/catalog/{name}/enable",
            Session,
            "enables catalog server `name` for the caller",
            catalog::enable
        ),
        route!(
            POST,
            "/api/catalog/{name}/disable",
            Session,
            "disables catalog server `name` for the caller and removes the caller's tokens for it",
            catalog::disable
        ),
        route!(
            GET,
            "/api/catalog/{name}/tools",
            Session,
            "lists the tools of catalog server `name` the caller enabled, with the caller's tokens (cached connection of the caller's)",
            catalog::tools
        ),
        route!(
            POST,
            "/api/catalog/{name}/call",
            Session,
            "calls a tool on catalog server `name` the caller enabled, with the caller's tokens",
            catalog::call
        ),
        route!(
            POST,
            "/api/catalog/{name}/test",
            Session,
            "connects to catalog server `name` the caller enabled with the caller's tokens and lists its tools (OAuth discovery hint on a 401)",
            catalog::test
        ),
        route!(
            POST,
            "/api/catalog/{name}/oauth/start",
            Session,
            "discovers catalog server `name`'s authorization server; stores a pending catalog login of the caller's; answers the authorization URL",
            catalog::oauth_start
        ),
        route!(
            POST,
            "/api/catalog/{name}/oauth/logout",
            Session,
            "removes the caller's OAuth tokens for catalog server `name`",
            catalog::oauth_logout
        ),
        route!(
            GET,
            "/.well-known/oauth-protected-resource",
            Public,
            "nothing: the gateway's RFC 9728 metadata (its /mcp URL, this app as authorization server)",
            gateway_auth::protected_resource
        ),
        route!(
            GET,
            "/.well-known/oauth-protected-resource/mcp",
            Public,
            "nothing: the same RFC 9728 metadata at the path-suffixed address",
            gateway_auth::protected_resource
        ),
        route!(
            GET,
            "/.well-known/oauth-authorization-server",
            Public,
            "nothing: the RFC 8414 metadata of the gateway's authorization server",
            gateway_auth::authorization_server
        ),
        route!(
            POST,
            "/oauth/register",
            Public,
            "stores a public MCP client (name, checked loopback-http or https redirect URIs; sizes per field and request, a rate per address, the oldest never-approved clients purged past a cap); answers its client id",
            gateway_auth::register
        ),
        route!(
            GET,
            "/oauth/authorize",
            Public,
            "reads the client (a registered one, or a client metadata document fetched through the URL guard and cached); with the caller's live session cookie shows the consent page naming the caller's email, without one redirects to the sign-in",
            gateway_auth::authorize
        ),
        route!(
            POST,
            "/oauth/authorize",
            Session,
            "records the caller's approval for a client (a grant bound to the caller's session) and a code; redirects to the client's registered redirect URI",
            gateway_auth::approve
        ),
        route!(
            POST,
            "/oauth/token",
            Public,
            "takes a code once (PKCE S256) or spends a refresh token once; stores hashed tokens of that grant; answers them",
            gateway_auth::token
        ),
        route!(
            POST,
            "/oauth/revoke",
            Public,
            "revokes a token the named client holds (RFC 7009): a refresh token ends its grant, an access token only itself; nothing for another client's token",
            gateway_auth::revoke
        ),
        route!(
            GET,
            "/api/gateway/grants",
            Session,
            "the caller's connected gateway clients (grants: client name, redirect URIs, created, last used; never a token)",
            gateway_auth::my_grants
        ),
        route!(
            DELETE,
            "/api/gateway/grants/{id}",
            Session,
            "ends the caller's gateway grant `id` with every token of it (another user's is 404)",
            gateway_auth::revoke_my_grant
        ),
        route!(
            POST,
            "/mcp",
            McpToken,
            "the token's user's enabled servers (cached connections with that user's tokens): lists and calls",
            gateway::mcp
        ),
        route!(
            GET,
            "/mcp",
            McpToken,
            "nothing beyond the token check: stateless gateway, no stream to resume (405)",
            gateway::mcp
        ),
        route!(
            DELETE,
            "/mcp",
            McpToken,
            "nothing beyond the token check: stateless gateway, no session to end (405)",
            gateway::mcp
        ),
    ]
}

/// Every route of the team app: method, path, who may call it and what it touches.
pub fn route_table() -> Vec<RouteInfo> {
    routes().into_iter().map(|r| r.info).collect()
}

async fn not_found() -> Response {
    ApiError::not_found("no such route in team mode").into_response()
}

/// The team app's router, built from [`route_table`]'s routes: each `Session` route sits
/// behind the session middleware.
pub fn team_app(state: TeamState) -> Router {
    let mut router = Router::new();
    for r in routes() {
        let handler = match r.info.access {
            RouteAccess::Public | RouteAccess::Operator | RouteAccess::McpToken => r.handler,
            RouteAccess::Session => r.handler.route_layer(middleware::from_fn_with_state(
                state.clone(),
                session::require_session,
            )),
            // The last layer added runs first: the session, then the admin flag.
            RouteAccess::Admin => r
                .handler
                .route_layer(middleware::from_fn(session::require_admin))
                .route_layer(middleware::from_fn_with_state(
                    state.clone(),
                    session::require_session,
                )),
        };
        router = router.route(r.info.path, handler);
    }
    router
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(middleware::from_fn(cors::cors))
        .with_state(state)
}
