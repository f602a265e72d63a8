//! `switchboard mcp list`: the `/mcp` view. Starts every server concurrently, reports
//! each one's status, what it offers and why it failed, then stops them all. Exits 0
//! whenever it could report, whatever the servers' states. With `--json` each status is
//! exactly one of `connected`, `connecting`, `disconnected`, `blocked`, `disabled`.
//!
//! The servers of a project settings file that is ignored because its folder is not
//! trusted are listed too, as "ignored: folder not trusted (`switchboard trust`)" (never
//! as "no servers configured"), and in `--json` in their own `ignored` array (each with
//! `name`, `file`, `folder`, `reason`, `fix`), always present; `ignoredProjectSettings`
//! also names the ignored top-level settings. They are never started.
//!
//! A person waits on this command, so each server's start-up is capped at
//! [`LIST_STARTUP_CAP`] (10 s) unless its settings set `startupTimeout`; the servers given up on
//! are named at the end. On a terminal (not with `--json`) each server's start is shown
//! live on stderr while it happens (see [`crate::progress::ServerLines`]) and cleared
//! before the report, so the report is the same whether or not it was shown.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use serde_json::{Value, json};
use switchboard_config::IgnoredProject;
use switchboard_host::{Host, HostOptions, ServerSnapshot, ServerStatus};

use crate::ctx::{self, Globals};
use crate::hooks::CliHooks;

/// How long `mcp list` waits for one server to start unless its settings say otherwise.
pub const LIST_STARTUP_CAP: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn run(g: &Globals, as_json: bool) -> Result<ExitCode> {
    let (specs, settings) = ctx::all_specs(g, true)?;
    let guard = ctx::guard(g, Some(&settings))?;
    let host = Host::new(
        specs,
        HostOptions {
            hooks: Arc::new(CliHooks),
            token_source: crate::auth_cmd::token_source(Some(&settings), &guard, false),
            guard: Some(guard),
            transport_cache: ctx::transport_cache(),
            pins: ctx::pin_store(),
            startup_cap: Some(LIST_STARTUP_CAP),
            // Lists once and exits: no list watch.
            watch_lists: false,
            ..Default::default()
        },
    );
    let starting: Vec<String> = host
        .snapshot()
        .into_iter()
        .filter(|s| !matches!(s.status, ServerStatus::Disabled | ServerStatus::Blocked))
        .map(|s| s.name)
        .collect();
    match crate::progress::ServerLines::start(as_json, &starting) {
        // The lines are cleared (dropped) before the report below is printed.
        Some(lines) => {
            let mut events = host.subscribe();
            let start = host.start();
            tokio::pin!(start);
            loop {
                tokio::select! {
                    () = &mut start => break,
                    Ok(ev) = events.recv() => lines.event(&ev),
                }
            }
            while let Ok(ev) = events.try_recv() {
                lines.event(&ev);
            }
        }
        None => host.start().await,
    }
    let snapshot = host.snapshot();
    host.shutdown().await;
    // Tool names for `mcp call SERVER <Tab>` (completion never connects).
    if let Some(path) = crate::tool_names::path() {
        let mut configured: Vec<String> = settings.servers.iter().map(|s| s.name.clone()).collect();
        if settings.no_settings_file {
            configured.push("demo".into());
        }
        crate::tool_names::save(&path, &snapshot, &configured);
    }
    let ignored = settings.ignored_project.as_ref();
    if as_json {
        let mut doc = to_json(&snapshot);
        doc["ignored"] = ignored_json(ignored);
        if let Some(ignored) = ignored {
            doc["ignoredProjectSettings"] = json!({
                "file": ignored.file,
                "folder": ignored.folder,
                "servers": ignored.servers,
                "settings": ignored.settings,
                "reason": "the folder is not trusted",
                "fix": ignored.fix(),
            });
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if snapshot.is_empty() && ignored.is_some_and(|i| !i.servers.is_empty()) {
        out!("{}", ignored_human(ignored));
    } else {
        out!(
            "{}{}",
            human(&snapshot, &settings.files),
            ignored_human(ignored)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Why an ignored project file's servers do not start.
const IGNORED_REASON: &str = "folder not trusted";

/// `--json`'s `ignored` array: one object per server of the ignored project file.
fn ignored_json(ignored: Option<&IgnoredProject>) -> Value {
    let Some(i) = ignored else {
        return json!([]);
    };
    i.servers
        .iter()
        .map(|name| {
            json!({
                "name": name,
                "file": i.file,
                "folder": i.folder,
                "reason": IGNORED_REASON,
                "fix": i.fix(),
            })
        })
        .collect()
}

/// The servers of a project file ignored because its folder is not trusted, and the
/// command that applies it; empty when nothing was ignored.
pub fn ignored_human(ignored: Option<&IgnoredProject>) -> String {
    let mut out = String::new();
    let Some(i) = ignored else {
        return out;
    };
    if i.servers.is_empty() {
        let _ = writeln!(out, "{}", i.message());
        return out;
    }
    let _ = writeln!(
        out,
        "Ignored ({}), from {}:\n",
        i.servers.len(),
        i.file.display()
    );
    for name in &i.servers {
        let _ = writeln!(
            out,
            "⊘ {name} — ignored: {IGNORED_REASON} (`switchboard trust`)"
        );
    }
    let _ = writeln!(
        out,
        "\nThis folder is not trusted, so its settings do not apply. Review {}, then run `{}` to use {}.",
        i.file.display(),
        i.fix(),
        if i.servers.len() == 1 { "it" } else { "them" }
    );
    out
}

pub fn to_json(servers: &[ServerSnapshot]) -> Value {
    let list: Vec<Value> = servers
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "status": s.status.as_str(),
                "transport": s.transport,
                "connectedVia": s.connected_via,
                "target": s.target,
                "origin": s.origin,
                "trust": s.trust,
                "timeoutMs": s.timeout.map(|t| t.as_millis() as u64),
                "tools": s.tools.iter().map(|t| json!({
                    "name": t.name,
                    "description": t.description,
                })).collect::<Vec<_>>(),
                "filteredOutTools": s.filtered_out,
                "withheldTools": s.withheld,
                "prompts": s.prompts.iter().map(|p| json!({
                    "name": p.name,
                    "description": p.description,
                    "arguments": p.arguments.as_ref().map(|args| args.iter().map(|a| json!({
                        "name": a.name,
                        "description": a.description,
                        "required": a.required.unwrap_or(false),
                    })).collect::<Vec<_>>()).unwrap_or_default(),
                })).collect::<Vec<_>>(),
                "resources": s.resources.iter().map(|r| json!({
                    "uri": r.uri,
                    "name": r.name,
                })).collect::<Vec<_>>(),
                "resourceTemplates": s.resource_templates.iter().map(|r| json!({
                    "uriTemplate": r.uri_template,
                    "name": r.name,
                })).collect::<Vec<_>>(),
                "serverInfo": s.server_info.as_ref().map(|(n, v)| json!({"name": n, "version": v})),
                "protocolVersion": s.protocol_version,
                "instructions": s.instructions,
                "auth": s.auth,
                "error": s.error,
                "hint": s.hint,
                "warnings": s.warnings,
                "gaveUpAfterMs": s.gave_up_after.map(|t| t.as_millis() as u64),
            })
        })
        .collect();
    json!({ "servers": list })
}

pub fn icon(status: ServerStatus) -> &'static str {
    match status {
        ServerStatus::Connected => "🟢",
        ServerStatus::Connecting => "🟡",
        ServerStatus::Disconnected => "🔴",
        ServerStatus::Blocked => "⛔",
        ServerStatus::Disabled => "⚪",
    }
}

fn one_line(s: &str) -> String {
    let first = s.lines().next().unwrap_or("").trim();
    if first.chars().count() > 100 {
        format!("{}…", first.chars().take(99).collect::<String>())
    } else {
        first.to_string()
    }
}

pub fn human(servers: &[ServerSnapshot], files: &[std::path::PathBuf]) -> String {
    let mut out = String::new();
    if servers.is_empty() {
        let _ = writeln!(
            out,
            "No MCP servers configured. Add one with `switchboard mcp add <name> <command-or-url>`."
        );
        if !files.is_empty() {
            let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            let _ = writeln!(out, "Settings read: {}", list.join(", "));
        }
        return out;
    }
    let _ = writeln!(out, "MCP servers ({}):\n", servers.len());
    for s in servers {
        let via = s.connected_via.as_deref().unwrap_or(&s.transport);
        let _ = writeln!(
            out,
            "{} {} — {} ({}, {})",
            icon(s.status),
            s.name,
            s.status,
            via,
            s.origin
        );
        let label = match s.transport.as_str() {
            "stdio" => "Command",
            "invalid" => "Target",
            _ => "URL",
        };
        let _ = writeln!(out, "    {label}: {}", s.target);
        if let Some(cwd) = &s.cwd {
            let _ = writeln!(out, "    Working directory: {cwd}");
        }
        if let Some(t) = s.timeout
            && t.as_millis() != 600_000
        {
            let _ = writeln!(out, "    Timeout: {} ms", t.as_millis());
        }
        if let Some((name, version)) = &s.server_info {
            let _ = writeln!(
                out,
                "    Server: {name} {version}{}",
                s.protocol_version
                    .as_ref()
                    .map(|v| format!(" (protocol {v})"))
                    .unwrap_or_default()
            );
        }
        if let Some(auth) = s.auth {
            let text = match auth {
                switchboard_host::AuthStatus::Authenticated => "OAuth: authenticated",
                switchboard_host::AuthStatus::Expired => "OAuth: expired",
                switchboard_host::AuthStatus::NeedsLogin => "OAuth: not authenticated",
            };
            let _ = writeln!(out, "    {text}");
        }
        if let Some(err) = &s.error {
            let mut lines = err.lines();
            let _ = writeln!(out, "    Error: {}", lines.next().unwrap_or(""));
            for l in lines {
                let _ = writeln!(out, "           {l}");
            }
        }
        if let Some(hint) = &s.hint {
            let _ = writeln!(out, "    Hint: {hint}");
        }
        for w in &s.warnings {
            let _ = writeln!(out, "    Warning: {w}");
        }
        if s.status == ServerStatus::Connected {
            let _ = writeln!(out, "    Tools ({}):", s.tools.len());
            for t in &s.tools {
                match t
                    .description
                    .as_deref()
                    .map(one_line)
                    .filter(|d| !d.is_empty())
                {
                    Some(d) => {
                        let _ = writeln!(out, "      - {}: {d}", t.name);
                    }
                    None => {
                        let _ = writeln!(out, "      - {}", t.name);
                    }
                }
            }
            if !s.withheld.is_empty() {
                let _ = writeln!(
                    out,
                    "    Withheld ({}): {}",
                    s.withheld.len(),
                    s.withheld
                        .iter()
                        .map(|w| format!("{} ({})", w.name, w.why()))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let changed = s
                    .withheld
                    .iter()
                    .filter(|w| {
                        !matches!(
                            w.reason,
                            switchboard_host::WithheldReason::Unverified { .. }
                        )
                    })
                    .count();
                if changed > 0 {
                    let _ = writeln!(
                        out,
                        "    {changed} tool{} changed since pinned — run `switchboard mcp pins {}`",
                        if changed == 1 { "" } else { "s" },
                        s.name
                    );
                }
            }
            if !s.filtered_out.is_empty() {
                let _ = writeln!(
                    out,
                    "    Hidden by includeTools/excludeTools: {}",
                    s.filtered_out.join(", ")
                );
            }
            if !s.prompts.is_empty() {
                let names: Vec<&str> = s.prompts.iter().map(|p| p.name.as_str()).collect();
                let _ = writeln!(out, "    Prompts ({}): {}", names.len(), names.join(", "));
            }
            if !s.resources.is_empty() || !s.resource_templates.is_empty() {
                let mut names: Vec<String> = s.resources.iter().map(|r| r.uri.clone()).collect();
                names.extend(s.resource_templates.iter().map(|t| t.uri_template.clone()));
                let _ = writeln!(out, "    Resources ({}): {}", names.len(), names.join(", "));
            }
        }
        let _ = writeln!(out);
    }
    let gave_up: Vec<String> = servers
        .iter()
        .filter_map(|s| {
            s.gave_up_after
                .map(|t| format!("{} (after {:.1} s)", s.name, t.as_secs_f64()))
        })
        .collect();
    if !gave_up.is_empty() {
        let _ = writeln!(
            out,
            "Gave up waiting for {}. Set `startupTimeout` (ms) in a server's settings to wait \
             longer.",
            gave_up.join(", ")
        );
    }
    out
}
