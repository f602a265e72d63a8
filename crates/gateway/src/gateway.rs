//! The gateway's shared state: the host, the current [`Catalog`], the downstream
//! sessions, the calls in flight (so that an upstream's elicitation, sampling or
//! `roots/list` request reaches the client whose call caused it), and the task that
//! turns host events into downstream notifications (`list_changed`, log messages,
//! status notes).
//!
//! The first list a client asks for waits at most [`GatewayOptions::initial_wait`] (5 s by
//! default, `--wait-ms`) for the servers' first connection attempts; `initialize` never
//! waits. A server that is down is absent, and named in `instructions` and a log
//! notification in the gateway's own words (its error text stays local). Each server's
//! lists are capped at 1,000 items of each kind by default (`crate::catalog`; the status
//! line says what was left out). An upstream's elicitation or sampling
//! goes to the client whose call to that server is in flight, inside that call's task (so
//! Streamable HTTP sends it on that call's stream); a client that did not declare the
//! capability has it declined with a reason, and an upstream cancelling the question
//! cancels the forwarded request.
//!
//! Roots: upstream servers are told (in `initialize`) that the roots may change; their
//! `roots/list` is answered by a downstream client (the one whose call is running,
//! else the latest that declared roots), and an empty list when no client declared
//! the roots capability. A client's `notifications/roots/list_changed`, and a client
//! with roots arriving or a session with roots ending, become
//! `notifications/roots/list_changed` to every server.
//!
//! Tool pinning: a host built with a pin store withholds a tool that changed or was
//! renamed since it was pinned (`switchboard_host::pins`), and the catalog leaves it
//! out (`crate::catalog`). When a re-list withholds a tool, clients get
//! `list_changed` and a warning log notification naming the tool and
//! `switchboard mcp pins accept SERVER TOOL`. An accept made by another process (the
//! usual case: `switchboard mcp pins accept` in a terminal) is seen by watching the
//! pins file (its size, time and inode, every [`PINS_CHECK`]): when it changes, the
//! host judges every server's tools again and an accepted tool is offered with
//! `list_changed`; a call to a withheld tool re-judges first, so it never waits for
//! the watch.
//!
//! It owns no connection of its own: upstream servers are reached only through the
//! [`Host`], downstream clients only through their rmcp `Peer`. Locks are sync mutexes
//! held only to copy in or out, never across an `.await`.
#![allow(deprecated)] // logging, sampling: deprecated by SEP-2577, still in use

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::future::{BoxFuture, join_all};
use futures::stream::FuturesUnordered;
use rmcp::model::{
    CancelledNotificationParam, ClientResult, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, ErrorData, LoggingLevel,
    LoggingMessageNotificationParam, Root, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleServer};
use switchboard_host::{Host, HostEvent, ServerStatus};
use switchboard_mcp::{CallOptions, ClientHooks, ServerEvent, decline_elicitation};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::audit::Audit;
use crate::catalog::{Catalog, CatalogOptions};
use crate::input::InputTable;
use crate::listen::ListsChanged;
use crate::subscriptions::{self, Subscriptions};
use crate::uris::{Returned, Unroutable, uris_in};

/// The logger name of the gateway's own log notifications.
pub const LOGGER: &str = "switchboard-gateway";

/// How the gateway behaves.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    pub catalog: CatalogOptions,
    /// How long `initialize` and the first lists wait for the servers' first connection
    /// attempts to settle; servers that come later are announced with `list_changed`.
    pub initial_wait: Duration,
    /// How long a forwarded elicitation or sampling request waits for the client.
    pub forward_timeout: Duration,
    /// `--audit FILE`.
    pub audit: Option<Arc<Audit>>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            catalog: CatalogOptions::default(),
            initial_wait: Duration::from_secs(5),
            forward_timeout: Duration::from_secs(600),
            audit: None,
        }
    }
}

/// How often the pins file is looked at for an accept made by another process.
pub const PINS_CHECK: Duration = Duration::from_secs(1);

/// How long a forwarded `roots/list` waits for the client (no person is involved).
const ROOTS_TIMEOUT: Duration = Duration::from_secs(30);

/// A request an upstream server sent that goes to a downstream client, with where its
/// answer goes (dropping the sender answers it as refused).
pub enum Forwarded {
    Roots(oneshot::Sender<Result<Vec<Root>, ErrorData>>),
    Elicit(ElicitRequestParams, oneshot::Sender<ElicitResult>),
    Sample(
        CreateMessageRequestParams,
        oneshot::Sender<Result<CreateMessageResult, ErrorData>>,
    ),
}

struct Session {
    id: u64,
    peer: Peer<RoleServer>,
    /// Set by the client's `logging/setLevel`.
    level: Option<LoggingLevel>,
}

struct Inflight {
    id: u64,
    server: String,
    asks: Asks,
}

/// Who answers the questions of a call in flight.
#[derive(Clone)]
enum Asks {
    /// The call's own task (`while_answering`), so that Streamable HTTP sends the
    /// question on that call's stream.
    Call(mpsc::UnboundedSender<Forwarded>),
    /// The client, asked from the hook's own task: a raw call has no task of its own,
    /// and a stdio client has one stream.
    Client(Peer<RoleServer>),
}

impl Asks {
    fn live(&self) -> bool {
        match self {
            Asks::Call(tx) => !tx.is_closed(),
            Asks::Client(peer) => !peer.is_transport_closed(),
        }
    }
}

pub(crate) struct Shared {
    pub(crate) host: Host,
    pub(crate) opts: GatewayOptions,
    catalog: Mutex<Arc<Catalog>>,
    sessions: Mutex<Vec<Session>>,
    inflight: Mutex<Vec<Inflight>>,
    /// Calls of clients on 2026-07-28 parked until they answer a question.
    pub(crate) inputs: Arc<InputTable>,
    /// Each change of the catalog's lists, for `subscriptions/listen`.
    pub(crate) changes: broadcast::Sender<ListsChanged>,
    /// Clients' resource subscriptions (`crate::subscriptions`).
    pub(crate) subs: Subscriptions,
    /// The URIs each server returned, which reads of them go back to (`crate::uris`).
    returned: Mutex<Returned>,
    settled: watch::Sender<bool>,
    next_id: AtomicU64,
}

/// The client hooks the gateway's [`Host`] must be built with: they forward upstream
/// elicitation and sampling requests to the downstream client. Make them first
/// ([`GatewayHooks::new`]), put them in `HostOptions::hooks`, then [`Gateway::new`].
#[derive(Clone, Default)]
pub struct GatewayHooks {
    link: Arc<OnceLock<Weak<Shared>>>,
}

impl std::fmt::Debug for GatewayHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayHooks").finish_non_exhaustive()
    }
}

impl GatewayHooks {
    pub fn new() -> Self {
        Self::default()
    }

    fn shared(&self) -> Option<Arc<Shared>> {
        self.link.get().and_then(Weak::upgrade)
    }
}

impl ClientHooks for GatewayHooks {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let shared = self.shared();
        let server = server.to_string();
        Box::pin(async move {
            match shared {
                Some(s) => s.forward_elicit(&server, request).await,
                None => decline_elicitation(),
            }
        })
    }

    fn sample(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>> {
        let shared = self.shared();
        let server = server.to_string();
        Box::pin(async move {
            match shared {
                Some(s) => s.forward_sample(&server, params).await,
                None => Err(no_client(&server, "sampling")),
            }
        })
    }

    fn supports_sampling(&self) -> bool {
        true
    }

    fn list_roots(&self, server: &str) -> BoxFuture<'static, Result<Vec<Root>, ErrorData>> {
        let shared = self.shared();
        let server = server.to_string();
        Box::pin(async move {
            match shared {
                Some(s) => s.forward_roots(&server).await,
                None => Ok(Vec::new()),
            }
        })
    }

    /// Downstream clients come, go and change their roots: servers hear about it.
    fn roots_list_changed(&self) -> bool {
        true
    }

    fn on_event(&self, server: &str, event: ServerEvent) {
        // List changes and log lines come through the host's events (`follow`).
        if let ServerEvent::ResourceUpdated { uri } = event
            && let Some(s) = self.shared()
        {
            subscriptions::updated(&s, server, &uri);
        }
    }
}

fn no_client(server: &str, what: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        format!(
            "{what} declined: server `{server}` asked for it, but no client connected to \
             switchboard gateway can answer it (none declared the `{what}` capability)"
        ),
        None,
    )
}

/// Keeps a call registered for forwarded requests while it runs.
pub(crate) struct InflightGuard {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if let Ok(mut v) = self.shared.inflight.lock() {
            v.retain(|c| c.id != self.id);
        }
    }
}

/// Lives as long as one downstream session's handler (every clone of it): when the
/// session ends (the client disconnected, or ended its HTTP session), it is forgotten
/// with its resource subscriptions, and if it had declared roots, the roots offered
/// upstream changed, so every server hears `notifications/roots/list_changed`.
pub(crate) struct SessionEnd {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: u64,
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        subscriptions::end(&self.shared, self.id);
        if !self.shared.end_session(self.id) {
            return;
        }
        let shared = self.shared.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { shared.roots_changed().await });
        }
    }
}

/// Cancels a request to the client unless disarmed (its answer came).
struct CancelOnDrop {
    peer: Option<Peer<RoleServer>>,
    id: rmcp::model::RequestId,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.peer = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let id = self.id.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let param = CancelledNotificationParam::new(
                    Some(id),
                    Some("the server that asked cancelled its request".into()),
                );
                let _ = peer.notify_cancelled(param).await;
            });
        }
    }
}

fn level_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn parse_level(level: &str) -> LoggingLevel {
    serde_json::from_value(serde_json::Value::String(level.to_string()))
        .unwrap_or(LoggingLevel::Info)
}

impl Shared {
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Remembers the URIs in a result `server` returned (a tool result, a read, a
    /// prompt), so that reads of them go back to it ([`crate::uris::Returned`]).
    pub(crate) fn remember_returned(&self, server: &str, result: &serde_json::Value) {
        let uris = uris_in(result);
        if uris.is_empty() {
            return;
        }
        if let Ok(mut r) = self.returned.lock() {
            for uri in &uris {
                r.record(server, uri);
            }
        }
    }

    /// Where a read of the downstream `uri` goes under `catalog` and the URIs servers
    /// returned ([`crate::uris::UriTable::route_with`]).
    pub(crate) fn route(
        &self,
        catalog: &Catalog,
        uri: &str,
    ) -> Result<(String, String), Unroutable> {
        match self.returned.lock() {
            Ok(r) => catalog.uris.route_with(uri, &r),
            Err(_) => catalog.uris.route(uri),
        }
    }

    /// Waits (at most `initial_wait`) for the servers' first connection attempts.
    pub(crate) async fn wait_settled(&self) {
        let mut rx = self.settled.subscribe();
        let _ = tokio::time::timeout(self.opts.initial_wait, rx.wait_for(|v| *v)).await;
    }

    pub(crate) fn register_session(&self, id: u64, peer: Peer<RoleServer>) {
        if let Ok(mut v) = self.sessions.lock() {
            v.retain(|s| s.id != id && !s.peer.is_transport_closed());
            v.push(Session {
                id,
                peer,
                level: None,
            });
        }
    }

    /// Awaits `fut`, a request to `server` made for a call of `peer`'s: meanwhile that
    /// server's elicitation, sampling and `roots/list` requests go to `peer` (the call is
    /// registered in flight), each answered on its own.
    pub(crate) async fn while_answering<T>(
        self: &Arc<Self>,
        peer: &Peer<RoleServer>,
        server: &str,
        fut: impl Future<Output = T>,
    ) -> T {
        let (ftx, mut frx) = mpsc::unbounded_channel();
        let _guard = self.register_inflight(server, ftx);
        let mut pending = FuturesUnordered::new();
        tokio::pin!(fut);
        loop {
            tokio::select! {
                r = &mut fut => return r,
                Some(f) = frx.recv() => {
                    pending.push(self.answer(peer.clone(), server.to_string(), f));
                }
                Some(()) = pending.next(), if !pending.is_empty() => {}
            }
        }
    }

    /// The client of session `id`, once it has initialized.
    pub(crate) fn session_peer(&self, id: u64) -> Option<Peer<RoleServer>> {
        let v = self.sessions.lock().ok()?;
        v.iter().find(|s| s.id == id).map(|s| s.peer.clone())
    }

    /// Forget session `id`; true when its client had declared roots.
    pub(crate) fn end_session(&self, id: u64) -> bool {
        let Ok(mut v) = self.sessions.lock() else {
            return false;
        };
        let had_roots = v.iter().any(|s| s.id == id && declares_roots(&s.peer));
        v.retain(|s| s.id != id);
        had_roots
    }

    pub(crate) fn set_session_level(&self, id: u64, level: LoggingLevel) {
        if let Ok(mut v) = self.sessions.lock()
            && let Some(s) = v.iter_mut().find(|s| s.id == id)
        {
            s.level = Some(level);
        }
    }

    /// Registers a call to `server` whose questions go to `tx` (its own task answers
    /// them) until the guard is dropped.
    pub(crate) fn register_inflight(
        self: &Arc<Self>,
        server: &str,
        tx: mpsc::UnboundedSender<Forwarded>,
    ) -> InflightGuard {
        self.register(server, Asks::Call(tx))
    }

    /// Registers a call to `server` whose questions the hooks ask `client` themselves.
    pub(crate) fn register_inflight_client(
        self: &Arc<Self>,
        server: &str,
        client: Peer<RoleServer>,
    ) -> InflightGuard {
        self.register(server, Asks::Client(client))
    }

    fn register(self: &Arc<Self>, server: &str, asks: Asks) -> InflightGuard {
        let id = self.next_id();
        if let Ok(mut v) = self.inflight.lock() {
            v.push(Inflight {
                id,
                server: server.to_string(),
                asks,
            });
        }
        InflightGuard {
            shared: self.clone(),
            id,
        }
    }

    fn live_peers(&self) -> Vec<(Peer<RoleServer>, Option<LoggingLevel>)> {
        let Ok(mut v) = self.sessions.lock() else {
            return Vec::new();
        };
        v.retain(|s| !s.peer.is_transport_closed());
        v.iter().map(|s| (s.peer.clone(), s.level)).collect()
    }

    /// The call in flight to `server` that started last, if any.
    fn inflight_for(&self, server: &str) -> Option<Asks> {
        let v = self.inflight.lock().ok()?;
        v.iter()
            .rev()
            .find(|c| c.server == server && c.asks.live())
            .map(|c| c.asks.clone())
    }

    /// The client that connected last (for requests not tied to a call).
    fn latest_peer(&self) -> Option<Peer<RoleServer>> {
        self.live_peers().pop().map(|(p, _)| p)
    }

    /// An upstream server's `roots/list`: answered by the client whose call to that
    /// server is running (the one that started last), else by the client that connected
    /// last among those that declared roots; with no such client, an empty list.
    async fn forward_roots(&self, server: &str) -> Result<Vec<Root>, ErrorData> {
        match self.inflight_for(server) {
            Some(Asks::Call(tx)) => {
                let (otx, orx) = oneshot::channel();
                if tx.send(Forwarded::Roots(otx)).is_ok() {
                    return orx.await.unwrap_or_else(|_| Ok(Vec::new()));
                }
            }
            Some(Asks::Client(peer)) => return self.answer_roots(&peer, server).await,
            None => {}
        }
        let peer = self
            .live_peers()
            .into_iter()
            .rev()
            .map(|(p, _)| p)
            .find(declares_roots);
        match peer {
            Some(peer) => self.answer_roots(&peer, server).await,
            None => Ok(Vec::new()),
        }
    }

    /// The roots of the client behind `peer`: empty when it did not declare the roots
    /// capability (so a server is never told about roots nobody offered).
    async fn answer_roots(
        &self,
        peer: &Peer<RoleServer>,
        server: &str,
    ) -> Result<Vec<Root>, ErrorData> {
        if !declares_roots(peer) {
            return Ok(Vec::new());
        }
        let request = ServerRequest::ListRootsRequest(Default::default());
        let options = PeerRequestOptions::with_timeout(ROOTS_TIMEOUT);
        let asked = async {
            let handle = peer.send_request_with_option(request, options).await?;
            handle.await_response().await
        };
        match asked.await {
            Ok(ClientResult::ListRootsResult(r)) => Ok(r.roots),
            Ok(_) => Err(ErrorData::internal_error(
                "the client connected to the gateway answered roots/list with something else",
                None,
            )),
            Err(rmcp::ServiceError::McpError(e)) => Err(e),
            Err(e) => Err(ErrorData::internal_error(
                format!(
                    "server `{server}` asked for roots; the client connected to the gateway \
                     did not answer roots/list: {e}"
                ),
                None,
            )),
        }
    }

    /// A client's roots changed (or a client with roots arrived): every connected
    /// server gets `notifications/roots/list_changed` and may ask again.
    pub(crate) async fn roots_changed(&self) {
        let conns: Vec<_> = self
            .host
            .server_names()
            .iter()
            .filter_map(|n| self.host.connection(n))
            .collect();
        for c in conns {
            if let Err(e) = c.notify_roots_changed().await {
                tracing::info!("roots/list_changed to `{}`: {e}", c.name());
            }
        }
    }

    async fn forward_elicit(&self, server: &str, request: ElicitRequestParams) -> ElicitResult {
        match self.inflight_for(server) {
            Some(Asks::Call(tx)) => {
                let (otx, orx) = oneshot::channel();
                if tx.send(Forwarded::Elicit(request, otx)).is_ok() {
                    return orx.await.unwrap_or_else(|_| decline_elicitation());
                }
                return decline_elicitation();
            }
            Some(Asks::Client(peer)) => return self.answer_elicit(&peer, server, request).await,
            None => {}
        }
        match self.latest_peer() {
            Some(peer) => self.answer_elicit(&peer, server, request).await,
            None => {
                tracing::warn!("{}", no_client(server, "elicitation").message);
                decline_elicitation()
            }
        }
    }

    async fn forward_sample(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        match self.inflight_for(server) {
            Some(Asks::Call(tx)) => {
                let (otx, orx) = oneshot::channel();
                if tx.send(Forwarded::Sample(params, otx)).is_ok() {
                    return orx
                        .await
                        .unwrap_or_else(|_| Err(no_client(server, "sampling")));
                }
                return Err(no_client(server, "sampling"));
            }
            Some(Asks::Client(peer)) => return self.answer_sample(&peer, server, params).await,
            None => {}
        }
        match self.latest_peer() {
            Some(peer) => self.answer_sample(&peer, server, params).await,
            None => Err(no_client(server, "sampling")),
        }
    }

    /// Answers a forwarded request through `peer` (called inside the downstream call's
    /// own task, so that Streamable HTTP sends it on that call's stream).
    /// When the upstream cancels its request (the waiting side is dropped), the
    /// client's request is cancelled too.
    pub(crate) async fn answer(&self, peer: Peer<RoleServer>, server: String, f: Forwarded) {
        match f {
            Forwarded::Roots(mut tx) => {
                tokio::select! {
                    r = self.answer_roots(&peer, &server) => { let _ = tx.send(r); }
                    () = tx.closed() => {}
                }
            }
            Forwarded::Elicit(req, mut tx) => {
                tokio::select! {
                    r = self.answer_elicit(&peer, &server, req) => { let _ = tx.send(r); }
                    () = tx.closed() => {}
                }
            }
            Forwarded::Sample(req, mut tx) => {
                tokio::select! {
                    r = self.answer_sample(&peer, &server, req) => { let _ = tx.send(r); }
                    () = tx.closed() => {}
                }
            }
        }
    }

    /// Sends `request` to the client and waits for its answer; dropped before that, it
    /// sends the client `notifications/cancelled` for it.
    async fn ask_client(
        &self,
        peer: &Peer<RoleServer>,
        request: ServerRequest,
    ) -> Result<ClientResult, rmcp::ServiceError> {
        let options = PeerRequestOptions::with_timeout(self.opts.forward_timeout);
        let handle = peer.send_request_with_option(request, options).await?;
        let guard = CancelOnDrop {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let r = handle.await_response().await;
        guard.disarm();
        r
    }

    async fn answer_elicit(
        &self,
        peer: &Peer<RoleServer>,
        server: &str,
        request: ElicitRequestParams,
    ) -> ElicitResult {
        let declared = peer
            .peer_info()
            .is_some_and(|i| i.capabilities.elicitation.is_some());
        if !declared {
            notify_log(
                peer,
                LoggingLevel::Warning,
                &format!(
                    "server `{server}` asked for input (elicitation); declined because this \
                     client did not declare the elicitation capability"
                ),
            )
            .await;
            return decline_elicitation();
        }
        let request = ServerRequest::ElicitRequest(rmcp::model::Request::new(request));
        match self.ask_client(peer, request).await {
            Ok(ClientResult::ElicitResult(r)) => r,
            Ok(_) => decline_elicitation(),
            Err(e) => {
                tracing::info!("the client did not answer `{server}`'s elicitation: {e}");
                decline_elicitation()
            }
        }
    }

    async fn answer_sample(
        &self,
        peer: &Peer<RoleServer>,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        let declared = peer
            .peer_info()
            .is_some_and(|i| i.capabilities.sampling.is_some());
        if !declared {
            return Err(no_client(server, "sampling"));
        }
        let request = ServerRequest::CreateMessageRequest(rmcp::model::Request::new(params));
        match self.ask_client(peer, request).await {
            Ok(ClientResult::CreateMessageResult(r)) => Ok(*r),
            Ok(_) => Err(ErrorData::internal_error(
                "the client answered the sampling request with something else",
                None,
            )),
            Err(rmcp::ServiceError::McpError(e)) => Err(e),
            Err(e) => Err(ErrorData::internal_error(
                format!(
                    "the client connected to the gateway did not answer the sampling request: {e}"
                ),
                None,
            )),
        }
    }

    /// `logging/setLevel` from a client: every connected server that offers logging.
    pub(crate) async fn fan_out_level(&self, level: LoggingLevel) {
        let conns: Vec<_> = self
            .host
            .server_names()
            .iter()
            .filter_map(|n| self.host.connection(n))
            .filter(|c| c.capabilities().logging.is_some())
            .collect();
        let opts = CallOptions {
            timeout: Some(Duration::from_secs(10)),
            ..Default::default()
        };
        let results = join_all(conns.iter().map(|c| c.set_log_level(level, &opts))).await;
        for (c, r) in conns.iter().zip(results) {
            if let Err(e) = r {
                tracing::info!("logging/setLevel on `{}`: {e}", c.name());
            }
        }
    }

    /// The catalog for a list answer: rebuilt from the host first, so a list never
    /// trails an event the follower has not handled yet.
    pub(crate) async fn fresh_catalog(&self) -> Arc<Catalog> {
        self.refresh().await;
        self.catalog()
    }

    /// Rebuilds the catalog from the host and tells every client what changed.
    async fn refresh(&self) {
        let new = Arc::new(Catalog::build(&self.host.snapshot(), &self.opts.catalog));
        let old = match self.catalog.lock() {
            Ok(mut c) => std::mem::replace(&mut *c, new.clone()),
            Err(_) => return,
        };
        self.announce_withheld(&old, &new).await;
        let changed = ListsChanged::between(&old, &new);
        if !changed.any() {
            return;
        }
        // Clients on 2026-07-28 listen (`subscriptions/listen`); none listening is fine.
        let _ = self.changes.send(changed);
        let ListsChanged {
            tools,
            prompts,
            resources,
        } = changed;
        for (peer, _) in self.live_peers() {
            if tools {
                let _ = peer.notify_tool_list_changed().await;
            }
            if prompts {
                let _ = peer.notify_prompt_list_changed().await;
            }
            if resources {
                let _ = peer.notify_resource_list_changed().await;
            }
        }
    }

    /// Tells every client about each tool `new` withholds that `old` did not: why, and
    /// the command that offers it again (`list_changed` follows from the lists).
    async fn announce_withheld(&self, old: &Catalog, new: &Catalog) {
        let fresh: Vec<String> = new
            .withheld
            .iter()
            .filter(|w| old.withheld(&w.name).is_none_or(|o| o.tool != w.tool))
            .map(|w| w.refusal())
            .collect();
        if fresh.is_empty() {
            return;
        }
        for (peer, min) in self.live_peers() {
            if min.is_some_and(|m| level_rank(LoggingLevel::Warning) < level_rank(m)) {
                continue;
            }
            for text in &fresh {
                notify_log(&peer, LoggingLevel::Warning, text).await;
            }
        }
    }

    async fn forward_log(&self, server: &str, level: &str, data: serde_json::Value) {
        let level = parse_level(level);
        for (peer, min) in self.live_peers() {
            if min.is_some_and(|m| level_rank(level) < level_rank(m)) {
                continue;
            }
            if let Ok(param) = serde_json::from_value::<LoggingMessageNotificationParam>(
                serde_json::json!({"level": level, "logger": server, "data": data}),
            ) {
                let _ = peer.notify_logging_message(param).await;
            }
        }
    }

    async fn status_note(&self, server: &str, status: ServerStatus, error: Option<String>) {
        let (level, text) = match status {
            ServerStatus::Connected => (LoggingLevel::Info, format!("server `{server}` connected")),
            ServerStatus::Disconnected | ServerStatus::Blocked => (
                LoggingLevel::Warning,
                format!(
                    "server `{server}` is {status}{}; its tools, prompts and resources are left out",
                    error.map(|e| format!(": {e}")).unwrap_or_default()
                ),
            ),
            ServerStatus::Connecting | ServerStatus::Disabled => return,
        };
        for (peer, min) in self.live_peers() {
            if min.is_some_and(|m| level_rank(level) < level_rank(m)) {
                continue;
            }
            notify_log(&peer, level, &text).await;
        }
    }
}

fn declares_roots(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.roots.is_some())
}

pub(crate) async fn notify_log(peer: &Peer<RoleServer>, level: LoggingLevel, text: &str) {
    if let Ok(param) = serde_json::from_value::<LoggingMessageNotificationParam>(
        serde_json::json!({"level": level, "logger": LOGGER, "data": text}),
    ) {
        let _ = peer.notify_logging_message(param).await;
    }
}

/// Every configured server as one MCP server. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over `host`, which must have been built with `hooks` in its
    /// `HostOptions::hooks`. Nothing starts until [`Gateway::start`].
    pub fn new(host: Host, hooks: &GatewayHooks, opts: GatewayOptions) -> Self {
        let (settled, _) = watch::channel(false);
        let inputs = InputTable::new(opts.forward_timeout);
        let shared = Arc::new(Shared {
            host,
            opts,
            catalog: Mutex::new(Arc::new(Catalog::default())),
            sessions: Mutex::new(Vec::new()),
            inflight: Mutex::new(Vec::new()),
            inputs,
            changes: broadcast::channel(16).0,
            subs: Subscriptions::default(),
            returned: Mutex::new(Returned::default()),
            settled,
            next_id: AtomicU64::new(1),
        });
        let _ = hooks.link.set(Arc::downgrade(&shared));
        Gateway { shared }
    }

    /// Connects every server in the background and starts following the host's events
    /// (and, with a pin store, the pins file).
    pub fn start(&self) {
        let events = self.shared.host.subscribe();
        tokio::spawn(follow(Arc::downgrade(&self.shared), events));
        if let Some(store) = self.shared.host.pin_store() {
            tokio::spawn(watch_pins(
                Arc::downgrade(&self.shared),
                store.path().to_path_buf(),
            ));
        }
        let shared = self.shared.clone();
        tokio::spawn(async move {
            shared.host.start().await;
            shared.refresh().await;
            shared.settled.send_replace(true);
        });
    }

    /// The host behind the gateway.
    pub fn host(&self) -> &Host {
        &self.shared.host
    }

    /// What the gateway offers right now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.shared.catalog()
    }

    /// Waits (at most the initial wait) for the servers' first connection attempts.
    pub async fn wait_settled(&self) {
        self.shared.wait_settled().await
    }

    /// Closes every upstream connection.
    pub async fn shutdown(&self) {
        self.shared.host.shutdown().await;
    }
}

/// What tells one version of a file from the next: size, modification time, inode
/// (the pins file is replaced by a rename). `None`: not there.
async fn file_stamp(path: &std::path::Path) -> Option<(u64, Option<std::time::SystemTime>, u64)> {
    let meta = tokio::fs::metadata(path).await.ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.len(), meta.modified().ok(), inode))
}

/// Judges every server's tools again whenever the pins file changes (an accept made
/// by `switchboard mcp pins accept`, or by another gateway); the host's `ListsUpdated`
/// then rebuilds the catalog. Ends with the gateway.
async fn watch_pins(shared: Weak<Shared>, path: std::path::PathBuf) {
    let mut last = file_stamp(&path).await;
    loop {
        tokio::time::sleep(PINS_CHECK).await;
        let Some(s) = shared.upgrade() else {
            return;
        };
        let now = file_stamp(&path).await;
        if now != last {
            last = now;
            s.host.review_pins().await;
        }
    }
}

/// Turns host events into a fresh catalog and downstream notifications, coalescing
/// bursts into one rebuild.
async fn follow(shared: Weak<Shared>, mut events: broadcast::Receiver<HostEvent>) {
    loop {
        let first = events.recv().await;
        let Some(s) = shared.upgrade() else {
            return;
        };
        let mut batch = vec![first];
        while let Ok(ev) = events.try_recv() {
            batch.push(Ok(ev));
        }
        let mut rebuild = false;
        let mut notes = Vec::new();
        for ev in batch {
            match ev {
                Err(broadcast::error::RecvError::Closed) => return,
                Err(broadcast::error::RecvError::Lagged(_)) => rebuild = true,
                Ok(HostEvent::ListsUpdated { .. }) => rebuild = true,
                Ok(HostEvent::Status { server, status, .. }) => {
                    rebuild = true;
                    if status == ServerStatus::Connected {
                        let s = s.clone();
                        let server = server.clone();
                        tokio::spawn(async move { subscriptions::resubscribe(&s, &server).await });
                    }
                    // The host's error text stays here (see `downstream_reason`).
                    let reason = s
                        .host
                        .server(&server)
                        .and_then(|snap| crate::catalog::downstream_reason(&snap));
                    notes.push((server, status, reason));
                }
                Ok(HostEvent::Log {
                    server,
                    level,
                    data,
                }) => s.forward_log(&server, &level, data).await,
                Ok(HostEvent::Reconnecting { .. }) => {}
                #[allow(unreachable_patterns)]
                Ok(_) => rebuild = true,
            }
        }
        if rebuild {
            s.refresh().await;
        }
        for (server, status, error) in notes {
            s.status_note(&server, status, error).await;
        }
    }
}
