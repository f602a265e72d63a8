//! One integration-test binary for this crate: OAuth against real authorization servers and protected MCP servers.
//! Each file beside this one is a module of it (one link instead of one per file,
//! which keeps CI's build small and fast); `cargo nextest` still runs every test in
//! its own process.
// Test code: a failed unwrap is a failed test (clippy.toml allows it only inside `#[test]`
// functions, and the helpers here are outside them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod grants;
mod oidc;
mod python_peer;
mod step_up;
mod ts_peer;
