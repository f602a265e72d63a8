//! The tool names `switchboard mcp call SERVER <Tab>` offers, kept between runs:
//! `mcp list` (which connects every server anyway) writes each connected server's tool
//! names to `$SWITCHBOARD_HOME/tool-names.json`, and completion reads them without
//! connecting (completion never connects: a Tab must not start a command or reach a
//! server, and must answer at once).
//!
//! Each server's names are stored with the SHA-256 of its target (command line or
//! URL, as the host shows it), and offered only while the settings still point the
//! server at that target, so a server renamed or pointed elsewhere is never offered
//! another's tools. Names are server text: only those made of the characters MCP
//! tool names use (`A-Z a-z 0-9 _ - . /`, at most 128) are kept, at most
//! [`MAX_TOOLS`] per server; the file is read up to [`MAX_FILE`]. Written through
//! `switchboard_config::replace_file` (Switchboard's own file, 0600).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use switchboard_host::{ServerSnapshot, ServerStatus};

/// Most names kept per server.
const MAX_TOOLS: usize = 2000;
/// Largest cache file read.
const MAX_FILE: u64 = 4 * 1024 * 1024;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Cache {
    #[serde(default)]
    servers: BTreeMap<String, Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    /// SHA-256 (hex) of the server's target.
    target: String,
    tools: Vec<String>,
}

/// Where the cache lives.
pub fn path() -> Option<PathBuf> {
    crate::ctx::home_dir()
        .ok()
        .map(|h| h.join("tool-names.json"))
}

fn fingerprint(target: &str) -> String {
    Sha256::digest(target.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a tool name can be offered to a shell as it is.
fn completable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

fn load(path: &Path) -> Cache {
    let Ok(file) = std::fs::File::open(path) else {
        return Cache::default();
    };
    let mut text = String::new();
    if file.take(MAX_FILE).read_to_string(&mut text).is_err() {
        return Cache::default();
    }
    serde_json::from_str(&text).unwrap_or_default()
}

/// After `mcp list`: the connected servers' names replace what was kept for them;
/// servers no longer in `configured` are dropped, the others are kept as they were.
pub fn save(path: &Path, snapshot: &[ServerSnapshot], configured: &[String]) {
    let mut cache = load(path);
    cache.servers.retain(|name, _| configured.contains(name));
    for s in snapshot {
        if s.status != ServerStatus::Connected || !configured.contains(&s.name) {
            continue;
        }
        let tools: Vec<String> = s
            .tools
            .iter()
            .map(|t| t.name.to_string())
            .filter(|n| completable(n))
            .take(MAX_TOOLS)
            .collect();
        cache.servers.insert(
            s.name.clone(),
            Entry {
                target: fingerprint(&s.target),
                tools,
            },
        );
    }
    let written = serde_json::to_vec_pretty(&cache)
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            switchboard_config::replace_file(path, &bytes, switchboard_config::Replace::OWNED)
                .map_err(std::io::Error::other)
        });
    if let Err(e) = written {
        tracing::debug!("cannot write the tool-name cache {}: {e}", path.display());
    }
}

/// The names kept for `server` while its target is still `target`.
pub fn tools(path: &Path, server: &str, target: &str) -> Vec<String> {
    let mut cache = load(path);
    match cache.servers.remove(server) {
        Some(e) if e.target == fingerprint(target) => e
            .tools
            .into_iter()
            .filter(|n| completable(n))
            .take(MAX_TOOLS)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_are_offered() {
        for ok in ["echo", "get_weather", "a.b-c/d", "X1"] {
            assert!(completable(ok), "{ok}");
        }
        for bad in ["", "a b", "a\nb", "$(rm)", "a;b", "é", &"x".repeat(129)] {
            assert!(!completable(bad), "{bad}");
        }
    }

    #[test]
    fn names_follow_the_target_and_garbage_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tool-names.json");
        let cache = Cache {
            servers: BTreeMap::from([(
                "a".to_string(),
                Entry {
                    target: fingerprint("http://x/mcp"),
                    tools: vec!["one".into(), "bad name".into()],
                },
            )]),
        };
        std::fs::write(&p, serde_json::to_vec(&cache).unwrap()).unwrap();
        assert_eq!(tools(&p, "a", "http://x/mcp"), ["one"]);
        assert!(tools(&p, "a", "http://elsewhere/mcp").is_empty());
        assert!(tools(&p, "b", "http://x/mcp").is_empty());
        std::fs::write(&p, "not json").unwrap();
        assert!(tools(&p, "a", "http://x/mcp").is_empty());
    }
}
