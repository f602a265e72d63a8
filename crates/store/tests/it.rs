//! One integration-test binary for this crate: the store on SQLite and on a throwaway PostgreSQL cluster.
//! Each file beside this one is a module of it (one link instead of one per file,
//! which keeps CI's build small and fast); `cargo nextest` still runs every test in
//! its own process.
// Test code: a failed unwrap is a failed test (clippy.toml allows it only inside `#[test]`
// functions, and the helpers here are outside them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog;
mod identity;
mod store;
