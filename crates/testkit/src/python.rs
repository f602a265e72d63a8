//! The Python-SDK peer (`tests/peers/python/server.py`) and the misbehaving stdio peers.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::install::{ensure_peers, peers_dir};
use crate::process::{PeerProcess, free_port};

/// How to run the Python-SDK server over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyMode {
    /// Legacy HTTP+SSE (`/sse`).
    Sse,
    /// Streamable HTTP with SSE replies and sessions (`/mcp`).
    StreamableHttp,
    /// Streamable HTTP with JSON replies (`--json-response`).
    Json,
    /// Streamable HTTP without sessions (`--stateless`).
    Stateless,
}

/// The venv's Python (`tests/peers/.venv/bin/python`).
pub fn python_bin() -> PathBuf {
    peers_dir().join(".venv").join("bin").join("python")
}

/// `tests/peers/python/server.py`.
pub fn python_server_script() -> PathBuf {
    peers_dir().join("python").join("server.py")
}

/// Program and arguments for the Python-SDK server over stdio.
pub fn python_stdio_command() -> (String, Vec<String>) {
    ensure_peers();
    (
        python_bin().display().to_string(),
        vec![
            python_server_script().display().to_string(),
            "--transport".to_owned(),
            "stdio".to_owned(),
        ],
    )
}

/// Program and arguments for a misbehaving stdio peer in `tests/peers/python/bad/`:
/// `exit_on_init`, `garbage`, `hang_init`, `no_tools`, `die_mid_call`, `hang_tool`
/// (a trailing `.py` is accepted).
///
/// # Panics
/// If there is no such peer.
pub fn bad_peer(name: &str) -> (String, Vec<String>) {
    ensure_peers();
    let file = if name.ends_with(".py") {
        name.to_owned()
    } else {
        format!("{name}.py")
    };
    let script = peers_dir().join("python").join("bad").join(file);
    assert!(
        script.is_file(),
        "no bad peer named {name:?} ({} does not exist)",
        script.display()
    );
    (
        python_bin().display().to_string(),
        vec![script.display().to_string()],
    )
}

/// Start the Python-SDK server over HTTP on a free loopback port with extra environment
/// `envs` (e.g. `SWITCHBOARD_CANCEL_LOG`), waiting (30 s at most) until it accepts
/// connections. `url` is `http://127.0.0.1:P/sse` for [`PyMode::Sse`], else `.../mcp`.
///
/// # Panics
/// If it cannot start or does not listen in time (the message quotes its output).
pub async fn spawn_python(mode: PyMode, envs: &[(&str, &str)]) -> PeerProcess {
    ensure_peers();
    let port = free_port();
    let mut command = Command::new(python_bin());
    command
        .arg(python_server_script())
        .arg("--port")
        .arg(port.to_string())
        .current_dir(peers_dir().join("python"))
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let path = match mode {
        PyMode::Sse => {
            command.args(["--transport", "sse"]);
            "/sse"
        }
        PyMode::StreamableHttp => {
            command.args(["--transport", "streamable-http"]);
            "/mcp"
        }
        PyMode::Json => {
            command.args(["--transport", "streamable-http", "--json-response"]);
            "/mcp"
        }
        PyMode::Stateless => {
            command.args(["--transport", "streamable-http", "--stateless"]);
            "/mcp"
        }
    };
    command.envs(envs.iter().copied());
    let mut peer = PeerProcess::spawn(&format!("python-{mode:?}"), command);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}{path}");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}

/// Start an HTTP peer from `tests/peers/python/bad/` (e.g. `flood_http`) on a free loopback
/// port: `--port P` then `args`, with extra environment `envs`, waiting (30 s at most) until
/// it accepts connections. `url` is `http://127.0.0.1:P` (add the path).
///
/// # Panics
/// If there is no such peer, or it does not listen in time.
pub async fn spawn_bad_http(name: &str, args: &[&str], envs: &[(&str, &str)]) -> PeerProcess {
    let (python, script) = bad_peer(name);
    let port = free_port();
    let mut command = Command::new(python);
    command
        .args(script)
        .arg("--port")
        .arg(port.to_string())
        .args(args)
        .current_dir(peers_dir().join("python").join("bad"))
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(envs.iter().copied());
    let mut peer = PeerProcess::spawn(&format!("bad-{name}"), command);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}
