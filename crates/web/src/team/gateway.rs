//! The team gateway: `/mcp` serves the caller's own servers as one MCP server, for any
//! MCP client that holds an access token from this team's authorization server
//! (`gateway_auth`). The token is checked on every request against the store (its hash,
//! expiry, the approving session, and the resource: exactly this gateway's `/mcp` URL);
//! the user it names is the only user the request can reach.
//!
//! Streamable HTTP in rmcp's **stateless** mode: no downstream session exists anywhere,
//! so any instance answers any request of a client (nothing to lose on a replica change).
//! Each request builds the user's catalog with `switchboard-gateway`'s `Catalog`
//! (`{server}__{tool}` names through its table, qualified resource URIs) from the user's
//! enabled servers, connected through this instance's client cache with the user's own
//! tokens (refreshed before use); a call resolves its name through the table of a catalog
//! this instance built for the same user in the last [`CATALOG_TTL`], else a fresh one.
//! A call, prompt or read relays the upstream's progress downstream under the client's own
//! `progressToken` (`switchboard-gateway`'s `relay_progress`): rmcp answers a stateless
//! POST whose handler notifies before its result as an SSE stream, so the notifications
//! reach the client on that request's own response; the client's `_meta` goes upstream,
//! and its disconnect cancels the upstream request.
//!
//! Clients on 2026-07-28: an upstream's elicitation, sampling or roots request during a
//! call comes back as an `InputRequiredResult` (the call registered with the elicitation
//! router as `Asker::Gateway`, parked in this instance's `InputTable` until the client's
//! retry; a retry reaching another instance is handed over through the store,
//! `gateway_input`); `subscriptions/listen` rebuilds the user's catalog every
//! [`LISTEN_EVERY`] and sends what changed. Older
//! clients have neither (no stream in stateless mode): elicitation is declined, sampling
//! refused with an error that says why, `roots/list` answered with an empty list
//! (`elicit`'s `TeamHooks`).
//!
//! A read goes where the gateway crate's URI rule routes it in the user's catalog
//! (`switchboard_gateway`'s `uris`: a listed URI to its server, a template never
//! capturing another server's origin, ambiguity refused with the qualified URIs); nothing
//! is remembered between requests, so a URI a server returned but does not list is
//! routed by that rule alone.
//!
//! Bounds: a catalog routes calls for [`CATALOG_TTL`] (30 s), at most 1024 users'
//! catalogs per instance (oldest first out); a server gets 15 s to connect and list
//! before it is left out; at most 4 open `subscriptions/listen` per user and 512 per
//! instance. A listen is compared at once with the catalog the client last saw on this
//! instance (kept 10 min), since rmcp acknowledges the subscription before the first
//! one is built. The team gateway offers no resource subscriptions (a subscription
//! would live on one instance). Without a valid token: 401 with no body, `no-store`,
//! and `WWW-Authenticate: Bearer resource_metadata="…", scope="mcp"` (with
//! `error="invalid_token"` when a token was presented).
//!
//! Must not: take a user from anything but the access token's row; reach a server but the
//! token's user's (`Store::for_user` with that id; connections keyed by it); pass an
//! upstream header, token or URL query downstream; keep anything a later request needs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use futures::future::join_all;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use switchboard_gateway::{
    CallKey, Catalog, CatalogOptions, ListsChanged, Relayed, Retry, Upstream, completed,
    list_filter, notify_listener, relay_options, relay_progress, scrub_urls, takes_input_required,
    unroutable, upstream_error,
};
use switchboard_host::{ServerSnapshot, ServerStatus};
use switchboard_mcp::{CallOptions, Connection, RequestError};
use switchboard_store::{ServerRef, User, UserId};

use super::elicit::Asker;
use super::gateway_auth::{mcp_url, resource_metadata_url};
use super::gateway_input;
use super::mcp_oauth::usable_tokens;
use super::metrics::{McpMethod, McpOutcome};
use super::servers::Resolved;
use super::state::TeamState;

/// How long a catalog built for a user may resolve that user's calls on this instance.
pub const CATALOG_TTL: Duration = Duration::from_secs(30);
/// At most this many users' catalogs kept per instance (the oldest goes first).
const MAX_CATALOGS: usize = 1024;
/// How long a user's last catalog is kept as what that user last saw, the baseline of
/// a `subscriptions/listen` they open (longer than [`CATALOG_TTL`], which routes calls).
const SEEN_TTL: Duration = Duration::from_secs(600);
/// How often an open `subscriptions/listen` rebuilds the user's catalog to compare.
pub const LISTEN_EVERY: Duration = Duration::from_secs(10);
/// At most this many open `subscriptions/listen` requests per user on one instance.
const MAX_LISTENS_PER_USER: usize = 4;
/// At most this many open `subscriptions/listen` requests on one instance.
const MAX_LISTENS: usize = 512;
/// How long one server may take to connect and list, before it is left out.
const SERVER_WAIT: Duration = Duration::from_secs(15);

/// The user an access token speaks for, put on the request by [`mcp`].
#[derive(Debug, Clone)]
struct Caller {
    user: User,
}

/// This instance's recently built catalogs, by user id: only a cache (a miss rebuilds).
#[derive(Default)]
pub(crate) struct CatalogCache {
    entries: Mutex<HashMap<String, (Instant, Arc<Catalog>)>>,
}

impl CatalogCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, (Instant, Arc<Catalog>)>> {
        match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The catalog last built for this user on this instance, if younger than
    /// `max_age`: [`CATALOG_TTL`] to route a call, [`SEEN_TTL`] for what the user's
    /// client last saw here.
    fn within(&self, user: &UserId, max_age: Duration) -> Option<Arc<Catalog>> {
        let entries = self.lock();
        entries
            .get(user.as_str())
            .filter(|(at, _)| at.elapsed() < max_age)
            .map(|(_, c)| c.clone())
    }

    fn put(&self, user: &UserId, catalog: Arc<Catalog>) {
        let mut entries = self.lock();
        entries.retain(|_, (at, _)| at.elapsed() < SEEN_TTL);
        while entries.len() >= MAX_CATALOGS {
            let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            entries.remove(&oldest);
        }
        entries.insert(user.as_str().to_owned(), (Instant::now(), catalog));
    }
}

fn unauthorized(state: &TeamState, presented: bool) -> Response {
    let mut value = format!(
        "Bearer resource_metadata=\"{}\", scope=\"{}\"",
        resource_metadata_url(state.cfg()),
        super::gateway_auth::SCOPE
    );
    if presented {
        value.push_str(", error=\"invalid_token\"");
    }
    let mut r = StatusCode::UNAUTHORIZED.into_response();
    if let Ok(v) = HeaderValue::from_str(&value) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn bearer(request: &Request) -> Option<&str> {
    let v = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// `POST|GET|DELETE /mcp`: the access token checked against the store (401 with the
/// RFC 9728 metadata URL otherwise), then rmcp's stateless Streamable HTTP service.
pub async fn mcp(State(state): State<TeamState>, mut request: Request) -> Response {
    let Some(token) = bearer(&request).map(str::to_owned) else {
        return unauthorized(&state, false);
    };
    let access = match state.store().gateway_access(&token).await {
        Ok(Some(a)) if a.resource == mcp_url(state.cfg()) => a,
        Ok(_) => return unauthorized(&state, true),
        Err(e) => {
            tracing::warn!("team store (gateway): {e}");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the team database did not answer; try again in a moment",
            )
                .into_response();
        }
    };
    request
        .extensions_mut()
        .insert(Caller { user: access.user });
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None);
    config.allowed_hosts = state.cfg().allowed_hosts.clone();
    let factory = state.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(TeamGatewayServer {
                state: factory.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    service.handle(request).await.map(Body::new)
}

/// The handler of one request (stateless: made per request).
#[derive(Clone)]
struct TeamGatewayServer {
    state: TeamState,
}

fn caller(ctx: &RequestContext<RoleServer>) -> Result<User, ErrorData> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .map(|c| c.user.clone())
        .ok_or_else(|| ErrorData::internal_error("the request carries no caller", None))
}

fn capabilities() -> ServerCapabilities {
    // `listChanged`: clients on 2026-07-28 hear changes through `subscriptions/listen`
    // (older clients have no stream for them in stateless mode, and hear none).
    serde_json::from_value(serde_json::json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true},
    }))
    .unwrap_or_default()
}

/// Where a read of `uri` goes: the user's catalog's URI table, the local gateway's
/// rule (`switchboard_gateway::uris`: a listed URI to its server, a template never
/// capturing another server's origin, ambiguity refused). Nothing is remembered between
/// requests, so a URI a server returned but does not list is routed by that rule alone.
fn route_read(catalog: &Catalog, uri: &str) -> Result<(String, String), ErrorData> {
    catalog.uris.route(uri).map_err(|e| unroutable(uri, e))
}

/// One connected server's lists, as a snapshot the gateway's catalog is built from.
fn snapshot(name: &str, conn: &Connection, lists: Lists) -> ServerSnapshot {
    ServerSnapshot {
        name: name.to_owned(),
        status: ServerStatus::Connected,
        transport: conn.transport_kind().to_string(),
        connected_via: None,
        target: String::new(),
        cwd: None,
        timeout: None,
        trust: false,
        origin: "team".into(),
        tools: lists.tools,
        filtered_out: Vec::new(),
        withheld: Vec::new(),
        prompts: lists.prompts,
        resources: lists.resources,
        resource_templates: lists.templates,
        instructions: conn.instructions(),
        server_info: None,
        protocol_version: None,
        auth: None,
        error: None,
        hint: None,
        warnings: Vec::new(),
        gave_up_after: None,
    }
}

#[derive(Default)]
struct Lists {
    tools: Vec<rmcp::model::Tool>,
    prompts: Vec<rmcp::model::Prompt>,
    resources: Vec<rmcp::model::Resource>,
    templates: Vec<rmcp::model::ResourceTemplate>,
}

async fn lists_of(conn: &Connection) -> Lists {
    let caps = conn.capabilities();
    let opts = CallOptions::default();
    let mut l = Lists::default();
    if caps.tools.is_some() {
        l.tools = conn.list_tools(&opts).await.unwrap_or_default();
    }
    if caps.prompts.is_some() {
        l.prompts = conn.list_prompts(&opts).await.unwrap_or_default();
    }
    if caps.resources.is_some() {
        l.resources = conn.list_resources(&opts).await.unwrap_or_default();
        l.templates = conn
            .list_resource_templates(&opts)
            .await
            .unwrap_or_default();
    }
    l
}

/// How a team-catalog server is named among a user's servers (a user's own server name
/// cannot hold `:`), as in the client cache and in chats.
const CATALOG_PREFIX: &str = "catalog:";

impl TeamGatewayServer {
    /// The user's enabled server `name` (or, as `catalog:NAME`, an enabled team-catalog
    /// server), connected with the user's own credentials.
    async fn connection(&self, user: &UserId, name: &str) -> Result<Arc<Connection>, String> {
        let us = self.state.store().for_user(user);
        let server = match name.strip_prefix(CATALOG_PREFIX) {
            Some(published) => ServerRef::catalog(published),
            None => ServerRef::own(name),
        };
        let resolved = Resolved::of(&self.state, &us, &server)
            .await
            .map_err(|e| e.message)?;
        if let Resolved::Own(record) = &resolved
            && !record.enabled
        {
            return Err(format!("you have no enabled server `{name}`"));
        }
        let tokens = usable_tokens(&self.state, &us, &server)
            .await
            .map_err(|e| e.message)?;
        resolved
            .connect(&self.state, user, tokens.as_ref())
            .await
            .map_err(|e| scrub_urls(&e.to_string()))
    }

    /// The user's catalog, built now from every enabled server (own, and team-catalog
    /// ones as `catalog:NAME`) that answers in time.
    async fn fresh_catalog(&self, user: &UserId) -> Result<Arc<Catalog>, ErrorData> {
        let us = self.state.store().for_user(user);
        let unavailable = |e: switchboard_store::StoreError| {
            tracing::warn!("team store (gateway): {e}");
            ErrorData::internal_error("the team database did not answer", None)
        };
        let records = us.servers().await.map_err(unavailable)?;
        let published = us.catalog().await.map_err(unavailable)?;
        let mut names: Vec<String> = records
            .iter()
            .filter(|r| r.enabled)
            .map(|r| r.name.clone())
            .collect();
        names.extend(
            published
                .iter()
                .filter(|e| {
                    e.enabled
                        && (!e.record.server.launch.is_stdio() || self.state.allow_catalog_stdio())
                })
                .map(|e| format!("{CATALOG_PREFIX}{}", e.record.server.name)),
        );
        let snaps = join_all(names.iter().map(|name| async move {
            let got = tokio::time::timeout(SERVER_WAIT, async {
                let conn = self.connection(user, name).await.ok()?;
                let lists = lists_of(&conn).await;
                Some(snapshot(name, &conn, lists))
            })
            .await;
            got.ok().flatten()
        }))
        .await;
        let snaps: Vec<ServerSnapshot> = snaps.into_iter().flatten().collect();
        let catalog = Arc::new(Catalog::build(&snaps, &CatalogOptions::default()));
        self.state.catalogs().put(user, catalog.clone());
        Ok(catalog)
    }

    /// A recent catalog of this user's in which `found` holds, else a fresh one.
    async fn catalog_with(
        &self,
        user: &UserId,
        found: impl Fn(&Catalog) -> bool,
    ) -> Result<Arc<Catalog>, ErrorData> {
        if let Some(c) = self
            .state
            .catalogs()
            .within(user, CATALOG_TTL)
            .filter(|c| found(c))
        {
            return Ok(c);
        }
        self.fresh_catalog(user).await
    }

    /// Runs one upstream request for a downstream one, with the upstream's progress
    /// under the client's own token. A client on 2026-07-28 is also asked the upstream
    /// server's questions (elicitation) through an `InputRequiredResult`, the call
    /// waiting on this instance for its retry (`switchboard_gateway::InputTable`), which
    /// may reach any instance ([`gateway_input`]); older clients' calls have those
    /// questions declined.
    async fn relay_call<T: Send + serde::Serialize + serde::de::DeserializeOwned + 'static>(
        &self,
        ctx: &RequestContext<RoleServer>,
        user: &UserId,
        server: &str,
        call: String,
        retry: Retry,
        start: impl FnOnce(CallOptions) -> BoxFuture<'static, Result<T, RequestError>>,
    ) -> Result<Relayed<T>, ErrorData> {
        // Upstream progress goes down under the client's own token: rmcp's stateless
        // mode answers a request that notifies before its result as an SSE stream.
        let (opts, progress) = relay_options(ctx);
        if !takes_input_required(ctx) {
            return Ok(Relayed::Done(
                relay_progress(ctx, start(opts), progress).await,
            ));
        }
        let key = CallKey {
            owner: user.as_str().to_owned(),
            call,
        };
        if let Some(rs) = &retry.state {
            if !self.state.inputs().holds(rs) {
                return gateway_input::retry_elsewhere(
                    &self.state,
                    ctx,
                    user,
                    rs,
                    &key,
                    retry.responses,
                )
                .await;
            }
            gateway_input::taken_here(&self.state, user, rs);
        }
        let router = self.state.cache().elicitations().cloned();
        let relayed = self
            .state
            .inputs()
            .relay(ctx, key.clone(), retry, || {
                Upstream::new(opts, progress, start, |asks| match router {
                    Some(r) => Box::new(r.enter(user.as_str(), server, Asker::Gateway(asks))),
                    None => Box::new(asks),
                })
            })
            .await?;
        if let Relayed::InputRequired(asked) = &relayed
            && let Some(rs) = &asked.request_state
        {
            gateway_input::offer(&self.state, user, rs.clone(), key, server.to_owned()).await?;
        }
        Ok(relayed)
    }

    async fn routed(&self, user: &UserId, server: &str) -> Result<Arc<Connection>, ErrorData> {
        self.connection(user, server).await.map_err(|why| {
            ErrorData::internal_error(format!("server `{server}` is not reachable: {why}"), None)
        })
    }
}

/// Counts a user's open `subscriptions/listen` requests on this instance while it lives.
struct Listening {
    state: TeamState,
    user: String,
}

impl Listening {
    /// `None` when the user already has [`MAX_LISTENS_PER_USER`] open here, or the
    /// instance [`MAX_LISTENS`].
    fn enter(state: &TeamState, user: &UserId) -> Option<Self> {
        let mut open = state.listens().lock().ok()?;
        let total: usize = open.values().sum();
        let mine = open.entry(user.as_str().to_owned()).or_default();
        if *mine >= MAX_LISTENS_PER_USER || total >= MAX_LISTENS {
            return None;
        }
        *mine += 1;
        Some(Self {
            state: state.clone(),
            user: user.as_str().to_owned(),
        })
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        if let Ok(mut open) = self.state.listens().lock()
            && let Some(n) = open.get_mut(&self.user)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}

impl ServerHandler for TeamGatewayServer {
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(list_filter())
    }

    /// Rebuilds the user's catalog every [`LISTEN_EVERY`] and sends what changed: a
    /// server added, removed, enabled or disabled through any instance, or a server's
    /// own lists changing, all reach the listener.
    ///
    /// rmcp acknowledges the subscription before this runs, so a client may change a
    /// list (call a tool that does) while the first catalog is still being built here,
    /// and that first catalog would already hold the change. So the first one is also
    /// compared with the catalog this user's client last saw on this instance (built
    /// before the acknowledgement): a change in between is sent at once. At worst that
    /// sends a change the client already saw, which only makes it list again.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let user = caller(subscription.request_context())?;
        let Some(_open) = Listening::enter(&self.state, &user.id) else {
            return Err(ErrorData::invalid_request(
                format!(
                    "too many open subscriptions/listen requests (at most \
                     {MAX_LISTENS_PER_USER} per user): close one first"
                ),
                None,
            ));
        };
        let seen = self.state.catalogs().within(&user.id, SEEN_TTL);
        let mut last = self.fresh_catalog(&user.id).await?;
        if let Some(seen) = seen {
            let changed = ListsChanged::between(&seen, &last);
            if changed.any() {
                notify_listener(&subscription, changed).await;
            }
        }
        let mut tick = tokio::time::interval(LISTEN_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                _ = tick.tick() => {
                    let Ok(next) = self.fresh_catalog(&user.id).await else {
                        continue;
                    };
                    let changed = ListsChanged::between(&last, &next);
                    if changed.any() {
                        notify_listener(&subscription, changed).await;
                    }
                    last = next;
                }
            }
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(capabilities())
            .with_server_info(
                Implementation::new("switchboard-team-gateway", env!("CARGO_PKG_VERSION"))
                    .with_title("Switchboard team gateway"),
            )
            .with_instructions(
                "Your own servers in this Switchboard team, as one MCP server: each tool and \
                 prompt is named `{server}__{name}`; a server that does not answer is left out.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let user = caller(&context)?;
        let c = self.fresh_catalog(&user.id).await?;
        Ok(ListToolsResult::with_all_items(c.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let user = caller(&context)?;
        let name = request.name.to_string();
        let catalog = self
            .catalog_with(&user.id, |c| c.tool_names.resolve(&name).is_some())
            .await?;
        let Some((server, tool)) = catalog.tool_names.resolve(&name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`: list the gateway's tools with tools/list"),
                None,
            ));
        };
        let started = Instant::now();
        let conn = self.routed(&user.id, server).await?;
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let (tool, arguments) = (tool.to_owned(), request.arguments);
        let relayed = self
            .relay_call(
                &context,
                &user.id,
                server,
                format!("tools/call {name}"),
                retry,
                move |opts| Box::pin(async move { conn.call_tool(&tool, arguments, &opts).await }),
            )
            .await?;
        let result = match relayed {
            Relayed::InputRequired(asked) => return Ok(CallToolResponse::InputRequired(asked)),
            Relayed::Done(r) => r,
        };
        self.state.metrics().mcp_call(
            McpMethod::CallTool,
            McpOutcome::of_answer(&result, |r| r.is_error == Some(true)),
            started,
        );
        result
            .map(|r| CallToolResponse::from(completed(r)))
            .map_err(|e| upstream_error(server, e))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let user = caller(&context)?;
        let c = self.fresh_catalog(&user.id).await?;
        Ok(ListPromptsResult::with_all_items(c.prompts.clone()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let user = caller(&context)?;
        let catalog = self
            .catalog_with(&user.id, |c| {
                c.prompt_names.resolve(&request.name).is_some()
            })
            .await?;
        let Some((server, prompt)) = catalog.prompt_names.resolve(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt `{}`: list the gateway's prompts with prompts/list",
                    request.name
                ),
                None,
            ));
        };
        let conn = self.routed(&user.id, server).await?;
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let (prompt, arguments) = (prompt.to_owned(), request.arguments.unwrap_or_default());
        let relayed = self
            .relay_call(
                &context,
                &user.id,
                server,
                format!("prompts/get {}", request.name),
                retry,
                move |opts| {
                    Box::pin(async move { conn.get_prompt(&prompt, arguments, &opts).await })
                },
            )
            .await?;
        match relayed {
            Relayed::InputRequired(asked) => Ok(GetPromptResponse::InputRequired(asked)),
            Relayed::Done(r) => r
                .map(|r| GetPromptResponse::from(completed(r)))
                .map_err(|e| upstream_error(server, e)),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let user = caller(&context)?;
        let c = self.fresh_catalog(&user.id).await?;
        Ok(ListResourcesResult::with_all_items(c.resources.clone()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let user = caller(&context)?;
        let c = self.fresh_catalog(&user.id).await?;
        Ok(ListResourceTemplatesResult::with_all_items(
            c.templates.clone(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let user = caller(&context)?;
        let catalog = self
            .catalog_with(&user.id, |c| route_read(c, &request.uri).is_ok())
            .await?;
        let (server, uri) = route_read(&catalog, &request.uri)?;
        let conn = self.routed(&user.id, &server).await?;
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let relayed = self
            .relay_call(
                &context,
                &user.id,
                &server,
                format!("resources/read {}", request.uri),
                retry,
                move |opts| Box::pin(async move { conn.read_resource(&uri, &opts).await }),
            )
            .await?;
        match relayed {
            Relayed::InputRequired(asked) => Ok(ReadResourceResponse::InputRequired(asked)),
            Relayed::Done(r) => r
                .map(|r| ReadResourceResponse::from(completed(r)))
                .map_err(|e| upstream_error(&server, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A connected server's snapshot with these lists (as [`snapshot`] makes them).
    fn snap(name: &str, lists: serde_json::Value) -> ServerSnapshot {
        let list = |k: &str| lists.get(k).cloned().unwrap_or(json!([]));
        ServerSnapshot {
            name: name.into(),
            status: ServerStatus::Connected,
            transport: "http".into(),
            connected_via: None,
            target: String::new(),
            cwd: None,
            timeout: None,
            trust: false,
            origin: "team".into(),
            tools: serde_json::from_value(list("tools")).unwrap(),
            filtered_out: Vec::new(),
            withheld: Vec::new(),
            prompts: Vec::new(),
            resources: serde_json::from_value(list("resources")).unwrap(),
            resource_templates: serde_json::from_value(list("templates")).unwrap(),
            instructions: None,
            server_info: None,
            protocol_version: None,
            auth: None,
            error: None,
            hint: None,
            warnings: Vec::new(),
            gave_up_after: None,
        }
    }

    /// The team gateway's reads and apps follow the gateway crate's one table: a
    /// member's server offering `{+u}` gets no read of another server's origin, an
    /// origin two servers own is refused, and a tool naming another server's app loses it.
    #[test]
    fn team_reads_and_apps_follow_the_gateways_uri_rule() {
        let a = snap(
            "a",
            json!({"resources": [{"uri": "a://doc/1", "name": "d"},
                                 {"uri": "ui://a/app.html", "name": "app"}]}),
        );
        let b = snap(
            "b",
            json!({"templates": [{"uriTemplate": "{+u}", "name": "all"},
                                 {"uriTemplate": "a://doc/{+p}", "name": "a-too"}],
                   "tools": [{"name": "t", "inputSchema": {"type": "object"},
                              "_meta": {"ui": {"resourceUri": "ui://a/app.html"}}}]}),
        );
        let catalog = Catalog::build(&[a, b], &CatalogOptions::default());
        assert_eq!(
            route_read(&catalog, "a://doc/1").unwrap(),
            ("a".into(), "a://doc/1".into())
        );
        assert_eq!(
            route_read(&catalog, "ui://a/other").unwrap(),
            ("a".into(), "ui://a/other".into())
        );
        assert_eq!(
            route_read(&catalog, "c://free").unwrap(),
            ("b".into(), "c://free".into())
        );
        // `a://doc` is owned by both (a lists there, b's template fixes it): refused.
        let e = route_read(&catalog, "a://doc/2").unwrap_err();
        assert!(
            e.message.contains("switchboard-gateway://a/a://doc/2"),
            "{}",
            e.message
        );
        let t = &catalog.tools[0];
        assert!(t.meta.as_ref().is_none_or(|m| m.0.get("ui").is_none()));
    }
}
