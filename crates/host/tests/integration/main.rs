//! Integration tests of the connection (`switchboard-mcp`) and host layers against real
//! peers: server-everything (Node), the Python-SDK peer, and misbehaving stdio peers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod failures;
mod host_behaviour;
mod matrix;
mod pins;
mod reconnect;
