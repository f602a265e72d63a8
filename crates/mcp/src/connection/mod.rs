//! One live connection to one MCP server: connect (with the right transport and
//! lifecycle), list with bounded pagination, call with a timeout, close.
//!
//! State machine: `connect()` either returns a ready [`Connection`] or a
//! [`ConnectError`](crate::ConnectError); a `Connection` is usable until the transport
//! closes ([`Connection::is_closed`]) or [`Connection::close`] is called. Reconnecting
//! is the host's job (it builds a new `Connection`).
//!
//! This module owns the public types ([`ConnectOptions`], [`CallOptions`],
//! [`Connection`]); the work is split by concern:
//! - `dial`: choosing and opening the transport (stdio, Streamable HTTP with the
//!   stateless probe, legacy SSE, the `Auto` fallback) within the start-up limit;
//! - `http_setup`: what every HTTP dial shares (URL check, the guard and its
//!   preflight, custom headers, the token source);
//! - `failure`: wording transport and rmcp failures as
//!   [`ConnectError`](crate::ConnectError) and [`RequestError`](crate::RequestError)
//!   messages;
//! - `session`: the connected peer (requests with timeouts, progress and
//!   cancellation, list calls, state, close);
//! - `watch`: the `subscriptions/listen` streams of a server on 2026-07-28 (its list
//!   changes; the resources subscribed to).

use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{Peer, RoleClient, RunningService};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::handler::{ClientHooks, DefaultHooks, HostHandler, Progress, ProgressRouter};
use crate::raw::RawLane;
use crate::stdio::{ChildGuard, SharedDiagnostics};
use crate::target::{Target, TransportKind};
use crate::token::TokenSource;

mod dial;
mod failure;
mod http_setup;
mod input;
mod session;
mod tap;
mod watch;

pub use session::{MAX_LIST_PAGES, PROGRESS_CAP};

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
    /// Hear the server's list changes on protocol 2026-07-28, which sends them only on a
    /// `subscriptions/listen` stream the client keeps open (`watch`): each reaches
    /// [`ClientHooks::on_event`] as on older revisions, which send them unasked. For
    /// hooks that act on them (a long-lived host); off by default, since the stream is
    /// a request held open for the connection's life.
    pub watch_lists: bool,
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
            watch_lists: false,
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
    /// `_meta` entries to send with the request (a client's own, relayed by the
    /// gateway). `progressToken` and the keys MCP reserves for itself
    /// (a prefix with a label `modelcontextprotocol` or `mcp`) are left out: those describe this
    /// connection and are set by it.
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
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
    /// What answers the server's questions: its own requests (through the handler) and,
    /// on 2026-07-28, the `InputRequiredResult`s of its calls (`input`).
    hooks: Arc<dyn ClientHooks>,
    request_timeout: Duration,
    /// The raw lane of a stdio connection (`crate::raw`).
    raw: Option<Arc<RawLane>>,
    /// The list watch of a server on 2026-07-28 (`watch`), ended when dropped.
    watch: std::sync::Mutex<Option<watch::Watch>>,
    /// Its resource subscriptions (`watch`), from the first set on.
    resources: std::sync::Mutex<Option<Arc<watch::Watch>>>,
}

/// A set of resource subscriptions handed to
/// [`Connection::set_resource_subscriptions`], to wait for the server's answer with
/// [`Connection::resource_subscriptions_acked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceSet(u64);

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}
