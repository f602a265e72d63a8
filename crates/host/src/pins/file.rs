//! The pins file on disk: its two-step parse (raw serde shapes, then validated
//! [`ServerPins`]), its size limit (32 MiB read), its lock (`flock`, waited on up to
//! 10 s) and its atomic, 0600 replacement: each change re-reads the file under the lock,
//! so concurrent processes merge.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::PinError;

/// The file format's version.
const VERSION: u64 = 1;

/// A pins file larger than this is refused (it is never that large by itself: each
/// definition kept is bounded).
pub(crate) const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// How long to wait for another process holding the lock.
const LOCK_WAIT: Duration = Duration::from_secs(10);

// ---- step one: what the file may hold ----

#[derive(Deserialize)]
struct RawFile {
    version: Option<u64>,
    #[serde(default)]
    servers: Vec<RawServer>,
}

#[derive(Deserialize)]
struct RawServer {
    name: Option<String>,
    identity: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, RawTool>,
}

#[derive(Deserialize)]
struct RawTool {
    pinned: Option<RawDefinition>,
    pending: Option<RawDefinition>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDefinition {
    sha256: Option<String>,
    sha256_without_name: Option<String>,
    definition: Option<Value>,
    at: Option<u64>,
    renamed_from: Option<String>,
}

// ---- step two: the validated pins ----

/// The pins of one server (one name at one identity).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerPins {
    /// The server's name in the settings.
    pub name: String,
    /// What it is: `stdio:<command line>` or `url:<URL without query>`; another server
    /// under the same name has other pins.
    pub identity: String,
    /// Per tool name.
    pub tools: BTreeMap<String, ToolPin>,
}

/// What is recorded for one tool name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolPin {
    /// The accepted definition (first seen, or accepted by the user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<PinnedDefinition>,
    /// A different definition seen since, withheld until accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PinnedDefinition>,
}

/// One definition as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedDefinition {
    /// SHA-256 (hex) of the whole canonical definition.
    pub sha256: String,
    /// The same without the name (to recognise a rename).
    pub sha256_without_name: String,
    /// The canonical definition, or a bounded summary of a very large one.
    pub definition: Value,
    /// When it was pinned or seen (Unix seconds).
    pub at: u64,
    /// For a pending definition: the pinned tool it looks like a rename of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
}

#[derive(Serialize)]
struct FileOut<'a> {
    version: u64,
    servers: &'a [ServerPins],
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn validate_definition(
    at: &str,
    raw: Option<RawDefinition>,
) -> Result<Option<PinnedDefinition>, String> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let sha256 = raw
        .sha256
        .filter(|s| is_sha256(s))
        .ok_or_else(|| format!("{at}.sha256 is missing or not a SHA-256"))?;
    let sha256_without_name = raw
        .sha256_without_name
        .filter(|s| is_sha256(s))
        .ok_or_else(|| format!("{at}.sha256WithoutName is missing or not a SHA-256"))?;
    let definition = raw
        .definition
        .filter(Value::is_object)
        .ok_or_else(|| format!("{at}.definition is missing or not an object"))?;
    Ok(Some(PinnedDefinition {
        sha256,
        sha256_without_name,
        definition,
        at: raw.at.unwrap_or(0),
        renamed_from: raw.renamed_from.filter(|n| !n.is_empty()),
    }))
}

fn validate(raw: RawFile) -> Result<Vec<ServerPins>, String> {
    match raw.version {
        Some(VERSION) => {}
        Some(v) if v > VERSION => {
            return Err(format!(
                "version {v} was written by a newer Switchboard (this one reads version {VERSION})"
            ));
        }
        Some(v) => return Err(format!("unknown version {v}")),
        None => return Err("`version` is missing".into()),
    }
    let mut out: Vec<ServerPins> = Vec::with_capacity(raw.servers.len());
    for (i, s) in raw.servers.into_iter().enumerate() {
        let name = s
            .name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("servers[{i}].name is missing"))?;
        let identity = s
            .identity
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("servers[{i}].identity is missing"))?;
        if out.iter().any(|o| o.name == name && o.identity == identity) {
            return Err(format!("servers[{i}] repeats server `{name}` ({identity})"));
        }
        let mut tools = BTreeMap::new();
        for (tool, t) in s.tools {
            let at = format!("servers[{i}].tools.{tool}");
            let pinned = validate_definition(&format!("{at}.pinned"), t.pinned)?;
            let pending = validate_definition(&format!("{at}.pending"), t.pending)?;
            if pinned.is_none() && pending.is_none() {
                return Err(format!("{at} has neither `pinned` nor `pending`"));
            }
            tools.insert(tool, ToolPin { pinned, pending });
        }
        out.push(ServerPins {
            name,
            identity,
            tools,
        });
    }
    Ok(out)
}

/// Reads and validates the file; a missing file holds no pins.
pub(crate) fn read(path: &Path) -> Result<Vec<ServerPins>, PinError> {
    let corrupt = |reason: String| PinError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    switchboard_config::refuse_symlink(path).map_err(PinError::File)?;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PinError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| PinError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(corrupt(format!(
            "it is larger than {} MiB",
            MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    let raw: RawFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    validate(raw).map_err(corrupt)
}

/// Replaces the file (temp file, fsync, rename; 0600; a link in its place refused).
pub(crate) fn write(path: &Path, servers: &[ServerPins]) -> Result<(), PinError> {
    let text = serde_json::to_string_pretty(&FileOut {
        version: VERSION,
        servers,
    })
    .map_err(|e| PinError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("cannot encode the pins: {e}"),
    })?;
    switchboard_config::replace_file(path, text.as_bytes(), switchboard_config::Replace::SECRET)
        .map_err(PinError::File)
}

/// The exclusive lock every change of the file is made under (`<file>.lock`): readers
/// need none (the file is only ever replaced whole), writers re-read under it.
pub(crate) struct Lock {
    _file: File,
}

pub(crate) fn lock(path: &Path) -> Result<Lock, PinError> {
    let lock_path = lock_path(path);
    if let Some(dir) = lock_path.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| PinError::Lock {
                path: lock_path.clone(),
                reason: format!("cannot create its folder: {e}"),
            })?;
    }
    let file = switchboard_config::open_owned(&lock_path, 0o600).map_err(PinError::File)?;
    let start = Instant::now();
    loop {
        match try_flock(&file) {
            Ok(true) => return Ok(Lock { _file: file }),
            Ok(false) => {}
            Err(e) => {
                return Err(PinError::Lock {
                    path: lock_path,
                    reason: e.to_string(),
                });
            }
        }
        if start.elapsed() > LOCK_WAIT {
            return Err(PinError::Lock {
                path: lock_path,
                reason: format!(
                    "another switchboard process has held it for over {} s",
                    LOCK_WAIT.as_secs()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// `flock(LOCK_EX | LOCK_NB)`: `Ok(true)` when taken, `Ok(false)` when another holds it.
#[allow(unsafe_code)]
fn try_flock(file: &File) -> std::io::Result<bool> {
    loop {
        // SAFETY: `file` owns a valid open descriptor for the duration of the call;
        // flock(2) touches no memory of ours.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}
