//! `switchboard-mcp`: one connection to one MCP server.
//!
//! Transports: stdio (a child process in its own process group), Streamable HTTP
//! (rmcp's client, with the stateless 2026-07-28 revision tried first and the
//! `initialize` handshake as fallback), and the legacy HTTP+SSE transport (ours).
//! Every request has a timeout; a timed-out or cancelled request sends
//! `notifications/cancelled`. What a server asks (elicitation, sampling, roots) is
//! answered by the embedder's [`ClientHooks`], whether it asks with a request of its
//! own or, on 2026-07-28, with an `InputRequiredResult` (the call is then retried with
//! the answers). This crate knows nothing about other servers, settings files or models.

mod connection;
mod error;
mod framing;
mod handler;
mod http_bounds;
mod line_sink;
mod raw;
mod sse;
mod stdio;
mod target;
mod token;

pub use connection::{
    CallOptions, ConnectOptions, Connection, MAX_LIST_PAGES, PROGRESS_CAP, ResourceSet,
};
pub use error::{ConnectError, RequestError};
pub use framing::{
    DEFAULT_MAX_MESSAGE_BYTES, Envelope, EnvelopeScan, Frame, LineFramer, SseEvent, SseFrame,
    SseParser,
};
pub use handler::{
    ClientHooks, DefaultHooks, Progress, ServerEvent, UI_EXTENSION_ID, decline_elicitation,
};
pub use line_sink::{BACKED_UP_LINES, LineSink, WriteNow};
pub use raw::{
    RawCall, RawDone, RawFault, RawLane, RawOutcome, RawReply, RawResult, RawTicket, SWEEP_EVERY,
    read_raw_reply,
};
pub use sse::{SseError, SseOptions, SseTransport};
pub use stdio::ChildGuard;
pub use target::{StdioTarget, Target, TransportKind};
pub use token::{TokenFuture, TokenSource, TokenStatus};

/// The MCP protocol types (re-exported from `rmcp`).
pub use rmcp::model;
