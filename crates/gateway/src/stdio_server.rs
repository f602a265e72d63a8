//! The downstream stdio transport: the client's newline-delimited JSON-RPC for rmcp's
//! server, with the calls the raw relay takes (`crate::raw_call`) set aside before
//! rmcp parses them, and one writer that rmcp's messages and the relay's replies share.
//!
//! It follows rmcp's own stdio transport where it decides something: a line of at most
//! [`MAX_LINE_BYTES`] (a longer one is dropped, answered with an error when it is a
//! request with an id), a UTF-8 BOM and blank lines ignored, text that is not JSON
//! ignored (answering it could start an error storm with a peer that echoes), and
//! well-formed JSON that is no MCP message answered with "Invalid Request" unless it
//! is a notification.
//!
//! Must not: interleave two messages on stdout (every line is written whole under one
//! lock, never held across anything but that write), or buffer more than one line of
//! the client's beyond [`MAX_LINE_BYTES`].

use std::collections::VecDeque;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use switchboard_mcp::{Frame, LineFramer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex as AsyncMutex;

use crate::raw_call::RawRelay;
use crate::stdio::{Input, Output};

/// The longest line read from the client (rmcp's own limit for stdio).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
const READ_CHUNK: usize = 64 * 1024;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The client's stdout side, shared by rmcp and the raw relay; `None` once closed.
#[derive(Debug)]
pub(crate) struct Writer(AsyncMutex<Option<Output>>);

/// The line answering request `id` with `error`.
pub(crate) fn error_line(id: &impl serde::Serialize, error: &ErrorData) -> Vec<u8> {
    let reply = json!({"jsonrpc": "2.0", "id": id, "error": error});
    let mut line = reply.to_string().into_bytes();
    line.push(b'\n');
    line
}

impl Writer {
    pub(crate) fn new(output: Output) -> Self {
        Self(AsyncMutex::new(Some(output)))
    }

    /// Writes one whole line (`line` ends with `\n`) and flushes it.
    pub(crate) async fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut out = self.0.lock().await;
        let Some(out) = out.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the client's stdout is closed",
            ));
        };
        out.write_all(line).await?;
        out.flush().await
    }

    async fn close(&self) {
        self.0.lock().await.take();
    }
}

/// The transport of one stdio session (see the module doc).
pub(crate) struct StdioServer {
    input: Input,
    framer: LineFramer,
    frames: VecDeque<Frame>,
    chunk: Vec<u8>,
    eof: bool,
    out: Arc<Writer>,
    relay: RawRelay,
}

impl StdioServer {
    /// The session's transport: `out` is the writer `relay` answers on too.
    pub(crate) fn new(input: Input, out: Arc<Writer>, relay: RawRelay) -> Self {
        Self {
            input,
            framer: LineFramer::new(MAX_LINE_BYTES),
            frames: VecDeque::new(),
            chunk: vec![0; READ_CHUNK],
            eof: false,
            relay,
            out,
        }
    }

    /// The message `line` holds for rmcp, or `None` (taken by the relay, blank, or not
    /// a message; an answer the client is owed has been written).
    fn message(&mut self, line: Vec<u8>) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(&line);
        let line = line.trim_ascii();
        if line.is_empty() || self.relay.take(line) {
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

    /// Answers request `id` with `error`, on a task of its own: `receive` may be dropped
    /// at any await, and a line must never be left half written.
    fn answer_error(&self, id: Value, error: ErrorData) {
        let line = error_line(&id, &error);
        let out = self.out.clone();
        tokio::spawn(async move {
            let _ = out.write_line(&line).await;
        });
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
            while let Some(frame) = self.frames.pop_front() {
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
            if self.eof {
                self.relay.end();
                return None;
            }
            // Cancel-safe: a read that completes is framed before the next await.
            let n = match self.input.read(&mut self.chunk).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!("reading the client's stdin failed: {e}");
                    0
                }
            };
            let mut frames = Vec::new();
            if n == 0 {
                self.eof = true;
                self.framer.finish(&mut frames);
            } else {
                self.framer.push(&self.chunk[..n], &mut frames);
            }
            self.frames.extend(frames);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.relay.end();
        self.out.close().await;
        Ok(())
    }
}
