//! What the host knows about each server at a moment: its state, why, and what it offers.

use std::time::Duration;

use serde::Serialize;
use switchboard_mcp::model::{Prompt, Resource, ResourceTemplate, Tool};

use crate::pins::WithheldTool;

/// A server's state, exactly the words `mcp list --json` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerStatus {
    Disconnected,
    Connecting,
    Connected,
    Blocked,
    Disabled,
}

impl ServerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerStatus::Disconnected => "disconnected",
            ServerStatus::Connecting => "connecting",
            ServerStatus::Connected => "connected",
            ServerStatus::Blocked => "blocked",
            ServerStatus::Disabled => "disabled",
        }
    }
}

impl std::fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Authorization state of a remote server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthStatus {
    Authenticated,
    Expired,
    NeedsLogin,
}

/// A copy of one server's state, safe to hold while the host moves on.
#[derive(Debug, Clone)]
pub struct ServerSnapshot {
    pub name: String,
    pub status: ServerStatus,
    /// The configured transport: `stdio`, `http`, `sse`, or `http|sse` (auto).
    pub transport: String,
    /// The transport actually used, once connected.
    pub connected_via: Option<String>,
    /// The command line or URL.
    pub target: String,
    pub cwd: Option<String>,
    pub timeout: Option<Duration>,
    pub trust: bool,
    /// Where the server was configured (`user`, `project`, `file`, `default`).
    pub origin: String,
    pub tools: Vec<Tool>,
    /// Tools the server offers that `includeTools`/`excludeTools` hid.
    pub filtered_out: Vec<String>,
    /// Tools the server lists that are not offered because their definition changed
    /// since it was pinned (or the pins cannot be checked); not in `tools`.
    pub withheld: Vec<WithheldTool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub resource_templates: Vec<ResourceTemplate>,
    pub instructions: Option<String>,
    pub server_info: Option<(String, String)>,
    pub protocol_version: Option<String>,
    pub auth: Option<AuthStatus>,
    pub error: Option<String>,
    /// What the user can do about `error`.
    pub hint: Option<String>,
    /// Non-fatal problems (a list that failed while others worked).
    pub warnings: Vec<String>,
    /// Set when start-up was given up on after this long (a start-up timeout).
    pub gave_up_after: Option<Duration>,
}
