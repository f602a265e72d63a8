//! The raw lane of a stdio connection: a `tools/call` relayed as bytes, for a caller
//! that already holds the request as JSON text and wants the result as JSON text (the
//! gateway, relaying a client's call). It skips rmcp's typed path — building
//! `ClientRequest`, its service loop and per-request bookkeeping, decoding
//! `CallToolResult` and encoding it again — and the runtime itself: a call is started
//! from any thread ([`RawLane::start`]) and its outcome handed to a callback on the
//! thread that learns it. That is what lets a relayed call cost about what a process
//! that only copies bytes costs (BENCHMARKS.md).
//!
//! How: the request is written straight to the server's stdin ([`LineSink`](crate::LineSink): at once
//! when the pipe has room, else by a task) under an id of the lane's own (a string,
//! `"sb.N"`: rmcp's ids are numbers, so the two never meet), and the stdio transport's
//! stdout thread hands a reply with such an id to the lane before rmcp would parse it
//! ([`RawLane::take_reply`]); the callback runs there. Everything else the server sends
//! (its notifications, its own requests, replies to rmcp's requests) goes through rmcp
//! as before, and so do its questions during a raw call (the connection's hooks answer
//! them).
//!
//! Invariants:
//! - a started call's callback runs exactly once: with the reply, or with an error when
//!   it times out, is cancelled ([`RawLane::cancel`]) or the server's stdout ends;
//!   never while the lane's lock is held;
//! - every raw call has a timeout, kept by one task per lane that wakes every
//!   [`SWEEP_EVERY`] while calls wait and sleeps while none do (a call's start wakes it
//!   only when it sleeps); a timed-out or cancelled call sends the server
//!   `notifications/cancelled` for its id and fails with the same [`RequestError`] a
//!   typed call gets;
//! - a reply is bounded like any other (the stdio framer's `maxMessageBytes`); an
//!   oversized or unreadable reply to a raw call fails that call at once;
//! - when the server's stdout ends, every raw call still waiting fails with
//!   [`RequestError::Closed`] at once; the lane takes no new calls after that;
//! - the lane never parses a result beyond its JSON-RPC envelope ([`read_raw_reply`]
//!   locates the `result`): the result goes back as the server wrote it, but only a JSON
//!   object is accepted as one; a reply with both `result` and `error`, or neither, fails
//!   its call; a reply to a lane id not waiting (never sent, or answered already) is
//!   dropped;
//! - the lane is offered only on a connection below protocol 2026-07-28
//!   (`Connection::raw_lane`), whose calls cannot be answered with an
//!   `InputRequiredResult`;
//! - memory: one entry per call in flight, removed when its callback runs.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::RequestError;
use crate::framing;
use crate::stdio::SharedStdin;

const METHOD: &str = "tools/call";

/// How often the lane looks for calls past their timeout while any wait.
pub const SWEEP_EVERY: Duration = Duration::from_millis(50);

/// A result as the server wrote it: the bytes of the reply's `result` member.
#[derive(Debug)]
pub struct RawResult {
    line: Vec<u8>,
    result: Range<usize>,
}

impl RawResult {
    /// The JSON text of the `result` object.
    pub fn json(&self) -> &[u8] {
        &self.line[self.result.clone()]
    }

    /// Whether the result says `isError: true` (parses the result's top level only).
    pub fn is_error(&self) -> bool {
        #[derive(Deserialize)]
        struct Head {
            #[serde(rename = "isError")]
            is_error: Option<bool>,
        }
        serde_json::from_slice::<Head>(self.json())
            .ok()
            .and_then(|h| h.is_error)
            .unwrap_or(false)
    }
}

/// How a raw call ended.
pub type RawOutcome = Result<RawResult, RequestError>;

/// What runs with a raw call's outcome (see the module doc for where).
pub type RawDone = Box<dyn FnOnce(RawOutcome) + Send>;

/// A started raw call, to cancel it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawTicket(u64);

/// What [`RawLane::start`] sends.
#[derive(Debug, Clone, Copy)]
pub struct RawCall<'a> {
    /// The server's own tool name.
    pub name: &'a str,
    /// The arguments as the caller received them (JSON text of an object), if any.
    pub arguments: Option<&'a RawValue>,
    /// How long the server has to answer.
    pub timeout: Duration,
}

struct Waiting {
    deadline: Instant,
    timeout: Duration,
    done: RawDone,
}

/// The raw lane of one stdio connection (see the module doc).
pub struct RawLane {
    server: Arc<str>,
    stdin: SharedStdin,
    pending: Mutex<HashMap<u64, Waiting>>,
    /// How many calls wait (read without the lock, to skip lines when none do).
    waiting: AtomicUsize,
    next: AtomicU64,
    closed: AtomicBool,
    /// Whether the timeout task sleeps until a call starts.
    idle: AtomicBool,
    wake: Arc<Notify>,
    stop: CancellationToken,
}

impl std::fmt::Debug for RawLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawLane")
            .field("server", &self.server)
            .field("waiting", &self.in_flight())
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Drop for RawLane {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl RawLane {
    /// A lane writing to `stdin`, with its timeout task on the current runtime.
    pub(crate) fn new(server: Arc<str>, stdin: SharedStdin) -> Arc<Self> {
        let wake = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let lane = Arc::new(Self {
            server,
            stdin,
            pending: Mutex::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
            next: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            idle: AtomicBool::new(true),
            wake: wake.clone(),
            stop: stop.clone(),
        });
        tokio::spawn(keep_timeouts(Arc::downgrade(&lane), wake, stop));
        lane
    }

    /// Whether the server's stdout has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// How many raw calls wait for their reply.
    fn in_flight(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Whether the server is not reading its stdin (lines wait behind others): a
    /// caller with another way to send may prefer it.
    pub fn backed_up(&self) -> bool {
        self.stdin.backed_up()
    }

    /// Calls the server's tool from any thread without blocking; `done` gets the
    /// outcome (see the module doc). An error here means the call was not started and
    /// `done` will not run (it is dropped).
    pub fn start(&self, call: RawCall<'_>, done: RawDone) -> Result<RawTicket, RequestError> {
        if self.is_closed() {
            return Err(RequestError::Closed(None));
        }
        let name = serde_json::to_string(call.name).map_err(|e| RequestError::Transport {
            method: METHOD.into(),
            message: format!("could not build the request: {e}"),
        })?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let args = call.arguments.map(|a| a.get().as_bytes());
        let mut line = Vec::with_capacity(80 + name.len() + args.map_or(0, <[u8]>::len));
        line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"sb.");
        line.extend_from_slice(id.to_string().as_bytes());
        line.extend_from_slice(b"\",\"method\":\"tools/call\",\"params\":{\"name\":");
        line.extend_from_slice(name.as_bytes());
        if let Some(args) = args {
            line.extend_from_slice(b",\"arguments\":");
            line.extend_from_slice(args);
        }
        line.extend_from_slice(b"}}\n");

        let waiting = Waiting {
            deadline: Instant::now() + call.timeout,
            timeout: call.timeout,
            done,
        };
        match self.pending.lock() {
            Ok(mut p) => {
                p.insert(id, waiting);
                self.waiting.store(p.len(), Ordering::SeqCst);
            }
            Err(_) => return Err(RequestError::Closed(None)),
        }
        // The stdout thread may have ended between the check above and the insert.
        if self.is_closed() && self.remove(id).is_some() {
            return Err(RequestError::Closed(None));
        }
        if self.idle.swap(false, Ordering::SeqCst) {
            self.wake.notify_one();
        }
        if let Err(e) = self.stdin.write_line_now(line) {
            // Not started, unless the lane closed meanwhile and already ended it.
            if self.remove(id).is_some() {
                return Err(write_error(e));
            }
        }
        Ok(RawTicket(id))
    }

    /// Cancels a started call: the server is told, and its callback runs with
    /// [`RequestError::Cancelled`]. `false` when the call had already ended.
    pub fn cancel(&self, ticket: RawTicket, reason: &str) -> bool {
        let Some(w) = self.remove(ticket.0) else {
            return false;
        };
        self.tell_cancelled(ticket.0, reason);
        (w.done)(Err(RequestError::Cancelled {
            method: METHOD.into(),
        }));
        true
    }

    fn tell_cancelled(&self, id: u64, reason: &str) {
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": format!("sb.{id}"), "reason": reason},
        });
        let mut line = note.to_string().into_bytes();
        line.push(b'\n');
        let _ = self.stdin.write_line_now(line);
    }

    fn remove(&self, id: u64) -> Option<Waiting> {
        let mut p = self.pending.lock().ok()?;
        let w = p.remove(&id);
        self.waiting.store(p.len(), Ordering::SeqCst);
        w
    }

    fn deliver(&self, id: u64, outcome: RawOutcome) {
        if let Some(w) = self.remove(id) {
            (w.done)(outcome);
        }
    }

    /// Ends every call past its deadline at `now`.
    fn expire(&self, now: Instant) {
        let expired: Vec<(u64, Waiting)> = match self.pending.lock() {
            Ok(mut p) => {
                let ids: Vec<u64> = p
                    .iter()
                    .filter(|(_, w)| w.deadline <= now)
                    .map(|(id, _)| *id)
                    .collect();
                let expired = ids
                    .into_iter()
                    .filter_map(|id| p.remove(&id).map(|w| (id, w)))
                    .collect();
                self.waiting.store(p.len(), Ordering::SeqCst);
                expired
            }
            Err(_) => Vec::new(),
        };
        for (id, w) in expired {
            self.tell_cancelled(id, "the request timed out");
            (w.done)(Err(RequestError::Timeout {
                method: METHOD.into(),
                after: w.timeout,
            }));
        }
    }

    /// Takes `line` when it is the reply to a raw call (returns `None`: the caller
    /// drops it) and gives it back otherwise, for rmcp.
    pub(crate) fn take_reply(&self, line: Vec<u8>) -> Option<Vec<u8>> {
        if self.in_flight() == 0 {
            return Some(line);
        }
        let Some(reply) = read_raw_reply(&line) else {
            return Some(line);
        };
        let outcome = match reply.outcome {
            Ok(result) => Ok(RawResult { line, result }),
            Err(RawFault::Error { code, message }) => Err(RequestError::Server {
                method: METHOD.into(),
                code,
                message,
            }),
            Err(RawFault::Malformed) => Err(RequestError::Server {
                method: METHOD.into(),
                code: framing::UNREADABLE_REPLY_CODE as i32,
                message: framing::unreadable_message(
                    &self.server,
                    "a tools/call reply needs an object `result` or an `error`",
                ),
            }),
        };
        self.deliver(reply.call, outcome);
        None
    }

    /// Fails the raw call a reply that could not be read (over the size limit, or not
    /// JSON) was meant for; `false` when `id` is not one of the lane's.
    pub(crate) fn fail_unreadable(&self, id: &serde_json::Value, message: String) -> bool {
        let Some(id) = own_id(id) else {
            return false;
        };
        self.deliver(
            id,
            Err(RequestError::Server {
                method: METHOD.into(),
                code: framing::UNREADABLE_REPLY_CODE as i32,
                message,
            }),
        );
        true
    }

    /// The server's stdout ended: every waiting call fails, and no new one starts.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.stop.cancel();
        let waiting: Vec<_> = match self.pending.lock() {
            Ok(mut p) => {
                self.waiting.store(0, Ordering::SeqCst);
                p.drain().map(|(_, w)| w).collect()
            }
            Err(_) => Vec::new(),
        };
        for w in waiting {
            (w.done)(Err(RequestError::Closed(None)));
        }
    }
}

fn write_error(e: std::io::Error) -> RequestError {
    match e.kind() {
        std::io::ErrorKind::NotConnected => RequestError::Closed(None),
        _ => RequestError::Closed(Some(format!("writing to the server failed: {e}"))),
    }
}

/// The lane's timeout task: asleep while no call waits, else every [`SWEEP_EVERY`].
async fn keep_timeouts(lane: Weak<RawLane>, wake: Arc<Notify>, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = stop.cancelled() => return,
        }
        loop {
            tokio::select! {
                () = tokio::time::sleep(SWEEP_EVERY) => {}
                () = stop.cancelled() => return,
            }
            let Some(lane) = lane.upgrade() else {
                return;
            };
            lane.expire(Instant::now());
            if lane.in_flight() == 0 {
                // Asleep from now on, unless a call started meanwhile (its start saw
                // `idle` false and did not wake us).
                lane.idle.store(true, Ordering::SeqCst);
                if lane.in_flight() == 0 || !lane.idle.swap(false, Ordering::SeqCst) {
                    break;
                }
            }
        }
    }
}

/// A reply to one of a raw lane's calls, as [`read_raw_reply`] reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct RawReply {
    /// The lane's call number (the `N` of its `"sb.N"` id).
    pub call: u64,
    /// Where the `result` object is in the line, or what is wrong instead.
    pub outcome: Result<Range<usize>, RawFault>,
}

/// A reply to a raw call that carries no result.
#[derive(Debug, PartialEq, Eq)]
pub enum RawFault {
    /// The server's JSON-RPC error.
    Error { code: i32, message: String },
    /// Neither an object `result` alone nor an `error` alone.
    Malformed,
}

/// The call number behind a reply's `id`, when it is one of a raw lane's (`"sb.N"`).
fn own_id(id: &serde_json::Value) -> Option<u64> {
    own_id_text(id.as_str()?)
}

/// The call number behind an id string, when it is one of a raw lane's (`"sb.N"`).
fn own_id_text(id: &str) -> Option<u64> {
    let n = id.strip_prefix("sb.")?;
    // Digits only: `u64::from_str` would also take a leading `+`.
    n.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| n.parse().ok())?
}

/// Reads one line from a server as a reply to a raw call: `None` when it is anything
/// else (not JSON, a request or notification, an id that is not a raw lane's), which
/// then goes to rmcp. Only the envelope is parsed; the result is located, not read.
pub fn read_raw_reply(line: &[u8]) -> Option<RawReply> {
    #[derive(Deserialize)]
    struct Reply<'a> {
        // A raw lane's ids are strings: a number here fails the parse, and the line
        // goes to rmcp, as any id that is not the lane's.
        #[serde(borrow)]
        id: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        result: Option<&'a RawValue>,
        #[serde(borrow)]
        error: Option<&'a RawValue>,
        method: Option<serde::de::IgnoredAny>,
    }
    #[derive(Deserialize)]
    struct ReplyError {
        code: i32,
        message: String,
    }
    let parsed = serde_json::from_slice::<Reply<'_>>(line).ok()?;
    if parsed.method.is_some() {
        return None;
    }
    let call = own_id_text(parsed.id.as_deref()?)?;
    let outcome = match (parsed.result, parsed.error) {
        (Some(result), None) if result.get().starts_with('{') => {
            // The result's place in the line (serde_json borrows it from there).
            let start = result.get().as_ptr() as usize - line.as_ptr() as usize;
            Ok(start..start + result.get().len())
        }
        (None, Some(e)) => match serde_json::from_str::<ReplyError>(e.get()) {
            Ok(e) => Err(RawFault::Error {
                code: e.code,
                message: e.message,
            }),
            Err(_) => Err(RawFault::Malformed),
        },
        _ => Err(RawFault::Malformed),
    };
    Some(RawReply { call, outcome })
}

#[cfg(test)]
mod tests {
    use super::{RawFault, read_raw_reply};

    fn result_text(line: &str) -> Option<String> {
        let r = read_raw_reply(line.as_bytes())?;
        r.outcome.ok().map(|range| line[range].to_string())
    }

    #[test]
    fn a_reply_to_a_raw_call_is_found_and_its_result_located() {
        let line =
            r#"{"jsonrpc":"2.0","id":"sb.42","result":{"content":[{"type":"text","text":"}"}]}}"#;
        let r = read_raw_reply(line.as_bytes()).unwrap();
        assert_eq!(r.call, 42);
        assert_eq!(
            result_text(line).unwrap(),
            r#"{"content":[{"type":"text","text":"}"}]}"#
        );
        // Members in any order, with spaces.
        let line = r#" { "result" : { "a" : 1 } , "id" : "sb.7" , "jsonrpc" : "2.0" } "#;
        assert_eq!(result_text(line).unwrap(), r#"{ "a" : 1 }"#);
    }

    #[test]
    fn anything_else_is_left_to_rmcp() {
        for line in [
            r#"{"jsonrpc":"2.0","id":42,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"42","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sb.x","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sb.1","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"sb.1 ","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sb.-1","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sb.+1","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"not json"#,
            r#"{"jsonrpc":"2.0","id":"sb.1","result":{}"#,
            "",
        ] {
            assert_eq!(read_raw_reply(line.as_bytes()), None, "{line}");
        }
    }

    #[test]
    fn a_lie_is_a_fault_of_its_call() {
        let fault = |line: &str| {
            read_raw_reply(line.as_bytes())
                .unwrap()
                .outcome
                .unwrap_err()
        };
        assert_eq!(
            fault(r#"{"jsonrpc":"2.0","id":"sb.1","result":"text"}"#),
            RawFault::Malformed
        );
        assert_eq!(
            fault(r#"{"jsonrpc":"2.0","id":"sb.1","result":{},"error":{"code":1,"message":"x"}}"#),
            RawFault::Malformed
        );
        assert_eq!(
            fault(r#"{"jsonrpc":"2.0","id":"sb.1"}"#),
            RawFault::Malformed
        );
        assert_eq!(
            fault(r#"{"jsonrpc":"2.0","id":"sb.1","error":{"code":"x"}}"#),
            RawFault::Malformed
        );
        assert_eq!(
            fault(r#"{"jsonrpc":"2.0","id":"sb.1","error":{"code":-32602,"message":"bad"}}"#),
            RawFault::Error {
                code: -32602,
                message: "bad".into()
            }
        );
    }
}
