//! `mcp import`: reading other MCP hosts' settings (Claude Desktop, Claude Code,
//! VS Code, Cursor, Codex, Gemini CLI, Windsurf) into Switchboard server entries.
//!
//! Each host's file is parsed in two steps, as our own settings are: a permissive
//! serde shape of the host's format ([`formats`]), then a validated Switchboard entry
//! (`Draft::finish`). Variable references are rewritten into our syntax and never
//! expanded ([`vars`]); fields with no equivalent are named in a warning per server.
//! Where a host keeps its files is [`import_sources`]; writing is the caller's job
//! (through [`crate::SettingsDoc`]).

mod codex;
mod formats;
mod vars;

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use crate::mask::is_secret_name;

/// A host whose MCP settings can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImportHost {
    /// Claude Desktop's `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Claude Code's `~/.claude.json` and a project's `.mcp.json`.
    ClaudeCode,
    /// VS Code's `mcp.json` (user or `.vscode/mcp.json`).
    VsCode,
    /// Cursor's `~/.cursor/mcp.json` and `.cursor/mcp.json`.
    Cursor,
    /// Codex's `~/.codex/config.toml`.
    Codex,
    /// Gemini CLI's `~/.gemini/settings.json` and `.gemini/settings.json`.
    Gemini,
    /// Windsurf's `~/.codeium/windsurf/mcp_config.json`.
    Windsurf,
}

impl ImportHost {
    /// Every host, in the order they are looked for.
    pub const ALL: [ImportHost; 7] = [
        ImportHost::ClaudeDesktop,
        ImportHost::ClaudeCode,
        ImportHost::VsCode,
        ImportHost::Cursor,
        ImportHost::Codex,
        ImportHost::Gemini,
        ImportHost::Windsurf,
    ];

    /// The `--from` value.
    pub fn id(self) -> &'static str {
        match self {
            ImportHost::ClaudeDesktop => "claude-desktop",
            ImportHost::ClaudeCode => "claude-code",
            ImportHost::VsCode => "vscode",
            ImportHost::Cursor => "cursor",
            ImportHost::Codex => "codex",
            ImportHost::Gemini => "gemini",
            ImportHost::Windsurf => "windsurf",
        }
    }

    /// The host's name for people.
    pub fn label(self) -> &'static str {
        match self {
            ImportHost::ClaudeDesktop => "Claude Desktop",
            ImportHost::ClaudeCode => "Claude Code",
            ImportHost::VsCode => "VS Code",
            ImportHost::Cursor => "Cursor",
            ImportHost::Codex => "Codex",
            ImportHost::Gemini => "Gemini CLI",
            ImportHost::Windsurf => "Windsurf",
        }
    }

    /// The host named by a `--from` value.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.id() == id)
    }

    /// The format of a file given by path: Codex for `.toml`; otherwise by the file's
    /// shape (`servers` → VS Code, `projects` → Claude Code) and name
    /// (`claude_desktop_config.json`, `mcp_config.json`, `settings.json`); any other
    /// `mcpServers` file is read as Claude Code's `.mcp.json`, the widest of them.
    pub fn detect(path: &Path, text: &str) -> ImportHost {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".toml") {
            return ImportHost::Codex;
        }
        let value = crate::jsonc::parse(path, text).ok();
        let has = |k: &str| value.as_ref().is_some_and(|v| v.get(k).is_some());
        if has("servers")
            || value
                .as_ref()
                .is_some_and(|v| v.pointer("/mcp/servers").is_some())
        {
            return ImportHost::VsCode;
        }
        if has("projects") || name == ".claude.json" {
            return ImportHost::ClaudeCode;
        }
        match name.as_str() {
            "claude_desktop_config.json" => ImportHost::ClaudeDesktop,
            n if n.ends_with("mcp_config.json") => ImportHost::Windsurf,
            "settings.json" => ImportHost::Gemini,
            _ => ImportHost::ClaudeCode,
        }
    }
}

impl std::fmt::Display for ImportHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// One file where a host may keep MCP servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSource {
    /// The host.
    pub host: ImportHost,
    /// The file.
    pub path: PathBuf,
    /// A file in the project folder (it came with the folder, so it is as trusted as
    /// the folder), not one the user's own host wrote.
    pub project: bool,
}

/// Where each host keeps its MCP servers on Linux and macOS: user files under `home`
/// (the user's home directory), then project files under `project_dir` (marked
/// [`ImportSource::project`]: they came with the folder, so the caller imports them
/// only where folder trust still applies). Codex's
/// user file is under `codex_home` (`$CODEX_HOME`) when given, else `~/.codex`.
pub fn import_sources(
    host: ImportHost,
    home: &Path,
    project_dir: &Path,
    codex_home: Option<&Path>,
) -> Vec<ImportSource> {
    let mac = home.join("Library").join("Application Support");
    let config = home.join(".config");
    let user: Vec<PathBuf> = match host {
        ImportHost::ClaudeDesktop => vec![
            config.join("Claude").join("claude_desktop_config.json"),
            mac.join("Claude").join("claude_desktop_config.json"),
        ],
        ImportHost::ClaudeCode => vec![home.join(".claude.json")],
        ImportHost::VsCode => vec![
            config.join("Code").join("User").join("mcp.json"),
            mac.join("Code").join("User").join("mcp.json"),
        ],
        ImportHost::Cursor => vec![home.join(".cursor").join("mcp.json")],
        ImportHost::Codex => vec![
            codex_home
                .map(Path::to_path_buf)
                .unwrap_or_else(|| home.join(".codex"))
                .join("config.toml"),
        ],
        ImportHost::Gemini => vec![home.join(".gemini").join("settings.json")],
        ImportHost::Windsurf => vec![
            home.join(".codeium")
                .join("windsurf")
                .join("mcp_config.json"),
        ],
    };
    let project: Vec<PathBuf> = match host {
        ImportHost::ClaudeDesktop | ImportHost::Windsurf => vec![],
        ImportHost::ClaudeCode => vec![project_dir.join(".mcp.json")],
        ImportHost::VsCode => vec![project_dir.join(".vscode").join("mcp.json")],
        ImportHost::Cursor => vec![project_dir.join(".cursor").join("mcp.json")],
        ImportHost::Codex => vec![project_dir.join(".codex").join("config.toml")],
        ImportHost::Gemini => vec![project_dir.join(".gemini").join("settings.json")],
    };
    let source = |project| {
        move |path| ImportSource {
            host,
            path,
            project,
        }
    };
    user.into_iter()
        .map(source(false))
        .chain(project.into_iter().map(source(true)))
        .collect()
}

/// Whose a file named for import is ([`import_file_owner`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportFileOwner {
    /// The user's: one of their hosts' own user files, or a file outside the project
    /// folder that is no folder's own file.
    User,
    /// A folder's own file: it lies inside the project folder `.0` (by its path as
    /// named or by where it really is).
    InProject(PathBuf),
    /// A folder's own file: the file a host keeps in a folder (`.0`, e.g.
    /// `.cursor/mcp.json`), in some other folder.
    FolderFile(PathBuf),
}

impl ImportFileOwner {
    /// Whether the file came with a folder (so it goes only into the project scope).
    pub fn is_folders(&self) -> bool {
        !matches!(self, Self::User)
    }
}

/// `path` made absolute against `base`, with `.` and `..` resolved by the names alone.
fn lexical_absolute(path: &Path, base: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in base.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Whose the file `path` (as the user named it, relative to `project_dir`, the current
/// folder) is, by where it is, not by how it was named: its path made absolute with
/// `..` resolved, and its real location (symlinks followed), are both checked. A host's
/// user file (the user's own, under `home` or `codex_home`) is the user's, even when
/// the project folder holds it (a project folder that is the home directory); else a
/// file inside the project folder, or one at a host's folder path (`.mcp.json`,
/// `.vscode/mcp.json`, …) anywhere, is a folder's own.
///
/// # Errors
/// `path` cannot be resolved (it does not exist, or a folder on the way is unreadable).
pub fn import_file_owner(
    path: &Path,
    home: &Path,
    project_dir: &Path,
    codex_home: Option<&Path>,
) -> std::io::Result<ImportFileOwner> {
    let named = lexical_absolute(path, project_dir);
    let real = std::fs::canonicalize(project_dir.join(path))?;
    let all = |project: &Path| -> Vec<ImportSource> {
        ImportHost::ALL
            .into_iter()
            .flat_map(|h| import_sources(h, home, project, codex_home))
            .collect()
    };
    let users_own = all(project_dir)
        .into_iter()
        .filter(|s| !s.project)
        .filter_map(|s| std::fs::canonicalize(&s.path).ok())
        .any(|p| p == real);
    if users_own {
        return Ok(ImportFileOwner::User);
    }
    let mut roots = vec![lexical_absolute(Path::new(""), project_dir)];
    if let Ok(p) = std::fs::canonicalize(project_dir) {
        roots.push(p);
    }
    if let Some(root) = roots
        .iter()
        .find(|r| named.starts_with(r) || real.starts_with(r))
    {
        return Ok(ImportFileOwner::InProject(root.clone()));
    }
    let folder_file = all(Path::new(""))
        .into_iter()
        .filter(|s| s.project)
        .map(|s| s.path)
        .find(|rel| named.ends_with(rel) || real.ends_with(rel));
    Ok(match folder_file {
        Some(rel) => ImportFileOwner::FolderFile(rel),
        None => ImportFileOwner::User,
    })
}

/// One server read from another host, as a Switchboard entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedServer {
    /// The name (the key in the host's file).
    pub name: String,
    /// Where in the file it was (`mcpServers.github`, `projects./p.mcpServers.db`).
    pub location: String,
    /// The entry to write under `mcpServers.<name>`.
    pub entry: Map<String, Value>,
    /// What did not carry over, or needs the user (unset inputs, literal secrets).
    pub warnings: Vec<String>,
}

/// A server in the host's file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedServer {
    /// The name.
    pub name: String,
    /// Why, with the field and the fix.
    pub reason: String,
}

/// What one file gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportedFile {
    /// Servers to import, in file order.
    pub servers: Vec<ImportedServer>,
    /// Servers that could not be read.
    pub skipped: Vec<SkippedServer>,
    /// Things about the file as a whole (e.g. other projects' servers left out).
    pub notes: Vec<String>,
}

/// Why a whole file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The file is not valid JSON/TOML or not the host's shape.
    #[error("{}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
}

/// Reads `path` in `host`'s format. `project_dir` picks Claude Code's entries for
/// this project and stands for `${workspaceFolder}` in a `.vscode`/`.cursor` file.
pub fn read_import(
    host: ImportHost,
    path: &Path,
    project_dir: &Path,
) -> Result<ImportedFile, ImportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_import(host, path, &text, project_dir)
}

/// Parses `text` (the contents of `path`) in `host`'s format.
pub fn parse_import(
    host: ImportHost,
    path: &Path,
    text: &str,
    project_dir: &Path,
) -> Result<ImportedFile, ImportError> {
    if host == ImportHost::Codex {
        return codex::parse(path, text);
    }
    let value = crate::jsonc::parse(path, text).map_err(|e| ImportError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    formats::parse(host, path, &value, project_dir)
}

/// The transport an entry will use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Stdio,
    Http,
    Sse,
    /// A URL with no type: Streamable HTTP, then legacy SSE.
    Auto,
}

/// Step two: a host-neutral entry being built, with its warnings.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: IndexMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub kind: Option<Kind>,
    pub headers: IndexMap<String, String>,
    pub timeout_ms: Option<u64>,
    pub startup_timeout_ms: Option<u64>,
    pub disabled: bool,
    pub include_tools: Option<Vec<String>>,
    pub exclude_tools: Option<Vec<String>>,
    pub description: Option<String>,
    /// Fields of the host with no equivalent here.
    pub dropped: Vec<String>,
    pub warnings: Vec<String>,
}

impl Draft {
    /// Validates the draft into an entry; the error names the field and the fix.
    pub(crate) fn finish(
        mut self,
        location: &str,
    ) -> Result<(Map<String, Value>, Vec<String>), String> {
        let mut e = Map::new();
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{location}: has both a command and a URL; keep one in the host's file and import again"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "{location}: has neither a command nor a URL, so there is nothing to start"
                ));
            }
            (Some(command), None) => {
                if matches!(self.kind, Some(Kind::Http | Kind::Sse)) {
                    return Err(format!(
                        "{location}.type: a command server cannot be http or sse; fix the type in the host's file"
                    ));
                }
                if command.trim().is_empty() {
                    return Err(format!("{location}.command: is empty"));
                }
                e.insert("command".into(), json!(command));
                if !self.args.is_empty() {
                    e.insert("args".into(), json!(self.args));
                }
                if !self.env.is_empty() {
                    e.insert("env".into(), json!(self.env));
                }
                if let Some(cwd) = &self.cwd {
                    e.insert("cwd".into(), json!(cwd));
                }
                if !self.headers.is_empty() {
                    self.dropped.push("headers".into());
                }
            }
            (None, Some(url)) => {
                let plain = !url.contains('$');
                if plain && !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("{location}.url: `{url}` is not an http(s):// URL"));
                }
                match self.kind.unwrap_or(Kind::Auto) {
                    Kind::Stdio => {
                        return Err(format!(
                            "{location}.type: stdio needs a command, but the entry has a URL"
                        ));
                    }
                    Kind::Http => {
                        e.insert("httpUrl".into(), json!(url));
                    }
                    Kind::Sse => {
                        e.insert("url".into(), json!(url));
                        e.insert("type".into(), json!("sse"));
                    }
                    Kind::Auto => {
                        e.insert("url".into(), json!(url));
                    }
                }
                if !self.headers.is_empty() {
                    e.insert("headers".into(), json!(self.headers));
                }
                for (field, set) in [
                    ("args", !self.args.is_empty()),
                    ("env", !self.env.is_empty()),
                    ("cwd", self.cwd.is_some()),
                ] {
                    if set {
                        self.dropped.push(field.into());
                    }
                }
            }
        }
        if let Some(t) = self.timeout_ms {
            e.insert("timeout".into(), json!(t));
        }
        if let Some(t) = self.startup_timeout_ms {
            e.insert("startupTimeout".into(), json!(t));
        }
        if let Some(i) = &self.include_tools {
            e.insert("includeTools".into(), json!(i));
        }
        if let Some(x) = &self.exclude_tools {
            e.insert("excludeTools".into(), json!(x));
        }
        if let Some(d) = &self.description {
            e.insert("description".into(), json!(d));
        }
        if self.disabled {
            e.insert("disabled".into(), json!(true));
        }
        let mut warnings = Vec::new();
        if !self.dropped.is_empty() {
            let list: Vec<String> = self.dropped.iter().map(|f| format!("`{f}`")).collect();
            warnings.push(format!(
                "{} {} no equivalent in Switchboard and {} left out",
                list.join(", "),
                if list.len() == 1 { "has" } else { "have" },
                if list.len() == 1 { "was" } else { "were" },
            ));
        }
        warnings.extend(secret_warnings(&e));
        warnings.append(&mut self.warnings);
        Ok((e, warnings))
    }
}

/// A warning for each `env`/`headers` value with a secret-looking name that is
/// written out rather than a `${VAR}` reference.
pub(crate) fn secret_warnings(entry: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for field in ["env", "headers"] {
        let Some(Value::Object(map)) = entry.get(field) else {
            continue;
        };
        for (k, v) in map {
            if let Value::String(v) = v
                && is_secret_name(k)
                && !v.is_empty()
                && !vars::has_reference(v)
            {
                out.push(format!(
                    "{field}.{k} holds a secret written out in the host's file; it was copied as is: consider `${{VAR}}` and setting VAR in the environment"
                ));
            }
        }
    }
    out
}

/// A name `mcp add` would accept too: not empty, no slash, no control character.
pub(crate) fn check_name(location: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().any(|c| c.is_control() || c == '/') {
        return Err(format!(
            "{location}: `{}` is not a usable server name (no slashes or control characters); rename it in the host's file",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// Converts a map of raw values (strings, numbers, booleans) to strings, naming the
/// field that holds something else.
pub(crate) fn string_map(
    location: &str,
    field: &str,
    map: &IndexMap<String, Value>,
) -> Result<IndexMap<String, String>, String> {
    let mut out = IndexMap::new();
    for (k, v) in map {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => continue,
            other => {
                return Err(format!(
                    "{location}.{field}.{k}: expected a string, found {}",
                    crate::raw::type_name(other)
                ));
            }
        };
        out.insert(k.clone(), s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
