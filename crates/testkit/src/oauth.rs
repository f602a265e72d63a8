//! OAuth-protected MCP peers: the Python-SDK server in `tests/peers/python/oauth_server.py`
//! (MCP server and authorization server in one process) and the TypeScript SDK's
//! `simpleStreamableHttp.js --oauth` example (MCP server plus a separate authorization
//! server, URLs hard-coded to `localhost`), plus a stand-in browser that follows the
//! authorization redirect to the callback.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::install::{ensure_peers, peers_dir};
use crate::process::{PeerProcess, free_port};
use crate::python::python_bin;

/// `tests/peers/python/oauth_server.py`.
pub fn oauth_server_script() -> PathBuf {
    peers_dir().join("python").join("oauth_server.py")
}

/// `tests/peers/python/fake_browser.py`: `BROWSER` for tests. It GETs the URL it is
/// given and follows redirects (to the callback listener), like a browser whose user
/// approves at once.
pub fn fake_browser_script() -> PathBuf {
    peers_dir().join("python").join("fake_browser.py")
}

/// A `BROWSER` value that runs [`fake_browser_script`] with the venv's Python.
pub fn fake_browser_command() -> String {
    ensure_peers();
    format!(
        "{} {}",
        shell_quote(&python_bin().display().to_string()),
        shell_quote(&fake_browser_script().display().to_string())
    )
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Start the Python-SDK OAuth server on a free 127.0.0.1 port with `args`
/// (`--access-ttl 2`, `--step-up`, `--refuse-registration`, `--no-rotation`,
/// `--transport sse`), waiting until it listens. `url` is `http://127.0.0.1:P/mcp`
/// (the SSE endpoint is `/sse`).
///
/// # Panics
/// If it cannot start or does not listen within 30 s.
pub async fn spawn_oauth_python(args: &[&str]) -> PeerProcess {
    ensure_peers();
    let port = free_port();
    let mut command = Command::new(python_bin());
    command
        .arg(oauth_server_script())
        .arg("--port")
        .arg(port.to_string())
        .args(args)
        .current_dir(peers_dir().join("python"))
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let mut peer = PeerProcess::spawn("python-oauth", command);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}/mcp");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}

/// Start the TypeScript SDK's `simpleStreamableHttp.js --oauth` on two free ports
/// (MCP and authorization server), forced onto 127.0.0.1. `url` is
/// `http://localhost:P/mcp` (the example hard-codes `localhost`).
///
/// # Panics
/// If it cannot start or does not listen within 30 s.
pub async fn spawn_ts_oauth() -> PeerProcess {
    ensure_peers();
    let port = free_port();
    let auth_port = loop {
        let p = free_port();
        if p != port {
            break p;
        }
    };
    let node_dir = peers_dir().join("node");
    let script = node_dir.join(
        "node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js",
    );
    let mut command = Command::new("node");
    command
        .arg(script)
        .arg("--oauth")
        .current_dir(&node_dir)
        .env("MCP_PORT", port.to_string())
        .env("MCP_AUTH_PORT", auth_port.to_string())
        .env(
            "NODE_OPTIONS",
            format!(
                "--require \"{}\"",
                node_dir.join("bind-loopback.cjs").display()
            ),
        );
    let mut peer = PeerProcess::spawn("ts-oauth", command);
    peer.port = port;
    peer.url = format!("http://localhost:{port}/mcp");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer.wait_for_port(auth_port, Duration::from_secs(30)).await;
    peer
}

/// The Python OAuth peer's counters (`GET /test/stats`: registrations, authorizations,
/// code exchanges, refreshes, refresh failures), given its MCP URL or its base URL.
pub async fn oauth_peer_stats(url: &str) -> serde_json::Value {
    let base = url.trim_end_matches('/').trim_end_matches("/mcp");
    let answer = reqwest::get(format!("{base}/test/stats"))
        .await
        .unwrap_or_else(|e| panic!("GET {base}/test/stats: {e}"));
    answer
        .json()
        .await
        .unwrap_or_else(|e| panic!("{base}/test/stats is not JSON: {e}"))
}
