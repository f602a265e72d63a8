//! The host: every configured server, each with its own small state machine
//! (`connecting → connected | disconnected`, plus `blocked`/`disabled` that never start).
//!
//! Invariants:
//! - all servers start concurrently; each attempt is bounded by that server's start-up
//!   limit, the smaller of `startupTimeout` (30 s by default) and `timeout`, so one slow,
//!   hung or broken server never delays the others; a command a person waits on may cap
//!   it further ([`HostOptions::startup_cap`]) unless the entry sets `startupTimeout`;
//! - the HTTP transport that worked for a server is remembered, in memory and in the
//!   transport cache when given, so its next connection skips the probe or the SSE
//!   fallback;
//! - with `reconnect`, a dropped connection is re-made after 1, 2, 4, 8, 16, then 30 s,
//!   giving up after [`HostOptions::max_reconnect_attempts`] (10) failures in a row;
//! - with [`HostOptions::watch_lists`] (on by default; off for commands that list or call
//!   once), a server on 2026-07-28 has a `subscriptions/listen` stream kept open for the
//!   list kinds it declared; a change heard there re-lists it like an older server's
//!   `list_changed` (so the pins judge it and the gateway passes it on), and a stream
//!   that ends counts as a change;
//! - no lock is held across an `.await`: state lives in `std::sync::Mutex`es that are
//!   locked only to copy in or out, and connections are cloned out as `Arc`s;
//! - a server that offers no tools, prompts or resources is closed, and says so;
//! - `list_changed` notifications re-list that server once per burst (coalesced);
//! - with a pin store, a tool is offered (in `tools`) only when its definition is the
//!   one pinned or seen for the first time; every listing, the first one and each
//!   re-list, is judged before anything of it is offered.
#![allow(deprecated)] // sampling/roots types: deprecated upstream, still used by servers

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::{BoxFuture, join_all};
use switchboard_config::ServerConfig;
use switchboard_mcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ErrorData,
    Prompt, Resource, ResourceTemplate, Tool,
};
use switchboard_mcp::{
    CallOptions, ClientHooks, ConnectError, ConnectOptions, Connection, DefaultHooks, RequestError,
    ServerEvent, Target, TokenSource, TokenStatus, TransportKind,
};
use tokio::sync::broadcast;

use crate::pins::{
    Accept, PendingChange, PinError, PinStore, Review, ServerKey, ServerPins, WithheldTool,
};
use crate::status::{AuthStatus, ServerSnapshot, ServerStatus};

/// How a server starts out, before any connection attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Initial {
    /// Start it.
    Start,
    /// `disabled: true` in settings.
    Disabled,
    /// Not allowed to run (`mcp.allowed`/`mcp.excluded`, an untrusted folder); the reason.
    Blocked(String),
    /// The settings entry is broken; the reason.
    Broken(String),
}

/// One server as the host sees it before connecting.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub name: String,
    /// `user`, `project`, `file`, `default` or `ad-hoc`.
    pub origin: String,
    pub transport_label: String,
    pub target_display: String,
    pub target: Option<Target>,
    pub cwd: Option<String>,
    pub timeout: Duration,
    pub startup_timeout: Duration,
    pub trust: bool,
    /// Pin its tools (`pinTools`, default on) when the host has a pin store.
    pub pin_tools: bool,
    /// The validated settings entry (filters, OAuth…), when there is one.
    pub config: Option<ServerConfig>,
    pub initial: Initial,
}

impl ServerSpec {
    /// A server that is not in any settings file (an ad-hoc target or the demo default).
    pub fn adhoc(name: impl Into<String>, origin: &str, target: Target) -> Self {
        let transport_label = match &target {
            Target::Stdio(_) => "stdio",
            Target::Http { .. } => "http",
            Target::Sse { .. } => "sse",
            Target::Auto { .. } => "http|sse",
        };
        Self {
            name: name.into(),
            origin: origin.into(),
            transport_label: transport_label.into(),
            target_display: target.display(),
            target: Some(target),
            cwd: None,
            timeout: Duration::from_millis(600_000),
            startup_timeout: Duration::from_millis(30_000),
            trust: false,
            pin_tools: true,
            config: None,
            initial: Initial::Start,
        }
    }

    fn tool_allowed(&self, tool: &str) -> bool {
        self.config.as_ref().is_none_or(|c| c.tool_allowed(tool))
    }
}

/// Something changed in the host (for live UIs).
#[derive(Debug, Clone, PartialEq)]
pub enum HostEvent {
    Status {
        server: String,
        status: ServerStatus,
        error: Option<String>,
    },
    /// The server's tools, prompts or resources were re-listed.
    ListsUpdated { server: String },
    Reconnecting {
        server: String,
        attempt: u32,
        delay: Duration,
    },
    Log {
        server: String,
        level: String,
        data: serde_json::Value,
    },
}

/// How the host behaves.
#[derive(Clone)]
pub struct HostOptions {
    /// Answers elicitation/sampling/roots; hears log messages.
    pub hooks: Arc<dyn ClientHooks>,
    /// Reconnect dropped connections with backoff (long-lived hosts: chat, web app).
    pub reconnect: bool,
    /// Give up reconnecting after this many failed attempts in a row.
    pub max_reconnect_attempts: u32,
    /// Advertise MCP Apps support.
    pub ui_extension: bool,
    /// How long a stdio server gets to exit after SIGTERM before SIGKILL.
    pub close_grace: Duration,
    /// A file remembering, per URL, which HTTP transport worked (so the next run skips
    /// the probe or the SSE fallback). `None` keeps it in memory only.
    pub transport_cache: Option<std::path::PathBuf>,
    /// The URL guard every HTTP connection goes through (`None`: the `local` policy;
    /// see `ConnectOptions::guard`).
    pub guard: Option<switchboard_net::GuardedClient>,
    /// Bearer tokens (OAuth) for HTTP servers; also the source of each server's
    /// `auth` status in snapshots.
    pub token_source: Option<Arc<dyn TokenSource>>,
    /// A cap on each server's start-up for commands a person waits on (`mcp list`):
    /// applied unless the server's settings set `startupTimeout` themselves. A server
    /// given up on reports [`ServerSnapshot::gave_up_after`].
    pub startup_cap: Option<Duration>,
    /// Tool pinning: each tool's definition is pinned when first seen, and a changed
    /// one is withheld (listed in [`ServerSnapshot::withheld`], not in `tools`) until
    /// the user accepts it. `None`: no pinning.
    pub pins: Option<PinStore>,
    /// Hear list changes from servers on protocol 2026-07-28, which send them only on a
    /// `subscriptions/listen` stream the client keeps open (one request held open per
    /// such server; older servers send theirs unasked). On by default; a command that
    /// lists or calls once and exits turns it off.
    pub watch_lists: bool,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            hooks: Arc::new(DefaultHooks),
            reconnect: false,
            max_reconnect_attempts: 10,
            ui_extension: true,
            close_grace: Duration::from_millis(500),
            transport_cache: None,
            guard: None,
            token_source: None,
            startup_cap: None,
            pins: None,
            watch_lists: true,
        }
    }
}

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostOptions")
            .field("reconnect", &self.reconnect)
            .field("ui_extension", &self.ui_extension)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Clone)]
struct SlotState {
    status: Option<ServerStatus>,
    connected_via: Option<String>,
    tools: Vec<Tool>,
    filtered_out: Vec<String>,
    withheld: Vec<WithheldTool>,
    /// The tools that passed the filters, before the pins (to judge them again).
    listed: Vec<Tool>,
    prompts: Vec<Prompt>,
    resources: Vec<Resource>,
    resource_templates: Vec<ResourceTemplate>,
    instructions: Option<String>,
    server_info: Option<(String, String)>,
    protocol_version: Option<String>,
    auth: Option<AuthStatus>,
    error: Option<String>,
    hint: Option<String>,
    warnings: Vec<String>,
    gave_up_after: Option<Duration>,
}

struct Slot {
    spec: ServerSpec,
    state: Mutex<SlotState>,
    conn: Mutex<Option<Arc<Connection>>>,
    relist_pending: AtomicBool,
}

struct Inner {
    slots: Vec<Arc<Slot>>,
    opts: HostOptions,
    events: broadcast::Sender<HostEvent>,
    shutting_down: AtomicBool,
    /// Per URL: the transport that worked last.
    hints: Mutex<HashMap<String, TransportKind>>,
    hints_dirty: AtomicBool,
}

/// Many MCP servers, managed together. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("servers", &self.inner.slots.len())
            .finish_non_exhaustive()
    }
}

/// The hooks each connection gets: the user's hooks, plus list-change handling.
struct HostHooks {
    host: Weak<Inner>,
    user: Arc<dyn ClientHooks>,
}

impl ClientHooks for HostHooks {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        self.user.elicit(server, request)
    }

    #[allow(deprecated)]
    fn sample(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>> {
        self.user.sample(server, params)
    }

    fn supports_sampling(&self) -> bool {
        self.user.supports_sampling()
    }

    #[allow(deprecated)]
    fn roots(&self) -> Vec<switchboard_mcp::model::Root> {
        self.user.roots()
    }

    #[allow(deprecated)]
    fn list_roots(
        &self,
        server: &str,
    ) -> BoxFuture<'static, Result<Vec<switchboard_mcp::model::Root>, ErrorData>> {
        self.user.list_roots(server)
    }

    fn roots_list_changed(&self) -> bool {
        self.user.roots_list_changed()
    }

    fn on_event(&self, server: &str, event: ServerEvent) {
        self.user.on_event(server, event.clone());
        let Some(inner) = self.host.upgrade() else {
            return;
        };
        match event {
            ServerEvent::ToolsChanged
            | ServerEvent::PromptsChanged
            | ServerEvent::ResourcesChanged => {
                if let Some(slot) = inner.slot(server) {
                    schedule_relist(inner.clone(), slot);
                }
            }
            ServerEvent::Log {
                level,
                logger: _,
                data,
            } => {
                let _ = inner.events.send(HostEvent::Log {
                    server: server.into(),
                    level,
                    data,
                });
            }
            ServerEvent::ResourceUpdated { .. } => {}
        }
    }
}

impl Inner {
    fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        self.slots.iter().find(|s| s.spec.name == name).cloned()
    }

    fn set_status(&self, slot: &Slot, f: impl FnOnce(&mut SlotState)) {
        let (status, error) = {
            let Ok(mut st) = slot.state.lock() else {
                return;
            };
            let before = st.status;
            f(&mut st);
            if st.status == before {
                return;
            }
            (st.status, st.error.clone())
        };
        if let Some(status) = status {
            let _ = self.events.send(HostEvent::Status {
                server: slot.spec.name.clone(),
                status,
                error,
            });
        }
    }
}

impl Host {
    /// A host over these servers. Nothing starts until [`Host::start`].
    pub fn new(specs: Vec<ServerSpec>, opts: HostOptions) -> Self {
        let (events, _) = broadcast::channel(256);
        let opts_cache = opts.transport_cache.clone();
        let slots = specs
            .into_iter()
            .map(|spec| {
                let mut st = SlotState::default();
                match &spec.initial {
                    Initial::Start => st.status = Some(ServerStatus::Disconnected),
                    Initial::Disabled => {
                        st.status = Some(ServerStatus::Disabled);
                        st.hint = Some(format!(
                            "enable it with `switchboard mcp enable {}`",
                            spec.name
                        ));
                    }
                    Initial::Blocked(reason) => {
                        st.status = Some(ServerStatus::Blocked);
                        st.error = Some(reason.clone());
                    }
                    Initial::Broken(reason) => {
                        st.status = Some(ServerStatus::Disconnected);
                        st.error = Some(reason.clone());
                        st.hint = Some("fix the settings entry shown above".into());
                    }
                }
                Arc::new(Slot {
                    spec,
                    state: Mutex::new(st),
                    conn: Mutex::new(None),
                    relist_pending: AtomicBool::new(false),
                })
            })
            .collect();
        Host {
            inner: Arc::new(Inner {
                slots,
                opts,
                events,
                shutting_down: AtomicBool::new(false),
                hints: Mutex::new(
                    opts_cache
                        .as_deref()
                        .map(crate::cache::load)
                        .unwrap_or_default(),
                ),
                hints_dirty: AtomicBool::new(false),
            }),
        }
    }

    /// Subscribe to status and list changes.
    pub fn subscribe(&self) -> broadcast::Receiver<HostEvent> {
        self.inner.events.subscribe()
    }

    /// Names of all servers, in order.
    pub fn server_names(&self) -> Vec<String> {
        self.inner
            .slots
            .iter()
            .map(|s| s.spec.name.clone())
            .collect()
    }

    /// The spec a server was created from.
    pub fn spec(&self, name: &str) -> Option<ServerSpec> {
        self.inner.slot(name).map(|s| s.spec.clone())
    }

    /// Connects every startable server concurrently and discovers what it offers.
    /// Returns when every first attempt has settled (each bounded by its start-up
    /// timeout). With `reconnect`, dropped connections are then watched and re-made.
    pub async fn start(&self) {
        let starts = self
            .inner
            .slots
            .iter()
            .filter(|s| s.spec.initial == Initial::Start)
            .map(|slot| run_slot(self.inner.clone(), slot.clone()));
        join_all(starts).await;
        self.save_transport_cache();
    }

    fn save_transport_cache(&self) {
        let Some(path) = &self.inner.opts.transport_cache else {
            return;
        };
        if !self.inner.hints_dirty.swap(false, Ordering::SeqCst) {
            return;
        }
        let hints = self
            .inner
            .hints
            .lock()
            .map(|h| h.clone())
            .unwrap_or_default();
        if let Err(e) = crate::cache::save(path, &hints) {
            tracing::debug!("could not save the transport cache {}: {e}", path.display());
        }
    }

    /// Starts one server (again): closes its connection if any, then connects.
    pub async fn restart(&self, name: &str) -> bool {
        let Some(slot) = self.inner.slot(name) else {
            return false;
        };
        let old = slot.conn.lock().ok().and_then(|mut c| c.take());
        if let Some(old) = old {
            old.close(self.inner.opts.close_grace).await;
        }
        run_slot(self.inner.clone(), slot).await;
        true
    }

    /// The live connection of a server, if it is connected.
    pub fn connection(&self, name: &str) -> Option<Arc<Connection>> {
        let slot = self.inner.slot(name)?;
        let conn = slot.conn.lock().ok()?.clone()?;
        if conn.is_closed() { None } else { Some(conn) }
    }

    /// A copy of every server's state.
    pub fn snapshot(&self) -> Vec<ServerSnapshot> {
        self.inner.slots.iter().map(|s| snapshot_of(s)).collect()
    }

    /// A copy of one server's state.
    pub fn server(&self, name: &str) -> Option<ServerSnapshot> {
        self.inner.slot(name).map(|s| snapshot_of(&s))
    }

    /// Why `tool` of `server` is withheld, when it is. Front ends that call a tool by
    /// name check this first (a list they built earlier may predate a change).
    pub fn withheld_tool(&self, server: &str, tool: &str) -> Option<WithheldTool> {
        let slot = self.inner.slot(server)?;
        let st = slot.state.lock().ok()?;
        st.withheld.iter().find(|w| w.name == tool).cloned()
    }

    /// The pin store this host judges tools with, if any.
    pub fn pin_store(&self) -> Option<&PinStore> {
        self.inner.opts.pins.as_ref()
    }

    /// Judges every connected server's tools against the pins file again (after an
    /// accept made here or by another process). Sends `ListsUpdated` for each server
    /// whose offer changed.
    pub async fn review_pins(&self) {
        for slot in &self.inner.slots {
            review_slot(&self.inner, slot).await;
        }
    }

    /// Accepts waiting changes of `server`'s tools (see [`PinStore::accept`]) and
    /// offers them at once. Returns the tools accepted (none when pinning is off).
    pub async fn accept_pins(&self, server: &str, which: Accept) -> Result<Vec<String>, PinError> {
        let Some(slot) = self.inner.slot(server) else {
            return Ok(Vec::new());
        };
        let (Some(store), Some(key)) = (self.inner.opts.pins.clone(), pin_key(&slot.spec)) else {
            return Ok(Vec::new());
        };
        let path = store.path().to_path_buf();
        let accepted = tokio::task::spawn_blocking(move || store.accept(&key, &which))
            .await
            .map_err(|e| PinError::Lock {
                path,
                reason: format!("the accepting task failed: {e}"),
            })??;
        review_slot(&self.inner, &slot).await;
        Ok(accepted)
    }

    /// The waiting changes of `server`'s tools with their diffs (none when pinning is
    /// off for it or nothing waits). Reads the pins file off the async threads.
    pub async fn pending_changes(&self, server: &str) -> Result<Vec<PendingChange>, PinError> {
        let Some(slot) = self.inner.slot(server) else {
            return Ok(Vec::new());
        };
        let (Some(store), Some(key)) = (self.inner.opts.pins.clone(), pin_key(&slot.spec)) else {
            return Ok(Vec::new());
        };
        let path = store.path().to_path_buf();
        let servers = tokio::task::spawn_blocking(move || store.servers())
            .await
            .map_err(|e| PinError::Lock {
                path,
                reason: format!("the reading task failed: {e}"),
            })??;
        Ok(servers
            .iter()
            .find(|p| p.name == key.name && p.identity == key.identity)
            .map(ServerPins::pending_changes)
            .unwrap_or_default())
    }

    /// Closes every connection concurrently and stops every stdio server.
    pub async fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        let grace = self.inner.opts.close_grace;
        let conns: Vec<Arc<Connection>> = self
            .inner
            .slots
            .iter()
            .filter_map(|s| s.conn.lock().ok().and_then(|mut c| c.take()))
            .collect();
        join_all(conns.iter().map(|c| c.close(grace))).await;
    }
}

fn snapshot_of(slot: &Slot) -> ServerSnapshot {
    let mut st = slot.state.lock().map(|s| s.clone()).unwrap_or_default();
    // A connection that closed under us (and is not being re-made) says so.
    let closed = slot
        .conn
        .lock()
        .ok()
        .and_then(|c| c.as_ref().map(|c| c.is_closed()))
        .unwrap_or(false);
    if closed && st.status == Some(ServerStatus::Connected) {
        st.status = Some(ServerStatus::Disconnected);
        st.error = Some("the connection was lost".into());
    }
    ServerSnapshot {
        name: slot.spec.name.clone(),
        status: st.status.unwrap_or(ServerStatus::Disconnected),
        transport: slot.spec.transport_label.clone(),
        connected_via: st.connected_via,
        target: slot.spec.target_display.clone(),
        cwd: slot.spec.cwd.clone(),
        timeout: Some(slot.spec.timeout),
        trust: slot.spec.trust,
        origin: slot.spec.origin.clone(),
        tools: st.tools,
        filtered_out: st.filtered_out,
        withheld: st.withheld,
        prompts: st.prompts,
        resources: st.resources,
        resource_templates: st.resource_templates,
        instructions: st.instructions,
        server_info: st.server_info,
        protocol_version: st.protocol_version,
        auth: st.auth,
        error: st.error,
        hint: st.hint,
        warnings: st.warnings,
        gave_up_after: st.gave_up_after,
    }
}

fn hint_for(e: &ConnectError, name: &str) -> Option<String> {
    Some(match e {
        ConnectError::CommandNotFound { .. } => {
            format!("install the command or fix `command` with `switchboard mcp add {name} …`")
        }
        ConnectError::AuthRequired { .. } | ConnectError::AuthFailed { .. } => {
            format!("run `switchboard mcp login {name}`")
        }
        ConnectError::StartupTimeout { .. } => {
            "raise `startupTimeout` (ms) in the server's settings if it is just slow (start-up \
             waits for the smaller of `startupTimeout` and `timeout`)"
                .into()
        }
        ConnectError::ExitedDuringInit { .. } => {
            "run the command by hand to see why it exits".into()
        }
        ConnectError::Blocked { .. } => {
            "choose another URL policy with --url-policy or `urlPolicy` in settings if this address is intended".into()
        }
        ConnectError::AutoFailed { .. } => {
            "check the URL; set `type` to `http` or `sse` if you know the transport".into()
        }
        _ => return None,
    })
}

/// First attempt, then (with `reconnect`) watch and re-make the connection.
async fn run_slot(inner: Arc<Inner>, slot: Arc<Slot>) {
    let Some(conn) = connect_once(&inner, &slot).await else {
        return;
    };
    if !inner.opts.reconnect {
        return;
    }
    tokio::spawn(watch_slot(inner, slot, conn));
}

async fn watch_slot(inner: Arc<Inner>, slot: Arc<Slot>, mut conn: Arc<Connection>) {
    loop {
        while !conn.is_closed() {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if inner.shutting_down.load(Ordering::SeqCst) {
                return;
            }
            // Replaced by a restart: the newer task watches it.
            let current = slot.conn.lock().ok().and_then(|c| c.clone());
            if !current.is_some_and(|c| Arc::ptr_eq(&c, &conn)) {
                return;
            }
        }
        let mut attempt = 0u32;
        loop {
            if inner.shutting_down.load(Ordering::SeqCst) {
                return;
            }
            attempt += 1;
            if attempt > inner.opts.max_reconnect_attempts {
                inner.set_status(&slot, |st| {
                    st.status = Some(ServerStatus::Disconnected);
                    st.error = Some(format!(
                        "connection lost; gave up after {} reconnect attempts",
                        inner.opts.max_reconnect_attempts
                    ));
                    st.hint = Some("restart it with `/mcp refresh`".into());
                });
                return;
            }
            let delay =
                Duration::from_secs(1u64 << (attempt - 1).min(5)).min(Duration::from_secs(30));
            inner.set_status(&slot, |st| {
                st.status = Some(ServerStatus::Disconnected);
                st.error = Some(format!(
                    "connection lost; reconnecting in {} s (attempt {attempt})",
                    delay.as_secs()
                ));
            });
            let _ = inner.events.send(HostEvent::Reconnecting {
                server: slot.spec.name.clone(),
                attempt,
                delay,
            });
            tokio::time::sleep(delay).await;
            if let Some(new) = connect_once(&inner, &slot).await {
                conn = new;
                break;
            }
        }
    }
}

fn url_of(target: &Target) -> Option<String> {
    match target {
        Target::Http { url, .. } | Target::Sse { url, .. } | Target::Auto { url, .. } => {
            Some(url.clone())
        }
        Target::Stdio(_) => None,
    }
}

/// One connection attempt plus discovery. Returns the connection when it is kept.
async fn connect_once(inner: &Arc<Inner>, slot: &Arc<Slot>) -> Option<Arc<Connection>> {
    let target = slot.spec.target.clone()?;
    let name = slot.spec.name.clone();
    inner.set_status(slot, |st| {
        st.status = Some(ServerStatus::Connecting);
        st.error = None;
        st.hint = None;
    });
    let url_key = url_of(&target);
    let mut copts = ConnectOptions::new(name.clone(), target);
    copts.request_timeout = slot.spec.timeout;
    copts.startup_timeout = slot.spec.startup_timeout;
    if let Some(cap) = inner.opts.startup_cap
        && !slot
            .spec
            .config
            .as_ref()
            .is_some_and(|c| c.startup_timeout_set)
    {
        copts.startup_timeout = copts.startup_timeout.min(cap);
    }
    if let Some(cfg) = &slot.spec.config {
        copts.max_message_bytes = cfg.max_message_bytes;
    }
    copts.ui_extension = inner.opts.ui_extension;
    copts.watch_lists = inner.opts.watch_lists;
    copts.guard = inner.opts.guard.clone();
    copts.token_source = inner.opts.token_source.clone();
    copts.hooks = Arc::new(HostHooks {
        host: Arc::downgrade(inner),
        user: inner.opts.hooks.clone(),
    });
    copts.transport_hint = inner.hints.lock().ok().and_then(|h| h.get(&name).copied());
    let conn = match Connection::connect(copts).await {
        Ok(c) => Arc::new(c),
        Err(e) => {
            let blocked = matches!(e, ConnectError::Blocked { .. });
            inner.set_status(slot, |st| {
                st.status = Some(if blocked {
                    ServerStatus::Blocked
                } else {
                    ServerStatus::Disconnected
                });
                st.auth = match auth_status(inner, &slot.spec) {
                    Some(AuthStatus::Authenticated) if e.is_auth() => Some(AuthStatus::NeedsLogin),
                    Some(known) => Some(known),
                    None if e.is_auth() => Some(AuthStatus::NeedsLogin),
                    None => None,
                };
                st.hint = hint_for(&e, &name);
                st.error = Some(e.to_string());
                st.gave_up_after = match &e {
                    ConnectError::StartupTimeout { after, .. } => Some(*after),
                    _ => None,
                };
            });
            return None;
        }
    };
    if let Some(key) = url_key
        && let Ok(mut h) = inner.hints.lock()
        && h.insert(key, conn.transport_kind()) != Some(conn.transport_kind())
    {
        inner.hints_dirty.store(true, Ordering::SeqCst);
    }
    let mut lists = list_everything(&conn, slot.spec.startup_timeout.min(slot.spec.timeout)).await;
    let offers_nothing = lists.tools.as_ref().is_none_or(|t| t.is_empty())
        && lists.prompts.as_ref().is_none_or(|p| p.is_empty())
        && lists.resources.as_ref().is_none_or(|r| r.is_empty())
        && lists.templates.as_ref().is_none_or(|r| r.is_empty());
    if offers_nothing {
        let why = if lists.errors.is_empty() {
            "the server offers no tools, prompts or resources, so it was closed".to_string()
        } else {
            format!("discovery failed: {}", lists.errors.join("; "))
        };
        conn.close(inner.opts.close_grace).await;
        inner.set_status(slot, |st| {
            st.status = Some(ServerStatus::Disconnected);
            st.error = Some(why);
        });
        return None;
    }
    // Judged before anything is offered: the connection is stored only after.
    let offer = offer(inner, &slot.spec, lists.tools.take().unwrap_or_default()).await;
    if inner.shutting_down.load(Ordering::SeqCst) {
        conn.close(inner.opts.close_grace).await;
        return None;
    }
    if let Ok(mut c) = slot.conn.lock() {
        *c = Some(conn.clone());
    }
    inner.set_status(slot, |st| {
        apply_lists(st, offer, lists);
        st.connected_via = Some(conn.transport_kind().to_string());
        st.instructions = conn.instructions();
        st.server_info = conn.server_info();
        st.protocol_version = conn.protocol_version().map(|v| v.to_string());
        st.status = Some(ServerStatus::Connected);
        st.auth = auth_status(inner, &slot.spec);
        st.error = None;
        st.hint = None;
    });
    Some(conn)
}

/// What the token source knows about a server's authorization.
fn auth_status(inner: &Inner, spec: &ServerSpec) -> Option<AuthStatus> {
    let source = inner.opts.token_source.as_ref()?;
    let url = url_of(spec.target.as_ref()?)?;
    Some(match source.status(&spec.name, &url)? {
        TokenStatus::Authenticated => AuthStatus::Authenticated,
        TokenStatus::Expired => AuthStatus::Expired,
        TokenStatus::NeedsLogin => AuthStatus::NeedsLogin,
    })
}

struct Lists {
    tools: Option<Vec<Tool>>,
    prompts: Option<Vec<Prompt>>,
    resources: Option<Vec<Resource>>,
    templates: Option<Vec<ResourceTemplate>>,
    errors: Vec<String>,
}

async fn list_everything(conn: &Connection, limit: Duration) -> Lists {
    let caps = conn.capabilities();
    let opts = CallOptions {
        timeout: Some(limit),
        ..Default::default()
    };
    async fn maybe<T>(
        enabled: bool,
        fut: impl Future<Output = Result<Vec<T>, RequestError>>,
    ) -> Option<Result<Vec<T>, RequestError>> {
        if enabled { Some(fut.await) } else { None }
    }
    let (tools, prompts, resources, templates) = tokio::join!(
        maybe(caps.tools.is_some(), conn.list_tools(&opts)),
        maybe(caps.prompts.is_some(), conn.list_prompts(&opts)),
        maybe(caps.resources.is_some(), conn.list_resources(&opts)),
        maybe(
            caps.resources.is_some(),
            conn.list_resource_templates(&opts)
        ),
    );
    let mut errors = Vec::new();
    fn keep<T>(
        errors: &mut Vec<String>,
        what: &str,
        r: Option<Result<Vec<T>, RequestError>>,
    ) -> Option<Vec<T>> {
        match r {
            Some(Ok(v)) => Some(v),
            Some(Err(RequestError::Server { code: -32601, .. })) => None,
            Some(Err(e)) => {
                errors.push(format!("{what}: {e}"));
                None
            }
            None => None,
        }
    }
    let tools = keep(&mut errors, "tools", tools);
    let prompts = keep(&mut errors, "prompts", prompts);
    let resources = keep(&mut errors, "resources", resources);
    let templates = keep(&mut errors, "resource templates", templates);
    Lists {
        tools,
        prompts,
        resources,
        templates,
        errors,
    }
}

/// What a server's tool list leaves to offer after the filters and the pins.
struct Offer {
    tools: Vec<Tool>,
    filtered_out: Vec<String>,
    withheld: Vec<WithheldTool>,
    listed: Vec<Tool>,
    /// Why the pins could not be checked.
    warning: Option<String>,
}

/// The pins key of a server that is pinned.
fn pin_key(spec: &ServerSpec) -> Option<ServerKey> {
    if !spec.pin_tools {
        return None;
    }
    spec.target.as_ref().map(|t| ServerKey::new(&spec.name, t))
}

/// Applies `includeTools`/`excludeTools`, then the pins (file work off the async
/// threads).
async fn offer(inner: &Inner, spec: &ServerSpec, tools: Vec<Tool>) -> Offer {
    let (listed, filtered_out): (Vec<Tool>, Vec<Tool>) =
        tools.into_iter().partition(|t| spec.tool_allowed(&t.name));
    let filtered_out = filtered_out
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    let (review, warning) = judge(inner, spec, &listed).await;
    Offer {
        tools: review.offered,
        filtered_out,
        withheld: review.withheld,
        listed,
        warning,
    }
}

/// The pins' verdict on `listed` (everything offered when pinning is off).
async fn judge(inner: &Inner, spec: &ServerSpec, listed: &[Tool]) -> (Review, Option<String>) {
    let (Some(store), Some(key)) = (inner.opts.pins.clone(), pin_key(spec)) else {
        return (
            Review {
                offered: listed.to_vec(),
                withheld: Vec::new(),
            },
            None,
        );
    };
    let tools = listed.to_vec();
    match tokio::task::spawn_blocking(move || store.review(&key, &tools)).await {
        Ok(Ok(review)) => (review, None),
        Ok(Err(e)) => (Review::unverified(listed, &e), Some(e.to_string())),
        Err(e) => {
            let e = format!("checking the pins failed: {e}");
            (Review::unverified(listed, &e), Some(e))
        }
    }
}

/// Judges a connected server's listed tools again; `ListsUpdated` when the offer changed.
async fn review_slot(inner: &Arc<Inner>, slot: &Arc<Slot>) {
    let listed = match slot.state.lock() {
        Ok(st) if st.status == Some(ServerStatus::Connected) => st.listed.clone(),
        _ => return,
    };
    let (review, warning) = judge(inner, &slot.spec, &listed).await;
    let changed = match slot.state.lock() {
        Ok(mut st) => {
            let changed = st.withheld != review.withheld || st.tools.len() != review.offered.len();
            st.tools = review.offered;
            st.withheld = review.withheld;
            st.warnings.retain(|w| !w.starts_with(PIN_WARNING));
            if let Some(w) = warning {
                st.warnings.push(format!("{PIN_WARNING}{w}"));
            }
            changed
        }
        Err(_) => false,
    };
    if changed {
        let _ = inner.events.send(HostEvent::ListsUpdated {
            server: slot.spec.name.clone(),
        });
    }
}

/// How a snapshot warning about the pins starts.
const PIN_WARNING: &str = "tools withheld: ";

fn apply_lists(st: &mut SlotState, offer: Offer, lists: Lists) {
    st.tools = offer.tools;
    st.filtered_out = offer.filtered_out;
    st.withheld = offer.withheld;
    st.listed = offer.listed;
    st.prompts = lists.prompts.unwrap_or_default();
    st.resources = lists.resources.unwrap_or_default();
    st.resource_templates = lists.templates.unwrap_or_default();
    st.warnings = lists.errors;
    if let Some(w) = offer.warning {
        st.warnings.push(format!("{PIN_WARNING}{w}"));
    }
}

/// Re-lists a server after `list_changed`, once per burst of notifications.
fn schedule_relist(inner: Arc<Inner>, slot: Arc<Slot>) {
    if slot.relist_pending.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        slot.relist_pending.store(false, Ordering::SeqCst);
        // A notification can arrive during the first discovery, before the
        // connection is stored: wait for it (bounded) rather than drop the re-list.
        let mut conn = None;
        for _ in 0..100 {
            conn = slot.conn.lock().ok().and_then(|c| c.clone());
            if conn.is_some() || inner.shutting_down.load(Ordering::SeqCst) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let Some(conn) = conn else {
            return;
        };
        let mut lists =
            list_everything(&conn, slot.spec.timeout.min(Duration::from_secs(60))).await;
        let offer = offer(&inner, &slot.spec, lists.tools.take().unwrap_or_default()).await;
        if let Ok(mut st) = slot.state.lock() {
            apply_lists(&mut st, offer, lists);
        }
        let _ = inner.events.send(HostEvent::ListsUpdated {
            server: slot.spec.name.clone(),
        });
    });
}
