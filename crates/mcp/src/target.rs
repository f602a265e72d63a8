//! Where a connection goes: the transport-level description of one MCP server.
//!
//! This is deliberately independent of the settings format so that library users can
//! connect to a server without a `settings.json` (see `switchboard-config` for that).

use std::path::PathBuf;

/// How to reach one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Spawn a local process and speak newline-delimited JSON-RPC on its stdin/stdout.
    Stdio(StdioTarget),
    /// Streamable HTTP (MCP 2025-03-26 and later; also the stateless 2026-07-28 revision).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The legacy HTTP+SSE transport of MCP 2024-11-05.
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// A URL with no declared type: Streamable HTTP first, then legacy SSE.
    Auto {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl Target {
    /// A one-line human description: the command line or the URL.
    pub fn display(&self) -> String {
        match self {
            Target::Stdio(s) => {
                let mut parts = vec![s.program.clone()];
                parts.extend(s.args.iter().cloned());
                parts.join(" ")
            }
            Target::Http { url, .. } | Target::Sse { url, .. } | Target::Auto { url, .. } => {
                url.clone()
            }
        }
    }
}

/// A process to spawn for a stdio server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioTarget {
    pub program: String,
    pub args: Vec<String>,
    /// The complete environment of the child (the child does not inherit ours).
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// The transport a connection ended up using.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    Stdio,
    /// Streamable HTTP with the `initialize` handshake (sessions, `Mcp-Session-Id`).
    StreamableHttp,
    /// Streamable HTTP, stateless 2026-07-28 revision (`server/discover`, no session).
    StatelessHttp,
    /// Legacy HTTP+SSE.
    Sse,
}

impl TransportKind {
    /// The short name shown to users (`stdio`, `http`, `sse`).
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::StreamableHttp => "http",
            TransportKind::StatelessHttp => "http (stateless)",
            TransportKind::Sse => "sse",
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
