//! Commands that edit settings: `mcp add/remove/enable/disable`, `mcp get` (read-only,
//! secrets masked) and `trust`. Files are rewritten atomically and keep every field
//! Switchboard does not know (the file is shared with other tools).
//!
//! No command writes settings that silently do not apply: without `--scope`, a server is
//! added to the project file only when the current folder is trusted, else to the user
//! file ([`default_scope`]; `mcp add --from-registry` uses the same rule), and every
//! write says which file and scope it went to. An explicit `--scope project` in an
//! untrusted folder is written, with a note that it does not apply until `switchboard
//! trust`. `mcp remove/enable/disable` without `--scope` edit the one file (project or
//! user) that defines the server.
//!
//! `mcp remove` of a server that runs from an installed bundle
//! (`$SWITCHBOARD_HOME/bundles/NAME-SHA12/`) also deletes that folder, once no entry in
//! the user, project or `--config` file runs from it; only a direct child of `bundles/`
//! counts, so a path with `..` that leads out of it deletes nothing.
//!
//! `mcp add NAME CMD -- ARGS…` and Claude Code's `mcp add NAME -- CMD ARGS…` (the
//! command after `--`) write the same entry. A server name that `mcp get/remove/enable/
//! disable` does not find gets "did you mean" (`switchboard_config::did_you_mean`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Map, Value, json};
use switchboard_config::{
    SettingsDoc, child_env, describe_env_policy, is_secret_name, mask_secret,
    project_settings_path, revoke_folder, trust_folder, trusted_folders, trusted_folders_path,
    user_settings_path,
};

use crate::ctx::{self, Globals};

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The server's name.
    pub name: String,
    /// A command (stdio) or an http(s):// URL (not with --from-registry). Claude Code's
    /// form `mcp add NAME -- CMD ARGS…` (the command after `--`) is accepted too.
    #[arg(
        required_unless_present_any = ["from_registry", "args"],
        conflicts_with = "from_registry"
    )]
    pub command_or_url: Option<String>,
    /// Install from the MCP Registry: a server name such as
    /// `io.github.example/weather-mcp`, optionally `@VERSION` (default: the latest).
    #[arg(long, value_name = "ID[@VERSION]")]
    pub from_registry: Option<String>,
    /// The MCP Registry to ask (default: `registryUrl` in the user settings, else
    /// `https://registry.modelcontextprotocol.io`).
    #[arg(long, value_name = "URL", requires = "from_registry")]
    pub registry: Option<String>,
    /// Arguments for the command (after `--`).
    #[arg(last = true)]
    pub args: Vec<String>,
    /// Environment variable for the server process (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// HTTP header (repeatable).
    #[arg(long = "header", short = 'H', value_name = "\"Name: value\"")]
    pub headers: Vec<String>,
    /// Which settings file: user ($SWITCHBOARD_HOME/settings.json) or project
    /// (./.switchboard/settings.json). Default: project when this folder is trusted
    /// (`switchboard trust`), else user, so that the server applies here.
    #[arg(long, short)]
    pub scope: Option<String>,
    /// stdio, http or sse (default: stdio for a command, http for a URL).
    #[arg(long, short)]
    pub transport: Option<String>,
    /// Request timeout in milliseconds.
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
    /// Skip tool-call confirmations for this server.
    #[arg(long)]
    pub trust: bool,
    /// A description shown in lists.
    #[arg(long)]
    pub description: Option<String>,
}

/// The settings file `scope` names (`--config FILE` wins over any scope); without a
/// scope, the one [`default_scope`] chooses.
pub(crate) fn settings_path(g: &Globals, scope: Option<&str>) -> Result<PathBuf> {
    if let Some(file) = &g.config {
        return Ok(file.clone());
    }
    let scope = match scope {
        Some(s) => s,
        None => default_scope()?,
    };
    match scope {
        "project" => Ok(project_settings_path(&ctx::project_dir()?)),
        "user" => Ok(user_settings_path(&ctx::home_dir()?)),
        other => bail!("--scope must be `project` or `user`, not `{other}`"),
    }
}

/// The scope a server is added to without `--scope`: `project` when the current folder
/// is trusted (its `.switchboard/settings.json` applies), else `user`. A project file
/// in an untrusted folder is ignored, so writing there by default would add a server
/// that does not show up.
pub(crate) fn default_scope() -> Result<&'static str> {
    Ok(if folder_trusted()? { "project" } else { "user" })
}

/// Whether the current folder is trusted, so that its project settings apply.
fn folder_trusted() -> Result<bool> {
    Ok(switchboard_config::is_trusted(
        &ctx::home_dir()?,
        &ctx::project_dir()?,
    ))
}

/// The file `mcp remove/enable/disable NAME` edits: `--config`, else the file `scope`
/// names, else the one of the project and user files that defines `name`.
fn file_defining(g: &Globals, name: &str, scope: Option<&str>) -> Result<PathBuf> {
    if g.config.is_some() || scope.is_some() {
        return settings_path(g, scope);
    }
    let project = project_settings_path(&ctx::project_dir()?);
    let user = user_settings_path(&ctx::home_dir()?);
    let mut found = Vec::new();
    for path in [&project, &user] {
        if path.is_file() && SettingsDoc::open(path)?.server(name).is_some() {
            found.push(path);
        }
    }
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let mut names = Vec::new();
            for path in [&project, &user] {
                if path.is_file() {
                    names.extend(SettingsDoc::open(path)?.server_names());
                }
            }
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            bail!(
                "no server `{name}` in {} or {}{}; `switchboard mcp list` shows the configured servers",
                project.display(),
                user.display(),
                switchboard_config::did_you_mean(name, &names)
            )
        }
        _ => bail!(
            "`{name}` is defined in both {} and {}; say which with --scope project or --scope user",
            project.display(),
            user.display()
        ),
    }
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.chars().any(|c| c.is_control() || c == '/') {
        bail!("`{name}` is not a usable server name (no slashes or control characters)");
    }
    Ok(())
}

pub fn add(g: &Globals, a: AddArgs) -> Result<ExitCode> {
    check_name(&a.name)?;
    // Claude Code's form: `mcp add NAME -- CMD ARGS…`.
    let (command_or_url, args) = match (a.command_or_url.clone(), a.args.split_first()) {
        (Some(c), _) => (c, a.args.clone()),
        (None, Some((c, rest))) => (c.clone(), rest.to_vec()),
        (None, None) => bail!(
            "give a command or URL to add: `switchboard mcp add NAME CMD -- ARGS…` or `switchboard mcp add NAME -- CMD ARGS…` (or --from-registry ID)"
        ),
    };
    let is_url = command_or_url.starts_with("http://") || command_or_url.starts_with("https://");
    let transport = a.transport.clone().unwrap_or_else(|| {
        if is_url {
            "http".into()
        } else {
            "stdio".into()
        }
    });
    let mut entry = Map::new();
    match transport.as_str() {
        "stdio" => {
            if is_url {
                bail!(
                    "`{}` is a URL; use --transport http or sse for it",
                    command_or_url
                );
            }
            if !a.headers.is_empty() {
                bail!("--header is for http and sse servers, not stdio");
            }
            entry.insert("command".into(), json!(command_or_url));
            if !args.is_empty() {
                entry.insert("args".into(), json!(args));
            }
        }
        "http" | "sse" => {
            if !is_url {
                bail!(
                    "`{}` is not an http(s):// URL; a {transport} server needs one",
                    command_or_url
                );
            }
            if !args.is_empty() {
                bail!("arguments after `--` are for stdio servers only");
            }
            if transport == "http" {
                entry.insert("httpUrl".into(), json!(command_or_url));
            } else {
                entry.insert("url".into(), json!(command_or_url));
                entry.insert("type".into(), json!("sse"));
            }
        }
        other => bail!("--transport must be stdio, http or sse, not `{other}`"),
    }
    if !a.env.is_empty() {
        if transport != "stdio" {
            bail!("--env is for stdio servers only");
        }
        let mut env = Map::new();
        for kv in &a.env {
            let (k, v) = kv
                .split_once('=')
                .with_context(|| format!("--env `{kv}` is not KEY=VALUE"))?;
            env.insert(k.to_string(), json!(v));
        }
        entry.insert("env".into(), Value::Object(env));
    }
    if !a.headers.is_empty() {
        let mut headers = Map::new();
        for h in &a.headers {
            let (k, v) = h
                .split_once(':')
                .with_context(|| format!("--header `{h}` is not \"Name: value\""))?;
            headers.insert(k.trim().to_string(), json!(v.trim()));
        }
        entry.insert("headers".into(), Value::Object(headers));
    }
    if let Some(t) = a.timeout {
        entry.insert("timeout".into(), json!(t));
    }
    if a.trust {
        entry.insert("trust".into(), json!(true));
    }
    if let Some(d) = &a.description {
        entry.insert("description".into(), json!(d));
    }
    write_entry(
        g,
        &a.name,
        a.scope.as_deref(),
        Value::Object(entry),
        &transport,
        false,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Writes server `name` into the settings file chosen by `scope` (atomically, keeping
/// every other field), and notes when a project file will not apply until trusted.
/// With `refuse_existing`, an entry of that name already there is an error.
pub(crate) fn write_entry(
    g: &Globals,
    name: &str,
    scope: Option<&str>,
    entry: Value,
    transport: &str,
    refuse_existing: bool,
) -> Result<()> {
    let path = settings_path(g, scope)?;
    let mut doc = SettingsDoc::open(&path)?;
    let existed = doc.server(name).is_some();
    if existed && refuse_existing {
        bail!(
            "a server named `{name}` already exists in {}; choose another name, or remove it first with `switchboard mcp remove {name}`",
            path.display()
        );
    }
    doc.set_server(name, entry)?;
    doc.save()?;
    let (verb, prep) = if existed {
        ("Updated", "in")
    } else {
        ("Added", "to")
    };
    let scope = match (g.config.is_some(), scope) {
        (true, _) => "the --config file",
        (false, Some(s)) => s,
        (false, None) => default_scope()?,
    };
    let scope_note = if scope == "the --config file" {
        scope.to_string()
    } else {
        format!("{scope} scope")
    };
    outln!(
        "{verb} server `{name}` ({transport}) {prep} {} ({scope_note})",
        path.display()
    );
    if scope == "project" && !folder_trusted()? {
        outln!(
            "Note: this folder is not trusted, so {} is ignored here and `{name}` will not start; review the file, then run `switchboard trust` to use it (or add it with --scope user).",
            path.display()
        );
    }
    Ok(())
}

pub fn remove(g: &Globals, name: &str, scope: Option<&str>) -> Result<ExitCode> {
    let path = file_defining(g, name, scope)?;
    let mut doc = SettingsDoc::open(&path)?;
    let bundles = ctx::home_dir()?.join("bundles");
    let bundle = doc.server(name).and_then(|e| bundle_dir_of(e, &bundles));
    if !doc.remove_server(name) {
        bail!(
            "no server `{name}` in {} (try --scope user or --scope project)",
            path.display()
        );
    }
    doc.save()?;
    outln!("Removed server `{name}` from {}", path.display());
    if let Some(dir) = bundle {
        remove_bundle(g, &dir, &bundles)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The bundle folder (`$SWITCHBOARD_HOME/bundles/NAME-SHA12`) a settings entry runs
/// from, when its command, an argument or its cwd lies inside one. Only a direct child
/// of `bundles` counts (a `..` in the path does not lead out of it).
fn bundle_dir_of(entry: &Value, bundles: &std::path::Path) -> Option<PathBuf> {
    let mut texts: Vec<&str> = Vec::new();
    for key in ["command", "cwd"] {
        if let Some(t) = entry.get(key).and_then(Value::as_str) {
            texts.push(t);
        }
    }
    if let Some(args) = entry.get("args").and_then(Value::as_array) {
        texts.extend(args.iter().filter_map(Value::as_str));
    }
    texts.into_iter().find_map(|t| {
        // Settings store a literal `$` as `$$`.
        let path = PathBuf::from(t.replace("$$", "$"));
        let rest = path.strip_prefix(bundles).ok()?;
        match rest.components().next()? {
            std::path::Component::Normal(first) => Some(bundles.join(first)),
            _ => None,
        }
    })
}

/// Deletes an unpacked bundle once no server in the user or project settings (or the
/// `--config` file) runs from it any more.
fn remove_bundle(g: &Globals, dir: &std::path::Path, bundles: &std::path::Path) -> Result<()> {
    let mut files = vec![user_settings_path(&ctx::home_dir()?)];
    files.push(project_settings_path(&ctx::project_dir()?));
    if let Some(file) = &g.config {
        files.push(file.clone());
    }
    for file in files.iter().filter(|f| f.is_file()) {
        let doc = SettingsDoc::open(file)?;
        let users: Vec<String> = doc
            .server_names()
            .into_iter()
            .filter(|n| {
                doc.server(n)
                    .and_then(|e| bundle_dir_of(e, bundles))
                    .is_some_and(|d| d == dir)
            })
            .collect();
        if let Some(other) = users.first() {
            outln!(
                "Kept the bundle in {} (server `{other}` in {} still runs from it)",
                dir.display(),
                file.display()
            );
            return Ok(());
        }
    }
    if dir.is_dir() {
        std::fs::remove_dir_all(dir).with_context(|| {
            format!(
                "could not delete the bundle in {}; delete it by hand",
                dir.display()
            )
        })?;
        outln!("Deleted the bundle's files in {}", dir.display());
    }
    Ok(())
}

pub fn set_enabled(
    g: &Globals,
    name: &str,
    scope: Option<&str>,
    enabled: bool,
) -> Result<ExitCode> {
    let path = file_defining(g, name, scope)?;
    let mut doc = SettingsDoc::open(&path)?;
    if doc.server(name).is_none() {
        bail!(
            "no server `{name}` in {} (try --scope user or --scope project)",
            path.display()
        );
    }
    doc.set_disabled(name, !enabled)?;
    doc.save()?;
    outln!(
        "{} server `{name}` in {}",
        if enabled { "Enabled" } else { "Disabled" },
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `switchboard trust [path] [--revoke | --list]`.
pub fn trust(path: Option<PathBuf>, revoke: bool, list: bool) -> Result<ExitCode> {
    let home = ctx::home_dir()?;
    if list {
        let folders = trusted_folders(&home)?;
        if folders.is_empty() {
            outln!(
                "No trusted folders ({}).",
                trusted_folders_path(&home).display()
            );
        }
        for f in folders {
            outln!("{}", f.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dir = match path {
        Some(p) => p,
        None => ctx::project_dir()?,
    };
    if revoke {
        let r = revoke_folder(&home, &dir)?;
        if r.removed.is_empty() {
            outln!("{} was not in the trusted folders.", dir.display());
        } else {
            outln!(
                "No longer trusted: {}. Its .switchboard/settings.json is ignored again.",
                r.removed[0].display()
            );
        }
        if !r.still_trusted_by.is_empty() {
            let by: Vec<String> = r
                .still_trusted_by
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            outln!(
                "It is still trusted through {}: run `switchboard trust --revoke` on {} to stop that.",
                by.join(", "),
                if by.len() == 1 { "it" } else { "each" }
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let trusted = trust_folder(&home, &dir)?;
    outln!(
        "Trusted {}: its .switchboard/settings.json now applies (its servers, including commands, and its policies). Undo with `switchboard trust --revoke`.",
        trusted.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn mask_map(map: &indexmap::IndexMap<String, String>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| {
            let shown = if is_secret_name(k) {
                mask_secret(v)
            } else {
                v.clone()
            };
            (k.clone(), json!(shown))
        })
        .collect()
}

pub fn get(g: &Globals, name: &str, as_json: bool) -> Result<ExitCode> {
    let settings = ctx::load_settings(g)?;
    let Some(entry) = settings.servers.iter().find(|s| s.name == name) else {
        if let Some(ignored) = settings
            .ignored_project
            .as_ref()
            .filter(|i| i.servers.iter().any(|n| n == name))
        {
            bail!(
                "`{name}` is defined in {}, which is ignored because the folder is not trusted; review it, then run `{}`",
                ignored.file.display(),
                ignored.fix()
            );
        }
        let names: Vec<&str> = settings.servers.iter().map(|s| s.name.as_str()).collect();
        bail!(
            "no server named `{name}`{}; configured: {}",
            switchboard_config::did_you_mean(name, &names),
            if names.is_empty() {
                "(none)".into()
            } else {
                names.join(", ")
            }
        );
    };
    let mut out = Map::new();
    out.insert("name".into(), json!(entry.name));
    out.insert("origin".into(), json!(entry.origin.to_string()));
    out.insert(
        "file".into(),
        json!(entry.source_file.display().to_string()),
    );
    out.insert(
        "state".into(),
        json!(match &entry.state {
            switchboard_config::EntryState::Enabled => "enabled".to_string(),
            switchboard_config::EntryState::Disabled => "disabled".to_string(),
            switchboard_config::EntryState::Blocked(r) => format!("blocked: {r}"),
        }),
    );
    match &entry.config {
        Err(reason) => {
            out.insert("error".into(), json!(reason));
        }
        Ok(cfg) => {
            out.insert("transport".into(), json!(cfg.transport.kind_name()));
            match &cfg.transport {
                switchboard_config::Transport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                } => {
                    out.insert("command".into(), json!(command));
                    out.insert("args".into(), json!(args));
                    out.insert("env".into(), Value::Object(mask_map(env)));
                    if let Some(cwd) = cwd {
                        out.insert("cwd".into(), json!(cwd.display().to_string()));
                    }
                    out.insert("envPolicy".into(), json!(cfg.env_policy.to_string()));
                    out.insert(
                        "envPolicyDescription".into(),
                        json!(describe_env_policy(cfg.env_policy)),
                    );
                    let passed: Vec<String> = child_env(cfg.env_policy, std::env::vars(), env)
                        .into_iter()
                        .map(|(k, _)| k)
                        .collect();
                    out.insert("environmentPassed".into(), json!(passed));
                }
                other => {
                    out.insert("url".into(), json!(other.url()));
                    if let Some(h) = other.headers() {
                        out.insert("headers".into(), Value::Object(mask_map(h)));
                    }
                }
            }
            out.insert("timeoutMs".into(), json!(cfg.timeout.as_millis() as u64));
            out.insert(
                "startupTimeoutMs".into(),
                json!(cfg.startup_timeout.as_millis() as u64),
            );
            out.insert("trust".into(), json!(cfg.trust));
            if let Some(i) = &cfg.include_tools {
                out.insert("includeTools".into(), json!(i));
            }
            if !cfg.exclude_tools.is_empty() {
                out.insert("excludeTools".into(), json!(cfg.exclude_tools));
            }
            if let Some(o) = &cfg.oauth {
                let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
                if let Some(obj) = v.as_object_mut() {
                    for key in ["clientSecret", "idToken"] {
                        if let Some(s) = obj.get(key).and_then(Value::as_str).map(mask_secret) {
                            obj.insert(key.into(), json!(s));
                        }
                    }
                    if let Some(idp) = obj.get_mut("idp").and_then(Value::as_object_mut)
                        && let Some(s) = idp.get("idToken").and_then(Value::as_str).map(mask_secret)
                    {
                        idp.insert("idToken".into(), json!(s));
                    }
                }
                out.insert("oauth".into(), v);
            }
            if let Some(d) = &cfg.description {
                out.insert("description".into(), json!(d));
            }
        }
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&Value::Object(out))?);
    } else {
        for (k, v) in &out {
            match v {
                Value::String(s) => outln!("{k}: {s}"),
                other => outln!("{k}: {other}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
