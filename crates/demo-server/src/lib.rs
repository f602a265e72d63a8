//! The demo MCP server bundled with Switchboard.
//!
//! Switchboard runs it as its embedded default server (over stdio, via a
//! hidden subcommand that calls [`serve_stdio`]) and benchmarks reach it over
//! Streamable HTTP ([`serve_http`]). It offers a handful of tools (echo, add,
//! a slow tool that reports progress and honours cancellation, an image, an
//! MCP App clock with its UI resource, a resource link and a failing tool),
//! two resources, a resource template and two prompts.

mod assets;
mod error;
mod options;
mod serve;
mod server;
mod time;

pub use assets::{CLOCK_UI_MIME_TYPE, CLOCK_UI_URI, GREETING_TEMPLATE, README_URI, TINY_PNG};
pub use error::DemoError;
pub use options::DemoOptions;
pub use serve::{serve_http, serve_http_with_shutdown, serve_stdio};
pub use server::{DemoServer, SERVER_NAME};
pub use time::rfc3339_utc;
