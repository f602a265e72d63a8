//! The raw relay: a stdio client's `tools/call` relayed as bytes to a stdio server's
//! raw lane (`switchboard_mcp::RawLane`), without rmcp's typed path on either side —
//! the client's line is read, its envelope checked, the request written to the
//! server under the lane's own id, and the server's `result` written back to the
//! client under the client's id, as the server wrote it. The call starts on the
//! thread reading the client's stdin and its reply is written on the thread reading
//! the server's stdout, so the runtime is not woken on the way (it keeps only the
//! timeouts, and writes a line only when a stream is full): that is what brings a
//! relayed call's added latency near that of a process that only copies bytes
//! (BENCHMARKS.md).
//!
//! It takes a call only when the typed path would do nothing more with it:
//! - the session is initialized on a protocol before 2026-07-28 (a later client takes
//!   questions as `InputRequiredResult`s, which only the typed path builds);
//! - the params are `name` and `arguments` (an object) and nothing else: no `_meta`
//!   (so no progress token), no retry fields, no task;
//! - the name is in the current catalog (so every policy, pin and filter the catalog
//!   applies holds: a withheld tool is not in it), its server is connected over stdio
//!   with a raw lane whose stdin is not backed up, the client reads its stdout (not
//!   more than `switchboard_mcp::BACKED_UP_LINES` replies wait for room), fewer than
//!   [`MAX_IN_FLIGHT`] (256) raw calls of the session are in flight (so a client that sends
//!   without reading is held to rmcp's pace, and memory stays bounded), and the audit
//!   log does not keep payloads.
//!
//! Anything else goes to rmcp, and so to `GatewayServer::call_tool`. A raw call keeps
//! every rule of a typed one: the server's timeout, the client's cancellation (its
//! `notifications/cancelled` is taken here and sent on; a cancelled call is not
//! answered, as rmcp does), the session's end cancelling what is in flight, the
//! server's elicitation, sampling and roots requests answered by this client (the call
//! is registered in flight like a typed one, answered from the hook's own task), the
//! same error words ([`upstream_error`]), an audit line, and the URIs its result names
//! remembered as returned by its server (`crate::uris::Returned`; the result is parsed
//! for that only when it holds a `"uri"` key). A lying or oversized reply,
//! or the server's exit, fails only that call, at once. The result goes to the client as
//! the server wrote it (checked only to be one JSON object within `maxMessageBytes`),
//! where the typed path rewrites it through rmcp's types; `crates/cli/tests/gateway_raw.rs`
//! checks both paths answer alike and that the raw one was taken (the server sees
//! `"sb.N"` ids).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use rmcp::model::ProtocolVersion;
use rmcp::service::{Peer, RoleServer};
use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_mcp::{Connection, RawCall, RawOutcome, RawTicket, RequestError};
use tokio::sync::mpsc;

use crate::audit::{AuditEntry, error_class, now};
use crate::gateway::{InflightGuard, Shared};
use crate::server::upstream_error;
use crate::stdio_server::{Writer, error_line};

/// At most this many raw calls of one session in flight; more go to rmcp, whose pace
/// the client then follows (it stops reading the client while its replies wait).
pub(crate) const MAX_IN_FLIGHT: usize = 256;

/// The raw relay of one stdio session (a handle: clones share it).
#[derive(Clone)]
pub(crate) struct RawRelay {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    session: u64,
    /// The session's client, once it has initialized.
    peer: OnceLock<Peer<RoleServer>>,
    out: Arc<Writer>,
    /// Raw calls in flight, by the client's id (as its JSON text).
    calls: Mutex<HashMap<Box<str>, InFlight>>,
    ended: AtomicBool,
    /// Dropped with the last handle and the last call of the session: see
    /// [`RawRelay::new`].
    _running: mpsc::Sender<()>,
}

/// A raw call in flight: its number (a client may reuse an id once its call is
/// cancelled), and once started, its connection and ticket to cancel it.
struct InFlight {
    seq: u64,
    started: Option<(Arc<Connection>, RawTicket)>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CancelParams<'a> {
    #[serde(borrow, rename = "requestId")]
    request_id: &'a RawValue,
}

/// What a started call's outcome is answered and audited with.
struct Started {
    id: Box<RawValue>,
    key: Box<str>,
    seq: u64,
    requested: String,
    server: String,
    tool: String,
    request_bytes: usize,
    peer: Peer<RoleServer>,
    at: Instant,
    /// Keeps the call registered for the server's questions until it ends.
    _asking: InflightGuard,
}

impl RawRelay {
    /// The relay of session `session`, answering on `out`. `running` is held until the
    /// relay and every call it started are gone, so whoever holds its receiver can wait
    /// for the calls cancelled by the session's end to tell their servers.
    pub(crate) fn new(
        shared: Arc<Shared>,
        session: u64,
        out: Arc<Writer>,
        running: mpsc::Sender<()>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                shared,
                session,
                peer: OnceLock::new(),
                out,
                calls: Mutex::new(HashMap::new()),
                ended: AtomicBool::new(false),
                _running: running,
            }),
        }
    }

    /// Takes `line` (one message from the client) when it is a call the relay serves,
    /// or the client's cancellation of one; `false` leaves it to rmcp. Called on the
    /// thread reading the client; never blocks.
    pub(crate) fn take(&self, line: &[u8]) -> bool {
        let Ok(m) = serde_json::from_slice::<Message<'_>>(line) else {
            return false;
        };
        if m.jsonrpc.as_deref() != Some("2.0") {
            return false;
        }
        match (m.method.as_deref(), m.id, m.params) {
            (Some("tools/call"), Some(id), Some(params)) => self.call(id, params),
            (Some("notifications/cancelled"), None, Some(params)) => self.cancel(params),
            _ => false,
        }
    }

    fn call(&self, id: &RawValue, params: &RawValue) -> bool {
        let inner = &self.inner;
        let key = id.get().trim();
        // A request id is a string or a number.
        if !key.starts_with(|c: char| c == '"' || c == '-' || c.is_ascii_digit()) {
            return false;
        }
        let Ok(p) = serde_json::from_str::<CallParams<'_>>(params.get()) else {
            return false;
        };
        if p.arguments.is_some_and(|a| !a.get().starts_with('{')) {
            return false;
        }
        let Some(peer) = inner.peer() else {
            return false;
        };
        let shared = &inner.shared;
        if shared.opts.audit.as_ref().is_some_and(|a| a.payloads()) {
            return false;
        }
        // A client that does not read its replies gets rmcp's pace, not a queue here.
        if inner.out.backed_up() {
            return false;
        }
        let catalog = shared.catalog();
        let Some((server, tool)) = catalog.tool_names.resolve(&p.name) else {
            return false;
        };
        let Some(conn) = shared.host.connection(server) else {
            return false;
        };
        let Some(lane) = conn.raw_lane() else {
            return false;
        };
        if lane.backed_up() {
            return false;
        }
        let seq = shared.next_id();
        {
            let Ok(mut calls) = inner.calls.lock() else {
                return false;
            };
            if inner.ended.load(Ordering::Acquire)
                || calls.len() >= MAX_IN_FLIGHT
                || calls.contains_key(key)
            {
                return false;
            }
            calls.insert(key.into(), InFlight { seq, started: None });
        }
        let started = Started {
            id: id.to_owned(),
            key: key.into(),
            seq,
            requested: p.name.to_string(),
            server: server.to_string(),
            tool: tool.to_string(),
            request_bytes: p.arguments.map(|a| a.get().len()).unwrap_or(0),
            _asking: shared.register_inflight_client(server, peer.clone()),
            peer,
            at: Instant::now(),
        };
        let call = RawCall {
            name: tool,
            arguments: p.arguments,
            timeout: conn.request_timeout(),
        };
        let done = {
            let inner = inner.clone();
            Box::new(move |outcome| inner.finish(started, outcome))
        };
        match lane.start(call, done) {
            Ok(ticket) => {
                let late = match inner.calls.lock() {
                    Ok(mut calls) => match calls.get_mut(key) {
                        Some(c) if c.seq == seq => {
                            c.started = Some((conn.clone(), ticket));
                            false
                        }
                        // Already answered, or the session ended meanwhile.
                        _ => true,
                    },
                    Err(_) => true,
                };
                if late && inner.ended.load(Ordering::Acquire) {
                    lane.cancel(ticket, "the client went away");
                }
                true
            }
            Err(_) => {
                // Not started (the server just went): rmcp's path says why.
                inner.forget(key, seq);
                false
            }
        }
    }

    /// The client's `notifications/cancelled` for a raw call: taken, and the call
    /// cancelled (which tells the server, and leaves the call unanswered).
    fn cancel(&self, params: &RawValue) -> bool {
        let Ok(p) = serde_json::from_str::<CancelParams<'_>>(params.get()) else {
            return false;
        };
        let call = self
            .inner
            .calls
            .lock()
            .ok()
            .and_then(|mut calls| calls.remove(p.request_id.get().trim()));
        match call {
            Some(c) => {
                if let Some((conn, ticket)) = c.started {
                    cancel(&conn, ticket, "cancelled by the user");
                }
                true
            }
            None => false,
        }
    }

    /// The session ended: every raw call in flight is cancelled, and none starts.
    pub(crate) fn end(&self) {
        self.inner.ended.store(true, Ordering::Release);
        let calls: Vec<_> = match self.inner.calls.lock() {
            Ok(mut calls) => calls.drain().filter_map(|(_, c)| c.started).collect(),
            Err(_) => Vec::new(),
        };
        for (conn, ticket) in calls {
            cancel(&conn, ticket, "the client went away");
        }
    }
}

fn cancel(conn: &Connection, ticket: RawTicket, reason: &str) {
    if let Some(lane) = conn.raw_lane() {
        lane.cancel(ticket, reason);
    }
}

impl Inner {
    /// The session's client, when it has initialized on a protocol the relay serves.
    fn peer(&self) -> Option<Peer<RoleServer>> {
        let peer = match self.peer.get() {
            Some(p) => p.clone(),
            None => {
                let p = self.shared.session_peer(self.session)?;
                self.peer.get_or_init(|| p).clone()
            }
        };
        let version = peer.peer_info()?.protocol_version.clone();
        (version.as_str() < ProtocolVersion::V_2026_07_28.as_str()).then_some(peer)
    }

    /// Removes call `key` when it is still call `seq`.
    fn forget(&self, key: &str, seq: u64) {
        if let Ok(mut calls) = self.calls.lock()
            && calls.get(key).is_some_and(|c| c.seq == seq)
        {
            calls.remove(key);
        }
    }

    /// A started call's outcome (on whichever thread learnt it): answered unless
    /// cancelled, and audited.
    fn finish(&self, call: Started, outcome: RawOutcome) {
        self.forget(&call.key, call.seq);
        let cancelled = matches!(outcome, Err(RequestError::Cancelled { .. }));
        let (line, answered) = match outcome {
            Ok(result) => {
                let json = result.json();
                // Reads of the URIs it returned go back to this server (`crate::uris`):
                // parsed only when the result names one.
                if std::str::from_utf8(json).is_ok_and(|s| s.contains("\"uri\""))
                    && let Ok(v) = serde_json::from_slice::<serde_json::Value>(json)
                {
                    self.shared.remember_returned(&call.server, &v);
                }
                let mut line = Vec::with_capacity(json.len() + call.id.get().len() + 40);
                line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
                line.extend_from_slice(call.id.get().as_bytes());
                line.extend_from_slice(b",\"result\":");
                line.extend_from_slice(json);
                line.extend_from_slice(b"}\n");
                (line, Ok(result))
            }
            Err(e) => {
                let error = upstream_error(&call.server, e);
                let class = error_class(error.code.0);
                (
                    error_line(&call.id, &error),
                    Err((class, error.message.to_string())),
                )
            }
        };
        // A cancelled call is not answered (the client gave it up).
        if !cancelled && let Err(e) = self.out.write_line_now(line) {
            tracing::debug!("could not answer the client: {e}");
        }
        if let Some(audit) = &self.shared.opts.audit {
            // Read only for the audit: a call without it pays nothing more.
            let (outcome, error, response_bytes) = match answered {
                Ok(r) if r.is_error() => ("tool_error", None, r.json().len()),
                Ok(r) => ("ok", None, r.json().len()),
                Err(e) => {
                    let kind = if cancelled { "cancelled" } else { "error" };
                    (kind, Some(e), 0)
                }
            };
            let (error_class, error) = error.unzip();
            audit.record(AuditEntry {
                time: now(),
                client: call.peer.peer_info().map(|i| i.client_info.name.clone()),
                method: "tools/call",
                server: Some(call.server),
                tool: call.tool,
                requested: call.requested,
                duration_ms: call.at.elapsed().as_millis() as u64,
                outcome,
                error_class,
                error,
                request_bytes: call.request_bytes,
                response_bytes,
                arguments: None,
                result: None,
            });
        }
    }
}
