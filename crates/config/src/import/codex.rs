//! Codex's `config.toml`: `[mcp_servers.NAME]` tables, read with the `toml` crate
//! into a permissive shape (step one), then mapped to a Switchboard entry: seconds
//! become milliseconds, `bearer_token_env_var` an `Authorization: Bearer ${VAR}`
//! header, `env_vars` and `env_http_headers` `${VAR}` references, `enabled = false`
//! `disabled`, `enabled_tools`/`disabled_tools` `includeTools`/`excludeTools`.
//! Codex expands no variables, so every literal `$` is escaped.

use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::vars::{Dialect, Rewrite};
use super::{Draft, ImportError, ImportedFile, ImportedServer, Kind, SkippedServer, check_name};

/// One `[mcp_servers.NAME]` table as written.
#[derive(Debug, Default, Deserialize)]
struct RawCodexServer {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<IndexMap<String, String>>,
    env_vars: Option<Vec<String>>,
    cwd: Option<String>,
    url: Option<String>,
    bearer_token_env_var: Option<String>,
    http_headers: Option<IndexMap<String, String>>,
    env_http_headers: Option<IndexMap<String, String>>,
    startup_timeout_sec: Option<f64>,
    startup_timeout_ms: Option<u64>,
    tool_timeout_sec: Option<f64>,
    enabled: Option<bool>,
    enabled_tools: Option<Vec<String>>,
    disabled_tools: Option<Vec<String>>,
    #[serde(flatten)]
    extra: IndexMap<String, toml::Value>,
}

fn millis(location: &str, field: &str, secs: f64) -> Result<u64, String> {
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "{location}.{field}: expected a positive number of seconds"
        ));
    }
    Ok((secs * 1000.0).round() as u64)
}

fn is_env_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && c.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

pub(crate) fn parse(path: &Path, text: &str) -> Result<ImportedFile, ImportError> {
    let root: toml::Table = toml::from_str(text).map_err(|e| ImportError::Format {
        path: path.to_path_buf(),
        message: format!("invalid TOML: {e}"),
    })?;
    let mut out = ImportedFile::default();
    let servers = match root.get("mcp_servers") {
        None => return Ok(out),
        Some(toml::Value::Table(t)) => t,
        Some(other) => {
            return Err(ImportError::Format {
                path: path.to_path_buf(),
                message: format!(
                    "mcp_servers: expected a table of servers, found a {}",
                    other.type_str()
                ),
            });
        }
    };
    for (name, value) in servers {
        let location = format!("mcp_servers.{name}");
        match check_name(&location, name).and_then(|()| entry(&location, value)) {
            Ok((entry, warnings)) => out.servers.push(ImportedServer {
                name: name.clone(),
                location,
                entry,
                warnings,
            }),
            Err(reason) => out.skipped.push(SkippedServer {
                name: name.clone(),
                reason,
            }),
        }
    }
    Ok(out)
}

fn entry(location: &str, value: &toml::Value) -> Result<(Map<String, Value>, Vec<String>), String> {
    let raw: RawCodexServer = value
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| format!("{location}: {}", e.message()))?;
    let mut rw = Rewrite::default();
    let lit = |rw: &mut Rewrite, s: &str| rw.apply(Dialect::Literal, s);
    let mut d = Draft {
        command: raw.command.as_deref().map(|c| lit(&mut rw, c)),
        args: raw
            .args
            .unwrap_or_default()
            .iter()
            .map(|a| lit(&mut rw, a))
            .collect(),
        cwd: raw.cwd.as_deref().map(|c| lit(&mut rw, c)),
        url: raw.url.as_deref().map(|u| lit(&mut rw, u)),
        kind: raw.url.as_ref().map(|_| Kind::Http),
        disabled: raw.enabled == Some(false),
        include_tools: raw.enabled_tools,
        exclude_tools: raw.disabled_tools.filter(|t| !t.is_empty()),
        ..Default::default()
    };
    if raw.command.is_some() {
        d.kind = Some(Kind::Stdio);
    }
    for (k, v) in raw.env.unwrap_or_default() {
        let v = lit(&mut rw, &v);
        d.env.insert(k, v);
    }
    // Variables Codex passes through from its own environment: a reference each.
    for name in raw.env_vars.unwrap_or_default() {
        if !is_env_name(&name) {
            return Err(format!(
                "{location}.env_vars: `{name}` is not a variable name"
            ));
        }
        d.env
            .entry(name.clone())
            .or_insert_with(|| format!("${{{name}}}"));
    }
    for (k, v) in raw.http_headers.unwrap_or_default() {
        let v = lit(&mut rw, &v);
        d.headers.insert(k, v);
    }
    for (k, var) in raw.env_http_headers.unwrap_or_default() {
        if !is_env_name(&var) {
            return Err(format!(
                "{location}.env_http_headers.{k}: `{var}` is not a variable name"
            ));
        }
        d.headers.insert(k, format!("${{{var}}}"));
    }
    if let Some(var) = &raw.bearer_token_env_var {
        if !is_env_name(var) {
            return Err(format!(
                "{location}.bearer_token_env_var: `{var}` is not a variable name"
            ));
        }
        d.headers
            .insert("Authorization".into(), format!("Bearer ${{{var}}}"));
    }
    d.startup_timeout_ms = match (raw.startup_timeout_sec, raw.startup_timeout_ms) {
        (Some(s), _) => Some(millis(location, "startup_timeout_sec", s)?),
        (None, ms) => ms,
    };
    d.timeout_ms = raw
        .tool_timeout_sec
        .map(|s| millis(location, "tool_timeout_sec", s))
        .transpose()?;
    d.dropped.extend(raw.extra.keys().cloned());
    d.finish(location)
}
