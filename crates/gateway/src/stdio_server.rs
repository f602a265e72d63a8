//! The downstream stdio transport: the client's newline-delimited JSON-RPC for rmcp's
//! server, with the calls the raw relay takes (`crate::raw_call`) set aside before
//! rmcp parses them, and one writer that rmcp's messages and the relay's replies share.
//!
//! The client's stdin is read by a thread of its own, blocked in `read`: it frames
//! lines, offers each to the relay (which starts a call it takes right there, without
//! waking the runtime), and hands the rest of each read to rmcp as one batch through
//! a channel of [`BATCHES_QUEUED`], so at most that many reads wait. The thread ends when stdin
//! ends or rmcp's side is gone; the process exits with the session (`serve_stdio`).
//!
//! It follows rmcp's own stdio transport where it decides something: a line of at most
//! [`MAX_LINE_BYTES`] (a longer one is dropped, answered with an error when it is a
//! request with an id), a UTF-8 BOM and blank lines ignored, text that is not JSON
//! ignored (answering it could start an error storm with a peer that echoes), and
//! well-formed JSON that is no MCP message answered with "Invalid Request" unless it
//! is a notification.
//!
//! rmcp serves each request on a task of its own and writes each message on another,
//! so a client that sends without reading (or faster than the servers answer) would
//! have rmcp hold requests and replies without end. The transport counts both, and
//! hands rmcp nothing more from the client while [`MAX_WRITING`] messages wait to be
//! written or [`MAX_SERVING`] requests are being served (64 and 128): the client's own writes then
//! wait (the stdin thread stops reading), and the gateway's memory stays bounded. The
//! second limit is lifted while rmcp waits for the client's answer to a question (an
//! upstream's elicitation, say), which would otherwise queue behind the requests it
//! holds back.
//!
//! Must not: interleave two messages on stdout (every line is written whole under one
//! lock: `switchboard_mcp::LineSink`), or buffer more than [`BATCHES_QUEUED`] reads of
//! the client's (each 64 KiB plus at most one line of [`MAX_LINE_BYTES`]).

use std::collections::HashSet;
use std::collections::VecDeque;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{
    ClientNotification, ErrorData, JsonRpcError, JsonRpcMessage, RequestId, ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use switchboard_mcp::{Frame, LineFramer, LineSink};
use tokio::sync::{Notify, mpsc};

use crate::raw_call::RawRelay;
use crate::stdio::Output;

/// The longest line read from the client (rmcp's own limit for stdio).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
const READ_CHUNK: usize = 64 * 1024;
/// How many reads' frames the stdin thread hands on before it waits for rmcp.
const BATCHES_QUEUED: usize = 4;
/// The stdin thread's stack: the relay parses a call's envelope there.
const READER_STACK: usize = 256 * 1024;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// How many of rmcp's messages may be waiting to be written before the transport
/// stops handing it the client's (see the module doc).
pub const MAX_WRITING: usize = 64;
/// How many of the client's requests rmcp may be serving before the transport stops
/// handing it more (see the module doc).
pub const MAX_SERVING: usize = 128;

/// What the transport counts to pace the client (see the module doc).
#[derive(Debug, Default)]
struct Flow {
    state: Mutex<FlowState>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct FlowState {
    /// rmcp's messages being written.
    writing: usize,
    /// The client's requests rmcp is serving (not yet answered).
    serving: HashSet<RequestId>,
    /// rmcp's requests to the client not yet answered.
    asking: HashSet<RequestId>,
}

impl Flow {
    fn with(&self, f: impl FnOnce(&mut FlowState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
        self.changed.notify_waiters();
    }

    /// Waits until rmcp may take another message from the client: fewer than
    /// [`MAX_WRITING`] of its messages being written, and fewer than [`MAX_SERVING`]
    /// requests being served — unless it waits for the client's answer to a question,
    /// which must not queue behind the requests it holds back.
    async fn room(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let open = match self.state.lock() {
                Ok(s) => {
                    s.writing < MAX_WRITING
                        && (s.serving.len() < MAX_SERVING || !s.asking.is_empty())
                }
                Err(_) => true,
            };
            if open {
                return;
            }
            changed.await;
        }
    }

    /// Notes a message rmcp takes from the client.
    fn taken(&self, m: &RxJsonRpcMessage<RoleServer>) {
        match m {
            JsonRpcMessage::Request(r) => self.with(|s| {
                s.serving.insert(r.id.clone());
            }),
            JsonRpcMessage::Response(r) => self.with(|s| {
                s.asking.remove(&r.id);
            }),
            JsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) => self.with(|s| {
                s.asking.remove(id);
            }),
            // A cancelled request is not answered.
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.with(|s| {
                        s.serving.remove(id);
                    });
                }
            }
            JsonRpcMessage::Error(_) => {}
        }
    }
}

/// One of rmcp's messages being written; when dropped (written, or given up), the
/// request it answers is no longer served.
struct Writing {
    flow: Arc<Flow>,
    answers: Option<RequestId>,
}

impl Writing {
    fn new(flow: &Arc<Flow>, m: &TxJsonRpcMessage<RoleServer>) -> Self {
        let answers = match m {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        flow.with(|s| {
            s.writing += 1;
            match m {
                JsonRpcMessage::Request(r) => {
                    s.asking.insert(r.id.clone());
                }
                // rmcp gave up its question (it timed out): no answer is awaited.
                JsonRpcMessage::Notification(n) => {
                    if let ServerNotification::CancelledNotification(c) = &n.notification
                        && let Some(id) = &c.params.request_id
                    {
                        s.asking.remove(id);
                    }
                }
                _ => {}
            }
        });
        Self {
            flow: flow.clone(),
            answers,
        }
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        let answers = self.answers.take();
        self.flow.with(|s| {
            s.writing -= 1;
            if let Some(id) = &answers {
                s.serving.remove(id);
            }
        });
    }
}

/// The client's stdout side, shared by rmcp and the raw relay.
pub(crate) type Writer = LineSink<Output>;

/// The line answering request `id` with `error`.
pub(crate) fn error_line(id: &impl serde::Serialize, error: &ErrorData) -> Vec<u8> {
    let reply = json!({"jsonrpc": "2.0", "id": id, "error": error});
    let mut line = reply.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// A line as the client wrote it, without a UTF-8 BOM or surrounding blanks.
fn clean(line: &[u8]) -> &[u8] {
    line.strip_prefix(UTF8_BOM).unwrap_or(line).trim_ascii()
}

/// The client's stdin, on its own thread (see the module doc).
fn read_client(input: OwnedFd, relay: RawRelay, batches: mpsc::Sender<Vec<Frame>>) {
    let mut input = std::fs::File::from(input);
    let mut framer = LineFramer::new(MAX_LINE_BYTES);
    let mut chunk = vec![0; READ_CHUNK];
    let mut out = Vec::new();
    loop {
        let n = match input.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Someone else made the shared descriptor non-blocking: wait for input.
                wait_readable(&input);
                continue;
            }
            Err(e) => {
                tracing::warn!("reading the client's stdin failed: {e}");
                0
            }
        };
        framer.read(&chunk[..n], &mut out);
        let batch: Vec<Frame> = out
            .drain(..)
            .filter(|frame| !matches!(frame, Frame::Message(line) if relay.take(clean(line))))
            .collect();
        if !batch.is_empty() && batches.blocking_send(batch).is_err() {
            return;
        }
        if n == 0 {
            return;
        }
    }
}

/// Blocks until `fd` has input (or an error or hang-up to report).
#[allow(unsafe_code)]
fn wait_readable(fd: &impl std::os::fd::AsRawFd) {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    unsafe {
        libc::poll(&mut p, 1, -1);
    }
}

/// The transport of one stdio session (see the module doc).
pub(crate) struct StdioServer {
    batches: mpsc::Receiver<Vec<Frame>>,
    frames: VecDeque<Frame>,
    out: Arc<Writer>,
    flow: Arc<Flow>,
    relay: RawRelay,
}

impl StdioServer {
    /// The session's transport, reading `input` on a thread it starts: `out` is the
    /// writer `relay` answers on too.
    pub(crate) fn new(input: OwnedFd, out: Arc<Writer>, relay: RawRelay) -> std::io::Result<Self> {
        let (tx, batches) = mpsc::channel(BATCHES_QUEUED);
        let reader = relay.clone();
        std::thread::Builder::new()
            .name("gateway-stdin".into())
            .stack_size(READER_STACK)
            .spawn(move || read_client(input, reader, tx))?;
        Ok(Self {
            batches,
            frames: VecDeque::new(),
            out,
            flow: Arc::default(),
            relay,
        })
    }

    /// The message `line` holds for rmcp, or `None` (taken by the relay, blank, or not
    /// a message; an answer the client is owed has been written).
    fn message(&mut self, line: Vec<u8>) -> Option<RxJsonRpcMessage<RoleServer>> {
        // Calls the relay takes were taken on the stdin thread.
        let line = clean(&line);
        if line.is_empty() {
            return None;
        }
        let e = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            Ok(m) => return Some(m),
            Err(e) => e,
        };
        use serde_json::error::Category;
        if matches!(e.classify(), Category::Syntax | Category::Eof) {
            tracing::debug!("ignoring a line from the client that is not JSON: {e}");
            return None;
        }
        // JSON, but no MCP message: a request is told so; a notification is not answered.
        let value: Value = serde_json::from_slice(line).ok()?;
        let id = value.get("id")?.clone();
        tracing::debug!("a message from the client is no MCP message: {e}");
        self.answer_error(
            id,
            ErrorData::invalid_request(format!("Invalid request: {e}"), None),
        );
        None
    }

    /// Answers request `id` with `error` without waiting (`receive` may be dropped at
    /// any await, and a line must never be left half written).
    fn answer_error(&self, id: Value, error: ErrorData) {
        if let Err(e) = self.out.write_line_now(error_line(&id, &error)) {
            tracing::debug!("could not answer the client: {e}");
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        self.relay.end();
    }
}

impl Transport<RoleServer> for StdioServer {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        let writing = Writing::new(&self.flow, &item);
        async move {
            let _writing = writing;
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            out.write_line(&line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        // Cancel-safe: nothing is taken before this wait ends.
        self.flow.room().await;
        loop {
            let Some(frame) = self.frames.pop_front() else {
                // Cancel-safe: a batch received is kept before the next await.
                match self.batches.recv().await {
                    Some(batch) => {
                        self.frames.extend(batch);
                        continue;
                    }
                    None => break,
                }
            };
            match frame {
                Frame::Message(line) => {
                    if let Some(m) = self.message(line) {
                        self.flow.taken(&m);
                        return Some(m);
                    }
                }
                Frame::Oversized { envelope, bytes } => {
                    tracing::warn!(
                        "a message from the client of over {MAX_LINE_BYTES} bytes was dropped ({bytes} bytes seen)"
                    );
                    if let (true, Some(id)) = (envelope.has_method, envelope.id) {
                        let text = format!(
                            "the request is larger than the gateway reads ({MAX_LINE_BYTES} bytes); it was dropped"
                        );
                        self.answer_error(id, ErrorData::invalid_request(text, None));
                    }
                }
            }
        }
        // stdin ended.
        self.relay.end();
        None
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.relay.end();
        self.out.close().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn from_client(v: Value) -> RxJsonRpcMessage<RoleServer> {
        serde_json::from_value(v).unwrap()
    }

    fn to_client(v: Value) -> TxJsonRpcMessage<RoleServer> {
        serde_json::from_value(v).unwrap()
    }

    fn request(id: u64) -> RxJsonRpcMessage<RoleServer> {
        from_client(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
    }

    fn answer(id: u64) -> TxJsonRpcMessage<RoleServer> {
        to_client(json!({"jsonrpc": "2.0", "id": id, "result": {}}))
    }

    async fn open(flow: &Flow) -> bool {
        tokio::time::timeout(Duration::from_millis(50), flow.room())
            .await
            .is_ok()
    }

    /// The transport stops taking the client's messages while too many of rmcp's wait
    /// to be written or too many requests are served, and opens again as they end —
    /// at once, whatever rmcp waits for the client to answer.
    #[tokio::test]
    async fn the_client_is_paced_by_what_waits() {
        let flow = Arc::new(Flow::default());
        assert!(open(&flow).await);

        // Messages waiting to be written.
        let writing: Vec<_> = (0..MAX_WRITING as u64)
            .map(|i| Writing::new(&flow, &answer(10_000 + i)))
            .collect();
        assert!(!open(&flow).await);
        drop(writing);
        assert!(open(&flow).await);

        // Requests being served; an answer written ends one, a cancellation another.
        for id in 0..MAX_SERVING as u64 {
            flow.taken(&request(id));
        }
        assert!(!open(&flow).await);
        drop(Writing::new(&flow, &answer(0)));
        assert!(open(&flow).await);
        flow.taken(&request(0));
        assert!(!open(&flow).await);
        flow.taken(&from_client(json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": 1}})));
        assert!(open(&flow).await);
        flow.taken(&request(1));
        assert!(!open(&flow).await);

        // rmcp asks the client: its answer must not wait behind the requests held back.
        let question = to_client(json!({"jsonrpc": "2.0", "id": 7,
            "method": "elicitation/create", "params": {"message": "?",
            "requestedSchema": {"type": "object", "properties": {}}}}));
        drop(Writing::new(&flow, &question));
        assert!(open(&flow).await, "held back while waiting for an answer");
        flow.taken(&from_client(json!({"jsonrpc": "2.0", "id": 7,
            "result": {"action": "decline"}})));
        assert!(!open(&flow).await);
        // A question rmcp gave up on opens nothing either.
        drop(Writing::new(&flow, &question));
        assert!(open(&flow).await);
        drop(Writing::new(
            &flow,
            &to_client(json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": 7}})),
        ));
        assert!(!open(&flow).await);
    }

    /// A waiter is woken when room comes, not left asleep.
    #[tokio::test]
    async fn a_waiting_receive_wakes_when_room_comes() {
        let flow = Arc::new(Flow::default());
        let writing: Vec<_> = (0..MAX_WRITING as u64)
            .map(|i| Writing::new(&flow, &answer(i)))
            .collect();
        let waiter = {
            let flow = flow.clone();
            tokio::spawn(async move { flow.room().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(writing);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter was not woken")
            .unwrap();
    }
}
