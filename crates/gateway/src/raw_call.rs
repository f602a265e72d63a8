//! The raw relay: a stdio client's `tools/call` relayed as bytes to a stdio server's
//! raw lane (`switchboard_mcp::RawLane`), without rmcp's typed path on either side —
//! the client's line is read, its envelope checked, the request written to the
//! server under the lane's own id, and the server's `result` written back to the
//! client under the client's id, as the server wrote it. It is what brings a relayed
//! call's added latency near that of a process that only copies bytes (BENCHMARKS.md).
//!
//! It takes a call only when the typed path would do nothing more with it:
//! - the session is initialized on a protocol before 2026-07-28 (a later client takes
//!   questions as `InputRequiredResult`s, which only the typed path builds);
//! - the params are `name` and `arguments` (an object) and nothing else: no `_meta`
//!   (so no progress token), no retry fields, no task;
//! - the name is in the current catalog (so every policy, pin and filter the catalog
//!   applies holds: a withheld tool is not in it), its server is connected over stdio
//!   with a raw lane, and the audit log does not keep payloads.
//!
//! Anything else goes to rmcp, and so to `GatewayServer::call_tool`. A raw call keeps
//! every rule of a typed one: the server's timeout, the client's cancellation (its
//! `notifications/cancelled` is taken here and sent on; a cancelled call is not
//! answered, as rmcp does), the session's end cancelling what is in flight, the
//! server's elicitation, sampling and roots requests answered by this client (the call
//! is registered in flight like a typed one), the same error words
//! ([`upstream_error`]), and an audit line.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use rmcp::model::ProtocolVersion;
use rmcp::service::{Peer, RoleServer};
use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_mcp::{Connection, RawResult, RequestError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::audit::{AuditEntry, now};
use crate::gateway::Shared;
use crate::server::upstream_error;
use crate::stdio_server::{Writer, error_line};

/// The raw relay of one stdio session.
pub(crate) struct RawRelay {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    session: u64,
    /// The session's client, once it has initialized.
    peer: OnceLock<Peer<RoleServer>>,
    out: Arc<Writer>,
    /// Raw calls in flight, by the client's id (as its JSON text): each call's number
    /// (a client may reuse an id once its call is cancelled) and its cancellation.
    calls: Mutex<HashMap<Box<str>, (u64, CancellationToken)>>,
    ended: AtomicBool,
    /// Dropped with the last task of the session: see [`RawRelay::new`].
    _running: mpsc::Sender<()>,
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

/// A call the relay took, on its way to its task.
struct Taken {
    id: Box<RawValue>,
    key: Box<str>,
    seq: u64,
    requested: String,
    server: String,
    tool: String,
    arguments: Option<Box<RawValue>>,
    conn: Arc<Connection>,
    peer: Peer<RoleServer>,
    cancel: CancellationToken,
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
    /// or the client's cancellation of one; `false` leaves it to rmcp.
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
        let catalog = shared.catalog();
        let Some((server, tool)) = catalog.tool_names.resolve(&p.name) else {
            return false;
        };
        let Some(conn) = shared.host.connection(server) else {
            return false;
        };
        if conn.raw_lane().is_none() {
            return false;
        }
        let cancel = CancellationToken::new();
        let seq = shared.next_id();
        {
            let Ok(mut calls) = inner.calls.lock() else {
                return false;
            };
            if inner.ended.load(Ordering::Acquire) || calls.contains_key(key) {
                return false;
            }
            calls.insert(key.into(), (seq, cancel.clone()));
        }
        let taken = Taken {
            id: id.to_owned(),
            key: key.into(),
            seq,
            requested: p.name.into_owned(),
            server: server.to_string(),
            tool: tool.to_string(),
            arguments: p.arguments.map(ToOwned::to_owned),
            conn,
            peer,
            cancel,
        };
        tokio::spawn(inner.clone().run(taken));
        true
    }

    /// The client's `notifications/cancelled` for a raw call: taken, and the call
    /// cancelled (which tells the server).
    fn cancel(&self, params: &RawValue) -> bool {
        let Ok(p) = serde_json::from_str::<CancelParams<'_>>(params.get()) else {
            return false;
        };
        let token = self
            .inner
            .calls
            .lock()
            .ok()
            .and_then(|mut calls| calls.remove(p.request_id.get().trim()))
            .map(|(_, t)| t);
        match token {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// The session ended: every raw call in flight is cancelled, and none starts.
    pub(crate) fn end(&self) {
        self.inner.ended.store(true, Ordering::Release);
        let calls: Vec<_> = match self.inner.calls.lock() {
            Ok(mut calls) => calls.drain().map(|(_, (_, t))| t).collect(),
            Err(_) => Vec::new(),
        };
        for t in calls {
            t.cancel();
        }
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

    async fn run(self: Arc<Self>, call: Taken) {
        let started = Instant::now();
        let outcome = self.relay(&call).await;
        if let Ok(mut calls) = self.calls.lock()
            && calls
                .get(&call.key)
                .is_some_and(|(seq, _)| *seq == call.seq)
        {
            calls.remove(&call.key);
        }
        let cancelled = call.cancel.is_cancelled();
        let (line, answered) = match outcome {
            Ok(result) => {
                let json = result.json();
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
                (error_line(&call.id, &error), Err(error.message.to_string()))
            }
        };
        // A cancelled call is not answered (the client gave it up).
        if !cancelled && let Err(e) = self.out.write_line(&line).await {
            tracing::debug!("could not answer the client: {e}");
        }
        if let Some(audit) = &self.shared.opts.audit {
            // Read only for the audit: a call without it pays nothing more.
            let (outcome, error, response_bytes) = match answered {
                Ok(r) if r.is_error() => ("tool_error", None, r.json().len()),
                Ok(r) => ("ok", None, r.json().len()),
                Err(message) => {
                    let kind = if cancelled { "cancelled" } else { "error" };
                    (kind, Some(message), 0)
                }
            };
            audit.record(AuditEntry {
                time: now(),
                client: call.peer.peer_info().map(|i| i.client_info.name.clone()),
                method: "tools/call",
                server: Some(call.server.clone()),
                tool: call.tool.clone(),
                requested: call.requested.clone(),
                duration_ms: started.elapsed().as_millis() as u64,
                outcome,
                error,
                request_bytes: call.arguments.as_ref().map(|a| a.get().len()).unwrap_or(0),
                response_bytes,
                arguments: None,
                result: None,
            });
        }
    }

    /// The upstream call, with the server's questions answered by this client meanwhile.
    async fn relay(&self, call: &Taken) -> Result<RawResult, RequestError> {
        let Some(lane) = call.conn.raw_lane() else {
            return Err(RequestError::Closed(None));
        };
        let fut = lane.call_tool(
            &call.tool,
            call.arguments.as_deref(),
            call.conn.request_timeout(),
            &call.cancel,
        );
        self.shared
            .while_answering(&call.peer, &call.server, fut)
            .await
    }
}
