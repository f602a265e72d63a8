//! One downstream session: the rmcp `ServerHandler` that answers a client from the
//! current catalog and relays its calls to the right upstream server, with progress,
//! cancellation, the request's own `_meta` (tools/call, resources/read, prompts/get,
//! completion/complete) and forwarded elicitation/sampling/roots in both directions —
//! for a client on 2026-07-28 through `InputRequiredResult` (`crate::input`), with list
//! changes on `subscriptions/listen` (`crate::listen`), resource subscriptions relayed
//! (`crate::subscriptions`), and every relayed result marked
//! `resultType: "complete"` ([`completed`]). A read goes where `crate::uris` routes it,
//! counting the URIs each server's relayed results named (remembered in `Shared`).
//!
//! It must not touch an upstream except through `Host::connection`, and never sends
//! an upstream credential or header downstream (it only copies MCP results).
//!
//! A request's own `_meta` goes upstream without `progressToken` (each upstream request
//! gets its own) and without the keys MCP reserves (a prefix label
//! `modelcontextprotocol` or `mcp`; the rule is `switchboard_mcp`'s), so a client
//! cannot spoof the gateway's protocol keys. Results (`structuredContent`, `_meta`,
//! annotations) are copied untouched but for that `resultType`, which rmcp drops again
//! for clients on older protocols. A `resources/subscribe` the client cancelled while
//! it ran is undone.
//! A call to a tool withheld by pinning is refused with why and
//! `switchboard mcp pins accept SERVER TOOL` ([`crate::Withheld::refusal`]), after the
//! pins are judged again (an accept made a moment ago offers it at once).
#![allow(deprecated)] // logging/setLevel: deprecated by SEP-2577, still in use

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference, ResultType, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ServerHandler, ServiceExt};
use switchboard_mcp::{CallOptions, Connection, Progress, RequestError};
use tokio::sync::mpsc;

use crate::audit::{AuditEntry, now};
use crate::catalog::Catalog;
use crate::error::GatewayError;
use crate::gateway::{Gateway, SessionEnd, Shared};
use crate::input::{CallKey, Relayed, Retry, Upstream, takes_input_required};
use crate::listen::{list_filter, serve_listen};
use crate::raw_call::RawRelay;
use crate::stdio_server::{StdioServer, Writer};
use crate::subscriptions::{self, MAX_PER_SUBSCRIBER, Subscriber, subscribable};
use crate::uris::Unroutable;

/// Ends a `subscriptions/listen` request's resource subscriptions when it ends.
struct ListenEnd {
    shared: Arc<Shared>,
    owner: u64,
}

impl Drop for ListenEnd {
    fn drop(&mut self) {
        subscriptions::end(&self.shared, self.owner);
    }
}

/// How long the end of a stdio session waits for its raw calls to tell their servers
/// they were cancelled.
const RAW_CALLS_END: std::time::Duration = std::time::Duration::from_secs(2);

/// The `serverInfo.name` the gateway reports.
pub const SERVER_NAME: &str = "switchboard-gateway";

/// The handler of one downstream session.
#[derive(Clone)]
pub struct GatewayServer {
    shared: Arc<Shared>,
    session: u64,
    /// Dropped with the session's last handler clone: ends the session.
    _end: Arc<SessionEnd>,
}

impl std::fmt::Debug for GatewayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayServer")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A handler for one more downstream session.
    pub fn session(&self) -> GatewayServer {
        let session = self.shared.next_id();
        GatewayServer {
            shared: self.shared.clone(),
            session,
            _end: Arc::new(SessionEnd {
                shared: self.shared.clone(),
                id: session,
            }),
        }
    }

    /// Serves one client on stdin/stdout until it closes the connection (stdin read
    /// by a thread, stdout written without blocking where it can be: the `stdio`
    /// module), its plain tool calls to stdio servers relayed as bytes (`raw_call`).
    pub async fn serve_stdio(&self) -> Result<(), GatewayError> {
        let server = self.session();
        let (input, output) = crate::stdio::stdio().map_err(GatewayError::Stdio)?;
        let (running_tx, mut raw_done) = mpsc::channel::<()>(1);
        let out = Arc::new(Writer::new(output));
        let relay = RawRelay::new(self.shared.clone(), server.session, out.clone(), running_tx);
        let transport = StdioServer::new(input, out, relay).map_err(GatewayError::Stdio)?;
        let running = match server.serve(transport).await {
            Ok(r) => r,
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(GatewayError::Initialize(e.to_string())),
        };
        let ended = running
            .waiting()
            .await
            .map_err(|e| GatewayError::Initialize(e.to_string()));
        // Raw calls in flight were cancelled when the session ended: let them tell their
        // servers before the host stops them (bounded: a server whose stdin is full).
        let _ = tokio::time::timeout(RAW_CALLS_END, raw_done.recv()).await;
        ended.map(|_| ())
    }
}

fn capabilities() -> ServerCapabilities {
    serde_json::from_value(serde_json::json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": true},
        "logging": {},
        "completions": {},
    }))
    .unwrap_or_default()
}

/// An upstream request's failure in the gateway's words for the client: the server's own
/// JSON-RPC error as it is, anything else with URLs scrubbed ([`scrub_urls`]).
pub fn upstream_error(server: &str, e: RequestError) -> ErrorData {
    match e {
        // The server's own JSON-RPC error goes through with its code and message.
        RequestError::Server { code, message, .. } => {
            ErrorData::new(ErrorCode(code), message, None)
        }
        other => ErrorData::internal_error(
            format!("server `{server}`: {}", scrub_urls(&other.to_string())),
            None,
        ),
    }
}

/// The gateway's own words about an upstream failure may quote the server's URL: shown
/// without user info, query or fragment (`switchboard_net::redacted`).
pub fn scrub_urls(text: &str) -> String {
    text.split(' ')
        .map(|word| match word.find("://") {
            Some(at) if at > 0 => {
                let start = word[..at]
                    .rfind(|c: char| !c.is_ascii_alphanumeric() && c != '+' && c != '-')
                    .map_or(0, |i| i + 1);
                let end = word
                    .rfind(|c: char| !matches!(c, ')' | ']' | ',' | ';' | ':' | '.' | '`' | '\''))
                    .map_or(word.len(), |i| i + 1);
                if start >= end {
                    return word.to_string();
                }
                format!(
                    "{}{}{}",
                    &word[..start],
                    switchboard_net::redacted(&word[start..end]),
                    &word[end..]
                )
            }
            _ => word.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A read (or subscription) of `requested` that [`crate::uris::UriTable`] could not
/// route, in the gateway's words for the client.
pub fn unroutable(requested: &str, e: Unroutable) -> ErrorData {
    match e {
        Unroutable::Unknown => ErrorData::resource_not_found(
            format!(
                "no connected server offers `{requested}`: list the gateway's resources with resources/list"
            ),
            None,
        ),
        Unroutable::Ambiguous(choices) => ErrorData::invalid_params(
            format!(
                "`{requested}` may belong to several servers, so it is not routed to either; read one of: {}",
                choices.join(", ")
            ),
            None,
        ),
    }
}

fn not_connected(shared: &Shared, server: &str) -> ErrorData {
    let why = shared
        .host
        .server(server)
        .map(|s| {
            format!(
                "{}{}",
                s.status,
                crate::catalog::downstream_reason(&s)
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "unknown".into());
    ErrorData::internal_error(
        format!("server `{server}` is not connected ({why}); try again when it is"),
        None,
    )
}

/// What one audited call was.
struct Call<'a> {
    method: &'static str,
    route: Option<(&'a str, &'a str)>,
    requested: &'a str,
    started: Instant,
    arguments: Option<serde_json::Value>,
}

/// A relayed request's answer ([`GatewayServer::answer`]).
enum Answer<T> {
    /// Parked: the client on 2026-07-28 is asked for input.
    Asked(rmcp::model::InputRequiredResult),
    Done(Result<T, ErrorData>),
}

struct Outcome {
    outcome: &'static str,
    error_class: Option<String>,
    error: Option<String>,
    bytes: usize,
    result: Option<serde_json::Value>,
}

impl GatewayServer {
    fn connection(&self, server: &str) -> Result<Arc<Connection>, ErrorData> {
        self.shared
            .host
            .connection(server)
            .ok_or_else(|| not_connected(&self.shared, server))
    }

    /// Runs one upstream request for a downstream one: progress goes down, the
    /// client's cancellation goes up (through `opts.cancel`), and elicitation or
    /// sampling requests from that server are answered by this client, inside this
    /// request's task.
    async fn relay<T>(
        &self,
        ctx: &RequestContext<RoleServer>,
        server: &str,
        fut: impl Future<Output = Result<T, RequestError>>,
        progress: mpsc::UnboundedReceiver<Progress>,
    ) -> Result<T, RequestError> {
        self.shared
            .while_answering(&ctx.peer, server, relay_progress(ctx, fut, progress))
            .await
    }

    /// [`Self::relay`] for `tools/call`, `prompts/get` and `resources/read`: a client on
    /// 2026-07-28 is asked for input through an `InputRequiredResult` instead
    /// ([`crate::input`]); `start` makes the upstream request with the options given.
    async fn relay_call<T: Send + serde::Serialize + 'static>(
        &self,
        ctx: &RequestContext<RoleServer>,
        server: &str,
        call: String,
        retry: Retry,
        start: impl FnOnce(CallOptions) -> BoxFuture<'static, Result<T, RequestError>>,
    ) -> Result<Relayed<T>, ErrorData> {
        let (opts, prx) = self.call_options(ctx);
        if !takes_input_required(ctx) {
            return Ok(Relayed::Done(
                self.relay(ctx, server, start(opts), prx).await,
            ));
        }
        let key = CallKey {
            owner: String::new(),
            call,
        };
        self.shared
            .inputs
            .relay(ctx, key, retry, || {
                Upstream::new(opts, prx, start, |asks| {
                    Box::new(self.shared.register_inflight(server, asks))
                })
            })
            .await
    }

    /// The end of a relayed `tools/call`, `prompts/get` or `resources/read` (`call`,
    /// whose route is the server's): audited as parked for the client's input, or as
    /// done (`is_error` says whether a result reports a failure), with the upstream's
    /// error in the gateway's words.
    fn answer<T: serde::Serialize + Completable>(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: Call<'_>,
        relayed: Result<Relayed<T>, ErrorData>,
        is_error: impl Fn(&T) -> bool,
    ) -> Answer<T> {
        let server = call.route.map(|(server, _)| server).unwrap_or_default();
        let result = match relayed {
            Ok(Relayed::InputRequired(asked)) => {
                self.audit(ctx, call, asked_outcome);
                return Answer::Asked(asked);
            }
            Ok(Relayed::Done(r)) => r.map(completed).map_err(|e| upstream_error(server, e)),
            Err(e) => Err(e),
        };
        // Reads of the URIs it returned go back to this server (`crate::uris`).
        if let Ok(v) = result.as_ref().map(serde_json::to_value)
            && let Ok(v) = v
        {
            self.shared.remember_returned(server, &v);
        }
        let failed = result.as_ref().is_ok_and(&is_error);
        let keep = self.audit_payloads();
        self.audit(ctx, call, || {
            outcome_of(&result, failed, ctx.ct.is_cancelled(), keep)
        });
        Answer::Done(result)
    }

    /// The current catalog, or, when `found` says it lacks what the client named,
    /// one rebuilt after the servers' first connection attempts (a client may call a
    /// tool it remembers before listing).
    async fn catalog_with(&self, found: impl Fn(&Catalog) -> bool) -> Arc<Catalog> {
        let catalog = self.shared.catalog();
        if found(&catalog) {
            return catalog;
        }
        self.shared.wait_settled().await;
        self.shared.fresh_catalog().await
    }

    /// The server and its own URI behind one of the gateway's resource URIs.
    async fn route_uri(&self, requested: &str) -> Result<(String, String), ErrorData> {
        let shared = &self.shared;
        let catalog = self
            .catalog_with(|c| shared.route(c, requested).is_ok())
            .await;
        shared
            .route(&catalog, requested)
            .map_err(|e| unroutable(requested, e))
    }

    fn call_options(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> (CallOptions, mpsc::UnboundedReceiver<Progress>) {
        relay_options(ctx)
    }

    /// Whether the audit log keeps arguments and results (`--audit-payloads`).
    fn audit_payloads(&self) -> bool {
        self.shared
            .opts
            .audit
            .as_ref()
            .is_some_and(|a| a.payloads())
    }

    /// A call's arguments for the audit log: without `--audit`, `None`, not even cloned.
    fn audit_arguments(
        &self,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Option<serde_json::Value> {
        self.shared.opts.audit.as_ref()?;
        arguments.cloned().map(serde_json::Value::Object)
    }

    /// Records one call. `outcome` runs only when there is an audit log (it serialises
    /// the whole result to measure it: work a call without `--audit` must not pay).
    fn audit(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: Call<'_>,
        outcome: impl FnOnce() -> Outcome,
    ) {
        let Some(audit) = &self.shared.opts.audit else {
            return;
        };
        let outcome = outcome();
        let Call {
            method,
            route,
            requested,
            started,
            arguments,
        } = call;
        let request_bytes = arguments.as_ref().map(|a| a.to_string().len()).unwrap_or(0);
        audit.record(AuditEntry {
            time: now(),
            client: ctx.client_info().map(|i| i.name),
            method,
            server: route.map(|(s, _)| s.to_string()),
            tool: route.map(|(_, t)| t.to_string()).unwrap_or_default(),
            requested: requested.to_string(),
            duration_ms: started.elapsed().as_millis() as u64,
            outcome: outcome.outcome,
            error_class: outcome.error_class,
            error: outcome.error,
            request_bytes,
            response_bytes: outcome.bytes,
            arguments,
            result: outcome.result,
        });
    }
}

/// Options for relaying one downstream request upstream: the client's cancellation,
/// its own `_meta` (switchboard-mcp leaves out `progressToken` and MCP's reserved keys,
/// which belong to each connection), and — when the client asked for progress — a
/// channel the upstream's progress arrives on, to hand to [`relay_progress`].
pub fn relay_options(
    ctx: &RequestContext<RoleServer>,
) -> (CallOptions, mpsc::UnboundedReceiver<Progress>) {
    let (ptx, prx) = mpsc::unbounded_channel();
    let meta: &serde_json::Map<String, serde_json::Value> = &ctx.meta;
    let opts = CallOptions {
        timeout: None,
        progress: ctx.meta.get_progress_token().map(|_| ptx),
        cancel: Some(ctx.ct.clone()),
        meta: (!meta.is_empty()).then(|| meta.clone()),
    };
    (opts, prx)
}

/// A result relayed from upstream, marked `resultType: "complete"`: an upstream on an
/// older protocol sends none, and a client on 2026-07-28 requires it (rmcp removes it
/// again for clients on older protocols).
pub fn completed<T: Completable>(mut result: T) -> T {
    result.result_type().get_or_insert(ResultType::COMPLETE);
    result
}

/// A result with a `resultType` field (see [`completed`]).
pub trait Completable {
    fn result_type(&mut self) -> &mut Option<ResultType>;
}

macro_rules! completable {
    ($($t:ty),*) => {$(
        impl Completable for $t {
            fn result_type(&mut self) -> &mut Option<ResultType> {
                &mut self.result_type
            }
        }
    )*};
}
completable!(
    CallToolResult,
    GetPromptResult,
    ReadResourceResult,
    CompleteResult
);

/// Await an upstream request, sending each of its progress notifications downstream
/// under the client's own `progressToken` (nothing when the client named none), in
/// order, all of them before the result.
pub async fn relay_progress<T>(
    ctx: &RequestContext<RoleServer>,
    fut: impl Future<Output = T>,
    mut progress: mpsc::UnboundedReceiver<Progress>,
) -> T {
    let token = ctx.meta.get_progress_token();
    tokio::pin!(fut);
    loop {
        tokio::select! {
            r = &mut fut => {
                while let Ok(p) = progress.try_recv() {
                    send_progress(ctx, token.as_ref(), p).await;
                }
                return r;
            }
            Some(p) = progress.recv() => send_progress(ctx, token.as_ref(), p).await,
        }
    }
}

/// Sends `p` to `ctx`'s client under its own progress `token` (nothing without one).
pub async fn send_progress(
    ctx: &RequestContext<RoleServer>,
    token: Option<&rmcp::model::ProgressToken>,
    p: Progress,
) {
    if let Some(token) = token {
        let mut param = ProgressNotificationParam::new(token.clone(), p.progress);
        param.total = p.total;
        param.message = p.message;
        let _ = ctx.peer.notify_progress(param).await;
    }
}

/// The audit outcome of a leg that ended asking the client for input (2026-07-28); the
/// call's retry is audited as a call of its own.
fn asked_outcome() -> Outcome {
    Outcome {
        outcome: "input_required",
        error_class: None,
        error: None,
        bytes: 0,
        result: None,
    }
}

fn outcome_of<T: serde::Serialize>(
    r: &Result<T, ErrorData>,
    is_error: bool,
    cancelled: bool,
    keep: bool,
) -> Outcome {
    match r {
        Ok(v) => {
            let value = serde_json::to_value(v).ok();
            Outcome {
                outcome: if is_error { "tool_error" } else { "ok" },
                error_class: None,
                error: None,
                bytes: value.as_ref().map(|v| v.to_string().len()).unwrap_or(0),
                result: if keep { value } else { None },
            }
        }
        Err(e) => Outcome {
            outcome: if cancelled { "cancelled" } else { "error" },
            error_class: Some(crate::audit::error_class(e.code.0)),
            error: Some(e.message.to_string()),
            bytes: 0,
            result: None,
        },
    }
}

impl ServerHandler for GatewayServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(capabilities())
            .with_server_info(
                Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"))
                    .with_title("Switchboard gateway"),
            )
            .with_instructions(
                // Fresh from the host: at `initialize` servers may still be connecting.
                Catalog::build(&self.shared.host.snapshot(), &self.shared.opts.catalog)
                    .instructions(),
            )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.shared
            .register_session(self.session, context.peer.clone());
        // No wait here: clients bound `initialize` tightly (Gemini CLI: 5 s). The
        // instructions say which servers are still connecting; lists wait instead.
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.shared.wait_settled().await;
        Ok(ListToolsResult::with_all_items(
            self.shared.fresh_catalog().await.tools.clone(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let requested = request.name.to_string();
        let mut catalog = self
            .catalog_with(|c| c.tool_names.resolve(&requested).is_some())
            .await;
        if catalog.tool_names.resolve(&requested).is_none()
            && catalog.withheld(&requested).is_some()
        {
            // Withheld by pinning: an accept made since (`switchboard mcp pins accept`,
            // another process) offers it at once, before the pins file watch sees it.
            self.shared.host.review_pins().await;
            catalog = self.shared.fresh_catalog().await;
        }
        let keep = self.audit_payloads();
        let args_value = self.audit_arguments(request.arguments.as_ref());
        let Some((server, tool)) = catalog.tool_names.resolve(&requested) else {
            let err = ErrorData::invalid_params(
                match catalog.withheld(&requested) {
                    Some(w) => w.refusal(),
                    None => format!(
                        "unknown tool `{requested}`: list the gateway's tools with tools/list"
                    ),
                },
                None,
            );
            let r: Result<(), ErrorData> = Err(err.clone());
            self.audit(
                &context,
                Call {
                    method: "tools/call",
                    route: None,
                    requested: &requested,
                    started,
                    arguments: args_value,
                },
                || outcome_of(&r, false, false, keep),
            );
            return Err(err);
        };
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let relayed = match self.connection(server) {
            Err(e) => Err(e),
            Ok(conn) => {
                let (tool_name, arguments) = (tool.to_owned(), request.arguments);
                self.relay_call(
                    &context,
                    server,
                    format!("tools/call {requested}"),
                    retry,
                    move |opts| {
                        Box::pin(async move { conn.call_tool(&tool_name, arguments, &opts).await })
                    },
                )
                .await
            }
        };
        let call = Call {
            method: "tools/call",
            route: Some((server, tool)),
            requested: &requested,
            started,
            arguments: args_value,
        };
        let is_error = |r: &CallToolResult| r.is_error.unwrap_or(false);
        match self.answer(&context, call, relayed, is_error) {
            Answer::Asked(asked) => Ok(CallToolResponse::InputRequired(asked)),
            Answer::Done(result) => result.map(CallToolResponse::from),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.shared.wait_settled().await;
        Ok(ListPromptsResult::with_all_items(
            self.shared.fresh_catalog().await.prompts.clone(),
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let started = Instant::now();
        let catalog = self
            .catalog_with(|c| c.prompt_names.resolve(&request.name).is_some())
            .await;
        let args_value = self.audit_arguments(request.arguments.as_ref());
        let Some((server, prompt)) = catalog.prompt_names.resolve(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt `{}`: list the gateway's prompts with prompts/list",
                    request.name
                ),
                None,
            ));
        };
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let relayed = match self.connection(server) {
            Err(e) => Err(e),
            Ok(conn) => {
                let (name, args) = (prompt.to_owned(), request.arguments.unwrap_or_default());
                self.relay_call(
                    &context,
                    server,
                    format!("prompts/get {}", request.name),
                    retry,
                    move |opts| Box::pin(async move { conn.get_prompt(&name, args, &opts).await }),
                )
                .await
            }
        };
        let call = Call {
            method: "prompts/get",
            route: Some((server, prompt)),
            requested: &request.name,
            started,
            arguments: args_value,
        };
        match self.answer(&context, call, relayed, |_| false) {
            Answer::Asked(asked) => Ok(GetPromptResponse::InputRequired(asked)),
            Answer::Done(result) => result.map(GetPromptResponse::from),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.shared.wait_settled().await;
        Ok(ListResourcesResult::with_all_items(
            self.shared.fresh_catalog().await.resources.clone(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.shared.wait_settled().await;
        Ok(ListResourceTemplatesResult::with_all_items(
            self.shared.fresh_catalog().await.templates.clone(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let started = Instant::now();
        let (server, uri) = self.route_uri(&request.uri).await?;
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let relayed = match self.connection(&server) {
            Err(e) => Err(e),
            Ok(conn) => {
                let upstream_uri = uri.clone();
                self.relay_call(
                    &context,
                    &server,
                    format!("resources/read {}", request.uri),
                    retry,
                    move |opts| {
                        Box::pin(async move { conn.read_resource(&upstream_uri, &opts).await })
                    },
                )
                .await
            }
        };
        let call = Call {
            method: "resources/read",
            route: Some((&server, &uri)),
            requested: &request.uri,
            started,
            arguments: None,
        };
        match self.answer(&context, call, relayed, |_| false) {
            Answer::Asked(asked) => Ok(ReadResourceResponse::InputRequired(asked)),
            Answer::Done(result) => result.map(ReadResourceResponse::from),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let catalog = self.shared.catalog();
        let mut upstream = request.clone();
        upstream.meta = None;
        let server = match &request.r#ref {
            Reference::Prompt(p) => {
                let Some((server, name)) = catalog.prompt_names.resolve(&p.name) else {
                    return Err(ErrorData::invalid_params(
                        format!("unknown prompt `{}`", p.name),
                        None,
                    ));
                };
                let mut r = p.clone();
                r.name = name.to_string();
                upstream.r#ref = Reference::Prompt(r);
                server.to_string()
            }
            Reference::Resource(t) => {
                let Some((server, uri)) = catalog.uris.route_template(&t.uri) else {
                    return Err(ErrorData::invalid_params(
                        format!("unknown resource template `{}`", t.uri),
                        None,
                    ));
                };
                let mut r = t.clone();
                r.uri = uri;
                upstream.r#ref = Reference::Resource(r);
                server
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "completion/complete: only `ref/prompt` and `ref/resource` are routed",
                    None,
                ));
            }
        };
        let conn = self.connection(&server)?;
        if conn.capabilities().completions.is_none() {
            return Ok(CompleteResult::default());
        }
        let (opts, prx) = self.call_options(&context);
        self.relay(&context, &server, conn.complete(upstream, &opts), prx)
            .await
            .map(completed)
            .map_err(|e| upstream_error(&server, e))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Servers may have asked for roots before this client came: with roots of its
        // own, tell them the list changed.
        if context
            .peer
            .peer_info()
            .is_some_and(|i| i.capabilities.roots.is_some())
        {
            self.shared.roots_changed().await;
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut filter = list_filter();
        // Resources whose server can be subscribed to now (rmcp then keeps only these).
        let catalog = self.shared.catalog();
        let uris: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| {
                self.shared.route(&catalog, uri).is_ok_and(|(server, _)| {
                    self.shared
                        .host
                        .connection(&server)
                        .is_some_and(|c| subscribable(&c, &server).is_ok())
                })
            })
            .take(MAX_PER_SUBSCRIBER)
            .cloned()
            .collect();
        if !uris.is_empty() {
            filter.resource_subscriptions = Some(uris);
        }
        Some(filter)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let changes = self.shared.changes.subscribe();
        // The listen request is the subscriber: its subscriptions end with it.
        let owner = self.shared.next_id();
        let _end = ListenEnd {
            shared: self.shared.clone(),
            owner,
        };
        let (tx, rx) = subscriptions::listen_queue();
        let catalog = self.shared.catalog();
        for uri in subscription
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten()
        {
            let Ok((server, upstream)) = self.shared.route(&catalog, uri) else {
                continue;
            };
            let to = Subscriber::Listen(tx.clone());
            let route = (server.as_str(), upstream.as_str());
            if let Err(e) = subscriptions::subscribe(&self.shared, owner, route, uri, to).await {
                tracing::info!("subscriptions/listen: `{uri}`: {}", e.message);
            }
        }
        // Only the table's senders stay (none when nothing was subscribed).
        drop(tx);
        serve_listen(subscription, changes, rx).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (server, upstream) = self.route_uri(&request.uri).await?;
        let to = Subscriber::Session(context.peer.clone());
        let route = (server.as_str(), upstream.as_str());
        subscriptions::subscribe(&self.shared, self.session, route, &request.uri, to).await?;
        // rmcp lets a handler run on when the client cancels its request: a subscription
        // the client gave up on is undone, not left sending it updates.
        if context.ct.is_cancelled() {
            subscriptions::unsubscribe(&self.shared, self.session, &request.uri).await;
            return Err(ErrorData::internal_error(
                "the subscription was cancelled by the client",
                None,
            ));
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        subscriptions::unsubscribe(&self.shared, self.session, &request.uri).await;
        Ok(())
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        self.shared.roots_changed().await;
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.set_session_level(self.session, request.level);
        self.shared.fan_out_level(request.level).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::scrub_urls;

    #[test]
    fn urls_lose_their_secrets() {
        assert_eq!(
            scrub_urls("cannot reach `https://u:p@h.test/mcp?key=s3cret#f`: refused"),
            "cannot reach `https://h.test/mcp`: refused"
        );
        assert_eq!(scrub_urls("no url here"), "no url here");
    }
}
