//! Workflow runs end to end: real MCP peers (server-everything, the Python-SDK server,
//! the demo server), the fake Gemini server, a local HTTP server, and validation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod gemini;
mod local;
mod openai;
mod peers;
mod validation;
