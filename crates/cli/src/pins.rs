//! `switchboard mcp pins`: what tool pinning recorded (`$SWITCHBOARD_HOME/pins.json`),
//! the changes waiting for the user with a diff of the pinned and the new definition,
//! and `mcp pins accept` to accept them. Reads and writes only the pins file: it starts
//! no server (a change is recorded when any command sees it).

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use switchboard_host::{Accept, PinStore, PinnedDefinition, ServerKey, ServerPins};

use crate::ctx::{self, AdHoc, Globals};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct PinsArgs {
    #[command(subcommand)]
    action: Option<PinsAction>,
    /// Only this server (a configured name or a URL); every pinned server when left out.
    #[arg(add = crate::complete::server_names())]
    server: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum PinsAction {
    /// Accept a server's changed tool (or all of them): the new definition becomes the
    /// pin and the tool is offered again.
    Accept {
        #[arg(add = crate::complete::server_names())]
        server: String,
        /// The tool (as the server names it now).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        tool: Option<String>,
        /// Every change waiting for this server.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
}

/// The pins file of this Switchboard home.
pub fn store() -> Result<PinStore> {
    Ok(PinStore::in_home(&ctx::home_dir()?))
}

/// The pins key of a configured server (or a URL), when it can be resolved.
fn key_of(g: &Globals, server: &str) -> Result<ServerKey> {
    let (spec, _) = ctx::resolve_one(g, Some(server), &AdHoc::default())?;
    let target = spec
        .target
        .as_ref()
        .with_context(|| format!("server `{server}` has a broken settings entry; fix it first (`switchboard mcp list` shows why)"))?;
    Ok(ServerKey::new(&spec.name, target))
}

pub async fn run(g: &Globals, args: PinsArgs) -> Result<ExitCode> {
    match args.action {
        Some(PinsAction::Accept {
            server,
            tool,
            all,
            json,
        }) => accept(g, &server, tool, all, json),
        None => list(g, args.server.as_deref(), args.json),
    }
}

fn accept(
    g: &Globals,
    server: &str,
    tool: Option<String>,
    all: bool,
    json: bool,
) -> Result<ExitCode> {
    let store = store()?;
    let key = key_of(g, server)?;
    let which = match (tool, all) {
        (Some(t), false) => Accept::Tool(t),
        (None, true) => Accept::All,
        _ => bail!("name the tool to accept, or use --all"),
    };
    let accepted = store.accept(&key, &which)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"server": key.name, "accepted": accepted}))?
        );
    } else if accepted.is_empty() {
        outln!("Nothing waiting to be accepted for `{}`.", key.name);
    } else {
        outln!(
            "Accepted for `{}`: {}. {} offered again from the next start (or re-list) of the server.",
            key.name,
            accepted.join(", "),
            if accepted.len() == 1 {
                "It is"
            } else {
                "They are"
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn list(g: &Globals, server: Option<&str>, json: bool) -> Result<ExitCode> {
    let store = store()?;
    let all = store.servers()?;
    let current = match server {
        Some(s) => Some(key_of(g, s)?),
        None => None,
    };
    let shown: Vec<&ServerPins> = all
        .iter()
        .filter(|p| current.as_ref().is_none_or(|k| k.name == p.name))
        .collect();
    if json {
        let servers: Vec<Value> = shown
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
                if let Some(k) = &current {
                    v["current"] = Value::Bool(k.identity == p.identity);
                }
                v
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"file": store.path().display().to_string(), "servers": servers})
            )?
        );
        return Ok(ExitCode::SUCCESS);
    }
    out!("{}", human(&store, &shown, current.as_ref()));
    Ok(ExitCode::SUCCESS)
}

/// The human report. With `current`, each server's waiting changes are shown in full.
pub fn human(store: &PinStore, shown: &[&ServerPins], current: Option<&ServerKey>) -> String {
    let mut out = String::new();
    if shown.is_empty() {
        let _ = match current {
            Some(k) => writeln!(
                out,
                "No tools of `{}` are pinned yet ({}). They are pinned the first time a command lists them.",
                k.name,
                store.path().display()
            ),
            None => writeln!(
                out,
                "No tools are pinned yet ({}). They are pinned the first time a command lists them.",
                store.path().display()
            ),
        };
        return out;
    }
    let _ = writeln!(out, "Pinned tools ({}):\n", store.path().display());
    for p in shown {
        let pinned = p.tools.values().filter(|t| t.pinned.is_some()).count();
        let waiting: Vec<(&String, &PinnedDefinition)> = p
            .tools
            .iter()
            .filter_map(|(n, t)| t.pending.as_ref().map(|d| (n, d)))
            .collect();
        let other = current.is_some_and(|k| k.identity != p.identity);
        let _ = writeln!(out, "{} ({})", p.name, p.identity);
        if other {
            let _ = writeln!(out, "    another server once configured under this name");
        }
        let _ = writeln!(
            out,
            "    {} pinned, {} waiting",
            plural(pinned, "tool"),
            match waiting.len() {
                0 => "no change".to_string(),
                n => plural(n, "change"),
            }
        );
        if waiting.is_empty() {
            let _ = writeln!(out);
            continue;
        }
        if current.is_none() {
            let _ = writeln!(
                out,
                "    {} changed: {} — see `switchboard mcp pins {}`\n",
                plural(waiting.len(), "tool"),
                waiting
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                p.name
            );
            continue;
        }
        for change in p.pending_changes() {
            let name = &change.name;
            let _ = writeln!(out);
            let _ = match &change.renamed_from {
                Some(from) => writeln!(
                    out,
                    "  {name}: new name of the pinned tool `{from}` (withheld until accepted)"
                ),
                None => writeln!(
                    out,
                    "  {name}: changed since pinned (withheld until accepted)"
                ),
            };
            for line in change.diff.lines() {
                let _ = writeln!(out, "    {line}");
            }
            if !other {
                let _ = writeln!(
                    out,
                    "    accept: switchboard mcp pins accept {} {name}",
                    p.name
                );
            }
        }
        let _ = writeln!(out);
        if !other && waiting.len() > 1 {
            let _ = writeln!(
                out,
                "Accept all {} with `switchboard mcp pins accept {} --all`.\n",
                waiting.len(),
                p.name
            );
        }
    }
    out
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}
