//! Step one for the JSON hosts: the permissive shape of an `mcpServers` entry
//! (Claude Desktop, Claude Code, Cursor, Windsurf) or a VS Code `servers` entry, and
//! where each host keeps its servers in the file. Gemini CLI's entries are our own
//! format and go through [`crate::raw::parse_server`].

use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::vars::{Dialect, Rewrite};
use super::{
    Draft, ImportError, ImportHost, ImportedFile, ImportedServer, Kind, SkippedServer, check_name,
    string_map,
};
use crate::raw::{SERVER_KEYS, parse_server, type_name};

/// One server entry as the JSON hosts write it: the union of their fields.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEntry {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<IndexMap<String, Value>>,
    env_file: Option<String>,
    cwd: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    url: Option<String>,
    /// Windsurf's remote URL.
    server_url: Option<String>,
    headers: Option<IndexMap<String, Value>>,
    /// Windsurf.
    disabled: Option<bool>,
    /// Windsurf.
    disabled_tools: Option<Vec<String>>,
    #[serde(flatten)]
    extra: IndexMap<String, Value>,
}

fn dialect(host: ImportHost) -> Dialect {
    match host {
        ImportHost::ClaudeDesktop | ImportHost::Codex => Dialect::Literal,
        ImportHost::ClaudeCode => Dialect::Braced,
        ImportHost::Gemini => Dialect::Same,
        ImportHost::VsCode | ImportHost::Cursor | ImportHost::Windsurf => Dialect::Editor,
    }
}

fn kind(location: &str, t: &str) -> Result<Kind, String> {
    match t {
        "stdio" => Ok(Kind::Stdio),
        "http" | "streamable-http" | "streamableHttp" => Ok(Kind::Http),
        "sse" => Ok(Kind::Sse),
        other => Err(format!(
            "{location}.type: `{other}` is not stdio, http or sse"
        )),
    }
}

/// The file's servers, where the host keeps them.
pub(crate) fn parse(
    host: ImportHost,
    path: &Path,
    value: &Value,
    project_dir: &Path,
) -> Result<ImportedFile, ImportError> {
    let format = |message: String| ImportError::Format {
        path: path.to_path_buf(),
        message,
    };
    let Value::Object(root) = value else {
        return Err(format(format!(
            "expected a JSON object, found {}",
            type_name(value)
        )));
    };
    let mut out = ImportedFile::default();
    let mut rw = Rewrite {
        workspace: workspace_of(path),
        ..Default::default()
    };
    let servers_at = |obj: &Map<String, Value>,
                      key: &str,
                      at: &str|
     -> Result<Map<String, Value>, ImportError> {
        match obj.get(key) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(other) => Err(format(format!(
                "{at}: expected an object of servers, found {}",
                type_name(other)
            ))),
        }
    };
    match host {
        ImportHost::VsCode => {
            // `mcp.json`, or the older `"mcp": {"servers": …}` in VS Code's settings.json.
            let holder = match root.get("mcp") {
                Some(Value::Object(m)) if !root.contains_key("servers") => m,
                _ => root,
            };
            if let Some(Value::Array(inputs)) = holder.get("inputs") {
                for i in inputs {
                    if let Some(id) = i.get("id").and_then(Value::as_str) {
                        rw.inputs.push((
                            id.to_string(),
                            i.get("description")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            i.get("password").and_then(Value::as_bool).unwrap_or(false),
                        ));
                    }
                }
            }
            for (name, v) in servers_at(holder, "servers", "servers")? {
                let location = format!("servers.{name}");
                let r = entry(host, &location, &v, &mut rw);
                push(&mut out, name, location, r);
            }
        }
        ImportHost::ClaudeCode => {
            for (name, v) in servers_at(root, "mcpServers", "mcpServers")? {
                let location = format!("mcpServers.{name}");
                let r = entry(host, &location, &v, &mut rw);
                push(&mut out, name, location, r);
            }
            if let Some(Value::Object(projects)) = root.get("projects") {
                let mut others = Vec::new();
                for (dir, project) in projects {
                    let Some(Value::Object(_)) = project.get("mcpServers") else {
                        continue;
                    };
                    let at = format!("projects.{dir}.mcpServers");
                    let servers = servers_at(
                        project.as_object().unwrap_or(&Map::new()),
                        "mcpServers",
                        &at,
                    )?;
                    if servers.is_empty() {
                        continue;
                    }
                    if !same_dir(Path::new(dir), project_dir) {
                        others.push(format!("{dir} ({})", servers.len()));
                        continue;
                    }
                    for (name, v) in servers {
                        let location = format!("{at}.{name}");
                        let r = entry(host, &location, &v, &mut rw);
                        push(&mut out, name, location, r);
                    }
                }
                if !others.is_empty() {
                    out.notes.push(format!(
                        "servers of other projects were left out: {}; run the import in that folder to bring them",
                        others.join(", ")
                    ));
                }
            }
        }
        ImportHost::Gemini => {
            for (name, v) in servers_at(root, "mcpServers", "mcpServers")? {
                let location = format!("mcpServers.{name}");
                let r = gemini_entry(path, &name, &location, &v);
                push(&mut out, name, location, r);
            }
        }
        ImportHost::ClaudeDesktop
        | ImportHost::Cursor
        | ImportHost::Windsurf
        | ImportHost::Codex => {
            for (name, v) in servers_at(root, "mcpServers", "mcpServers")? {
                let location = format!("mcpServers.{name}");
                let r = entry(host, &location, &v, &mut rw);
                push(&mut out, name, location, r);
            }
        }
    }
    Ok(out)
}

fn push(
    out: &mut ImportedFile,
    name: String,
    location: String,
    r: Result<(Map<String, Value>, Vec<String>), String>,
) {
    match check_name(&location, &name).and(r) {
        Ok((entry, warnings)) => out.servers.push(ImportedServer {
            name,
            location,
            entry,
            warnings,
        }),
        Err(reason) => out.skipped.push(SkippedServer { name, reason }),
    }
}

/// The folder `${workspaceFolder}` means for a `<folder>/.vscode/mcp.json` or
/// `<folder>/.cursor/mcp.json`.
fn workspace_of(path: &Path) -> Option<String> {
    let dir = path.parent()?;
    let name = dir.file_name()?.to_string_lossy();
    if name == ".vscode" || name == ".cursor" {
        let folder = dir.parent()?;
        let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        return Some(folder.display().to_string());
    }
    None
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}

/// Step two for one entry of a JSON host.
fn entry(
    host: ImportHost,
    location: &str,
    value: &Value,
    rw: &mut Rewrite,
) -> Result<(Map<String, Value>, Vec<String>), String> {
    if !value.is_object() {
        return Err(format!(
            "{location}: expected an object, found {}",
            type_name(value)
        ));
    }
    let raw: RawEntry =
        serde_json::from_value(value.clone()).map_err(|e| format!("{location}: {e}"))?;
    let d = dialect(host);
    let mut draft = Draft {
        command: raw.command.as_deref().map(|c| rw.apply(d, c)),
        args: raw
            .args
            .unwrap_or_default()
            .iter()
            .map(|a| rw.apply(d, a))
            .collect(),
        cwd: raw.cwd.as_deref().map(|c| rw.apply(d, c)),
        disabled: raw.disabled.unwrap_or(false),
        exclude_tools: raw.disabled_tools.filter(|t| !t.is_empty()),
        ..Default::default()
    };
    if let Some(env) = &raw.env {
        draft.env = string_map(location, "env", env)?
            .into_iter()
            .map(|(k, v)| (k, rw.apply(d, &v)))
            .collect();
    }
    if let Some(headers) = &raw.headers {
        draft.headers = string_map(location, "headers", headers)?
            .into_iter()
            .map(|(k, v)| (k, rw.apply(d, &v)))
            .collect();
    }
    draft.url = match (raw.url, raw.server_url) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{location}: has both `url` and `serverUrl`; keep one"
            ));
        }
        (u, s) => u.or(s).map(|u| rw.apply(d, &u)),
    };
    draft.kind = raw.kind.as_deref().map(|t| kind(location, t)).transpose()?;
    if let Some(file) = &raw.env_file {
        draft.warnings.push(format!(
            "`envFile` ({file}) is not read by Switchboard: copy its variables into `env` (as `${{VAR}}` references for secrets)"
        ));
    }
    draft.dropped.extend(raw.extra.keys().cloned());
    draft.warnings.extend(rw.take_warnings());
    draft.finish(location)
}

/// Gemini CLI's entries are Switchboard's own format: validated with our raw parser,
/// the known fields kept verbatim (references included), the others named.
fn gemini_entry(
    path: &Path,
    name: &str,
    location: &str,
    value: &Value,
) -> Result<(Map<String, Value>, Vec<String>), String> {
    let raw = parse_server(path, name, value)?;
    if raw.command.is_none() && raw.url.is_none() && raw.http_url.is_none() {
        return Err(format!(
            "{location}: has none of `command`, `url` or `httpUrl`, so there is nothing to start"
        ));
    }
    let obj = value.as_object().cloned().unwrap_or_default();
    let mut entry = Map::new();
    let mut dropped = Vec::new();
    for (k, v) in obj {
        if SERVER_KEYS.contains(&k.as_str()) {
            entry.insert(k, v);
        } else {
            dropped.push(format!("`{k}`"));
        }
    }
    let mut warnings = super::secret_warnings(&entry);
    if !dropped.is_empty() {
        warnings.push(format!(
            "{} {} no equivalent in Switchboard and {} left out",
            dropped.join(", "),
            if dropped.len() == 1 { "has" } else { "have" },
            if dropped.len() == 1 { "was" } else { "were" },
        ));
    }
    Ok((entry, warnings))
}
