//! MCPB bundles (`registryType: "mcpb"`): the package's `identifier` is the bundle's
//! download URL and `fileSha256` its digest. [`download_bundle`] reads it through the
//! caller's guarded client ([`BUNDLE_TIMEOUT`] 300 s, body included; [`MAX_BUNDLE`]
//! 64 MiB); [`check_sha256`] refuses a bundle whose digest differs, or that has none
//! (the registry requires one for every mcpb package, so a listing without it did not
//! come through the registry's checks); [`unpack`] writes the zip into a fresh
//! directory beside the final one and renames it into place, refusing `..`, absolute
//! paths, symlinks, more than [`Limits::max_entries`] entries or more than
//! [`Limits::max_unpacked`] bytes (declared or actual; by default 20,000 entries,
//! 512 MiB); [`read_manifest`] parses `manifest.json` in two steps and
//! [`Manifest::entry`] builds the stdio settings entry from `server.mcp_config`
//! (`${__dirname}` → the unpack directory, `${user_config.KEY}` → the person's value).
//!
//! Manifest text is escaped (`switchboard_config::escape_vars`) so a bundle cannot make
//! an entry read this machine's environment: the command, the arguments, the `env`
//! values and the `user_config` defaults alike (only a value the person gives is written
//! as given); `env` names must be variable names. The command must be the declared runtime
//! (`node`, `python`/`python3`) or a file inside the bundle. Must not: ask a person,
//! write settings, or run anything.
//!
//! What remains: the bundle's code runs with the user's rights; the hash proves only
//! that the file is the one the registry lists.
//!
//! Unpacked with `zip` 9.5 (default features off, deflate through zlib-rs only: no
//! bzip2, lzma, zstd or AES; 9.8 needs Rust 1.89).

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use switchboard_config::{escape_vars, is_var_name};
use switchboard_net::{GuardedClient, LimitedBody};

use crate::check::shown;
use crate::server_json::Input;

/// Largest bundle downloaded.
pub const MAX_BUNDLE: usize = 64 * 1024 * 1024;
/// Time limit for the download, body included.
pub const BUNDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Caps on what a bundle may unpack to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Total bytes of all files.
    pub max_unpacked: u64,
    /// Number of entries (files and directories).
    pub max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_unpacked: 512 * 1024 * 1024,
            max_entries: 20_000,
        }
    }
}

/// Why a bundle was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    #[error("cannot download the bundle {url}: {why}; check the address and your network")]
    Download { url: String, why: String },
    #[error("the bundle at {url} is larger than {limit_mib} MiB and was not installed")]
    TooLarge { url: String, limit_mib: usize },
    #[error(
        "the registry gives no SHA-256 for this bundle, so it cannot be checked and was not installed; download it by hand if you trust its source"
    )]
    NoDigest,
    #[error(
        "the downloaded bundle's SHA-256 is {actual}, not the registry's {expected}; nothing was installed"
    )]
    DigestMismatch { expected: String, actual: String },
    #[error("the bundle is not a readable zip archive: {0}")]
    NotZip(String),
    #[error("the bundle entry `{name}` {why}; nothing was installed")]
    UnsafeEntry { name: String, why: &'static str },
    #[error("the bundle unpacks to more than {limit} {what}; nothing was installed")]
    TooBig { what: &'static str, limit: u64 },
    #[error("cannot write the bundle to {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the bundle's manifest.json {0}")]
    Manifest(String),
    #[error("the bundle needs {names}; give each with its value")]
    Missing { names: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// GET the bundle at `url` through `client`, at most [`MAX_BUNDLE`] bytes.
pub async fn download_bundle(
    client: &GuardedClient,
    url: &str,
    timeout: Duration,
) -> Result<Vec<u8>, BundleError> {
    let fail = |why: String| BundleError::Download {
        url: url.to_string(),
        why,
    };
    let req = client.get(url).timeout(timeout);
    let resp = client.send(req).await.map_err(|e| fail(e.to_string()))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(fail(format!("the server answered {status}")));
    }
    match switchboard_net::read_limited(resp, MAX_BUNDLE)
        .await
        .map_err(|e| fail(e.to_string()))?
    {
        LimitedBody::Whole(body) => Ok(body),
        LimitedBody::Cut(_) => Err(BundleError::TooLarge {
            url: url.to_string(),
            limit_mib: MAX_BUNDLE / (1024 * 1024),
        }),
    }
}

/// The bundle's SHA-256 (lower-case hex) when it equals `expected`; none expected is
/// refused.
pub fn check_sha256(bytes: &[u8], expected: Option<&str>) -> Result<String, BundleError> {
    let expected = expected
        .map(|e| e.trim().to_ascii_lowercase())
        .ok_or(BundleError::NoDigest)?;
    let actual = hex::encode(Sha256::digest(bytes));
    if actual != expected {
        return Err(BundleError::DigestMismatch { expected, actual });
    }
    Ok(actual)
}

/// A zip entry name as a relative path inside the bundle, or why not.
fn safe_path(name: &str) -> Result<PathBuf, &'static str> {
    if name.contains('\\') || name.contains('\0') {
        return Err("has a backslash or NUL in its name");
    }
    let mut out = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err("climbs out of the bundle (`..`)"),
            Component::RootDir | Component::Prefix(_) => return Err("is an absolute path"),
        }
    }
    if out.as_os_str().is_empty() {
        return Err("has an empty name");
    }
    Ok(out)
}

/// Unpacks `bytes` (a zip) into `dest`, which must not exist: written to a sibling
/// directory first and renamed, so `dest` appears whole or not at all.
pub fn unpack(bytes: &[u8], dest: &Path, limits: Limits) -> Result<(), BundleError> {
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| BundleError::NotZip(e.to_string()))?;
    if archive.len() > limits.max_entries {
        return Err(BundleError::TooBig {
            what: "entries",
            limit: limits.max_entries as u64,
        });
    }
    // Check every entry before writing anything.
    let mut declared: u64 = 0;
    let mut plan = Vec::with_capacity(archive.len());
    for i in 0..archive.len() {
        let f = archive
            .by_index_raw(i)
            .map_err(|e| BundleError::NotZip(e.to_string()))?;
        let name = f
            .name()
            .map_err(|e| BundleError::NotZip(e.to_string()))?
            .into_owned();
        let unsafe_entry = |why| BundleError::UnsafeEntry {
            name: name.clone(),
            why,
        };
        let path = safe_path(&name).map_err(unsafe_entry)?;
        if f.is_symlink() {
            return Err(unsafe_entry("is a symbolic link"));
        }
        declared = declared.saturating_add(f.size());
        if declared > limits.max_unpacked {
            return Err(BundleError::TooBig {
                what: "bytes",
                limit: limits.max_unpacked,
            });
        }
        let exec = f.unix_mode().is_some_and(|m| m & 0o111 != 0);
        plan.push((path, f.is_dir(), exec));
    }
    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let tmp = parent.join(format!(
        ".unpacking-{}-{}",
        dest.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = write_all(&mut archive, &plan, &tmp, limits)
        .and_then(|()| std::fs::rename(&tmp, dest).map_err(io(dest)));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn write_all(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    plan: &[(PathBuf, bool, bool)],
    root: &Path,
    limits: Limits,
) -> Result<(), BundleError> {
    std::fs::create_dir_all(root).map_err(io(root))?;
    let mut written: u64 = 0;
    for (i, (rel, is_dir, exec)) in plan.iter().enumerate() {
        let path = root.join(rel);
        if *is_dir {
            std::fs::create_dir_all(&path).map_err(io(&path))?;
            continue;
        }
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).map_err(io(p))?;
        }
        let f = archive
            .by_index(i)
            .map_err(|e| BundleError::NotZip(e.to_string()))?;
        let left = limits.max_unpacked.saturating_sub(written);
        let mut out = std::fs::File::create_new(&path).map_err(io(&path))?;
        let n = std::io::copy(&mut f.take(left + 1), &mut out).map_err(io(&path))?;
        if n > left {
            return Err(BundleError::TooBig {
                what: "bytes",
                limit: limits.max_unpacked,
            });
        }
        written += n;
        out.flush().map_err(io(&path))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = if *exec { 0o755 } else { 0o644 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(io(&path))?;
        }
        #[cfg(not(unix))]
        let _ = exec;
    }
    Ok(())
}

/// `manifest.json` as written.
#[derive(Deserialize)]
struct RawManifest {
    name: Option<String>,
    server: Option<RawServer>,
    #[serde(default)]
    user_config: BTreeMap<String, RawUserConfig>,
}

#[derive(Deserialize)]
struct RawServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    entry_point: Option<String>,
    mcp_config: Option<RawMcpConfig>,
}

#[derive(Deserialize)]
struct RawMcpConfig {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct RawUserConfig {
    title: Option<String>,
    description: Option<String>,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    sensitive: bool,
    default: Option<Value>,
}

/// The runtime a bundle's server needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerType {
    Node,
    Python,
    Binary,
}

/// A validated `manifest.json`.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub name: String,
    pub server_type: ServerType,
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// `user_config` as values to ask for (`sensitive` ones are secret); the name is
    /// the key used in `${user_config.KEY}`.
    pub user_config: Vec<Input>,
}

/// Reads and validates `dir/manifest.json` (at most 1 MiB).
pub fn read_manifest(dir: &Path) -> Result<Manifest, BundleError> {
    let bad = |why: &str| BundleError::Manifest(why.to_string());
    let path = dir.join("manifest.json");
    let meta = std::fs::metadata(&path).map_err(|_| bad("is missing"))?;
    if meta.len() > 1024 * 1024 {
        return Err(bad("is larger than 1 MiB"));
    }
    let text = std::fs::read(&path).map_err(io(&path))?;
    let raw: RawManifest =
        serde_json::from_slice(&text).map_err(|e| bad(&format!("is not valid: {e}")))?;
    let server = raw.server.ok_or_else(|| bad("has no `server`"))?;
    let server_type = match server.kind.as_deref() {
        Some("node") => ServerType::Node,
        Some("python") => ServerType::Python,
        Some("binary") => ServerType::Binary,
        Some(other) => {
            return Err(bad(&format!(
                "has server type `{other}`, which Switchboard does not run (node, python or binary)"
            )));
        }
        None => return Err(bad("has no `server.type`")),
    };
    let entry_point = server.entry_point.as_deref().map(safe_path).transpose();
    let entry_point = entry_point.map_err(|why| bad(&format!("`server.entry_point` {why}")))?;
    let (command, args, env) = match server.mcp_config {
        Some(c) => {
            if let Some(k) = c.env.keys().find(|k| !is_var_name(k)) {
                return Err(bad(&format!(
                    "names the environment variable `{}` in `server.mcp_config.env`, which is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
                    shown(k)
                )));
            }
            (
                c.command
                    .ok_or_else(|| bad("has no `server.mcp_config.command`"))?,
                c.args,
                c.env.into_iter().collect(),
            )
        }
        None => {
            let entry = entry_point
                .as_ref()
                .ok_or_else(|| bad("has neither `server.mcp_config` nor `server.entry_point`"))?
                .to_string_lossy()
                .into_owned();
            let at = format!("${{__dirname}}/{entry}");
            match server_type {
                ServerType::Node => ("node".into(), vec![at], Vec::new()),
                ServerType::Python => ("python3".into(), vec![at], Vec::new()),
                ServerType::Binary => (at, Vec::new(), Vec::new()),
            }
        }
    };
    let user_config = raw
        .user_config
        .into_iter()
        .map(|(key, u)| Input {
            name: key,
            description: u.title.or(u.description),
            required: u.required,
            secret: u.sensitive,
            value: None,
            default: u.default.and_then(|d| match d {
                Value::String(s) => Some(s),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            }),
            choices: Vec::new(),
        })
        .collect();
    Ok(Manifest {
        name: raw.name.unwrap_or_default(),
        server_type,
        command,
        args,
        env,
        user_config,
    })
}

impl Manifest {
    /// `text` with `${__dirname}` and `${user_config.KEY}` replaced; the manifest's own
    /// text and the directory are escaped, the person's values written as given.
    fn fill(
        &self,
        text: &str,
        dir: &str,
        values: &BTreeMap<&str, String>,
    ) -> Result<String, BundleError> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let var = &rest[start + 2..start + len];
            let filled = if var == "__dirname" {
                escape_vars(dir)
            } else if var == "/" || var == "pathSeparator" {
                std::path::MAIN_SEPARATOR.to_string()
            } else if let Some(key) = var.strip_prefix("user_config.") {
                values.get(key).cloned().unwrap_or_default()
            } else {
                escape_vars(&rest[start..start + len + 1])
            };
            out.push_str(&escape_vars(&rest[..start]));
            out.push_str(&filled);
            rest = &rest[start + len + 1..];
        }
        out.push_str(&escape_vars(rest));
        Ok(out)
    }

    /// The stdio settings entry for the bundle unpacked at `dir`, with the person's
    /// `given` values (key → value as it is to be written). A required `user_config`
    /// key with neither a value nor a default is [`BundleError::Missing`].
    pub fn entry(
        &self,
        dir: &Path,
        given: &[(String, String)],
    ) -> Result<Map<String, Value>, BundleError> {
        let mut values: BTreeMap<&str, String> = BTreeMap::new();
        let mut missing = Vec::new();
        for u in &self.user_config {
            if let Some((_, v)) = given.iter().find(|(k, _)| *k == u.name) {
                values.insert(&u.name, v.clone());
            } else if let Some(d) = &u.default {
                // A default is manifest text: escaped like the rest of it.
                values.insert(&u.name, escape_vars(d));
            } else if u.required {
                missing.push(u.label());
            }
        }
        if !missing.is_empty() {
            return Err(BundleError::Missing {
                names: missing.join(", "),
            });
        }
        let dir_text = dir.to_string_lossy();
        let mut command = self.fill(&self.command, &dir_text, &values)?;
        let allowed: &[&str] = match self.server_type {
            ServerType::Node => &["node"],
            ServerType::Python => &["python", "python3"],
            ServerType::Binary => &[],
        };
        if !allowed.contains(&command.as_str()) {
            // Otherwise it must be a file inside the bundle.
            let plain = command.replace("$$", "$");
            let rel = plain
                .strip_prefix(dir_text.as_ref())
                .map(|r| r.trim_start_matches(['/', '\\']))
                .unwrap_or(&plain);
            let rel = safe_path(rel)
                .ok()
                .filter(|r| dir.join(r).is_file())
                .ok_or_else(|| {
                BundleError::Manifest(format!(
                    "runs `{plain}`, which is neither the bundle's runtime ({}) nor a file inside the bundle",
                    if allowed.is_empty() { "none for a binary server".to_string() } else { allowed.join(", ") }
                ))
            })?;
            command = escape_vars(&dir.join(rel).to_string_lossy());
        }
        let args = self
            .args
            .iter()
            .map(|a| self.fill(a, &dir_text, &values))
            .collect::<Result<Vec<_>, _>>()?;
        let mut env = Map::new();
        for (k, v) in &self.env {
            env.insert(k.clone(), json!(self.fill(v, &dir_text, &values)?));
        }
        let mut entry = Map::new();
        entry.insert("command".into(), json!(command));
        entry.insert("args".into(), json!(args));
        if !env.is_empty() {
            entry.insert("env".into(), Value::Object(env));
        }
        entry.insert("cwd".into(), json!(escape_vars(&dir_text)));
        Ok(entry)
    }

    /// The runtime to install when it is not on `PATH` (`node` for a node server,
    /// `python3` for a python one), else `None`.
    pub fn missing_runtime(&self) -> Option<&'static str> {
        let wanted: &[&'static str] = match self.server_type {
            ServerType::Node => &["node"],
            ServerType::Python => &["python3", "python"],
            ServerType::Binary => return None,
        };
        let path = std::env::var_os("PATH").unwrap_or_default();
        let found =
            std::env::split_paths(&path).any(|d| wanted.iter().any(|w| d.join(w).is_file()));
        (!found).then_some(wanted[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zip::write::SimpleFileOptions;

    fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, body) in files {
            w.start_file(*name, opts).unwrap();
            w.write_all(body).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    const MANIFEST: &str = r#"{"manifest_version": "0.3", "name": "hello",
        "server": {"type": "node", "entry_point": "server/index.js",
          "mcp_config": {"command": "node", "args": ["${__dirname}/server/index.js", "$HOME"],
            "env": {"API_KEY": "${user_config.api_key}", "MODE": "${user_config.mode}"}}},
        "user_config": {"api_key": {"type": "string", "title": "API key", "sensitive": true, "required": true},
          "mode": {"type": "string", "title": "Mode", "default": "fast"}}}"#;

    #[test]
    fn a_good_bundle_unpacks_and_becomes_an_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("hello-abc");
        let bytes = zip_of(&[
            ("manifest.json", MANIFEST.as_bytes()),
            ("server/index.js", b"console.log(1)"),
        ]);
        unpack(&bytes, &dest, Limits::default()).unwrap();
        assert_eq!(
            std::fs::read(dest.join("server/index.js")).unwrap(),
            b"console.log(1)"
        );
        let m = read_manifest(&dest).unwrap();
        assert_eq!(m.server_type, ServerType::Node);
        assert!(
            m.user_config
                .iter()
                .any(|u| u.name == "api_key" && u.secret)
        );
        let err = m.entry(&dest, &[]).unwrap_err().to_string();
        assert!(err.contains("api_key (API key)"), "{err}");
        let e = m
            .entry(&dest, &[("api_key".into(), "${KEY}".into())])
            .unwrap();
        let d = dest.to_string_lossy();
        assert_eq!(e["command"], "node");
        assert_eq!(e["args"], json!([format!("{d}/server/index.js"), "$$HOME"]));
        assert_eq!(e["env"], json!({"API_KEY": "${KEY}", "MODE": "fast"}));
        // Only what the zip holds (and nothing left beside it).
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("hello-abc")]);
    }

    #[test]
    fn digests_are_checked_and_required() {
        let bytes = b"bundle";
        let good = hex::encode(Sha256::digest(bytes));
        assert_eq!(
            check_sha256(bytes, Some(&good.to_uppercase())).unwrap(),
            good
        );
        let err = check_sha256(bytes, Some(&"0".repeat(64))).unwrap_err();
        assert!(matches!(err, BundleError::DigestMismatch { .. }), "{err}");
        assert!(matches!(
            check_sha256(bytes, None).unwrap_err(),
            BundleError::NoDigest
        ));
    }

    fn refused(bytes: &[u8], limits: Limits) -> String {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("b");
        let err = unpack(bytes, &dest, limits).unwrap_err().to_string();
        // Nothing written: not the bundle, not a temporary directory.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "{err}");
        err
    }

    #[test]
    fn traversal_absolute_paths_and_symlinks_are_refused() {
        let err = refused(
            &zip_of(&[("ok.txt", b"x"), ("../evil", b"x")]),
            Limits::default(),
        );
        assert!(err.contains("`../evil`") && err.contains(".."), "{err}");
        let err = refused(&zip_of(&[("a/../../evil", b"x")]), Limits::default());
        assert!(err.contains(".."), "{err}");
        let err = refused(&zip_of(&[("/etc/evil", b"x")]), Limits::default());
        assert!(err.contains("absolute"), "{err}");
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        w.add_symlink("link", "/etc/passwd", SimpleFileOptions::default())
            .unwrap();
        let err = refused(&w.finish().unwrap().into_inner(), Limits::default());
        assert!(err.contains("symbolic link"), "{err}");
    }

    #[test]
    fn bombs_are_refused_within_the_caps() {
        let zeros = vec![0u8; 4 * 1024 * 1024];
        let bytes = zip_of(&[("a", &zeros), ("b", &zeros)]);
        assert!(bytes.len() < 100 * 1024, "{}", bytes.len());
        let limits = Limits {
            max_unpacked: 6 * 1024 * 1024,
            max_entries: 10,
        };
        let err = refused(&bytes, limits);
        assert!(err.contains("more than 6291456 bytes"), "{err}");
        let many: Vec<(String, &[u8])> = (0..11).map(|i| (format!("f{i}"), &b"x"[..])).collect();
        let many: Vec<(&str, &[u8])> = many.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        let err = refused(&zip_of(&many), limits);
        assert!(err.contains("more than 10 entries"), "{err}");
    }

    /// A bundle whose headers understate its sizes is still cut at the cap while
    /// writing.
    #[test]
    fn actual_size_is_capped_even_when_declared_small() {
        let zeros = vec![0u8; 2 * 1024 * 1024];
        let mut bytes = zip_of(&[("a", &zeros)]);
        // Patch the uncompressed size in the central directory (offset 24 of the
        // entry's record) to 1 byte.
        let cd = bytes
            .windows(4)
            .rposition(|w| w == [0x50, 0x4b, 0x01, 0x02])
            .unwrap();
        bytes[cd + 24..cd + 28].copy_from_slice(&1u32.to_le_bytes());
        let tmp = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_unpacked: 1024 * 1024,
            max_entries: 10,
        };
        let err = unpack(&bytes, &tmp.path().join("b"), limits)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("more than 1048576 bytes") || err.contains("larger than its declared"),
            "{err}"
        );
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn commands_outside_the_runtime_or_bundle_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("b");
        let manifest =
            r#"{"server": {"type": "node", "mcp_config": {"command": "sh", "args": ["-c", "x"]}}}"#;
        unpack(
            &zip_of(&[("manifest.json", manifest.as_bytes())]),
            &dest,
            Limits::default(),
        )
        .unwrap();
        let err = read_manifest(&dest)
            .unwrap()
            .entry(&dest, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`sh`"), "{err}");
        let dest2 = tmp.path().join("c");
        let manifest = r#"{"server": {"type": "binary", "entry_point": "bin/srv"}}"#;
        unpack(
            &zip_of(&[("manifest.json", manifest.as_bytes()), ("bin/srv", b"x")]),
            &dest2,
            Limits::default(),
        )
        .unwrap();
        let e = read_manifest(&dest2).unwrap().entry(&dest2, &[]).unwrap();
        assert_eq!(e["command"], json!(dest2.join("bin/srv").to_string_lossy()));
        let dest3 = tmp.path().join("d");
        let manifest = r#"{"server": {"type": "uv", "entry_point": "a.py"}}"#;
        unpack(
            &zip_of(&[("manifest.json", manifest.as_bytes())]),
            &dest3,
            Limits::default(),
        )
        .unwrap();
        let err = read_manifest(&dest3).unwrap_err().to_string();
        assert!(err.contains("`uv`"), "{err}");
    }

    /// Finding 2 of #26: a `user_config` default is manifest text, so `${SECRET}` in
    /// it is written escaped and never reads the environment; a value the person
    /// gives is written as given.
    #[test]
    fn defaults_are_escaped_like_all_manifest_text() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("b");
        let manifest = r#"{"server": {"type": "node", "mcp_config": {"command": "node",
            "args": ["${user_config.path}"],
            "env": {"TOKEN": "${user_config.token}", "MINE": "${user_config.mine}"}}},
          "user_config": {"token": {"type": "string", "default": "${SECRET}"},
            "path": {"type": "string", "default": "$HOME/x"},
            "mine": {"type": "string", "required": true}}}"#;
        unpack(
            &zip_of(&[("manifest.json", manifest.as_bytes())]),
            &dest,
            Limits::default(),
        )
        .unwrap();
        let e = read_manifest(&dest)
            .unwrap()
            .entry(&dest, &[("mine".into(), "${MINE}".into())])
            .unwrap();
        assert_eq!(e["env"], json!({"TOKEN": "$${SECRET}", "MINE": "${MINE}"}));
        assert_eq!(e["args"], json!(["$$HOME/x"]));
        // An `env` name that is not a variable name is refused.
        let dest2 = tmp.path().join("c");
        let manifest = r#"{"server": {"type": "node", "mcp_config": {"command": "node",
            "env": {"X=${SECRET}": "v"}}}}"#;
        unpack(
            &zip_of(&[("manifest.json", manifest.as_bytes())]),
            &dest2,
            Limits::default(),
        )
        .unwrap();
        let err = read_manifest(&dest2).unwrap_err().to_string();
        assert!(err.contains("`X=${SECRET}`"), "{err}");
    }
}
