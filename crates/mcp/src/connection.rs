//! One live connection to one MCP server: connect (with the right transport and
//! lifecycle), list with bounded pagination, call with a timeout, close.
//!
//! State machine: `connect()` either returns a ready [`Connection`] or a
//! [`ConnectError`]; a `Connection` is usable until the transport closes
//! ([`Connection::is_closed`]) or [`Connection::close`] is called. Reconnecting is the
//! host's job (it builds a new `Connection`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolResult, ClientRequest, GetPromptResult, Prompt, ProtocolVersion, ReadResourceResult,
    Resource, ResourceTemplate, ServerCapabilities, ServerResult, Tool,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, Peer, PeerRequestOptions, RoleClient,
    RunningService, ServiceError, serve_client_with_lifecycle,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use switchboard_net::{ClientOptions, GuardedClient, UrlPolicy};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::{ConnectError, RequestError};
use crate::handler::{
    ClientHooks, DefaultHooks, HostHandler, Progress, ProgressRouter, client_info,
};
use crate::http_bounds::BoundedHttpClient;
use crate::sse::{SseError, SseOptions, SseTransport};
use crate::stdio::{self, ChildGuard, SharedDiagnostics};
use crate::target::{StdioTarget, Target, TransportKind};
use crate::token::{TokenHttpClient, TokenSource};

/// At most this many pages are fetched for one list request.
pub const MAX_LIST_PAGES: usize = 100;
/// How long the stateless-revision probe may take before we fall back to `initialize`.
const DISCOVER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything needed to connect to one server.
#[derive(Clone)]
pub struct ConnectOptions {
    /// The server's name (used in messages and logs).
    pub name: String,
    pub target: Target,
    /// Time limit for each request (the server's `timeout`; Gemini CLI's default is 10 min).
    pub request_timeout: Duration,
    /// Time limit for spawning/connecting and the handshake. The request timeout bounds
    /// `initialize` too (as in Gemini CLI), so start-up waits at most
    /// [`ConnectOptions::startup_limit`], the smaller of the two.
    pub startup_timeout: Duration,
    pub hooks: Arc<dyn ClientHooks>,
    /// What worked last time for this target, to skip probing.
    pub transport_hint: Option<TransportKind>,
    pub client_name: String,
    pub client_version: String,
    /// Advertise the MCP Apps UI extension in `initialize`.
    pub ui_extension: bool,
    /// The URL guard: every HTTP request goes through its client, and the server URL is
    /// checked against its policy before anything is sent. `None` uses a guard with the
    /// `local` policy (loopback and private addresses allowed; link-local and cloud
    /// metadata blocked). There is no unguarded HTTP client.
    pub guard: Option<switchboard_net::GuardedClient>,
    /// Bearer tokens (OAuth) for HTTP servers: asked before each request unless the
    /// target's headers set `Authorization`; a 401 makes it refresh once.
    pub token_source: Option<Arc<dyn TokenSource>>,
    /// The largest message read from the server (a stdio line, an SSE event, a
    /// Streamable HTTP event), in bytes; a larger reply fails its request at once.
    pub max_message_bytes: usize,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("name", &self.name)
            .field("target", &self.target.display())
            .field("request_timeout", &self.request_timeout)
            .field("startup_timeout", &self.startup_timeout)
            .finish_non_exhaustive()
    }
}

impl ConnectOptions {
    /// How long start-up may take: the smaller of `startup_timeout` and
    /// `request_timeout` (a server's `timeout` is the limit for every request,
    /// `initialize` included).
    pub fn startup_limit(&self) -> Duration {
        self.startup_timeout.min(self.request_timeout)
    }

    /// Options with the defaults: 10 min request timeout, 30 s start-up timeout.
    pub fn new(name: impl Into<String>, target: Target) -> Self {
        Self {
            name: name.into(),
            target,
            request_timeout: Duration::from_secs(600),
            startup_timeout: Duration::from_secs(30),
            hooks: Arc::new(DefaultHooks),
            transport_hint: None,
            client_name: "switchboard".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            ui_extension: true,
            guard: None,
            token_source: None,
            max_message_bytes: crate::framing::DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// Per-request options.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Overrides the connection's request timeout.
    pub timeout: Option<Duration>,
    /// Receives `notifications/progress` for this request.
    pub progress: Option<mpsc::UnboundedSender<Progress>>,
    /// Cancels the request (a `notifications/cancelled` is sent).
    pub cancel: Option<CancellationToken>,
}

/// A connected MCP server.
pub struct Connection {
    name: Arc<str>,
    service: std::sync::Mutex<Option<RunningService<RoleClient, HostHandler>>>,
    peer: Peer<RoleClient>,
    kind: TransportKind,
    child: Option<Arc<ChildGuard>>,
    diag: Option<SharedDiagnostics>,
    progress: Arc<ProgressRouter>,
    request_timeout: Duration,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

fn handler(opts: &ConnectOptions, progress: &Arc<ProgressRouter>) -> HostHandler {
    HostHandler {
        server: Arc::from(opts.name.as_str()),
        hooks: opts.hooks.clone(),
        progress: progress.clone(),
        info: client_info(
            &opts.client_name,
            &opts.client_version,
            opts.hooks.supports_sampling(),
            opts.ui_extension,
        ),
    }
}

impl Connection {
    /// A connection whose handshake has completed.
    fn ready(
        opts: &ConnectOptions,
        service: RunningService<RoleClient, HostHandler>,
        kind: TransportKind,
        progress: Arc<ProgressRouter>,
        child: Option<(Arc<ChildGuard>, SharedDiagnostics)>,
    ) -> Connection {
        let (child, diag) = match child {
            Some((guard, diag)) => (Some(guard), Some(diag)),
            None => (None, None),
        };
        Connection {
            name: Arc::from(opts.name.as_str()),
            peer: service.peer().clone(),
            service: std::sync::Mutex::new(Some(service)),
            kind,
            child,
            diag,
            progress,
            request_timeout: opts.request_timeout,
        }
    }

    /// Connects to the server described by `opts`, within its start-up timeout.
    pub async fn connect(opts: ConnectOptions) -> Result<Connection, ConnectError> {
        match opts.target.clone() {
            Target::Stdio(t) => connect_stdio(&opts, &t).await,
            Target::Http { url, headers } => connect_http(&opts, &url, &headers).await,
            Target::Sse { url, headers } => connect_sse(&opts, &url, &headers).await,
            Target::Auto { url, headers } => {
                if opts.transport_hint == Some(TransportKind::Sse) {
                    return connect_sse(&opts, &url, &headers).await;
                }
                match connect_http(&opts, &url, &headers).await {
                    Ok(c) => Ok(c),
                    Err(e) if should_try_sse(&e) => {
                        tracing::debug!(server = %opts.name, "Streamable HTTP failed ({e}); trying legacy SSE");
                        match connect_sse(&opts, &url, &headers).await {
                            Ok(c) => Ok(c),
                            Err(sse) if sse.is_auth() => Err(sse),
                            Err(sse) => Err(ConnectError::AutoFailed {
                                http: e.to_string(),
                                sse: sse.to_string(),
                            }),
                        }
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The transport in use.
    pub fn transport_kind(&self) -> TransportKind {
        self.kind
    }

    /// The protocol version agreed with the server.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.peer.peer_info().map(|i| i.protocol_version.clone())
    }

    /// The server's `serverInfo` name and version.
    pub fn server_info(&self) -> Option<(String, String)> {
        self.peer
            .peer_info()
            .and_then(|i| i.server_info.clone())
            .map(|s| (s.name, s.version))
    }

    /// The server's `instructions`, if any.
    pub fn instructions(&self) -> Option<String> {
        self.peer.peer_info().and_then(|i| i.instructions.clone())
    }

    /// What the server declared it offers.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.peer
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default()
    }

    /// True once the transport has closed (the server went away).
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// The last lines the server wrote to stderr (stdio servers).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.diag
            .as_ref()
            .map(stdio::stderr_tail)
            .unwrap_or_default()
    }

    /// The process id of a stdio server.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.pid())
    }

    /// The default request timeout of this connection.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Closes the connection: ends the session (DELETE for Streamable HTTP), closes
    /// stdin, and stops a stdio server's process group (SIGTERM, SIGKILL after `grace`).
    pub async fn close(&self, grace: Duration) {
        let service = self.service.lock().ok().and_then(|mut s| s.take());
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(grace).await;
        }
        if let Some(child) = &self.child {
            child.terminate(grace).await;
        }
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        opts: &CallOptions,
    ) -> Result<ServerResult, RequestError> {
        let req = make_request(method, params)?;
        let timeout = opts.timeout.unwrap_or(self.request_timeout);
        let handle = self
            .peer
            .send_request_with_option(req, request_options(timeout))
            .await
            .map_err(|e| map_service_error(method, timeout, e))?;
        let token = handle.progress_token.clone();
        if let Some(sink) = &opts.progress {
            self.progress.register(token.clone(), sink.clone());
        }
        let peer = handle.peer.clone();
        let id = handle.id.clone();
        let result = match &opts.cancel {
            Some(ct) => {
                tokio::select! {
                    r = handle.await_response() => r.map_err(|e| map_service_error(method, timeout, e)),
                    _ = ct.cancelled() => {
                        let note = json!({
                            "method": "notifications/cancelled",
                            "params": {"requestId": id, "reason": "cancelled by the user"}
                        });
                        if let Ok(n) = serde_json::from_value(note) {
                            let _ = peer.send_notification(n).await;
                        }
                        Err(RequestError::Cancelled { method: method.to_string() })
                    }
                }
            }
            None => handle
                .await_response()
                .await
                .map_err(|e| map_service_error(method, timeout, e)),
        };
        self.progress.unregister(&token);
        result
    }

    async fn list_all<T>(
        &self,
        method: &str,
        key: &str,
        opts: &CallOptions,
    ) -> Result<Vec<T>, RequestError>
    where
        T: serde::de::DeserializeOwned,
    {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..MAX_LIST_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let result = self.request(method, params, opts).await?;
            let value = serde_json::to_value(&result).map_err(|_| RequestError::Unexpected {
                method: method.into(),
            })?;
            let items = value
                .get(key)
                .cloned()
                .ok_or_else(|| RequestError::Unexpected {
                    method: method.into(),
                })?;
            let items: Vec<T> =
                serde_json::from_value(items).map_err(|e| RequestError::Transport {
                    method: method.into(),
                    message: format!("the server's `{key}` list is malformed: {e}"),
                })?;
            out.extend(items);
            match value.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => {
                    if !seen.insert(next.to_string()) {
                        return Err(RequestError::Pagination {
                            method: method.into(),
                            reason: format!(
                                "the server returned cursor `{next}` twice (a pagination loop)"
                            ),
                        });
                    }
                    cursor = Some(next.to_string());
                }
                _ => return Ok(out),
            }
        }
        Err(RequestError::Pagination {
            method: method.into(),
            reason: format!("more than {MAX_LIST_PAGES} pages"),
        })
    }

    /// `tools/list`, all pages.
    pub async fn list_tools(&self, opts: &CallOptions) -> Result<Vec<Tool>, RequestError> {
        self.list_all("tools/list", "tools", opts).await
    }

    /// `prompts/list`, all pages.
    pub async fn list_prompts(&self, opts: &CallOptions) -> Result<Vec<Prompt>, RequestError> {
        self.list_all("prompts/list", "prompts", opts).await
    }

    /// `resources/list`, all pages.
    pub async fn list_resources(&self, opts: &CallOptions) -> Result<Vec<Resource>, RequestError> {
        self.list_all("resources/list", "resources", opts).await
    }

    /// `resources/templates/list`, all pages.
    pub async fn list_resource_templates(
        &self,
        opts: &CallOptions,
    ) -> Result<Vec<ResourceTemplate>, RequestError> {
        self.list_all("resources/templates/list", "resourceTemplates", opts)
            .await
    }

    /// `tools/call`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        opts: &CallOptions,
    ) -> Result<CallToolResult, RequestError> {
        let mut params = json!({"name": name});
        if let Some(args) = arguments {
            params["arguments"] = Value::Object(args);
        }
        match self.request("tools/call", params, opts).await? {
            ServerResult::CallToolResult(r) => Ok(r),
            _ => Err(RequestError::Unexpected {
                method: "tools/call".into(),
            }),
        }
    }

    /// `resources/read`.
    pub async fn read_resource(
        &self,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<ReadResourceResult, RequestError> {
        match self
            .request("resources/read", json!({"uri": uri}), opts)
            .await?
        {
            ServerResult::ReadResourceResult(r) => Ok(r),
            _ => Err(RequestError::Unexpected {
                method: "resources/read".into(),
            }),
        }
    }

    /// `prompts/get`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
        opts: &CallOptions,
    ) -> Result<GetPromptResult, RequestError> {
        let params = json!({"name": name, "arguments": arguments});
        match self.request("prompts/get", params, opts).await? {
            ServerResult::GetPromptResult(r) => Ok(r),
            _ => Err(RequestError::Unexpected {
                method: "prompts/get".into(),
            }),
        }
    }

    /// `ping`.
    pub async fn ping(&self, timeout: Duration) -> Result<(), RequestError> {
        let opts = CallOptions {
            timeout: Some(timeout),
            ..Default::default()
        };
        self.request("ping", json!({}), &opts).await.map(|_| ())
    }
}

fn make_request(method: &str, params: Value) -> Result<ClientRequest, RequestError> {
    let value = if method == "ping" {
        json!({"method": method})
    } else {
        json!({"method": method, "params": params})
    };
    serde_json::from_value(value).map_err(|e| RequestError::Transport {
        method: method.into(),
        message: format!("could not build the request: {e}"),
    })
}

/// How long a request may wait: `timeout` without news from the server; each progress
/// notification for it starts that wait again, up to [`PROGRESS_CAP`] × `timeout` in
/// all. Past either limit the request fails and `notifications/cancelled` is sent.
fn request_options(timeout: Duration) -> PeerRequestOptions {
    PeerRequestOptions::with_timeout(timeout)
        .reset_timeout_on_progress()
        .with_max_total_timeout(timeout.saturating_mul(PROGRESS_CAP))
}

/// How many times its timeout a request that keeps reporting progress may run.
pub const PROGRESS_CAP: u32 = 10;

fn map_service_error(method: &str, timeout: Duration, e: ServiceError) -> RequestError {
    match e {
        ServiceError::McpError(data) => RequestError::Server {
            method: method.into(),
            code: data.code.0,
            message: data.message.to_string(),
        },
        ServiceError::Timeout { timeout: after } => RequestError::Timeout {
            method: method.into(),
            after: after.max(timeout),
        },
        ServiceError::TransportClosed => RequestError::Closed(None),
        ServiceError::TransportSend(err) => {
            RequestError::Closed(Some(strip_type_names(&err.to_string())))
        }
        ServiceError::Cancelled { .. } => RequestError::Cancelled {
            method: method.into(),
        },
        ServiceError::UnexpectedResponse => RequestError::Unexpected {
            method: method.into(),
        },
        other => RequestError::Transport {
            method: method.into(),
            message: strip_type_names(&other.to_string()),
        },
    }
}

async fn connect_stdio(
    opts: &ConnectOptions,
    target: &StdioTarget,
) -> Result<Connection, ConnectError> {
    let (transport, guard, diag) = stdio::spawn(&opts.name, target, opts.max_message_bytes)?;
    let progress = Arc::new(ProgressRouter::default());
    let handler = handler(opts, &progress);
    let attempt = tokio::time::timeout(
        opts.startup_limit(),
        serve_client_with_lifecycle(handler, transport, ClientLifecycleMode::Initialize),
    )
    .await;
    match attempt {
        Ok(Ok(service)) => Ok(Connection::ready(
            opts,
            service,
            TransportKind::Stdio,
            progress,
            Some((guard, diag)),
        )),
        Ok(Err(e)) => {
            let status = guard.wait_exit(Duration::from_millis(500)).await;
            // Let the stderr reader drain what the process wrote before it went.
            tokio::time::sleep(Duration::from_millis(50)).await;
            guard.terminate(Duration::from_millis(200)).await;
            let stderr = stdio::stderr_tail(&diag);
            // An error reply (the server's own, or one standing in for a reply that
            // could not be read) is the cause, even if the process then went away.
            if let ClientInitializeError::JsonRpcError(data) = &e {
                return Err(ConnectError::Initialize {
                    message: data.message.to_string(),
                    stderr,
                });
            }
            match status {
                Some(status) => Err(ConnectError::ExitedDuringInit { status, stderr }),
                None => Err(ConnectError::Initialize {
                    message: init_error_message(&e),
                    stderr,
                }),
            }
        }
        Err(_) => {
            guard.terminate(Duration::from_millis(200)).await;
            Err(ConnectError::StartupTimeout {
                after: opts.startup_limit(),
                stderr: stdio::stderr_tail(&diag),
            })
        }
    }
}

fn init_error_message(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::ConnectionClosed(_) => {
            "the server closed the connection during initialize".into()
        }
        other => error_chain(other),
    }
}

/// An error and its sources on one line, without rmcp's type names.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = strip_type_names(&e.to_string());
    let mut source = e.source();
    while let Some(s) = source {
        let s_msg = s.to_string();
        if !msg.contains(&s_msg) {
            msg.push_str(": ");
            msg.push_str(&s_msg);
        }
        source = s.source();
    }
    msg
}

fn header_map(
    headers: &[(String, String)],
) -> Result<HashMap<HeaderName, HeaderValue>, ConnectError> {
    let mut map = HashMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| ConnectError::BadHeader {
            name: k.clone(),
            reason: e.to_string(),
        })?;
        let lower = name.as_str();
        if matches!(
            lower,
            "accept"
                | "mcp-session-id"
                | "last-event-id"
                | "content-type"
                | "content-length"
                | "host"
        ) {
            return Err(ConnectError::BadHeader {
                name: k.clone(),
                reason: "this header is set by the transport; remove it from `headers`".into(),
            });
        }
        let value = HeaderValue::from_str(v).map_err(|e| ConnectError::BadHeader {
            name: k.clone(),
            reason: format!("invalid value ({e})"),
        })?;
        map.insert(name, value);
    }
    Ok(map)
}

/// The guard every HTTP request of this connection goes through: the caller's, or
/// one shared `local`-policy guard.
fn guard(opts: &ConnectOptions) -> Result<GuardedClient, ConnectError> {
    if let Some(g) = &opts.guard {
        return Ok(g.clone());
    }
    static DEFAULT: OnceLock<Result<GuardedClient, String>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            GuardedClient::new(ClientOptions::new(UrlPolicy::Local)).map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|message| ConnectError::Initialize {
            message: format!("cannot build the HTTP client: {message}"),
            stderr: vec![],
        })
}

/// The HTTP client of this connection: always the guard's.
fn http_client(opts: &ConnectOptions) -> Result<reqwest::Client, ConnectError> {
    Ok(guard(opts)?.inner().clone())
}

/// The token source for an HTTP target and the token it gives now: `None` without a
/// source, or when the target's headers set their own `Authorization`. A source that
/// fails (a saved login that can no longer be refreshed) fails the connection with
/// its message.
async fn auth_source(
    opts: &ConnectOptions,
    url: &str,
    headers: &[(String, String)],
) -> Result<Option<(Arc<dyn TokenSource>, Option<String>)>, ConnectError> {
    let Some(source) = &opts.token_source else {
        return Ok(None);
    };
    if headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        return Ok(None);
    }
    match source.bearer(&opts.name, url).await {
        Ok(token) => Ok(Some((source.clone(), token))),
        Err(reason) => Err(ConnectError::AuthFailed {
            server: opts.name.clone(),
            reason,
        }),
    }
}

/// Checks the server URL against the URL guard's policy.
async fn preflight(opts: &ConnectOptions, url: &str) -> Result<(), ConnectError> {
    guard(opts)?
        .preflight(url)
        .await
        .map_err(|b| ConnectError::Blocked {
            url: url.to_string(),
            reason: b.to_string(),
        })?;
    Ok(())
}

fn check_url(url: &str) -> Result<(), ConnectError> {
    match url::Url::parse(url) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Ok(()),
        Ok(u) => Err(ConnectError::BadUrl {
            url: url.into(),
            reason: format!("scheme `{}` is not http or https", u.scheme()),
        }),
        Err(e) => Err(ConnectError::BadUrl {
            url: url.into(),
            reason: e.to_string(),
        }),
    }
}

async fn connect_http(
    opts: &ConnectOptions,
    url: &str,
    headers: &[(String, String)],
) -> Result<Connection, ConnectError> {
    check_url(url)?;
    preflight(opts, url).await?;
    let map = header_map(headers)?;
    let source = auth_source(opts, url, headers).await?.map(|(s, _)| s);
    let client = TokenHttpClient::new(http_client(opts)?, source, &opts.name, url, &map);
    let bounded = BoundedHttpClient::new(client.clone(), &opts.name, opts.max_message_bytes);
    let make = || {
        let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .custom_headers(map.clone())
            .reinit_on_expired_session(true);
        cfg.max_sse_event_size = opts.max_message_bytes;
        StreamableHttpClientTransport::with_client(bounded.clone(), cfg)
    };
    let deadline = tokio::time::Instant::now() + opts.startup_limit();

    // 1. The stateless 2026-07-28 revision, unless we know this server is older.
    if opts.transport_hint != Some(TransportKind::StreamableHttp) {
        let progress = Arc::new(ProgressRouter::default());
        let probe = tokio::time::timeout(
            DISCOVER_PROBE_TIMEOUT.min(opts.startup_limit()),
            serve_client_with_lifecycle(
                handler(opts, &progress),
                make(),
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            ),
        )
        .await;
        if matches!(probe, Ok(Err(_)))
            && let Some(reason) = client.take_failure()
        {
            return Err(ConnectError::AuthFailed {
                server: opts.name.clone(),
                reason,
            });
        }
        match probe {
            Ok(Ok(service)) => {
                return Ok(Connection::ready(
                    opts,
                    service,
                    TransportKind::StatelessHttp,
                    progress,
                    None,
                ));
            }
            Ok(Err(e)) if e.is_authorization_required() => {
                return Err(ConnectError::AuthRequired {
                    server: opts.name.clone(),
                    www_authenticate: e.auth_challenge().map(str::to_string),
                });
            }
            Ok(Err(e)) if is_connect_failure(&e) => {
                return Err(connect_failure(opts, url, &e).await);
            }
            Ok(Err(e)) => {
                tracing::debug!(server = %opts.name, "server/discover probe declined ({e}); using initialize");
            }
            Err(_) => {
                tracing::debug!(server = %opts.name, "server/discover probe timed out; using initialize");
            }
        }
    }

    // 2. The initialize handshake (2025-11-25 offered, older accepted).
    let progress = Arc::new(ProgressRouter::default());
    let attempt = tokio::time::timeout_at(
        deadline,
        serve_client_with_lifecycle(
            handler(opts, &progress),
            make(),
            ClientLifecycleMode::Initialize,
        ),
    )
    .await;
    if matches!(attempt, Ok(Err(_)))
        && let Some(reason) = client.take_failure()
    {
        return Err(ConnectError::AuthFailed {
            server: opts.name.clone(),
            reason,
        });
    }
    match attempt {
        Ok(Ok(service)) => Ok(Connection::ready(
            opts,
            service,
            TransportKind::StreamableHttp,
            progress,
            None,
        )),
        Ok(Err(e)) if e.is_authorization_required() => Err(ConnectError::AuthRequired {
            server: opts.name.clone(),
            www_authenticate: e.auth_challenge().map(str::to_string),
        }),
        Ok(Err(e)) if is_connect_failure(&e) => Err(connect_failure(opts, url, &e).await),
        Ok(Err(e)) => Err(ConnectError::Initialize {
            message: init_error_message(&e),
            stderr: vec![],
        }),
        Err(_) => Err(ConnectError::StartupTimeout {
            after: opts.startup_limit(),
            stderr: vec![],
        }),
    }
}

/// Removes rmcp's Rust type names (`Transport [rmcp::…<…>] error:`) from a message.
fn strip_type_names(msg: &str) -> String {
    let mut out = msg.to_string();
    while let Some(start) = out.find(" [rmcp::") {
        let rest = &out[start..];
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(e) => out.replace_range(start..start + e + 1, ""),
            None => break,
        }
    }
    out
}

/// The innermost I/O error text of a connection failure ("Connection refused").
fn io_detail(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut found = None;
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            found = Some(io.to_string());
        }
        source = s.source();
    }
    found
}

/// The error for a connection that failed before any answer.
///
/// `Blocked` when the guard refused the destination: found in the error chain, or,
/// when the transport did not keep the cause, by the guard's own verdict on the URL
/// (a DNS lookup through its resolver, no connection). Otherwise `Unreachable` with the
/// I/O error; when the transport dropped that too, one bodiless `HEAD` through the same
/// guard recovers it ("Connection refused"). No socket is opened outside the guard.
async fn connect_failure(
    opts: &ConnectOptions,
    url: &str,
    e: &(dyn std::error::Error + Send + Sync + 'static),
) -> ConnectError {
    let blocked = |b: &switchboard_net::Blocked| ConnectError::Blocked {
        url: url.to_string(),
        reason: b.to_string(),
    };
    if let Some(b) = switchboard_net::find_blocked(e) {
        return blocked(b);
    }
    let Ok(g) = guard(opts) else {
        return unreachable(url, error_chain(e));
    };
    match g.check_destination(url).await {
        Err(b) if b.is_policy_verdict() => return blocked(&b),
        Err(b) => return unreachable(url, b.to_string()),
        Ok(_) => {}
    }
    if let Some(d) = io_detail(e) {
        return unreachable(url, d);
    }
    let retry = g
        .request(reqwest::Method::HEAD, url)
        .timeout(UNREACHABLE_PROBE_TIMEOUT);
    match g.send(retry).await {
        Err(net) => match net.blocked() {
            Some(b) if b.is_policy_verdict() => blocked(b),
            _ => unreachable(url, io_detail(&net).unwrap_or_else(|| error_chain(e))),
        },
        Ok(_) => unreachable(url, error_chain(e)),
    }
}

/// How long the guarded `HEAD` that words an unreachable error may take.
const UNREACHABLE_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

fn unreachable(url: &str, detail: String) -> ConnectError {
    ConnectError::Unreachable {
        url: url.to_string(),
        detail,
    }
}

/// A connection-level failure (refused, DNS): another transport will not help.
fn is_connect_failure(e: &ClientInitializeError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(re) = s.downcast_ref::<reqwest::Error>()
            && re.is_connect()
        {
            return true;
        }
        source = s.source();
    }
    let text = init_error_message(e).to_ascii_lowercase();
    text.contains("connection refused")
        || text.contains("error trying to connect")
        || text.contains("error sending request")
}

fn should_try_sse(e: &ConnectError) -> bool {
    match e {
        ConnectError::AuthRequired { .. }
        | ConnectError::AuthFailed { .. }
        | ConnectError::Blocked { .. }
        | ConnectError::BadHeader { .. }
        | ConnectError::BadUrl { .. }
        | ConnectError::Unreachable { .. } => false,
        ConnectError::Initialize { message, .. } => {
            let m = message.to_ascii_lowercase();
            !(m.contains("connection refused") || m.contains("error trying to connect"))
        }
        _ => true,
    }
}

async fn connect_sse(
    opts: &ConnectOptions,
    url: &str,
    headers: &[(String, String)],
) -> Result<Connection, ConnectError> {
    check_url(url)?;
    preflight(opts, url).await?;
    let parsed = url::Url::parse(url).map_err(|e| ConnectError::BadUrl {
        url: url.into(),
        reason: e.to_string(),
    })?;
    let mut base = http::HeaderMap::new();
    for (k, v) in header_map(headers)? {
        base.insert(k, v);
    }
    let deadline = tokio::time::Instant::now() + opts.startup_limit();
    // The legacy transport sends the token fixed at connect time (no refresh mid-session).
    let (source, mut bearer) = match auth_source(opts, url, headers).await? {
        Some((s, b)) => (Some(s), b),
        None => (None, None),
    };
    let mut refreshed = false;
    let transport = loop {
        let mut hmap = base.clone();
        if let Some(token) = &bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ConnectError::AuthFailed {
                    server: opts.name.clone(),
                    reason: "the access token is not a valid header value".into(),
                }
            })?;
            hmap.insert(http::header::AUTHORIZATION, value);
        }
        let sse_opts = SseOptions {
            headers: hmap,
            connect_timeout: opts.startup_limit(),
            max_message_bytes: opts.max_message_bytes,
            server: opts.name.clone(),
            ..Default::default()
        };
        match tokio::time::timeout_at(
            deadline,
            SseTransport::connect(http_client(opts)?, parsed.clone(), sse_opts),
        )
        .await
        {
            Ok(Ok(t)) => break t,
            Ok(Err(e)) => {
                if e.status() == Some(401)
                    && !refreshed
                    && let Some(source) = &source
                {
                    refreshed = true;
                    match source
                        .unauthorized(&opts.name, url, bearer.clone(), None)
                        .await
                    {
                        Ok(Some(t)) if Some(&t) != bearer.as_ref() => {
                            bearer = Some(t);
                            continue;
                        }
                        Ok(_) => {}
                        Err(reason) => {
                            return Err(ConnectError::AuthFailed {
                                server: opts.name.clone(),
                                reason,
                            });
                        }
                    }
                }
                if e.status() == Some(401) || e.status() == Some(403) {
                    return Err(ConnectError::AuthRequired {
                        server: opts.name.clone(),
                        www_authenticate: None,
                    });
                }
                if let SseError::Http(re) = &e
                    && re.is_connect()
                {
                    return Err(connect_failure(opts, url, re).await);
                }
                return Err(ConnectError::Initialize {
                    message: format!("legacy SSE: {e}"),
                    stderr: vec![],
                });
            }
            Err(_) => {
                return Err(ConnectError::StartupTimeout {
                    after: opts.startup_limit(),
                    stderr: vec![],
                });
            }
        }
    };
    let progress = Arc::new(ProgressRouter::default());
    let attempt = tokio::time::timeout_at(
        deadline,
        serve_client_with_lifecycle(
            handler(opts, &progress),
            transport,
            ClientLifecycleMode::Initialize,
        ),
    )
    .await;
    match attempt {
        Ok(Ok(service)) => Ok(Connection::ready(
            opts,
            service,
            TransportKind::Sse,
            progress,
            None,
        )),
        Ok(Err(e)) => Err(ConnectError::Initialize {
            message: format!("legacy SSE: {}", init_error_message(&e)),
            stderr: vec![],
        }),
        Err(_) => Err(ConnectError::StartupTimeout {
            after: opts.startup_limit(),
            stderr: vec![],
        }),
    }
}
