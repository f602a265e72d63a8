//! `@modelcontextprotocol/server-everything` (Node), forced onto 127.0.0.1 by a preload.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::install::{ensure_peers, peers_dir};
use crate::process::{PeerProcess, free_port};

/// Which HTTP transport to start server-everything with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EverythingMode {
    /// Legacy HTTP+SSE: `GET /sse`, POSTs to the announced endpoint.
    Sse,
    /// Streamable HTTP on `/mcp`.
    StreamableHttp,
}

fn node_dir() -> PathBuf {
    peers_dir().join("node")
}

fn preload() -> PathBuf {
    node_dir().join("bind-loopback.cjs")
}

/// Path to server-everything's bin script (`dist/index.js`).
pub fn everything_bin() -> PathBuf {
    node_dir()
        .join("node_modules")
        .join("@modelcontextprotocol")
        .join("server-everything")
        .join("dist")
        .join("index.js")
}

/// Program and arguments for a stdio config entry:
/// `node --require <preload> <server-everything bin> stdio`.
pub fn everything_stdio_command() -> (String, Vec<String>) {
    ensure_peers();
    (
        "node".to_owned(),
        vec![
            "--require".to_owned(),
            preload().display().to_string(),
            everything_bin().display().to_string(),
            "stdio".to_owned(),
        ],
    )
}

/// Start server-everything over HTTP on a free loopback port and wait (30 s at most)
/// until it accepts connections. `url` is `http://127.0.0.1:P/sse` or `.../mcp`.
///
/// # Panics
/// If it cannot start or does not listen in time (the message quotes its output).
pub async fn spawn_everything(mode: EverythingMode) -> PeerProcess {
    ensure_peers();
    let port = free_port();
    let (arg, path) = match mode {
        EverythingMode::Sse => ("sse", "/sse"),
        EverythingMode::StreamableHttp => ("streamableHttp", "/mcp"),
    };
    let mut command = Command::new("node");
    command
        .arg(everything_bin())
        .arg(arg)
        .current_dir(node_dir())
        .env("PORT", port.to_string())
        .env(
            "NODE_OPTIONS",
            format!("--require \"{}\"", preload().display()),
        );
    let mut peer = PeerProcess::spawn(&format!("server-everything-{arg}"), command);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}{path}");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}
