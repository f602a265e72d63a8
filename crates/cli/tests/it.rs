//! One integration-test binary for this crate: the `switchboard` binaries, driven as a user drives them.
//! Each file beside this one is a module of it (one link instead of one per file,
//! which keeps CI's build small and fast); `cargo nextest` still runs every test in
//! its own process.
// Test code: a failed unwrap is a failed test (clippy.toml allows it only inside `#[test]`
// functions, and the helpers here are outside them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod auth;
mod chat;
mod chat_openai;
mod chat_session;
mod cli;
mod color;
mod completions;
mod conformance;
mod db;
mod first_steps;
mod first_steps_args;
mod gateway;
mod gateway_inspector;
mod gateway_lean;
mod gateway_pins;
mod gateway_raw;
mod gateway_trust;
mod import;
mod pins;
mod progress;
mod registry;
mod registry_mcpb;
mod run;
mod serve;
mod startup_limits;
mod team;
mod team_chat;
mod team_ops;
mod terminal;
mod trust;
mod untrusted;
