//! `mcp search TEXT` and `mcp add NAME --from-registry ID[@VERSION]`: the terminal side
//! of the MCP Registry. The registry client, `server.json` and the entry it becomes
//! are `switchboard-registry`'s; this module picks the registry URL and the URL policy
//! from the flags and settings, prints results (terminal-safe), takes `--env` /
//! `--header` values, asks on a terminal for the required ones (secrets without echo),
//! words errors with the CLI's flags, prints the exact command line the entry runs
//! (`-e NAME` flags included; `switchboard_registry::command_line`) or the URL it
//! contacts, with the names (not the values) of its variables or headers, and then
//! writes the entry. What the registry may put in the command is checked by
//! `switchboard-registry` (`check.rs`); a refusal is printed with the exact command to
//! add by hand. An mcpb package (when it is
//! the first stdio package) is installed here only: downloaded through the guarded
//! client, its SHA-256 checked, unpacked into `$SWITCHBOARD_HOME/bundles/NAME-SHA12/`
//! and its manifest's command written (the terminal user chose to run it; the web app
//! refuses bundles). Before the entry is written it checks that the bundle's runtime
//! (`node`, or `python3`/`python`) is on `PATH`. `mcp remove` (`edit.rs`) deletes the
//! bundle's folder once nothing runs from it.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};
use switchboard_registry::{
    BUNDLE_TIMEOUT, BundleError, Choice, DEFAULT_REGISTRY, Input, InputKind, Limits, Package,
    PackageKind, Plan, Registry, RegistryError, ServerJson, check_sha256, command_line,
    download_bundle, read_manifest, split_id, unpack,
};

use crate::ctx::{self, Globals};
use crate::edit::{self, AddArgs};

/// Pages followed by one search at most.
const MAX_PAGES: usize = 10;
/// Where the registry URL comes from, for messages.
const WHERE: &str = "--registry or `registryUrl` in settings";

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

/// The registry named by the flag, else `registryUrl`, else the official one, through
/// the guard of the URL policy in force.
fn registry(g: &Globals, flag: Option<&str>) -> Result<Registry> {
    // The settings give `registryUrl` and the URL policy; a file that cannot be read
    // is an error rather than a silent fall-back to the defaults.
    let settings = ctx::read_settings(g)?;
    let raw = flag
        .map(str::to_string)
        .or_else(|| settings.registry_url.clone())
        .unwrap_or_else(|| DEFAULT_REGISTRY.to_string());
    let client = ctx::guard(g, Some(&settings))?;
    Registry::new(&raw, client).map_err(|e| anyhow::anyhow!("{e} ({WHERE})"))
}

/// A registry error in the CLI's words (its flags and commands as the next step).
fn cli_error(e: RegistryError) -> anyhow::Error {
    match e {
        RegistryError::Unreachable { base, source } => anyhow::Error::new(source).context(format!(
            "cannot reach the MCP Registry at {base}; check the address ({WHERE}) and your network"
        )),
        e @ (RegistryError::NotARegistry { .. } | RegistryError::Malformed { .. }) => {
            anyhow::anyhow!("{e} ({WHERE})")
        }
        e @ RegistryError::NotFound { .. } => {
            anyhow::anyhow!("{e}; find names with `switchboard mcp search TEXT`")
        }
        RegistryError::Inactive { id, status } => anyhow::anyhow!(
            "`{id}` is {status} in the registry and is not installed; pick another with `switchboard mcp search`"
        ),
        e @ RegistryError::ArgumentWithoutValue { package: true, .. } => anyhow::anyhow!(
            "{e}; give it after `--` (e.g. `switchboard mcp add NAME --from-registry ID -- VALUE`)"
        ),
        e @ (RegistryError::ArgumentWithoutValue { .. }
        | RegistryError::ArgumentVariable { .. }
        | RegistryError::UrlVariables { .. }) => anyhow::anyhow!(
            "{e}: `switchboard mcp add NAME COMMAND -- ARGS…` (or `switchboard mcp add NAME URL`)"
        ),
        RegistryError::Missing { kind, names } => {
            let flag = flag_for(kind);
            anyhow::anyhow!(
                "the server needs {} {}; give each with {flag} NAME=VALUE (or {flag} NAME='${{NAME}}' to store a reference to your environment instead of the value)",
                kind.plural(),
                names.join(", ")
            )
        }
        other => anyhow::Error::new(other),
    }
}

fn flag_for(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Env => "--env",
        InputKind::Header => "--header",
    }
}

/// `switchboard mcp search TEXT`.
pub async fn search(g: &Globals, a: SearchArgs) -> Result<ExitCode> {
    let reg = registry(g, a.registry.as_deref())?;
    let found = reg.search(&a.text, MAX_PAGES).await.map_err(cli_error)?;
    if found.truncated {
        errln!(
            "warning: stopped after {} results ({MAX_PAGES} pages); narrow the search to see the rest",
            found.servers.len()
        );
    }
    if a.json {
        let list: Vec<Value> = found
            .servers
            .iter()
            .map(|l| {
                json!({
                    "name": l.server.name,
                    "description": l.server.description,
                    "version": l.server.version,
                    "runs": l.server.runs(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    if found.servers.is_empty() {
        outln!("No active server matches `{}` in {}.", a.text, reg.base());
        return Ok(ExitCode::SUCCESS);
    }
    for l in &found.servers {
        let s = &l.server;
        outln!(
            "{}  {}  [{}]\n    {}",
            s.name,
            s.version,
            s.runs().join(", "),
            one_line(&s.description)
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

/// `switchboard mcp add NAME --from-registry ID[@VERSION]`.
pub async fn add(g: &Globals, a: AddArgs) -> Result<ExitCode> {
    edit::check_name(&a.name)?;
    let Some(spec) = a.from_registry.as_deref() else {
        bail!("--from-registry needs a server name");
    };
    if a.transport.is_some() {
        bail!("--transport is taken from the registry; leave it out with --from-registry");
    }
    let env_given = given(&a.env, "--env")?;
    let headers_given = given(&a.headers, "--header")?;
    let (id, version) = split_id(spec);
    let reg = registry(g, a.registry.as_deref())?;
    let listing = reg.server(id, version).await.map_err(cli_error)?;
    let server = &listing.server;
    if let Some(p) = server.packages.iter().find(|p| p.transport == "stdio")
        && p.registry_type == PackageKind::Mcpb
    {
        if !headers_given.is_empty() {
            bail!("--header is for remote servers; this one runs as a bundle");
        }
        return add_bundle(g, &a, server, p, env_given).await;
    }
    let plan = Plan::new(server, Choice::Auto, &a.args).map_err(cli_error)?;
    let mut values = if plan.runs_locally() {
        if !headers_given.is_empty() {
            bail!("--header is for remote servers; this one runs as a package");
        }
        env_given
    } else {
        if !env_given.is_empty() {
            bail!("--env is for servers that run locally; this one is remote (use --header)");
        }
        if !a.args.is_empty() {
            bail!("arguments after `--` are for servers that run locally; this one is remote");
        }
        headers_given
    };
    ask_required(plan.inputs(), &mut values)?;
    let entry = plan.entry(&values).map_err(cli_error)?;
    finish(g, &a, server, entry, plan.transport())
}

/// Asks on a terminal for what is required and has no value yet.
fn ask_required(inputs: &[Input], values: &mut Vec<(String, String)>) -> Result<()> {
    for input in inputs {
        if input.needs_value()
            && !values.iter().any(|(k, _)| *k == input.name)
            && let Some(v) = ask(&input.name, input.description.as_deref(), input.secret)?
        {
            values.push((input.name.clone(), v));
        }
    }
    Ok(())
}

/// An mcpb package: download, check, unpack, and write its manifest's command.
async fn add_bundle(
    g: &Globals,
    a: &AddArgs,
    server: &ServerJson,
    p: &Package,
    mut values: Vec<(String, String)>,
) -> Result<ExitCode> {
    if !a.args.is_empty() {
        bail!(
            "arguments after `--` are not used for a bundle: its manifest gives the command line"
        );
    }
    let settings = ctx::read_settings(g)?;
    let client = ctx::guard(g, Some(&settings))?;
    if p.file_sha256.is_none() {
        return Err(anyhow::Error::new(BundleError::NoDigest));
    }
    errln!("Downloading the bundle {} …", p.identifier);
    let bytes = download_bundle(&client, &p.identifier, BUNDLE_TIMEOUT).await?;
    let sha = check_sha256(&bytes, p.file_sha256.as_deref())?;
    let dir = ctx::home_dir()?
        .join("bundles")
        .join(format!("{}-{}", a.name, &sha[..12]));
    if !dir.join("manifest.json").is_file() {
        unpack(&bytes, &dir, Limits::default())?;
    }
    let manifest = read_manifest(&dir)
        .with_context(|| format!("the bundle unpacked at {} cannot be used", dir.display()))?;
    if let Some(rt) = manifest.missing_runtime() {
        bail!(
            "this bundle's server runs on `{rt}`, which is not on PATH; install {} and run this command again",
            if rt == "node" { "Node.js" } else { "Python 3" }
        );
    }
    ask_required(&manifest.user_config, &mut values)?;
    let entry = manifest.entry(&dir, &values).map_err(|e| match e {
        BundleError::Missing { names } => anyhow::anyhow!(
            "the bundle needs {names}; give each with --env KEY=VALUE (or --env KEY='${{VAR}}' to store a reference to your environment instead of the value)"
        ),
        other => anyhow::Error::new(other),
    })?;
    finish(g, a, server, entry, "stdio")
}

/// Prints what the entry will run (its exact command line, `-e NAME` flags included) or
/// contact, and the names of its environment variables or headers (never the values),
/// before it is written.
fn show(entry: &serde_json::Map<String, Value>) {
    if let Some(line) = command_line(entry) {
        outln!("Runs: {line}");
    } else if let Some(url) = entry
        .get("httpUrl")
        .or_else(|| entry.get("url"))
        .and_then(Value::as_str)
    {
        outln!("Connects to: {}", url.replace("$$", "$"));
    }
    for (field, label) in [("env", "Environment variables"), ("headers", "Headers")] {
        if let Some(m) = entry.get(field).and_then(Value::as_object)
            && !m.is_empty()
        {
            let names: Vec<&str> = m.keys().map(String::as_str).collect();
            outln!("{label}: {} (values not shown)", names.join(", "));
        }
    }
}

/// Adds `--timeout`, `--trust` and the description, shows the entry, and writes it.
fn finish(
    g: &Globals,
    a: &AddArgs,
    server: &ServerJson,
    mut entry: serde_json::Map<String, Value>,
    transport: &str,
) -> Result<ExitCode> {
    if let Some(t) = a.timeout {
        entry.insert("timeout".into(), json!(t));
    }
    if a.trust {
        entry.insert("trust".into(), json!(true));
    }
    let description = a
        .description
        .as_deref()
        .or((!server.description.is_empty()).then_some(server.description.as_str()));
    if let Some(d) = description {
        entry.insert("description".into(), json!(d));
    }
    show(&entry);
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
