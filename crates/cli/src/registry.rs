//! The official MCP Registry (`/v0.1` API): `mcp search TEXT` lists active servers
//! (following cursor pagination up to a cap), and `mcp add NAME --from-registry
//! ID[@VERSION]` turns a server's `server.json` into a settings entry (npm → `npx`,
//! pypi → `uvx`, oci → `docker run`, remotes → `httpUrl`/`url`). Every request goes
//! through switchboard-net's guarded client, with a time limit and a size limit.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use reqwest::Url;
use serde_json::{Map, Value, json};

use crate::ctx::{self, Globals};
use crate::edit::{self, AddArgs};

/// The registry asked when neither `--registry` nor `registryUrl` is set.
pub const DEFAULT_REGISTRY: &str = "https://registry.modelcontextprotocol.io";
/// Time limit for one registry request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest registry response read (a page of 100 servers is well under this).
const MAX_BODY: usize = 8 * 1024 * 1024;
/// Pages followed by one search at most.
const MAX_PAGES: usize = 10;
/// Servers per page asked for.
const PAGE_LIMIT: usize = 100;
/// The registry's own metadata key in `_meta`.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words to look for in server names.
    pub text: String,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
    /// The MCP Registry to ask (default: `registryUrl` in the user settings, else
    /// `https://registry.modelcontextprotocol.io`).
    #[arg(long, value_name = "URL")]
    pub registry: Option<String>,
}

/// A registry client: base URL plus the guarded HTTP client.
struct Registry {
    base: Url,
    client: switchboard_net::GuardedClient,
}

impl Registry {
    fn new(g: &Globals, flag: Option<&str>) -> Result<Self> {
        // The settings give `registryUrl` and the URL policy; a file that cannot be read
        // is an error rather than a silent fall-back to the defaults.
        let settings = ctx::read_settings(g)?;
        let raw = flag
            .map(str::to_string)
            .or_else(|| settings.registry_url.clone())
            .unwrap_or_else(|| DEFAULT_REGISTRY.to_string());
        let base = Url::parse(raw.trim_end_matches('/')).with_context(|| {
            format!("`{raw}` is not a registry URL; give one like {DEFAULT_REGISTRY} (--registry or `registryUrl` in settings)")
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            bail!("the registry URL `{raw}` must be http(s)://");
        }
        let client = ctx::guard(g, Some(&settings))?;
        Ok(Self { base, client })
    }

    /// `base` + path segments (each percent-encoded, so `a/b` stays one segment).
    fn url(&self, segments: &[&str]) -> Result<Url> {
        let mut url = self.base.clone();
        {
            let mut path = url.path_segments_mut().map_err(|()| {
                anyhow::anyhow!("the registry URL `{}` cannot take a path", self.base)
            })?;
            path.pop_if_empty();
            for s in segments {
                path.push(s);
            }
        }
        Ok(url)
    }

    /// GET `url` and parse JSON: `Ok(None)` on 404.
    async fn get(&self, url: &Url) -> Result<Option<Value>> {
        let req = self.client.get(url.as_str()).timeout(REQUEST_TIMEOUT);
        let resp = self.client.send(req).await.with_context(|| {
            format!(
                "cannot reach the MCP Registry at {}; check the address (--registry or `registryUrl` in settings) and your network",
                self.base
            )
        })?;
        let status = resp.status();
        let body = match switchboard_net::read_limited(resp, MAX_BODY)
            .await
            .with_context(|| format!("reading the registry's answer from {url} failed"))?
        {
            switchboard_net::LimitedBody::Whole(body) => body,
            switchboard_net::LimitedBody::Cut(_) => bail!(
                "the registry's answer from {url} is larger than {} MiB; is {} an MCP Registry?",
                MAX_BODY / (1024 * 1024),
                self.base
            ),
        };
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let detail = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| {
                    v.get("detail")
                        .or_else(|| v.get("title"))
                        .or_else(|| v.get("error"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            bail!("the MCP Registry answered {status} for {url}: {detail}");
        }
        let value = serde_json::from_slice(&body).with_context(|| {
            format!(
                "the answer from {url} is not JSON; is {} an MCP Registry?",
                self.base
            )
        })?;
        Ok(Some(value))
    }
}

/// `status` from the registry's `_meta` (absent: active).
fn status(item: &Value) -> &str {
    item.get("_meta")
        .and_then(|m| m.get(OFFICIAL_META))
        .and_then(|o| o.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("active")
}

/// How a server runs: `npm`, `pypi`, `oci`, `mcpb`, `remote`….
fn runs(server: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in array(server, "packages") {
        if let Some(t) = p.get("registryType").and_then(Value::as_str)
            && !out.iter().any(|o| o == t)
        {
            out.push(t.to_string());
        }
    }
    if !array(server, "remotes").is_empty() {
        out.push("remote".into());
    }
    out
}

fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// `switchboard mcp search TEXT`.
pub async fn search(g: &Globals, a: SearchArgs) -> Result<ExitCode> {
    let reg = Registry::new(g, a.registry.as_deref())?;
    let mut found: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut truncated = false;
    for page in 0.. {
        if page == MAX_PAGES {
            truncated = true;
            break;
        }
        let mut url = reg.url(&["v0.1", "servers"])?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("search", &a.text);
            q.append_pair("version", "latest");
            q.append_pair("limit", &PAGE_LIMIT.to_string());
            if let Some(c) = &cursor {
                q.append_pair("cursor", c);
            }
        }
        let Some(doc) = reg.get(&url).await? else {
            bail!(
                "{} has no /v0.1/servers: is it an MCP Registry? (--registry or `registryUrl` in settings)",
                reg.base
            );
        };
        for item in array(&doc, "servers") {
            if status(item) != "active" {
                continue;
            }
            let Some(server) = item.get("server") else {
                continue;
            };
            let Some(name) = text(server, "name") else {
                continue;
            };
            if found.iter().any(|f| f["name"] == name) {
                continue;
            }
            found.push(json!({
                "name": name,
                "description": text(server, "description").unwrap_or(""),
                "version": text(server, "version").unwrap_or(""),
                "runs": runs(server),
            }));
        }
        cursor = doc
            .get("metadata")
            .and_then(|m| m.get("nextCursor"))
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    if truncated {
        errln!(
            "warning: stopped after {} results ({MAX_PAGES} pages); narrow the search to see the rest",
            found.len()
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        outln!("No active server matches `{}` in {}.", a.text, reg.base);
        return Ok(ExitCode::SUCCESS);
    }
    for f in &found {
        let runs: Vec<&str> = f["runs"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        outln!(
            "{}  {}  [{}]\n    {}",
            f["name"].as_str().unwrap_or(""),
            f["version"].as_str().unwrap_or(""),
            runs.join(", "),
            one_line(f["description"].as_str().unwrap_or(""))
        );
    }
    outln!("Add one with `switchboard mcp add NAME --from-registry ID`.");
    Ok(ExitCode::SUCCESS)
}

/// `text` on one line (a registry's description must not fake lines of the listing).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Values given with `--env` / `--header` (`K=V`, or `Name: value` for headers).
fn given(list: &[String], flag: &str) -> Result<Vec<(String, String)>> {
    list.iter()
        .map(|kv| {
            let at = kv
                .find(['=', ':'])
                .with_context(|| format!("{flag} `{kv}` is not KEY=VALUE"))?;
            let (k, v) = kv.split_at(at);
            Ok((k.trim().to_string(), v[1..].trim_start().to_string()))
        })
        .collect()
}

/// Values for the declared variables (environment variables or headers): given, else
/// the default when required, else asked on a terminal, else an error naming them.
fn fill(
    declared: &[Value],
    given: &[(String, String)],
    what: &str,
    flag: &str,
) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    let mut missing = Vec::new();
    for d in declared {
        let Some(name) = text(d, "name") else {
            continue;
        };
        let required = d.get("isRequired").and_then(Value::as_bool) == Some(true);
        let secret = d.get("isSecret").and_then(Value::as_bool) == Some(true);
        if let Some((_, v)) = given.iter().find(|(k, _)| k == name) {
            out.insert(name.into(), json!(v));
        } else if let Some(v) = text(d, "value") {
            out.insert(name.into(), json!(v));
        } else if required {
            if let Some(v) = text(d, "default") {
                out.insert(name.into(), json!(v));
            } else if let Some(v) = ask(name, text(d, "description"), secret)? {
                out.insert(name.into(), json!(v));
            } else {
                let about = text(d, "description")
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default();
                missing.push(format!("{name}{about}"));
            }
        }
    }
    for (k, v) in given {
        if !out.contains_key(k) {
            out.insert(k.clone(), json!(v));
        }
    }
    if !missing.is_empty() {
        bail!(
            "the server needs {what} {}; give each with {flag} NAME=VALUE (or {flag} NAME='${{NAME}}' to store a reference to your environment instead of the value)",
            missing.join(", ")
        );
    }
    Ok(out)
}

/// Asks for `name` when stdin and stderr are a terminal (a secret is not echoed).
fn ask(name: &str, description: Option<&str>, secret: bool) -> Result<Option<String>> {
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok(None);
    }
    let about = description.map(|d| format!(" ({d})")).unwrap_or_default();
    let hint = if secret {
        format!(", not shown; type ${{{name}}} to store a reference instead")
    } else {
        String::new()
    };
    errout!("{name}{about}{hint}: ");
    std::io::stderr().flush().ok();
    let line = if secret {
        read_hidden()?
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line
    };
    let line = line.trim_end_matches(['\r', '\n']).to_string();
    Ok((!line.is_empty()).then_some(line))
}

/// Reads a line from the terminal with echo off (restored afterwards).
#[cfg(not(unix))]
fn read_hidden() -> Result<String> {
    bail!("cannot hide what you type on this system; give the value with --env or --header")
}

/// Reads a line from the terminal with echo off (restored afterwards).
#[cfg(unix)]
fn read_hidden() -> Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let before = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Now, &quiet)
        .context("cannot turn off the terminal's echo")?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let restored = tcsetattr(&stdin, OptionalActions::Now, &before);
    eprintln!();
    read?;
    restored.context("cannot restore the terminal's echo")?;
    Ok(line)
}

/// Argument values (`runtimeArguments` / `packageArguments`): `{var}` variables are
/// filled from the argument's `variables` defaults; anything required that cannot be
/// filled is an error naming it.
/// With `given_after` (arguments were given after `--`), a required package argument
/// without a value is left to them.
fn arguments(list: &[Value], which: &str, given_after: bool) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for a in list {
        let required = a.get("isRequired").and_then(Value::as_bool) == Some(true);
        let value = text(a, "value").or_else(|| required.then(|| text(a, "default")).flatten());
        let label = text(a, "name")
            .or_else(|| text(a, "valueHint"))
            .unwrap_or("?");
        let Some(value) = value else {
            if required && !given_after {
                let about = text(a, "description")
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                if which == "package" {
                    bail!(
                        "package argument `{label}`{about} has no value in the registry; give it after `--` (e.g. `switchboard mcp add NAME --from-registry ID -- VALUE`)"
                    );
                }
                bail!(
                    "{which} argument `{label}`{about} has no value in the registry; add the server by hand with `switchboard mcp add NAME COMMAND -- ARGS…`"
                );
            }
            continue;
        };
        let value = substitute(value, a.get("variables"), label)?;
        if text(a, "type") == Some("named")
            && let Some(n) = text(a, "name")
        {
            out.push(n.to_string());
        }
        out.push(value);
    }
    Ok(out)
}

fn substitute(value: &str, variables: Option<&Value>, label: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let var = &rest[start + 1..start + len];
        let default = variables
            .and_then(|v| v.get(var))
            .and_then(|v| text(v, "default"));
        let Some(default) = default else {
            bail!(
                "argument `{label}` needs `{var}`, which --from-registry cannot fill; add the server by hand with `switchboard mcp add NAME COMMAND -- ARGS…`"
            );
        };
        out.push_str(&rest[..start]);
        out.push_str(default);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The OCI image reference: the identifier when it carries a tag or digest, else
/// `identifier:version`.
fn image(identifier: &str, version: Option<&str>) -> String {
    let last = identifier.rsplit('/').next().unwrap_or(identifier);
    match version {
        Some(v) if !last.contains(':') && !last.contains('@') => format!("{identifier}:{v}"),
        _ => identifier.to_string(),
    }
}

/// The settings entry for `server` (and its transport name for the message).
fn entry_for(server: &Value, a: &AddArgs) -> Result<(Map<String, Value>, &'static str)> {
    let env_given = given(&a.env, "--env")?;
    let headers_given = given(&a.headers, "--header")?;
    let mut entry = Map::new();
    let mut skipped = Vec::new();
    for p in array(server, "packages") {
        let kind = text(p, "registryType").unwrap_or("");
        let transport = p
            .get("transport")
            .and_then(|t| text(t, "type"))
            .unwrap_or("stdio");
        if transport != "stdio" {
            skipped.push(format!("{kind} ({transport} transport)"));
            continue;
        }
        let ident = text(p, "identifier").context("a package has no `identifier`")?;
        let version = text(p, "version");
        let hint = text(p, "runtimeHint");
        let mut args = arguments(array(p, "runtimeArguments"), "runtime", false)?;
        let env = fill(
            array(p, "environmentVariables"),
            &env_given,
            "environment variables",
            "--env",
        )?;
        let command = match kind {
            "npm" => {
                let cmd = hint.unwrap_or("npx");
                if cmd == "npx" && !args.iter().any(|a| a == "-y" || a == "--yes") {
                    args.insert(0, "-y".into());
                }
                args.push(match version {
                    Some(v) => format!("{ident}@{v}"),
                    None => ident.to_string(),
                });
                cmd
            }
            "pypi" => {
                args.push(match version {
                    Some(v) => format!("{ident}=={v}"),
                    None => ident.to_string(),
                });
                hint.unwrap_or("uvx")
            }
            "oci" => {
                let mut run: Vec<String> = vec!["run".into(), "-i".into(), "--rm".into()];
                run.append(&mut args);
                for k in env.keys() {
                    run.push("-e".into());
                    run.push(k.clone());
                }
                run.push(image(ident, version));
                args = run;
                hint.unwrap_or("docker")
            }
            "mcpb" => {
                skipped.push(format!(
                    "mcpb (bundles are not supported yet: download {ident}{}, unpack it and add its command with `switchboard mcp add`)",
                    text(p, "fileSha256")
                        .map(|h| format!(", check its SHA-256 is {h}"))
                        .unwrap_or_default()
                ));
                continue;
            }
            other => {
                skipped.push(format!("{other} (not supported)"));
                continue;
            }
        };
        args.extend(arguments(
            array(p, "packageArguments"),
            "package",
            !a.args.is_empty(),
        )?);
        args.extend(a.args.iter().cloned());
        if !headers_given.is_empty() {
            bail!("--header is for remote servers; this one runs as a {kind} package");
        }
        entry.insert("command".into(), json!(command));
        entry.insert("args".into(), json!(args));
        if !env.is_empty() {
            entry.insert("env".into(), Value::Object(env));
        }
        return Ok((entry, "stdio"));
    }
    if let Some(r) = array(server, "remotes").first() {
        let url = text(r, "url").context("a remote has no `url`")?;
        if url.contains('{') {
            bail!(
                "the remote URL `{url}` has `{{variables}}` --from-registry cannot fill; add it by hand with `switchboard mcp add NAME URL`"
            );
        }
        if !env_given.is_empty() {
            bail!("--env is for servers that run locally; this one is remote (use --header)");
        }
        if !a.args.is_empty() {
            bail!("arguments after `--` are for servers that run locally; this one is remote");
        }
        let kind = match text(r, "type") {
            Some("sse") => {
                entry.insert("url".into(), json!(url));
                entry.insert("type".into(), json!("sse"));
                "sse"
            }
            Some("streamable-http") | None => {
                entry.insert("httpUrl".into(), json!(url));
                "http"
            }
            Some(other) => {
                bail!("remote type `{other}` is not supported (only streamable-http and sse)")
            }
        };
        let headers = fill(array(r, "headers"), &headers_given, "headers", "--header")?;
        if !headers.is_empty() {
            entry.insert("headers".into(), Value::Object(headers));
        }
        return Ok((entry, kind));
    }
    if skipped.is_empty() {
        bail!(
            "the registry lists no package or remote for this server; see its website or repository to install it"
        );
    }
    bail!(
        "no way to run this server that Switchboard supports: {}",
        skipped.join("; ")
    )
}

/// `switchboard mcp add NAME --from-registry ID[@VERSION]`.
pub async fn add(g: &Globals, a: AddArgs) -> Result<ExitCode> {
    edit::check_name(&a.name)?;
    let Some(spec) = a.from_registry.as_deref() else {
        bail!("--from-registry needs a server name");
    };
    if a.transport.is_some() {
        bail!("--transport is taken from the registry; leave it out with --from-registry");
    }
    let (id, version) = match spec.rsplit_once('@') {
        Some((id, v)) if !id.is_empty() && !v.is_empty() => (id, v),
        _ => (spec, "latest"),
    };
    let reg = Registry::new(g, a.registry.as_deref())?;
    let url = reg.url(&["v0.1", "servers", id, "versions", version])?;
    let Some(item) = reg.get(&url).await? else {
        bail!(
            "the MCP Registry at {} has no server `{id}`{}; find names with `switchboard mcp search TEXT`",
            reg.base,
            if version == "latest" {
                String::new()
            } else {
                format!(" at version {version}")
            }
        );
    };
    let st = status(&item);
    if st != "active" {
        bail!(
            "`{id}` is {st} in the registry and is not installed; pick another with `switchboard mcp search`"
        );
    }
    let server = item.get("server").unwrap_or(&item);
    let (mut entry, transport) = entry_for(server, &a)?;
    if let Some(t) = a.timeout {
        entry.insert("timeout".into(), json!(t));
    }
    if a.trust {
        entry.insert("trust".into(), json!(true));
    }
    if let Some(d) = a
        .description
        .as_deref()
        .or_else(|| text(server, "description"))
    {
        entry.insert("description".into(), json!(d));
    }
    edit::write_entry(
        g,
        &a.name,
        a.scope.as_deref(),
        Value::Object(entry),
        transport,
        true,
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add_args(env: &[&str]) -> AddArgs {
        AddArgs {
            name: "n".into(),
            command_or_url: None,
            from_registry: Some("id".into()),
            registry: None,
            args: vec![],
            env: env.iter().map(|s| s.to_string()).collect(),
            headers: vec![],
            scope: None,
            transport: None,
            timeout: None,
            trust: false,
            description: None,
        }
    }

    #[test]
    fn a_runtime_hint_replaces_the_default_runner() {
        let server = json!({"packages": [{
            "registryType": "npm", "identifier": "@a/b", "version": "1.0.0",
            "runtimeHint": "bunx", "transport": {"type": "stdio"},
            "packageArguments": [{"type": "named", "name": "--mode", "value": "local"}]
        }]});
        let (entry, transport) = entry_for(&server, &add_args(&[])).unwrap();
        assert_eq!(transport, "stdio");
        assert_eq!(entry["command"], "bunx");
        assert_eq!(entry["args"], json!(["@a/b@1.0.0", "--mode", "local"]));
    }

    #[test]
    fn a_required_argument_without_a_value_is_named() {
        let server = json!({"packages": [{
            "registryType": "npm", "identifier": "@a/b", "version": "1.0.0",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "positional", "valueHint": "database_name",
                "description": "Name of the database", "isRequired": true}]
        }]});
        let err = entry_for(&server, &add_args(&[])).unwrap_err().to_string();
        assert!(
            err.contains("`database_name` (Name of the database)"),
            "{err}"
        );
        assert!(err.contains("after `--`"), "{err}");
        let mut given = add_args(&[]);
        given.args = vec!["sales".into()];
        let (entry, _) = entry_for(&server, &given).unwrap();
        assert_eq!(entry["args"], json!(["-y", "@a/b@1.0.0", "sales"]));
    }

    #[test]
    fn image_keeps_a_tag_and_adds_the_version_otherwise() {
        assert_eq!(
            image("docker.io/mcp/fs:1.0.2", Some("1.0.2")),
            "docker.io/mcp/fs:1.0.2"
        );
        assert_eq!(image("ghcr.io/a/b", Some("2")), "ghcr.io/a/b:2");
        assert_eq!(image("localhost:5000/a", Some("2")), "localhost:5000/a:2");
    }

    #[test]
    fn variables_take_defaults_or_fail_naming_the_variable() {
        let vars = json!({"t": {"default": "/project"}});
        assert_eq!(
            substitute("dst={t}", Some(&vars), "--mount").unwrap(),
            "dst=/project"
        );
        let err = substitute("src={s}", Some(&vars), "--mount")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`s`") && err.contains("--mount"), "{err}");
    }
}
