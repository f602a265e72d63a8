//! One integration-test binary for this crate: MCP connections against real and hostile peers.
//! Each file beside this one is a module of it (one link instead of one per file,
//! which keeps CI's build small and fast); `cargo nextest` still runs every test in
//! its own process.
// Test code: a failed unwrap is a failed test (clippy.toml allows it only inside `#[test]`
// functions, and the helpers here are outside them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hostile_bounds;
mod input_required;
mod list_watch;
mod net_door;
mod progress_order;
mod progress_timeout;
mod raw_lane;
mod sse_transport;
mod stdio_reader;
