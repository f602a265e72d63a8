//! Tool pinning against "rug pulls": a server that changes a tool after the user
//! started relying on it.
//!
//! Owns the fingerprint of a tool's definition ([`fingerprint`]), the pins file
//! (`$SWITCHBOARD_HOME/pins.json`: per server name *and* identity, so another server
//! reusing a name does not inherit pins; written atomically, 0600, under a lock, re-read
//! before each change so that concurrent processes merge), and the verdict on a tool
//! list ([`PinStore::review`]):
//!
//! - a tool seen for the first time is pinned and offered (trust on first use);
//! - a tool whose definition differs from its pin is withheld, and the new definition
//!   is recorded as *pending* so that `switchboard mcp pins` can show the difference;
//! - a new tool whose definition, name aside, equals a pinned tool that is gone is a
//!   rename, withheld the same way;
//! - a pins file that cannot be read or is not valid withholds every tool of the
//!   servers it would judge (never "trust everything"), with an error naming the file
//!   and the fix;
//! - at most [`MAX_TOOLS_PER_SERVER`] (512) names are recorded per server; a new name
//!   past that is withheld, not recorded.
//!
//! A server's identity is its command line (and cwd) or its URL without credentials or
//! query, so a rotated secret keeps the pins. Only `pinTools: false` on the server's
//! spec skips pinning (`trust` does not); which file may set it is `switchboard-config`'s
//! rule, and the bundled demo server is exempt (part of the binary). Front ends that call a tool by
//! name check [`Host::withheld_tool`](crate::Host::withheld_tool) first.
//!
//! It must not decide anything else about a tool (filters are the host's, confirmation
//! the front end's) and never talks to a server: the host hands it the lists.

mod changes;
mod file;
mod fingerprint;

use std::path::{Path, PathBuf};

use serde::Serialize;
use switchboard_mcp::Target;
use switchboard_mcp::model::Tool;

pub use changes::PendingChange;
pub use file::{PinnedDefinition, ServerPins, ToolPin};
pub use fingerprint::{definition, fingerprint, fingerprint_of};

use fingerprint::{fingerprint_without_name, kept};

/// The pins file's name in Switchboard's home folder.
pub const PINS_FILE: &str = "pins.json";

/// The most tool names recorded for one server: a server inventing names at every start
/// cannot grow the file without limit (a new name past it is withheld, not recorded).
pub const MAX_TOOLS_PER_SERVER: usize = 512;

/// Why pinning could not give a verdict, or an accept could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error(
        "the pins file {} is not valid: {reason}. Fix it, or move it away (`mv {} {}.bad`): every tool is then pinned again the next time it is seen",
        path.display(), path.display(), path.display()
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot read the pins file {}: {source}; check its permissions", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the pins file: {0}")]
    File(switchboard_config::ReplaceError),
    #[error("cannot lock {}: {reason}", path.display())]
    Lock { path: PathBuf, reason: String },
    #[error(
        "server `{server}` has no change of `{tool}` waiting to be accepted; `switchboard mcp pins {server}` lists what is waiting"
    )]
    NothingToAccept { server: String, tool: String },
}

/// Which server a set of pins belongs to: its name and what it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerKey {
    pub name: String,
    /// `stdio:<command line>[ (in <cwd>)]` or `url:<URL without credentials or query>`.
    pub identity: String,
}

impl ServerKey {
    /// The key of server `name` reached at `target`. The environment and headers are
    /// not part of it (a rotated secret keeps the pins); a query string is dropped
    /// (it may hold one).
    pub fn new(name: impl Into<String>, target: &Target) -> Self {
        let identity = match target {
            Target::Stdio(s) => {
                let mut id = format!("stdio:{}", target.display());
                if let Some(cwd) = &s.cwd {
                    id.push_str(&format!(" (in {})", cwd.display()));
                }
                id
            }
            Target::Http { url, .. } | Target::Sse { url, .. } | Target::Auto { url, .. } => {
                format!("url:{}", switchboard_net::redacted(url))
            }
        };
        Self {
            name: name.into(),
            identity,
        }
    }
}

/// Why a tool is not offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum WithheldReason {
    /// Its definition differs from the one pinned.
    Changed,
    /// It is new, and looks like the pinned tool `from` under another name.
    Renamed { from: String },
    /// The pins could not be checked (the error names the file and the fix).
    Unverified { error: String },
}

/// A tool the server lists but the host does not offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WithheldTool {
    pub name: String,
    #[serde(flatten)]
    pub reason: WithheldReason,
}

impl WithheldTool {
    /// A few words on why (`changed since pinned`, `renamed from x`, …).
    pub fn why(&self) -> String {
        match &self.reason {
            WithheldReason::Changed => "changed since pinned".into(),
            WithheldReason::Renamed { from } => format!("renamed from `{from}`"),
            WithheldReason::Unverified { .. } => "pin not checked".into(),
        }
    }

    /// The whole story for someone who tried to use it, with what to do.
    pub fn message(&self, server: &str) -> String {
        match &self.reason {
            WithheldReason::Changed => format!(
                "tool `{}` of server `{server}` changed since it was pinned, so it is withheld until you accept it: review the change with `switchboard mcp pins {server}`, then `switchboard mcp pins accept {server} {}`",
                self.name, self.name
            ),
            WithheldReason::Renamed { from } => format!(
                "tool `{}` of server `{server}` looks like the pinned tool `{from}` under a new name, so it is withheld until you accept it: review it with `switchboard mcp pins {server}`, then `switchboard mcp pins accept {server} {}`",
                self.name, self.name
            ),
            WithheldReason::Unverified { error } => format!(
                "tool `{}` of server `{server}` is withheld because its pin cannot be checked: {error}",
                self.name
            ),
        }
    }
}

/// The verdict on one tool list.
#[derive(Debug, Clone, Default)]
pub struct Review {
    /// Offered, in the server's order.
    pub offered: Vec<Tool>,
    /// Withheld, in the server's order.
    pub withheld: Vec<WithheldTool>,
}

impl Review {
    /// Every tool withheld because the pins cannot be checked.
    pub fn unverified(tools: &[Tool], error: &dyn std::fmt::Display) -> Self {
        let error = error.to_string();
        Self {
            offered: Vec::new(),
            withheld: tools
                .iter()
                .map(|t| WithheldTool {
                    name: t.name.to_string(),
                    reason: WithheldReason::Unverified {
                        error: error.clone(),
                    },
                })
                .collect(),
        }
    }
}

/// What to accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accept {
    /// Every waiting change of the server.
    All,
    /// The waiting change of this tool.
    Tool(String),
}

/// The pins file and the rules over it. Cheap to clone; holds no open file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinStore {
    path: PathBuf,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl PinStore {
    /// Pins kept in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Pins kept in Switchboard's home folder (`<home>/pins.json`).
    pub fn in_home(home: &Path) -> Self {
        Self::new(home.join(PINS_FILE))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Everything pinned, every server (a missing file: none).
    pub fn servers(&self) -> Result<Vec<ServerPins>, PinError> {
        file::read(&self.path)
    }

    /// Judges `tools` (the list `key`'s server just gave) against its pins, pins the
    /// tools seen for the first time and records changed definitions as pending.
    /// Blocking (file I/O under a lock): call it off the async threads.
    pub fn review(&self, key: &ServerKey, tools: &[Tool]) -> Result<Review, PinError> {
        let _lock = file::lock(&self.path)?;
        let mut servers = file::read(&self.path)?;
        let at = now();
        let idx = match servers
            .iter()
            .position(|s| s.name == key.name && s.identity == key.identity)
        {
            Some(i) => i,
            None => {
                servers.push(ServerPins {
                    name: key.name.clone(),
                    identity: key.identity.clone(),
                    tools: Default::default(),
                });
                servers.len() - 1
            }
        };
        let entry = &mut servers[idx];
        let listed: std::collections::HashSet<&str> =
            tools.iter().map(|t| t.name.as_ref()).collect();
        let mut review = Review::default();
        let mut dirty = false;
        for tool in tools {
            let name = tool.name.to_string();
            let def = definition(tool);
            let sha = fingerprint_of(&def);
            let without = fingerprint_without_name(&def);
            let record = |renamed_from: Option<String>| PinnedDefinition {
                sha256: sha.clone(),
                sha256_without_name: without.clone(),
                definition: kept(&def),
                at,
                renamed_from,
            };
            let pinned_sha = entry
                .tools
                .get(&name)
                .and_then(|t| t.pinned.as_ref())
                .map(|p| p.sha256.clone());
            match pinned_sha {
                Some(p) if p == sha => {
                    if let Some(t) = entry.tools.get_mut(&name)
                        && t.pending.take().is_some()
                    {
                        dirty = true;
                    }
                    review.offered.push(tool.clone());
                }
                Some(_) => {
                    if let Some(t) = entry.tools.get_mut(&name)
                        && t.pending.as_ref().is_none_or(|p| p.sha256 != sha)
                    {
                        t.pending = Some(record(None));
                        dirty = true;
                    }
                    review.withheld.push(WithheldTool {
                        name,
                        reason: WithheldReason::Changed,
                    });
                }
                None if !entry.tools.contains_key(&name)
                    && entry.tools.len() >= MAX_TOOLS_PER_SERVER =>
                {
                    review.withheld.push(WithheldTool {
                        name,
                        reason: WithheldReason::Unverified {
                            error: format!(
                                "server `{}` already has {MAX_TOOLS_PER_SERVER} tool names recorded in {}, the most kept for one server; remove the names it no longer has from its entry (or the whole entry, to pin its tools again)",
                                key.name,
                                self.path.display()
                            ),
                        },
                    });
                }
                None => {
                    let renamed_from = entry
                        .tools
                        .iter()
                        .find(|(n, t)| {
                            !listed.contains(n.as_str())
                                && t.pinned
                                    .as_ref()
                                    .is_some_and(|p| p.sha256_without_name == without)
                        })
                        .map(|(n, _)| n.clone());
                    match renamed_from {
                        Some(from) => {
                            let t = entry.tools.entry(name.clone()).or_insert(ToolPin {
                                pinned: None,
                                pending: None,
                            });
                            if t.pending.as_ref().is_none_or(|p| {
                                p.sha256 != sha || p.renamed_from.as_ref() != Some(&from)
                            }) {
                                t.pending = Some(record(Some(from.clone())));
                                dirty = true;
                            }
                            review.withheld.push(WithheldTool {
                                name,
                                reason: WithheldReason::Renamed { from },
                            });
                        }
                        None => {
                            entry.tools.insert(
                                name,
                                ToolPin {
                                    pinned: Some(record(None)),
                                    pending: None,
                                },
                            );
                            dirty = true;
                            review.offered.push(tool.clone());
                        }
                    }
                }
            }
        }
        if servers[idx].tools.is_empty() {
            servers.remove(idx);
        }
        if dirty {
            file::write(&self.path, &servers)?;
        }
        Ok(review)
    }

    /// Accepts the waiting change(s) of `key`'s server: each pending definition becomes
    /// the pin (a rename's old name is dropped). Returns the tools accepted.
    pub fn accept(&self, key: &ServerKey, which: &Accept) -> Result<Vec<String>, PinError> {
        let _lock = file::lock(&self.path)?;
        let mut servers = file::read(&self.path)?;
        let nothing = |tool: &str| PinError::NothingToAccept {
            server: key.name.clone(),
            tool: tool.to_string(),
        };
        let Some(entry) = servers
            .iter_mut()
            .find(|s| s.name == key.name && s.identity == key.identity)
        else {
            return match which {
                Accept::All => Ok(Vec::new()),
                Accept::Tool(t) => Err(nothing(t)),
            };
        };
        let names: Vec<String> = match which {
            Accept::All => entry
                .tools
                .iter()
                .filter(|(_, t)| t.pending.is_some())
                .map(|(n, _)| n.clone())
                .collect(),
            Accept::Tool(t) => {
                if entry.tools.get(t).is_none_or(|p| p.pending.is_none()) {
                    return Err(nothing(t));
                }
                vec![t.clone()]
            }
        };
        for name in &names {
            let Some(t) = entry.tools.get_mut(name) else {
                continue;
            };
            let Some(mut pending) = t.pending.take() else {
                continue;
            };
            let from = pending.renamed_from.take();
            pending.at = now();
            t.pinned = Some(pending);
            if let Some(from) = from {
                entry.tools.remove(&from);
            }
        }
        if !names.is_empty() {
            file::write(&self.path, &servers)?;
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests;
