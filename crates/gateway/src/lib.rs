//! `switchboard-gateway`: every configured MCP server served back out as one MCP
//! server, over stdio or Streamable HTTP.
//!
//! The gateway sits on a [`switchboard_host::Host`]: it offers what the host's
//! snapshots say each *connected* server offers (so `includeTools`/`excludeTools` and
//! anything else the host withholds apply), under collision-proof names
//! ([`names`]: `{server}__{tool}`) and URIs ([`uris`]), and relays each call to the
//! right connection with progress, cancellation, logging, the call's own `_meta`,
//! forwarded elicitation/sampling, the client's roots and its resource subscriptions
//! (`subscriptions`). Clients on protocol
//! 2026-07-28, which has no sessions and no server-to-client requests, are asked the
//! upstream's questions through `InputRequiredResult`s ([`InputTable`]) and hear list
//! changes on `subscriptions/listen` ([`serve_listen`]). Its own stdin/stdout are
//! read and written on the reactor when they are sockets or pipes (`stdio`). It never
//! opens an upstream connection itself and never passes an upstream credential
//! downstream.

mod audit;
mod catalog;
mod error;
mod gateway;
mod http;
mod input;
mod listen;
pub mod names;
mod raw_call;
mod server;
mod stdio;
mod stdio_server;
mod subscriptions;
pub mod uris;

pub use audit::{Audit, AuditEntry, error_class, withheld_uri};
pub use catalog::{Catalog, CatalogOptions, StatusLine, Withheld, downstream_reason};
pub use error::GatewayError;
pub use gateway::{Forwarded, Gateway, GatewayHooks, GatewayOptions, LOGGER};
pub use http::{HttpOptions, MCP_PATH, generate_token, serve_http};
pub use input::{
    CallKey, Detached, InputTable, MAX_PARKED, MAX_PARKED_PER_USER, Relayed, Retry, Upstream,
    takes_input_required, user_limit_error,
};
pub use listen::{ListsChanged, list_filter, notify_listener, serve_listen};
pub use server::{
    Completable, GatewayServer, SERVER_NAME, completed, relay_options, relay_progress, scrub_urls,
    send_progress, unroutable, upstream_error,
};
