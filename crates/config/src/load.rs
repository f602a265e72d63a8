//! Loading settings: layers, merging, validation, policy and trust.
//!
//! The rules (layers, folder trust, merging, credentials bound to their destination,
//! policies that only get stricter) are documented on [`load`]. Besides `pinTools`,
//! `registryUrl` too counts only from the user or `--config` file. A broken entry (bad
//! field, unset variable, two transports) disables only that server, with a reason
//! naming the file, `mcpServers.<name>.<field>` and the fix; the others still start.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::doc::{project_settings_path, user_settings_path};
use crate::error::ConfigError;
use crate::jsonc;
use crate::raw::{self, IDP_KEYS, MCP_KEYS, OAUTH_KEYS, RawMcp, RawServer, SERVER_KEYS, type_name};
use crate::server::{self, Layer, ServerConfig, Sources};
use crate::suggest::unknown_key_warning;
use crate::trust::is_trusted;

/// Which layer a server comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The user file (`$SWITCHBOARD_HOME/settings.json`).
    User,
    /// The project file, or both layers merged.
    Project,
    /// The file given with `--config`.
    File,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::User => "user",
            Origin::Project => "project",
            Origin::File => "file",
        })
    }
}

/// What to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Switchboard's home (`$SWITCHBOARD_HOME`, default `~/.switchboard`), resolved by the caller.
    pub home: PathBuf,
    /// The project directory (usually the current directory).
    pub project_dir: PathBuf,
    /// `--config FILE`: read only this file.
    pub config_file: Option<PathBuf>,
}

/// Whether a server may be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryState {
    /// Start it.
    Enabled,
    /// `disabled: true` in the settings (`mcp disable`).
    Disabled,
    /// Blocked by `mcp.allowed` / `mcp.excluded`; the reason says which.
    Blocked(String),
}

/// One configured server, valid or not.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEntry {
    /// The key under `mcpServers` (`mcp` for `mcp.serverCommand`).
    pub name: String,
    /// Where it was defined.
    pub origin: Origin,
    /// The file that defined it (the project file for a merged server).
    pub source_file: PathBuf,
    /// The validated configuration, or why it is broken (names file, server, field, fix).
    pub config: Result<ServerConfig, String>,
    /// Whether it may start.
    pub state: EntryState,
    /// The command line or URL as written (before expansion), for display.
    pub raw_target: Option<String>,
}

impl ServerEntry {
    /// Valid and [`EntryState::Enabled`].
    pub fn should_start(&self) -> bool {
        self.config.is_ok() && self.state == EntryState::Enabled
    }
}

/// The result of [`load`].
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Every configured server, sorted by name.
    pub servers: Vec<ServerEntry>,
    /// Non-fatal problems (unknown keys, ignored fields, suspicious values).
    pub warnings: Vec<String>,
    /// True when neither settings file exists (and no `--config` was given).
    pub no_settings_file: bool,
    /// The files that were read, in layer order.
    pub files: Vec<PathBuf>,
    /// `urlPolicy` of the user file (or the `--config` file), for the HTTP layer.
    pub url_policy: Option<String>,
    /// `urlPolicy` of a trusted project file. It may only make the policy stricter:
    /// the HTTP layer applies it only when it is stricter than the policy otherwise in
    /// force (see `switchboard_net::choose_policy`).
    pub project_url_policy: Option<String>,
    /// `registryUrl` of the user file (or the `--config` file): the MCP Registry that
    /// `mcp search` and `mcp add --from-registry` ask. A project file cannot set it.
    pub registry_url: Option<String>,
    /// The project file that was not applied because its folder is not trusted.
    pub ignored_project: Option<IgnoredProject>,
    /// `model` (a string, or Gemini CLI's `model.name`).
    pub model: Option<String>,
    /// `provider`: the model API (`gemini` or `openai`), checked where the model client
    /// is built (`switchboard_model::Provider`).
    pub provider: Option<String>,
    /// `mcp.allowed` (non-empty: only these servers may start).
    pub allowed: Option<Vec<String>>,
    /// `mcp.excluded`.
    pub excluded: Vec<String>,
}

/// A project settings file that was not applied because its folder is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredProject {
    /// The project settings file.
    pub file: PathBuf,
    /// The folder to trust to apply it.
    pub folder: PathBuf,
    /// The servers it defines (empty when the file cannot be read as JSON).
    pub servers: Vec<String>,
    /// The top-level settings it sets (`urlPolicy`, `mcp.allowed`, …).
    pub settings: Vec<String>,
}

impl IgnoredProject {
    /// The command that trusts the folder.
    pub fn fix(&self) -> String {
        let folder = self.folder.to_string_lossy();
        let quoted =
            shlex::try_quote(&folder).map_or_else(|_| folder.to_string(), |q| q.into_owned());
        format!("switchboard trust {quoted}")
    }

    /// One line for the user: what was ignored, why, and the fix.
    pub fn message(&self) -> String {
        let mut what = Vec::new();
        if !self.servers.is_empty() {
            let names = self
                .servers
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ");
            what.push(format!(
                "{} server{} ({names})",
                self.servers.len(),
                if self.servers.len() == 1 { "" } else { "s" }
            ));
        }
        if !self.settings.is_empty() {
            what.push(self.settings.join(", "));
        }
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(": {} not applied", what.join(" and "))
        };
        format!(
            "ignored {} because the folder is not trusted{what}. A cloned project must not start servers or change policies by itself: review the file, then run `{}`",
            self.file.display(),
            self.fix()
        )
    }
}

impl Settings {
    /// The entry named `name`.
    pub fn server(&self, name: &str) -> Option<&ServerEntry> {
        self.servers.iter().find(|s| s.name == name)
    }
}

struct ParsedFile {
    layer: usize,
    servers: Vec<(String, Value)>,
    mcp: RawMcp,
    url_policy: Option<String>,
    registry_url: Option<String>,
    pin_tools: Option<bool>,
    model: Option<String>,
    provider: Option<String>,
}

fn invalid(path: &Path, field: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        path: path.to_path_buf(),
        field: field.to_string(),
        message,
    }
}

fn string_list(path: &Path, field: &str, v: &Value) -> Result<Option<Vec<String>>, ConfigError> {
    match v {
        Value::Null => Ok(None),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid(path, field, "expected a list of server names".into()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        other => Err(invalid(
            path,
            field,
            format!(
                "expected a list of server names, found {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_file(
    layer: usize,
    path: &Path,
    root: Value,
    warnings: &mut Vec<String>,
) -> Result<ParsedFile, ConfigError> {
    let Value::Object(root) = root else {
        return Err(invalid(
            path,
            "(root)",
            format!("expected a JSON object, found {}", type_name(&root)),
        ));
    };
    let servers = match root.get("mcpServers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(other) => {
            return Err(invalid(
                path,
                "mcpServers",
                format!(
                    "expected an object mapping server names to settings, found {}",
                    type_name(other)
                ),
            ));
        }
    };
    let mut mcp = RawMcp::default();
    match root.get("mcp") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (key, v) in m {
                match key.as_str() {
                    "allowed" => mcp.allowed = string_list(path, "mcp.allowed", v)?,
                    "excluded" => mcp.excluded = string_list(path, "mcp.excluded", v)?,
                    "serverCommand" => match v {
                        Value::Null => {}
                        Value::String(s) => mcp.server_command = Some(s.clone()),
                        other => {
                            return Err(invalid(
                                path,
                                "mcp.serverCommand",
                                format!(
                                    "expected a command line string, found {}",
                                    type_name(other)
                                ),
                            ));
                        }
                    },
                    _ => {
                        warnings.push(unknown_key_warning(path, "mcp", key, MCP_KEYS));
                        mcp.extra.insert(key.clone(), v.clone());
                    }
                }
            }
        }
        Some(other) => {
            return Err(invalid(
                path,
                "mcp",
                format!("expected an object, found {}", type_name(other)),
            ));
        }
    }
    // Gemini CLI's older top-level names.
    if mcp.allowed.is_none()
        && let Some(v) = root.get("allowMCPServers")
    {
        mcp.allowed = string_list(path, "allowMCPServers", v)?;
    }
    if mcp.excluded.is_none()
        && let Some(v) = root.get("excludeMCPServers")
    {
        mcp.excluded = string_list(path, "excludeMCPServers", v)?;
    }
    if mcp.server_command.is_none()
        && let Some(Value::String(s)) = root.get("mcpServerCommand")
    {
        mcp.server_command = Some(s.clone());
    }
    let url_policy = match root.get("urlPolicy") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(invalid(
                path,
                "urlPolicy",
                format!("expected a string, found {}", type_name(other)),
            ));
        }
    };
    let registry_url = match root.get("registryUrl") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(invalid(
                path,
                "registryUrl",
                format!("expected a URL string, found {}", type_name(other)),
            ));
        }
    };
    let pin_tools = match root.get("pinTools") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(invalid(
                path,
                "pinTools",
                format!("expected true or false, found {}", type_name(other)),
            ));
        }
    };
    let model = match root.get("model") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(m)) => m.get("name").and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    // The file is shared with other tools: a `provider` that is not a string is
    // ignored with a warning rather than breaking every command.
    let provider = match root.get("provider") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            warnings.push(format!(
                "{}: provider: expected `gemini` or `openai`, found {}; ignored",
                path.display(),
                type_name(other)
            ));
            None
        }
    };
    Ok(ParsedFile {
        layer,
        servers,
        mcp,
        url_policy,
        registry_url,
        pin_tools,
        model,
        provider,
    })
}

fn warn_unknown(file: &Path, name: &str, raw: &RawServer, warnings: &mut Vec<String>) {
    let base = format!("mcpServers.{name}");
    for key in raw.extra.keys() {
        warnings.push(unknown_key_warning(file, &base, key, SERVER_KEYS));
    }
    if let Some(oauth) = &raw.oauth {
        for key in oauth.extra.keys() {
            warnings.push(unknown_key_warning(
                file,
                &format!("{base}.oauth"),
                key,
                OAUTH_KEYS,
            ));
        }
        if let Some(idp) = &oauth.idp {
            for key in idp.extra.keys() {
                warnings.push(unknown_key_warning(
                    file,
                    &format!("{base}.oauth.idp"),
                    key,
                    IDP_KEYS,
                ));
            }
        }
    }
}

fn pick<T>(p: Option<T>, u: Option<T>, key: &str, ui: usize, src: &mut Sources) -> Option<T> {
    match p {
        Some(v) => Some(v),
        None => {
            if u.is_some() {
                src.fields.insert(key.to_string(), ui);
            }
            u
        }
    }
}

fn merge_map(
    u: Option<IndexMap<String, String>>,
    p: Option<IndexMap<String, String>>,
    prefix: &str,
    ui: usize,
    src: &mut Sources,
) -> Option<IndexMap<String, String>> {
    if u.is_none() && p.is_none() {
        return None;
    }
    let mut out = IndexMap::new();
    for (k, v) in u.unwrap_or_default() {
        src.fields.insert(format!("{prefix}.{k}"), ui);
        out.insert(k, v);
    }
    for (k, v) in p.unwrap_or_default() {
        src.fields.remove(&format!("{prefix}.{k}"));
        out.insert(k, v);
    }
    Some(out)
}

/// Where a server entry points: what runs, or what is contacted.
#[derive(PartialEq)]
struct Destination<'a> {
    command: Option<&'a str>,
    args: Option<&'a [String]>,
    cwd: Option<&'a str>,
    endpoint: Option<&'a str>,
}

fn destination(r: &RawServer) -> Destination<'_> {
    Destination {
        command: r.command.as_deref(),
        args: r.args.as_deref(),
        cwd: r.cwd.as_deref(),
        endpoint: r.http_url.as_deref().or(r.url.as_deref()),
    }
}

/// Where the merge of `u` and `p` will point (before merging: it decides what of `u`
/// may be used).
fn merged_destination<'a>(u: &'a RawServer, p: &'a RawServer) -> Destination<'a> {
    let mine = destination(p);
    if p.command.is_some() || p.url.is_some() || p.http_url.is_some() {
        return mine;
    }
    let theirs = destination(u);
    Destination {
        command: mine.command.or(theirs.command),
        args: mine.args.or(theirs.args),
        cwd: mine.cwd.or(theirs.cwd),
        endpoint: mine.endpoint.or(theirs.endpoint),
    }
}

/// Merges a user entry (layer `ui`) with a project entry (layer `pi`). The user
/// entry's credentials are dropped (with a warning) when the project points the
/// server somewhere else: see the module docs.
fn merge(
    name: &str,
    layers: &[Layer],
    (mut u, ui): (RawServer, usize),
    (p, pi): (RawServer, usize),
    warnings: &mut Vec<String>,
) -> (RawServer, Sources) {
    let mut src = Sources::single(pi);
    if merged_destination(&u, &p) != destination(&u) {
        let dropped: Vec<&str> = [
            ("headers", u.headers.take().is_some()),
            ("env", u.env.take().is_some()),
            ("oauth", u.oauth.take().is_some()),
            ("authProviderType", u.auth_provider_type.take().is_some()),
            ("trust", u.trust.take().is_some()),
            ("envPolicy", u.env_policy.take().is_some()),
            ("pinTools", u.pin_tools.take().is_some()),
        ]
        .into_iter()
        .filter_map(|(k, had)| had.then_some(k))
        .collect();
        if !dropped.is_empty() {
            warnings.push(format!(
                "{}: mcpServers.{name} points the server defined in {} somewhere else, so that entry's {} {} not used for it (credentials stay bound to the destination they were written for); set them in the project entry if this destination should have them",
                layers[pi].path.display(),
                layers[ui].path.display(),
                dropped.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
                if dropped.len() == 1 { "is" } else { "are" },
            ));
        }
    }
    if p.command.is_some() || p.url.is_some() || p.http_url.is_some() {
        u.command = None;
        u.args = None;
        u.cwd = None;
        u.url = None;
        u.http_url = None;
        u.kind = None;
    }
    let include_tools = match (u.include_tools, p.include_tools) {
        (Some(a), Some(b)) => Some(b.into_iter().filter(|t| a.contains(t)).collect()),
        (a, b) => pick(b, a, "includeTools", ui, &mut src),
    };
    let exclude_tools = match (u.exclude_tools, p.exclude_tools) {
        (Some(mut a), Some(b)) => {
            for t in b {
                if !a.contains(&t) {
                    a.push(t);
                }
            }
            Some(a)
        }
        (a, b) => pick(b, a, "excludeTools", ui, &mut src),
    };
    let mut extra = u.extra;
    extra.extend(p.extra);
    let merged = RawServer {
        command: pick(p.command, u.command, "command", ui, &mut src),
        args: pick(p.args, u.args, "args", ui, &mut src),
        env: merge_map(u.env, p.env, "env", ui, &mut src),
        cwd: pick(p.cwd, u.cwd, "cwd", ui, &mut src),
        url: pick(p.url, u.url, "url", ui, &mut src),
        http_url: pick(p.http_url, u.http_url, "httpUrl", ui, &mut src),
        kind: pick(p.kind, u.kind, "type", ui, &mut src),
        headers: merge_map(u.headers, p.headers, "headers", ui, &mut src),
        timeout: pick(p.timeout, u.timeout, "timeout", ui, &mut src),
        startup_timeout: pick(
            p.startup_timeout,
            u.startup_timeout,
            "startupTimeout",
            ui,
            &mut src,
        ),
        max_message_bytes: pick(
            p.max_message_bytes,
            u.max_message_bytes,
            "maxMessageBytes",
            ui,
            &mut src,
        ),
        trust: pick(p.trust, u.trust, "trust", ui, &mut src),
        include_tools,
        exclude_tools,
        oauth: pick(p.oauth, u.oauth, "oauth", ui, &mut src),
        auth_provider_type: pick(
            p.auth_provider_type,
            u.auth_provider_type,
            "authProviderType",
            ui,
            &mut src,
        ),
        description: pick(p.description, u.description, "description", ui, &mut src),
        disabled: pick(p.disabled, u.disabled, "disabled", ui, &mut src),
        env_policy: pick(p.env_policy, u.env_policy, "envPolicy", ui, &mut src),
        pin_tools: merge_pin_tools(
            name,
            layers,
            (u.pin_tools, ui),
            (p.pin_tools, pi),
            &mut src,
            warnings,
        ),
        extra,
    };
    (merged, src)
}

/// `pinTools` of a merged entry: a project may keep pinning on, never turn it off (the
/// user entry's value stands, or the default, on).
fn merge_pin_tools(
    name: &str,
    layers: &[Layer],
    (u, ui): (Option<bool>, usize),
    (p, pi): (Option<bool>, usize),
    src: &mut Sources,
    warnings: &mut Vec<String>,
) -> Option<bool> {
    if p == Some(false) {
        warnings.push(format!(
            "{}: mcpServers.{name}.pinTools: false is ignored: a project file cannot turn tool pinning off (set it in your user settings if you mean it)",
            layers[pi].path.display()
        ));
    }
    pick(p.filter(|on| *on), u, "pinTools", ui, src)
}

fn quote_line(command: &str, args: &[String]) -> String {
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .map(|w| shlex::try_quote(w).map_or_else(|_| w.to_string(), |q| q.into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn raw_target(raw: &RawServer) -> Option<String> {
    if let Some(c) = &raw.command {
        return Some(quote_line(c, raw.args.as_deref().unwrap_or_default()));
    }
    raw.http_url.clone().or_else(|| raw.url.clone())
}

/// Best-effort target of an entry that failed to parse.
fn value_target(values: &[(usize, Value)]) -> Option<String> {
    values.iter().rev().find_map(|(_, v)| {
        let get = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        get("command")
            .or_else(|| get("httpUrl"))
            .or_else(|| get("url"))
    })
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

struct Pending {
    name: String,
    origin: Origin,
    source_file: PathBuf,
    config: Result<ServerConfig, String>,
    disabled: bool,
    raw_target: Option<String>,
}

/// Loads, merges and validates settings. `env` looks up variables for expansion.
///
/// # Layers
/// Without `--config`, two files are read: the user file
/// `$SWITCHBOARD_HOME/settings.json` ([`crate::user_settings_path`]) and the project
/// file `<project>/.switchboard/settings.json` ([`crate::project_settings_path`]).
/// With `--config FILE`, only that file is read (and it must exist).
///
/// # Folder trust: a project file is untrusted until its folder is trusted
/// A project file comes with whatever repository was cloned, so it is not applied at
/// all until its folder is trusted ([`crate::trust_folder`], `switchboard trust`): no
/// server from it starts (HTTP ones included) and no policy from it applies. The
/// file is only looked at for names, to say what was ignored
/// ([`Settings::ignored_project`]); an unparsable untrusted file is not an error. A
/// `--config` file is an explicit choice and is trusted.
///
/// # Merging a server defined in both layers (trusted project)
/// Project fields override user fields, except: `includeTools` lists intersect,
/// `excludeTools` lists unite, and `env` and `headers` merge key by key (project
/// wins per key). If the project entry sets a transport (`command`, `url` or
/// `httpUrl`), the user entry's `command`, `args`, `cwd`, `url`, `httpUrl` and `type`
/// are dropped, so the two transports never mix. The merged server's origin is
/// [`Origin::Project`].
///
/// **Credentials are bound to the destination they were written for.** When the
/// merged entry points somewhere else than the user entry did (its command, args,
/// working directory or URL differ), none of the user entry's `headers`, `env`,
/// `oauth`, `authProviderType`, `trust` or `envPolicy` is used: the user wrote them
/// for the user's destination. (Stored OAuth tokens are keyed by URL, so a new URL
/// gets none either.) A warning says so.
///
/// # Top-level values
/// Policies can only be made stricter by a project file: `mcp.excluded` lists unite,
/// a non-empty `mcp.allowed` in both layers intersect (either one alone applies),
/// and the project's `urlPolicy` is kept apart ([`Settings::project_url_policy`]) for
/// the HTTP layer, which applies it only when it is stricter; `pinTools: false` (tool
/// pinning off, for all servers or one) counts only from the user or `--config` file,
/// with a warning when a project file says it. `mcp.serverCommand`,
/// `model` and `provider`: the project value replaces the user value when set. A non-empty
/// `mcp.allowed` blocks every server not listed; `mcp.excluded` blocks the servers
/// listed. `mcp.serverCommand` is split shell-style into a stdio server named `mcp`.
/// Gemini CLI's older top-level `allowMCPServers`, `excludeMCPServers` and
/// `mcpServerCommand` are read when the `mcp` block does not set them.
///
/// # Resilience
/// A file that is not JSON is fatal (the error names the file, line and column). A
/// broken server entry only breaks that server: it is listed with
/// `config: Err(reason)`. Unknown top-level keys are ignored (the file is shared with
/// other tools); unknown keys inside a server are warnings with a suggestion.
///
/// # Errors
/// Fatal errors: an unreadable file, a file that is not JSON, a top-level field of
/// the wrong type, a missing `--config` file (an untrusted project file is never
/// fatal: it is not applied). Everything else is reported per server or as a warning.
pub fn load(
    opts: &LoadOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigError> {
    let mut warnings = Vec::new();
    let mut layers: Vec<Layer> = Vec::new();
    let mut parsed: Vec<ParsedFile> = Vec::new();
    let home = absolute(&opts.home);
    let project_dir = absolute(&opts.project_dir);
    let mut no_settings_file = false;
    let mut ignored_project = None;

    let mut add = |path: PathBuf,
                   base_dir: PathBuf,
                   origin: Origin,
                   root: Value,
                   warnings: &mut Vec<String>| {
        let idx = layers.len();
        let file = parse_file(idx, &path, root, warnings)?;
        layers.push(Layer {
            path,
            base_dir,
            origin,
        });
        parsed.push(file);
        Ok::<(), ConfigError>(())
    };

    if let Some(cfg) = &opts.config_file {
        let path = absolute(cfg);
        let root = jsonc::read(&path)?
            .ok_or_else(|| ConfigError::ConfigFileMissing { path: path.clone() })?;
        let base = path
            .parent()
            .map_or_else(|| project_dir.clone(), Path::to_path_buf);
        add(path, base, Origin::File, root, &mut warnings)?;
    } else {
        let user = user_settings_path(&home);
        let project = project_settings_path(&project_dir);
        let same = match (
            std::fs::canonicalize(&user),
            std::fs::canonicalize(&project),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if let Some(root) = jsonc::read(&user)? {
            let base = home
                .parent()
                .map_or_else(|| home.clone(), Path::to_path_buf);
            add(user, base, Origin::User, root, &mut warnings)?;
        }
        if !same && project.exists() {
            if is_trusted(&home, &project_dir) {
                if let Some(root) = jsonc::read(&project)? {
                    add(
                        project,
                        project_dir.clone(),
                        Origin::Project,
                        root,
                        &mut warnings,
                    )?;
                }
            } else {
                ignored_project = Some(describe_ignored(project, &project_dir));
            }
        }
        no_settings_file = layers.is_empty() && ignored_project.is_none();
    }

    // Group entries by server name across layers.
    let mut by_name: IndexMap<String, Vec<(usize, Value)>> = IndexMap::new();
    for file in &parsed {
        for (name, v) in &file.servers {
            by_name
                .entry(name.clone())
                .or_default()
                .push((file.layer, v.clone()));
        }
    }

    let mut pending: Vec<Pending> = Vec::new();
    for (name, values) in &by_name {
        let origin = if values.len() > 1 {
            Origin::Project
        } else {
            layers[values[0].0].origin
        };
        let last_layer = values.last().map_or(0, |(l, _)| *l);
        let source_file = layers[last_layer].path.clone();
        let disabled = values
            .iter()
            .rev()
            .find_map(|(_, v)| v.get("disabled").and_then(Value::as_bool))
            .unwrap_or(false);
        let mut raws: Vec<(usize, RawServer)> = Vec::new();
        let mut failure: Option<String> = None;
        for (layer, v) in values {
            match raw::parse_server(&layers[*layer].path, name, v) {
                Ok(r) => {
                    warn_unknown(&layers[*layer].path, name, &r, &mut warnings);
                    raws.push((*layer, r));
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        let (config, target) = match failure {
            Some(e) => (Err(e), value_target(values)),
            None => {
                let mut iter = raws.into_iter();
                let (mut li, mut merged) = match iter.next() {
                    Some(first) => first,
                    None => continue,
                };
                let mut sources = Sources::single(li);
                for (pi, p) in iter {
                    let (m, s) = merge(name, &layers, (merged, li), (p, pi), &mut warnings);
                    merged = m;
                    sources = s;
                    li = pi;
                }
                let target = raw_target(&merged);
                let cfg = server::build(name, &merged, &sources, &layers, env, &mut warnings);
                (cfg, target)
            }
        };
        pending.push(Pending {
            name: name.clone(),
            origin,
            source_file,
            config,
            disabled,
            raw_target: target,
        });
    }

    // Top-level values. Policies only get stricter through a project file; the
    // others are replaced by the later layer when it sets them.
    let mut allowed: Option<Vec<String>> = None;
    let mut excluded: Option<Vec<String>> = None;
    let mut server_command: Option<(usize, String)> = None;
    let mut url_policy = None;
    let mut project_url_policy = None;
    let mut registry_url = None;
    let mut pin_tools = true;
    let mut model = None;
    let mut provider = None;
    for file in &parsed {
        let project = layers[file.layer].origin == Origin::Project;
        if let Some(list) = file.mcp.allowed.as_ref().filter(|l| !l.is_empty()) {
            allowed = Some(
                match allowed.take().filter(|a: &Vec<String>| !a.is_empty()) {
                    Some(before) => before.into_iter().filter(|n| list.contains(n)).collect(),
                    None => list.clone(),
                },
            );
        } else if allowed.is_none() {
            allowed.clone_from(&file.mcp.allowed);
        }
        if let Some(list) = &file.mcp.excluded {
            let all = excluded.get_or_insert_with(Vec::new);
            for n in list {
                if !all.contains(n) {
                    all.push(n.clone());
                }
            }
        }
        if let Some(c) = &file.mcp.server_command {
            server_command = Some((file.layer, c.clone()));
        }
        if project {
            project_url_policy.clone_from(&file.url_policy);
        } else if file.url_policy.is_some() {
            url_policy.clone_from(&file.url_policy);
        }
        if !project && file.registry_url.is_some() {
            registry_url.clone_from(&file.registry_url);
        }
        match (project, file.pin_tools) {
            (false, Some(on)) => pin_tools = on,
            (true, Some(false)) => warnings.push(format!(
                "{}: pinTools: false is ignored: a project file cannot turn tool pinning off (set it in your user settings if you mean it)",
                layers[file.layer].path.display()
            )),
            _ => {}
        }
        if file.model.is_some() {
            model.clone_from(&file.model);
        }
        if file.provider.is_some() {
            provider.clone_from(&file.provider);
        }
    }

    if let Some((layer, line)) = server_command {
        let file = &layers[layer].path;
        let config = match shlex::split(&line) {
            None => Err(format!(
                "{}: mcp.serverCommand: cannot split `{line}` into words (check the quotes)",
                file.display()
            )),
            Some(words) if words.is_empty() => Err(format!(
                "{}: mcp.serverCommand: the command is empty",
                file.display()
            )),
            Some(mut words) => {
                let command = words.remove(0);
                let raw = RawServer {
                    command: Some(command),
                    args: Some(words),
                    ..RawServer::default()
                };
                server::build(
                    "mcp",
                    &raw,
                    &Sources::single(layer),
                    &layers,
                    env,
                    &mut warnings,
                )
            }
        };
        if let Some(pos) = pending.iter().position(|p| p.name == "mcp") {
            warnings.push(format!(
                "{}: mcp.serverCommand replaces the server `mcp` defined in {}",
                file.display(),
                pending[pos].source_file.display()
            ));
            pending.remove(pos);
        }
        pending.push(Pending {
            name: "mcp".into(),
            origin: layers[layer].origin,
            source_file: file.clone(),
            config,
            disabled: false,
            raw_target: Some(line),
        });
    }

    if !pin_tools {
        for p in &mut pending {
            if let Ok(cfg) = &mut p.config {
                cfg.pin_tools = false;
            }
        }
    }
    let excluded = excluded.unwrap_or_default();
    let mut servers: Vec<ServerEntry> = pending
        .into_iter()
        .map(|p| {
            let state = if excluded.contains(&p.name) {
                EntryState::Blocked("listed in mcp.excluded".into())
            } else if allowed
                .as_ref()
                .is_some_and(|a| !a.is_empty() && !a.contains(&p.name))
            {
                EntryState::Blocked("not in mcp.allowed".into())
            } else if p.disabled {
                EntryState::Disabled
            } else {
                EntryState::Enabled
            };
            ServerEntry {
                name: p.name,
                origin: p.origin,
                source_file: p.source_file,
                config: p.config,
                state,
                raw_target: p.raw_target,
            }
        })
        .collect();
    servers.sort_by(|a, b| a.name.cmp(&b.name));

    Ok(Settings {
        servers,
        warnings,
        no_settings_file,
        files: layers.into_iter().map(|l| l.path).collect(),
        url_policy,
        project_url_policy,
        registry_url,
        ignored_project,
        model,
        provider,
        allowed,
        excluded,
    })
}

/// What an untrusted project file would have set, read without applying anything
/// (a file that is not JSON only yields its path).
fn describe_ignored(file: PathBuf, folder: &Path) -> IgnoredProject {
    let root = jsonc::read(&file).ok().flatten();
    let obj = root.as_ref().and_then(Value::as_object);
    let servers = obj
        .and_then(|o| o.get("mcpServers"))
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let mut settings = Vec::new();
    if let Some(o) = obj {
        for key in [
            "urlPolicy",
            "registryUrl",
            "pinTools",
            "model",
            "provider",
            "allowMCPServers",
            "excludeMCPServers",
            "mcpServerCommand",
        ] {
            if o.get(key).is_some_and(|v| !v.is_null()) {
                settings.push(format!("`{key}`"));
            }
        }
        if let Some(mcp) = o.get("mcp").and_then(Value::as_object) {
            for key in mcp.keys() {
                settings.push(format!("`mcp.{key}`"));
            }
        }
    }
    IgnoredProject {
        file,
        folder: folder.to_path_buf(),
        servers,
        settings,
    }
}
