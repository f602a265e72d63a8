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
//! Must not: interleave two messages on stdout (every line is written whole under one
//! lock: `switchboard_mcp::LineSink`), or buffer more than [`BATCHES_QUEUED`] reads of
//! the client's (each 64 KiB plus at most one line of [`MAX_LINE_BYTES`]).

use std::collections::VecDeque;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use switchboard_mcp::{Frame, LineFramer, LineSink};
use tokio::sync::mpsc;

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
        if n == 0 {
            framer.finish(&mut out);
        } else {
            framer.push(&chunk[..n], &mut out);
        }
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
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            out.write_line(&line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
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
