//! The raw lane of a stdio connection: a `tools/call` relayed as bytes, for a caller
//! that already holds the request as JSON text and wants the result as JSON text (the
//! gateway, relaying a client's call). It skips rmcp's typed path — building
//! `ClientRequest`, its service loop and per-request bookkeeping, decoding
//! `CallToolResult` and encoding it again — which is most of a relayed call's cost.
//!
//! How: the request is written straight to the server's stdin under an id of the
//! lane's own (a string, `"sb.N"`: rmcp's ids are numbers, so the two never meet), and
//! the stdio transport hands a reply with such an id to the lane before rmcp would
//! parse it ([`RawLane::take_reply`]). Everything else the server sends (its
//! notifications, its own requests, replies to rmcp's requests) goes through rmcp as
//! before, and so do its questions during a raw call (the connection's hooks answer them).
//!
//! Invariants:
//! - every raw call has a timeout; a timed-out or cancelled call sends the server
//!   `notifications/cancelled` for its id and fails with the same [`RequestError`] a
//!   typed call gets;
//! - a reply is bounded like any other (the stdio framer's `maxMessageBytes`); an
//!   oversized or unreadable reply to a raw call fails that call at once;
//! - when the server's stdout ends, every raw call still waiting fails with
//!   [`RequestError::Closed`] at once; the lane takes no new calls after that;
//! - the lane never parses a result beyond its JSON-RPC envelope: the result goes back
//!   as the server wrote it, but only a JSON object is accepted as one;
//! - memory: one entry per call in flight, removed when the call ends however it ends
//!   (its future may be dropped at any point).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::error::RequestError;
use crate::framing;
use crate::stdio::{self, SharedStdin};

const METHOD: &str = "tools/call";

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

type Outcome = Result<RawResult, RequestError>;

/// The raw lane of one stdio connection (see the module doc).
#[derive(Debug)]
pub struct RawLane {
    server: Arc<str>,
    stdin: SharedStdin,
    pending: Mutex<HashMap<u64, oneshot::Sender<Outcome>>>,
    /// How many calls wait (read without the lock, to skip lines when none do).
    waiting: AtomicUsize,
    next: AtomicU64,
    closed: AtomicBool,
}

/// Removes a call's entry however its future ends.
struct Entry<'a> {
    lane: &'a RawLane,
    id: u64,
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        self.lane.remove(self.id);
    }
}

impl RawLane {
    pub(crate) fn new(server: Arc<str>, stdin: SharedStdin) -> Self {
        Self {
            server,
            stdin,
            pending: Mutex::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
            next: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        }
    }

    /// Whether the server's stdout has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// How many raw calls wait for their reply.
    fn in_flight(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Calls the server's tool `name` with `arguments` (JSON text of an object, as the
    /// caller received it; `None` sends none) and returns its result as JSON text.
    /// Fails after `timeout`, or when `cancel` fires, sending `notifications/cancelled`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<&RawValue>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<RawResult, RequestError> {
        if self.is_closed() {
            return Err(RequestError::Closed(None));
        }
        let name = serde_json::to_string(name).map_err(|e| RequestError::Transport {
            method: METHOD.into(),
            message: format!("could not build the request: {e}"),
        })?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut line =
            Vec::with_capacity(80 + name.len() + arguments.map(|a| a.get().len()).unwrap_or(0));
        line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"sb.");
        line.extend_from_slice(id.to_string().as_bytes());
        line.extend_from_slice(b"\",\"method\":\"tools/call\",\"params\":{\"name\":");
        line.extend_from_slice(name.as_bytes());
        if let Some(args) = arguments {
            line.extend_from_slice(b",\"arguments\":");
            line.extend_from_slice(args.get().as_bytes());
        }
        line.extend_from_slice(b"}}\n");

        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, tx);
            self.waiting.store(p.len(), Ordering::Release);
        }
        let _entry = Entry { lane: self, id };
        // The stdout reader may have ended between the check above and the insert.
        if self.is_closed() {
            return Err(RequestError::Closed(None));
        }
        let exchange = async {
            self.write(&line).await?;
            rx.await.unwrap_or(Err(RequestError::Closed(None)))
        };
        tokio::select! {
            r = tokio::time::timeout(timeout, exchange) => match r {
                Ok(outcome) => outcome,
                Err(_) => {
                    self.cancel(id, "the request timed out").await;
                    Err(RequestError::Timeout { method: METHOD.into(), after: timeout })
                }
            },
            () = cancel.cancelled() => {
                self.cancel(id, "cancelled by the user").await;
                Err(RequestError::Cancelled { method: METHOD.into() })
            }
        }
    }

    async fn write(&self, line: &[u8]) -> Result<(), RequestError> {
        stdio::write_line(&self.stdin, line)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotConnected => RequestError::Closed(None),
                _ => RequestError::Closed(Some(format!("writing to the server failed: {e}"))),
            })
    }

    async fn cancel(&self, id: u64, reason: &str) {
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": format!("sb.{id}"), "reason": reason},
        });
        let mut line = note.to_string().into_bytes();
        line.push(b'\n');
        let _ = self.write(&line).await;
    }

    fn remove(&self, id: u64) -> Option<oneshot::Sender<Outcome>> {
        let mut p = self.pending.lock().ok()?;
        let tx = p.remove(&id);
        self.waiting.store(p.len(), Ordering::Release);
        tx
    }

    fn deliver(&self, id: u64, outcome: Outcome) {
        if let Some(tx) = self.remove(id) {
            let _ = tx.send(outcome);
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
        let waiting: Vec<_> = match self.pending.lock() {
            Ok(mut p) => {
                self.waiting.store(0, Ordering::Release);
                p.drain().map(|(_, tx)| tx).collect()
            }
            Err(_) => Vec::new(),
        };
        for tx in waiting {
            let _ = tx.send(Err(RequestError::Closed(None)));
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
    let n = id.as_str()?.strip_prefix("sb.")?;
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
        id: Option<serde_json::Value>,
        #[serde(borrow)]
        result: Option<&'a RawValue>,
        error: Option<serde_json::Value>,
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
    let call = own_id(parsed.id.as_ref()?)?;
    let outcome = match (parsed.result, parsed.error) {
        (Some(result), None) if result.get().starts_with('{') => {
            // The result's place in the line (serde_json borrows it from there).
            let start = result.get().as_ptr() as usize - line.as_ptr() as usize;
            Ok(start..start + result.get().len())
        }
        (None, Some(e)) => match serde_json::from_value::<ReplyError>(e) {
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
