//! One integration-test binary for this crate: the web app and team mode over real listeners, peers and Chromium.
//! Each file beside this one is a module of it (one link instead of one per file,
//! which keeps CI's build small and fast); `cargo nextest` still runs every test in
//! its own process.
// Test code: a failed unwrap is a failed test (clippy.toml allows it only inside `#[test]`
// functions, and the helpers here are outside them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[macro_use]
mod team_support;

mod api;
mod browser;
mod links_js;
mod oauth_discovery;
mod pins;
mod registry;
mod remote;
mod team;
mod team_apps;
mod team_apps_browser;
mod team_browser;
mod team_catalog;
mod team_chat;
mod team_chat_bounds;
mod team_elicit;
mod team_gateway;
mod team_gateway_bounds;
mod team_isolation;
mod team_metrics;
mod team_oauth;
mod team_oauth_login;
mod team_parking;
mod team_replicas;
mod team_secrets;
mod team_signin;
mod team_workflows;
mod trust;
mod workflows;
