//! Step two of parsing: validated server configuration.
//!
//! # Transport rules (as Gemini CLI)
//! - `command` → [`Transport::Stdio`];
//! - `httpUrl` → [`Transport::Http`] (Streamable HTTP);
//! - `url` + `"type": "sse"` → [`Transport::Sse`];
//! - `url` + `"type": "http"` (or `"streamable-http"`) → [`Transport::Http`];
//! - `url` with no `type` → [`Transport::AutoHttp`]: try Streamable HTTP, fall back to
//!   SSE (the connection layer does that).
//!
//! Exactly one of `command`, `url`, `httpUrl` must be set. URLs must be `http(s)`.
//!
//! # Limits
//! `timeout` (every request, `initialize` included) defaults to 10 min and
//! `startupTimeout` to 30 s; `maxMessageBytes` (one message from the server, on every
//! transport) defaults to 16 MiB and must lie between 64 KiB and 1 GiB.
//!
//! # Relative `cwd`
//! A relative `cwd` is resolved against the directory that holds the settings
//! file's folder: for a project file `<project>/.switchboard/settings.json` that is
//! the project directory; for the user file `$SWITCHBOARD_HOME/settings.json` it is
//! the parent of `SWITCHBOARD_HOME` (your home directory with the default
//! `~/.switchboard`); for a `--config FILE` it is the directory containing `FILE`.
//!
//! # Variable expansion
//! `command`, `args`, `env` values, `cwd`, `url`, `httpUrl` and `headers` values are
//! expanded with [`crate::expand_vars`]; an unset variable with no default makes the
//! server fail to load, with a reason naming the variable and the field.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;

use crate::env_policy::EnvPolicy;
use crate::expand::expand_vars;
use crate::load::Origin;
use crate::raw::{AuthProviderType, OAuthConfig, RawServer};

/// Default request timeout (Gemini CLI's): 10 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(600_000);
/// Default start-up timeout (Switchboard's own): 30 seconds.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_millis(30_000);
/// Default limit for one message from a server (`maxMessageBytes`): 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The smallest `maxMessageBytes` accepted: below it even a tool list does not fit.
pub const MIN_MAX_MESSAGE_BYTES: u64 = 64 * 1024;
/// The largest `maxMessageBytes` accepted (1 GiB).
pub const MAX_MAX_MESSAGE_BYTES: u64 = 1024 * 1024 * 1024;

/// How to reach a server.
///
/// # Transport rules (as Gemini CLI)
/// - `command` → [`Transport::Stdio`];
/// - `httpUrl` → [`Transport::Http`] (Streamable HTTP);
/// - `url` + `"type": "sse"` → [`Transport::Sse`];
/// - `url` + `"type": "http"` (or `"streamable-http"`) → [`Transport::Http`];
/// - `url` with no `type` → [`Transport::AutoHttp`]: try Streamable HTTP, fall back to
///   SSE (the connection layer does that).
///
/// Exactly one of `command`, `url`, `httpUrl` must be set. URLs must be `http(s)`.
///
/// # Relative `cwd`
/// A relative `cwd` is resolved against the directory that holds the settings
/// file's folder: for a project file `<project>/.switchboard/settings.json` that is
/// the project directory; for the user file `$SWITCHBOARD_HOME/settings.json` it is
/// the parent of `SWITCHBOARD_HOME` (your home directory with the default
/// `~/.switchboard`); for a `--config FILE` it is the directory containing `FILE`.
///
/// # Variable expansion
/// `command`, `args`, `env` values, `cwd`, `url`, `httpUrl` and `headers` values are
/// expanded with [`crate::expand_vars`]; an unset variable with no default makes the
/// server fail to load, with a reason naming the variable and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A local program speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Configured environment entries (always passed; see [`crate::child_env`]).
        env: IndexMap<String, String>,
        /// Working directory (absolute after loading), or Switchboard's own.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// Endpoint URL.
        url: String,
        /// Extra request headers.
        headers: IndexMap<String, String>,
    },
    /// Legacy HTTP+SSE.
    Sse {
        /// The SSE stream URL.
        url: String,
        /// Extra request headers.
        headers: IndexMap<String, String>,
    },
    /// Streamable HTTP first, falling back to legacy SSE.
    AutoHttp {
        /// Endpoint URL.
        url: String,
        /// Extra request headers.
        headers: IndexMap<String, String>,
    },
}

impl Transport {
    /// A short name: `stdio`, `http`, `sse` or `http/sse` (auto).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::Sse { .. } => "sse",
            Transport::AutoHttp { .. } => "http/sse",
        }
    }

    /// Whether this runs a local command.
    pub fn is_stdio(&self) -> bool {
        matches!(self, Transport::Stdio { .. })
    }

    /// The URL of a remote transport.
    pub fn url(&self) -> Option<&str> {
        match self {
            Transport::Stdio { .. } => None,
            Transport::Http { url, .. }
            | Transport::Sse { url, .. }
            | Transport::AutoHttp { url, .. } => Some(url),
        }
    }

    /// Headers of a remote transport (empty for stdio).
    pub fn headers(&self) -> Option<&IndexMap<String, String>> {
        match self {
            Transport::Stdio { .. } => None,
            Transport::Http { headers, .. }
            | Transport::Sse { headers, .. }
            | Transport::AutoHttp { headers, .. } => Some(headers),
        }
    }
}

/// A validated server entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The key under `mcpServers`.
    pub name: String,
    /// How to reach it (values expanded).
    pub transport: Transport,
    /// Per-request timeout (`timeout`, ms; default 600 000).
    pub timeout: Duration,
    /// Start-up timeout (`startupTimeout`, ms; default 30 000).
    pub startup_timeout: Duration,
    /// `startupTimeout` was set in the settings (not the default): commands that cap
    /// start-up for a person waiting (`mcp list`) respect it.
    pub startup_timeout_set: bool,
    /// The largest message read from this server (`maxMessageBytes`; default 16 MiB):
    /// a larger reply fails its request with an error naming the server and the limit.
    pub max_message_bytes: usize,
    /// Skip tool-call confirmations.
    pub trust: bool,
    /// Only these tools (see [`ServerConfig::tool_allowed`]).
    pub include_tools: Option<Vec<String>>,
    /// Never these tools (wins over `include_tools`).
    pub exclude_tools: Vec<String>,
    /// OAuth settings.
    pub oauth: Option<OAuthConfig>,
    /// Authentication provider.
    pub auth_provider_type: AuthProviderType,
    /// Free text.
    pub description: Option<String>,
    /// Environment rule for stdio servers.
    pub env_policy: EnvPolicy,
    /// Pin each tool's definition on first sight and withhold a changed one until the
    /// user accepts it (`pinTools`, default on). Off only when the user layer (or the
    /// `--config` file) says so, for this server or for all (top-level `pinTools`); a
    /// project file can never turn it off.
    pub pin_tools: bool,
}

impl ServerConfig {
    /// Whether a tool passes `includeTools`/`excludeTools` (Gemini CLI's rule):
    /// a tool listed in `excludeTools` is never allowed; otherwise, with
    /// `includeTools` set, an entry must equal the tool name or start with
    /// `name(` (`run_shell_command(ls)` allows `run_shell_command`).
    pub fn tool_allowed(&self, tool: &str) -> bool {
        if self.exclude_tools.iter().any(|t| t == tool) {
            return false;
        }
        match &self.include_tools {
            None => true,
            Some(list) => list.iter().any(|t| {
                t == tool
                    || t.strip_prefix(tool)
                        .is_some_and(|rest| rest.starts_with('('))
            }),
        }
    }
}

/// A settings file taking part in a load.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub path: PathBuf,
    pub base_dir: PathBuf,
    pub origin: Origin,
}

/// Which layer each field of a merged server came from.
#[derive(Debug, Clone)]
pub(crate) struct Sources {
    pub default: usize,
    pub fields: HashMap<String, usize>,
}

impl Sources {
    pub fn single(layer: usize) -> Self {
        Sources {
            default: layer,
            fields: HashMap::new(),
        }
    }

    pub fn of(&self, field: &str) -> usize {
        self.fields.get(field).copied().unwrap_or(self.default)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stdio,
    Http,
    Sse,
}

struct Ctx<'a> {
    name: &'a str,
    sources: &'a Sources,
    layers: &'a [Layer],
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Ctx<'_> {
    fn layer(&self, source_key: &str) -> &Layer {
        let i = self.sources.of(source_key);
        self.layers.get(i).unwrap_or(&self.layers[0])
    }

    fn file(&self, source_key: &str) -> &Path {
        &self.layer(source_key).path
    }

    /// `file: mcpServers.name.field`
    fn loc(&self, source_key: &str, field: &str) -> String {
        format!(
            "{}: mcpServers.{}.{}",
            self.file(source_key).display(),
            self.name,
            field
        )
    }

    fn loc_server(&self, source_key: &str) -> String {
        format!(
            "{}: mcpServers.{}",
            self.file(source_key).display(),
            self.name
        )
    }

    fn expand(&self, source_key: &str, field: &str, value: &str) -> Result<String, String> {
        expand_vars(value, self.env).map_err(|e| format!("{}: {e}", self.loc(source_key, field)))
    }

    fn check_url(&self, key: &str, raw: &str, expanded: &str) -> Result<(), String> {
        match url::Url::parse(expanded) {
            Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some() => {
                Ok(())
            }
            Ok(u) => Err(format!(
                "{}: `{raw}` is not an http(s) URL (scheme `{}`); use http:// or https://",
                self.loc(key, key),
                u.scheme()
            )),
            Err(e) => Err(format!(
                "{}: `{raw}` is not a valid http(s) URL ({e}); write a full URL like http://127.0.0.1:3000/mcp",
                self.loc(key, key)
            )),
        }
    }

    fn headers(&self, raw: &RawServer) -> Result<IndexMap<String, String>, String> {
        let mut out = IndexMap::new();
        for (k, v) in raw.headers.iter().flatten() {
            let key = format!("headers.{k}");
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                return Err(format!(
                    "{}: `{k}` is not a valid HTTP header name",
                    self.loc(&key, &key)
                ));
            }
            let value = self.expand(&key, &key, v)?;
            if value.contains(['\r', '\n']) {
                return Err(format!(
                    "{}: header values must not contain line breaks",
                    self.loc(&key, &key)
                ));
            }
            out.insert(k.clone(), value);
        }
        Ok(out)
    }
}

fn parse_kind(s: &str) -> Option<Kind> {
    match s {
        "stdio" => Some(Kind::Stdio),
        "http" | "streamable-http" | "streamableHttp" => Some(Kind::Http),
        "sse" => Some(Kind::Sse),
        _ => None,
    }
}

fn conflict_message(present: &[&str]) -> String {
    match present {
        ["command", "url"] => "both `command` and `url` are set, but a server has exactly one transport: remove `url` (to run the command over stdio) or `command` (to connect to the URL)".to_string(),
        ["command", "httpUrl"] => "both `command` and `httpUrl` are set, but a server has exactly one transport: remove `httpUrl` (to run the command over stdio) or `command` (to connect to the URL)".to_string(),
        ["url", "httpUrl"] => "both `url` and `httpUrl` are set: remove one (`httpUrl` is Streamable HTTP; `url` is SSE or HTTP by `type`, auto-detected without it)".to_string(),
        _ => "`command`, `url` and `httpUrl` are all set, but a server has exactly one transport: keep one of them".to_string(),
    }
}

fn default_duration(ms: Option<u64>, default: Duration) -> Duration {
    ms.map_or(default, Duration::from_millis)
}

/// Validates a (possibly merged) raw server.
pub(crate) fn build(
    name: &str,
    raw: &RawServer,
    sources: &Sources,
    layers: &[Layer],
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<ServerConfig, String> {
    let cx = Ctx {
        name,
        sources,
        layers,
        env,
    };
    let mut present: Vec<&str> = Vec::new();
    if raw.command.is_some() {
        present.push("command");
    }
    if raw.url.is_some() {
        present.push("url");
    }
    if raw.http_url.is_some() {
        present.push("httpUrl");
    }
    let kind = match raw.kind.as_deref() {
        None => None,
        Some(k) => Some(parse_kind(k).ok_or_else(|| {
            format!(
                "{}: unknown transport type `{k}`; use \"stdio\", \"http\" or \"sse\"",
                cx.loc("type", "type")
            )
        })?),
    };
    let type_str = raw.kind.as_deref().unwrap_or_default();
    let transport = match (&raw.command, &raw.url, &raw.http_url) {
        (Some(command), None, None) => {
            if matches!(kind, Some(Kind::Http | Kind::Sse)) {
                return Err(format!(
                    "{}: `type` is \"{type_str}\" but the server has `command`; `type` selects how to use `url` — remove `type`, or replace `command` with `url`",
                    cx.loc_server("type")
                ));
            }
            let command = cx.expand("command", "command", command)?;
            if command.trim().is_empty() {
                return Err(format!(
                    "{}: the command is empty",
                    cx.loc("command", "command")
                ));
            }
            let mut args = Vec::new();
            for (i, a) in raw.args.iter().flatten().enumerate() {
                args.push(cx.expand("args", &format!("args[{i}]"), a)?);
            }
            let mut env_out = IndexMap::new();
            for (k, v) in raw.env.iter().flatten() {
                let key = format!("env.{k}");
                env_out.insert(k.clone(), cx.expand(&key, &key, v)?);
            }
            let cwd = match &raw.cwd {
                None => None,
                Some(c) => {
                    let c = cx.expand("cwd", "cwd", c)?;
                    let p = PathBuf::from(&c);
                    Some(if p.is_absolute() {
                        p
                    } else {
                        cx.layer("cwd").base_dir.join(p)
                    })
                }
            };
            if raw.headers.as_ref().is_some_and(|h| !h.is_empty()) {
                warnings.push(format!(
                    "{}: ignored: headers apply only to `url`/`httpUrl` servers",
                    cx.loc("headers", "headers")
                ));
            }
            Transport::Stdio {
                command,
                args,
                env: env_out,
                cwd,
            }
        }
        (None, Some(url), None) => {
            if kind == Some(Kind::Stdio) {
                return Err(format!(
                    "{}: `type` is \"stdio\" but the server has `url`; a stdio server needs `command` — remove `type` or replace `url` with `command`",
                    cx.loc_server("type")
                ));
            }
            let expanded = cx.expand("url", "url", url)?;
            cx.check_url("url", url, &expanded)?;
            let headers = cx.headers(raw)?;
            match kind {
                Some(Kind::Sse) => Transport::Sse {
                    url: expanded,
                    headers,
                },
                Some(Kind::Http) => Transport::Http {
                    url: expanded,
                    headers,
                },
                _ => Transport::AutoHttp {
                    url: expanded,
                    headers,
                },
            }
        }
        (None, None, Some(http_url)) => {
            if matches!(kind, Some(Kind::Stdio | Kind::Sse)) {
                return Err(format!(
                    "{}: `type` is \"{type_str}\" but `httpUrl` is always Streamable HTTP; remove `type`, or for SSE use `url` with \"type\": \"sse\"",
                    cx.loc_server("type")
                ));
            }
            let expanded = cx.expand("httpUrl", "httpUrl", http_url)?;
            cx.check_url("httpUrl", http_url, &expanded)?;
            Transport::Http {
                url: expanded,
                headers: cx.headers(raw)?,
            }
        }
        (None, None, None) => {
            return Err(format!(
                "{}: no transport: set `command` (a local program over stdio), `httpUrl` (Streamable HTTP) or `url` (SSE or HTTP)",
                cx.loc_server("command")
            ));
        }
        _ => {
            return Err(format!(
                "{}: {}",
                cx.loc_server(present.first().copied().unwrap_or("command")),
                conflict_message(&present)
            ));
        }
    };
    if !transport.is_stdio() {
        for (field, set) in [
            ("args", raw.args.as_ref().is_some_and(|a| !a.is_empty())),
            ("env", raw.env.as_ref().is_some_and(|e| !e.is_empty())),
            ("cwd", raw.cwd.is_some()),
            ("envPolicy", raw.env_policy.is_some()),
        ] {
            if set {
                warnings.push(format!(
                    "{}: ignored: `{field}` applies only to `command` (stdio) servers",
                    cx.loc(field, field)
                ));
            }
        }
    }
    for (field, ms) in [
        ("timeout", raw.timeout),
        ("startupTimeout", raw.startup_timeout),
    ] {
        match ms {
            Some(0) => {
                return Err(format!(
                    "{}: must be more than 0 (milliseconds)",
                    cx.loc(field, field)
                ));
            }
            Some(ms) if ms < 1000 => warnings.push(format!(
                "{}: {ms} ms is very short — the value is in milliseconds (did you mean {}?)",
                cx.loc(field, field),
                ms * 1000
            )),
            _ => {}
        }
    }
    let max_message_bytes = match raw.max_message_bytes {
        None => DEFAULT_MAX_MESSAGE_BYTES,
        Some(n) if (MIN_MAX_MESSAGE_BYTES..=MAX_MAX_MESSAGE_BYTES).contains(&n) => {
            usize::try_from(n).unwrap_or(DEFAULT_MAX_MESSAGE_BYTES)
        }
        Some(n) => {
            return Err(format!(
                "{}: {n} bytes is out of range; use between {MIN_MAX_MESSAGE_BYTES} (64 KiB) \
                 and {MAX_MAX_MESSAGE_BYTES} (1 GiB), or leave it out for 16 MiB",
                cx.loc("maxMessageBytes", "maxMessageBytes")
            ));
        }
    };
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        max_message_bytes,
        startup_timeout_set: raw.startup_timeout.is_some(),
        timeout: default_duration(raw.timeout, DEFAULT_TIMEOUT),
        startup_timeout: default_duration(raw.startup_timeout, DEFAULT_STARTUP_TIMEOUT),
        trust: raw.trust.unwrap_or(false),
        include_tools: raw.include_tools.clone(),
        exclude_tools: raw.exclude_tools.clone().unwrap_or_default(),
        oauth: raw.oauth.clone(),
        auth_provider_type: raw.auth_provider_type.unwrap_or_default(),
        description: raw.description.clone(),
        env_policy: raw.env_policy.unwrap_or_default(),
        pin_tools: pin_tools(&cx, raw, warnings),
    })
}

/// `pinTools`: on unless the user layer (or the `--config` file) turns it off; a
/// project file may only keep it on.
fn pin_tools(cx: &Ctx<'_>, raw: &RawServer, warnings: &mut Vec<String>) -> bool {
    match raw.pin_tools {
        Some(false) if cx.layer("pinTools").origin == Origin::Project => {
            warnings.push(format!(
                "{}: false is ignored: a project file cannot turn tool pinning off (set it in your user settings if you mean it)",
                cx.loc("pinTools", "pinTools")
            ));
            true
        }
        Some(on) => on,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::parse_server;
    use serde_json::json;

    fn layers() -> Vec<Layer> {
        vec![Layer {
            path: PathBuf::from("/proj/.switchboard/settings.json"),
            base_dir: PathBuf::from("/proj"),
            origin: Origin::Project,
        }]
    }

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "PORT" => Some("8080".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn try_build(v: serde_json::Value) -> (Result<ServerConfig, String>, Vec<String>) {
        let ls = layers();
        let raw = parse_server(&ls[0].path, "s", &v).unwrap();
        let mut w = Vec::new();
        let r = build("s", &raw, &Sources::single(0), &ls, &env, &mut w);
        (r, w)
    }

    fn ok(v: serde_json::Value) -> ServerConfig {
        let (r, _) = try_build(v);
        r.unwrap()
    }

    fn err(v: serde_json::Value) -> String {
        try_build(v).0.unwrap_err()
    }

    #[test]
    fn command_is_stdio() {
        let c = ok(
            json!({"command": "python", "args": ["-m", "srv", "--port", "$PORT"], "env": {"A": "${TOKEN}"}, "cwd": "tools"}),
        );
        assert_eq!(
            c.transport,
            Transport::Stdio {
                command: "python".into(),
                args: vec!["-m".into(), "srv".into(), "--port".into(), "8080".into()],
                env: [("A".to_string(), "t0k".to_string())].into_iter().collect(),
                cwd: Some(PathBuf::from("/proj/tools")),
            }
        );
        assert_eq!(c.timeout, Duration::from_millis(600_000));
        assert_eq!(c.startup_timeout, Duration::from_millis(30_000));
        assert_eq!(c.env_policy, EnvPolicy::Filtered);
        assert_eq!(c.auth_provider_type, AuthProviderType::DynamicDiscovery);
        assert!(!c.trust);
        let c = ok(json!({"command": "x", "type": "stdio", "cwd": "/abs"}));
        assert!(
            matches!(c.transport, Transport::Stdio { cwd: Some(ref p), .. } if p == Path::new("/abs"))
        );
    }

    #[test]
    fn http_url_is_http() {
        let c = ok(
            json!({"httpUrl": "http://127.0.0.1:$PORT/mcp", "headers": {"Authorization": "Bearer $TOKEN"}, "timeout": 5000}),
        );
        let mut h = IndexMap::new();
        h.insert("Authorization".to_string(), "Bearer t0k".to_string());
        assert_eq!(
            c.transport,
            Transport::Http {
                url: "http://127.0.0.1:8080/mcp".into(),
                headers: h
            }
        );
        assert_eq!(c.timeout, Duration::from_millis(5000));
        assert!(matches!(
            ok(json!({"httpUrl": "https://x/mcp", "type": "http"})).transport,
            Transport::Http { .. }
        ));
    }

    #[test]
    fn url_with_types() {
        assert!(matches!(
            ok(json!({"url": "http://x/sse", "type": "sse"})).transport,
            Transport::Sse { .. }
        ));
        assert!(matches!(
            ok(json!({"url": "http://x/mcp", "type": "http"})).transport,
            Transport::Http { .. }
        ));
        assert!(matches!(
            ok(json!({"url": "http://x/mcp", "type": "streamable-http"})).transport,
            Transport::Http { .. }
        ));
        let c = ok(json!({"url": "http://x/mcp"}));
        assert!(matches!(c.transport, Transport::AutoHttp { .. }));
        assert_eq!(c.transport.kind_name(), "http/sse");
        assert_eq!(c.transport.url(), Some("http://x/mcp"));
    }

    #[test]
    fn conflicts_name_fields_and_fix() {
        let e = err(json!({"command": "node", "url": "http://x"}));
        assert!(
            e.starts_with(
                "/proj/.switchboard/settings.json: mcpServers.s: both `command` and `url`"
            ),
            "{e}"
        );
        assert!(
            e.contains("remove `url`") && e.contains("or `command`"),
            "{e}"
        );
        let e = err(json!({"command": "node", "httpUrl": "http://x"}));
        assert!(
            e.contains("`command` and `httpUrl`") && e.contains("remove `httpUrl`"),
            "{e}"
        );
        let e = err(json!({"url": "http://x", "httpUrl": "http://x"}));
        assert!(e.contains("both `url` and `httpUrl`"), "{e}");
        let e = err(json!({"command": "n", "url": "http://x", "httpUrl": "http://x"}));
        assert!(e.contains("all set"), "{e}");
        let e = err(json!({"timeout": 5}));
        assert!(e.contains("no transport"), "{e}");
    }

    #[test]
    fn type_mismatches() {
        let e = err(json!({"url": "http://x", "type": "stdio"}));
        assert!(
            e.contains("\"stdio\"") && e.contains("needs `command`"),
            "{e}"
        );
        let e = err(json!({"command": "x", "type": "sse"}));
        assert!(
            e.contains("`type` is \"sse\"") && e.contains("has `command`"),
            "{e}"
        );
        let e = err(json!({"httpUrl": "http://x", "type": "sse"}));
        assert!(e.contains("always Streamable HTTP"), "{e}");
        let e = err(json!({"url": "http://x", "type": "websocket"}));
        assert!(
            e.contains("mcpServers.s.type: unknown transport type `websocket`"),
            "{e}"
        );
    }

    #[test]
    fn bad_urls_name_the_field() {
        let e = err(json!({"httpUrl": "localhost:3000/mcp"}));
        assert!(
            e.contains("mcpServers.s.httpUrl: `localhost:3000/mcp` is not"),
            "{e}"
        );
        let e = err(json!({"url": "ftp://x/y"}));
        assert!(
            e.contains("mcpServers.s.url") && e.contains("scheme `ftp`"),
            "{e}"
        );
        let e = err(json!({"url": "not a url"}));
        assert!(e.contains("mcpServers.s.url"), "{e}");
    }

    #[test]
    fn max_message_bytes_has_a_default_and_a_range() {
        assert_eq!(
            ok(json!({"command": "x"})).max_message_bytes,
            16 * 1024 * 1024
        );
        let c = ok(json!({"command": "x", "maxMessageBytes": 1_048_576}));
        assert_eq!(c.max_message_bytes, 1_048_576);
        let e = err(json!({"command": "x", "maxMessageBytes": 10}));
        assert!(
            e.contains("mcpServers.s.maxMessageBytes") && e.contains("64 KiB"),
            "{e}"
        );
    }

    #[test]
    fn unset_variable_names_variable_and_field() {
        let e = err(json!({"command": "x", "env": {"API_KEY": "$MISSING_KEY"}}));
        assert!(e.contains("mcpServers.s.env.API_KEY"), "{e}");
        assert!(
            e.contains("`MISSING_KEY` is not set") && e.contains("${MISSING_KEY:-default}"),
            "{e}"
        );
        let e = err(json!({"command": "x", "args": ["ok", "${NOPE}"]}));
        assert!(e.contains("mcpServers.s.args[1]"), "{e}");
        let e = err(json!({"httpUrl": "http://h/${NOPE}"}));
        assert!(e.contains("mcpServers.s.httpUrl"), "{e}");
        let e = err(json!({"url": "http://h/", "headers": {"X": "$NOPE"}}));
        assert!(e.contains("mcpServers.s.headers.X"), "{e}");
        let c = ok(json!({"command": "x", "args": ["${EMPTY:-dflt}", "$$HOME"]}));
        match c.transport {
            Transport::Stdio { args, .. } => assert_eq!(args, vec!["dflt", "$HOME"]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timeouts_and_warnings() {
        let e = err(json!({"command": "x", "timeout": 0}));
        assert!(e.contains("mcpServers.s.timeout"), "{e}");
        let (r, w) =
            try_build(json!({"command": "x", "startupTimeout": 30, "headers": {"A": "b"}}));
        assert_eq!(r.unwrap().startup_timeout, Duration::from_millis(30));
        assert!(
            w.iter()
                .any(|w| w.contains("startupTimeout") && w.contains("30000")),
            "{w:?}"
        );
        assert!(w.iter().any(|w| w.contains("headers")), "{w:?}");
        let (_, w) = try_build(json!({"httpUrl": "http://x", "args": ["a"]}));
        assert!(
            w.iter().any(|w| w.contains("mcpServers.s.args: ignored")),
            "{w:?}"
        );
    }

    #[test]
    fn header_injection_rejected() {
        let e = err(json!({"url": "http://x", "headers": {"X": "a\r\nEvil: 1"}}));
        assert!(e.contains("line breaks"), "{e}");
        let e = err(json!({"url": "http://x", "headers": {"Bad Name": "a"}}));
        assert!(e.contains("not a valid HTTP header name"), "{e}");
    }

    #[test]
    fn tool_filter() {
        let mut c = ok(json!({"command": "x"}));
        assert!(c.tool_allowed("anything"));
        c.include_tools = Some(vec!["read".into(), "run_shell_command(ls)".into()]);
        c.exclude_tools = vec!["read".into()];
        assert!(!c.tool_allowed("read"), "exclude wins");
        assert!(c.tool_allowed("run_shell_command"));
        assert!(!c.tool_allowed("run_shell"));
        assert!(!c.tool_allowed("write"));
        c.include_tools = None;
        assert!(c.tool_allowed("write"));
        assert!(!c.tool_allowed("read"));
    }
}
