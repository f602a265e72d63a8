//! What the gateway offers downstream at one moment: every connected server's tools,
//! prompts, resources and templates under their downstream names, the tables back to
//! the upstream ones, and a status line per server.
//!
//! Built from [`switchboard_host::ServerSnapshot`]s only, so whatever the host applies
//! (`includeTools`/`excludeTools`, tools withheld by pinning) applies here as well. It
//! must not call a server.

use serde_json::Value;
use switchboard_host::{AuthStatus, ServerSnapshot, ServerStatus};
use switchboard_mcp::model::{Prompt, Resource, ResourceTemplate, Tool};

use crate::names::NameTable;
use crate::uris::{Offered, UriTable};

/// How the catalog is built.
#[derive(Debug, Clone)]
pub struct CatalogOptions {
    /// Only tools whose annotations say `readOnlyHint: true`.
    pub read_only: bool,
    /// At most this many tools, prompts, resources and templates (each) per server;
    /// the rest are left out and the server's status line says so.
    pub max_items_per_server: usize,
}

impl Default for CatalogOptions {
    fn default() -> Self {
        Self {
            read_only: false,
            max_items_per_server: 1_000,
        }
    }
}

/// One server's line in the gateway's `instructions`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusLine {
    pub server: String,
    pub status: ServerStatus,
    /// Why it is not connected, or what was left out.
    pub note: Option<String>,
}

/// The downstream view.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    pub tool_names: NameTable,
    pub prompt_names: NameTable,
    pub uris: UriTable,
    pub status: Vec<StatusLine>,
    /// Each connected server's own `instructions`.
    pub upstream_instructions: Vec<(String, String)>,
    /// Built for a read-only gateway.
    pub read_only: bool,
}

fn capped<T: Clone>(items: &[T], max: usize, what: &str, notes: &mut Vec<String>) -> Vec<T> {
    if items.len() > max {
        notes.push(format!(
            "{} of its {} {what} left out (more than {max})",
            items.len() - max,
            items.len()
        ));
    }
    items.iter().take(max).cloned().collect()
}

fn read_only(tool: &Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

impl Catalog {
    /// The catalog of the connected servers among `snapshots`.
    pub fn build(snapshots: &[ServerSnapshot], opts: &CatalogOptions) -> Self {
        struct Kept {
            server: String,
            tools: Vec<Tool>,
            prompts: Vec<Prompt>,
            resources: Vec<Resource>,
            templates: Vec<ResourceTemplate>,
        }
        let mut kept = Vec::new();
        let mut status = Vec::new();
        let mut upstream_instructions = Vec::new();
        let max = opts.max_items_per_server;
        for snap in snapshots {
            if snap.status != ServerStatus::Connected {
                status.push(StatusLine {
                    server: snap.name.clone(),
                    status: snap.status,
                    note: downstream_reason(snap),
                });
                continue;
            }
            let mut notes = Vec::new();
            let mut tools = capped(&snap.tools, max, "tools", &mut notes);
            if opts.read_only {
                let before = tools.len();
                tools.retain(read_only);
                if tools.len() < before {
                    notes.push(format!(
                        "{} tools without readOnlyHint hidden (read-only gateway)",
                        before - tools.len()
                    ));
                }
            }
            kept.push(Kept {
                server: snap.name.clone(),
                tools,
                prompts: capped(&snap.prompts, max, "prompts", &mut notes),
                resources: capped(&snap.resources, max, "resources", &mut notes),
                templates: capped(&snap.resource_templates, max, "templates", &mut notes),
            });
            if let Some(text) = snap.instructions.as_ref().filter(|t| !t.trim().is_empty()) {
                upstream_instructions.push((snap.name.clone(), text.clone()));
            }
            status.push(StatusLine {
                server: snap.name.clone(),
                status: snap.status,
                note: (!notes.is_empty()).then(|| notes.join("; ")),
            });
        }
        let tool_names = NameTable::build(
            kept.iter()
                .flat_map(|k| k.tools.iter().map(|t| (k.server.as_str(), t.name.as_ref()))),
        );
        let prompt_names = NameTable::build(kept.iter().flat_map(|k| {
            k.prompts
                .iter()
                .map(|p| (k.server.as_str(), p.name.as_str()))
        }));
        let offered_resources: Vec<Offered<'_>> = kept
            .iter()
            .flat_map(|k| {
                k.resources.iter().map(|r| Offered {
                    server: &k.server,
                    uri: r.uri.as_str(),
                })
            })
            .collect();
        let offered_templates: Vec<Offered<'_>> = kept
            .iter()
            .flat_map(|k| {
                k.templates.iter().map(|t| Offered {
                    server: &k.server,
                    uri: t.uri_template.as_str(),
                })
            })
            .collect();
        let uris = UriTable::build(&offered_resources, &offered_templates);

        let mut cat = Catalog {
            tool_names,
            prompt_names,
            status,
            upstream_instructions,
            read_only: opts.read_only,
            ..Default::default()
        };
        for k in &kept {
            for t in &k.tools {
                let Some(name) = cat.tool_names.name_of(&k.server, &t.name) else {
                    continue;
                };
                let mut t = t.clone();
                t.name = name.to_string().into();
                rewrite_ui_uri(&mut t, &k.server, &uris);
                cat.tools.push(t);
            }
            for p in &k.prompts {
                let Some(name) = cat.prompt_names.name_of(&k.server, &p.name) else {
                    continue;
                };
                let mut p = p.clone();
                p.name = name.to_string();
                cat.prompts.push(p);
            }
            for r in &k.resources {
                let mut r = r.clone();
                if let Some(uri) = uris.resource_uri(&k.server, &r.uri) {
                    r.uri = uri.to_string();
                }
                cat.resources.push(r);
            }
            for t in &k.templates {
                let mut t = t.clone();
                if let Some(uri) = uris.template_uri(&k.server, &t.uri_template) {
                    t.uri_template = uri.to_string();
                }
                cat.templates.push(t);
            }
        }
        cat.uris = uris;
        cat
    }

    /// The gateway's `instructions`: which servers are in, which are not and why, then
    /// each connected server's own instructions under its name.
    pub fn instructions(&self) -> String {
        let mut out = String::from(
            "Switchboard gateway: the tools, prompts and resources of several MCP servers. \
             Tool and prompt names are `{server}__{name}`.\n",
        );
        if self.read_only {
            out.push_str(
                "This gateway is read-only: only tools annotated `readOnlyHint: true` are offered.\n",
            );
        }
        for line in &self.status {
            out.push_str(&format!("- `{}`: {}", line.server, line.status));
            if let Some(note) = &line.note {
                out.push_str(&format!(" ({note})"));
            }
            out.push('\n');
        }
        for (server, text) in &self.upstream_instructions {
            out.push_str(&format!("\n## Server `{server}`\n{text}\n"));
        }
        out
    }
}

/// Why a server is not in, in words safe for the downstream client: never the
/// upstream's own error text, which may quote a URL with a key in it, a command line or
/// the server's stderr. The details are in `switchboard mcp list` on this machine.
pub fn downstream_reason(snap: &ServerSnapshot) -> Option<String> {
    if snap.status == ServerStatus::Connected {
        return None;
    }
    let why = if let Some(after) = snap.gave_up_after {
        format!("start-up timed out after {} s", after.as_secs())
    } else if matches!(
        snap.auth,
        Some(AuthStatus::NeedsLogin) | Some(AuthStatus::Expired)
    ) {
        format!("needs a login: `switchboard mcp login {}`", snap.name)
    } else {
        match snap.status {
            ServerStatus::Connecting => return None,
            ServerStatus::Disabled => "disabled in settings".into(),
            ServerStatus::Blocked => "blocked by policy".into(),
            _ if snap.error.is_some() => "failed to connect".into(),
            _ => return None,
        }
    };
    Some(format!("{why}; details: `switchboard mcp list`"))
}

/// An MCP Apps tool points at its UI resource by URI; when that URI is served
/// qualified, the tool's `_meta` must point at the qualified one.
fn rewrite_ui_uri(tool: &mut Tool, server: &str, uris: &UriTable) {
    let Some(meta) = tool.meta.as_mut() else {
        return;
    };
    let map = |v: &mut Value| {
        if let Some(uri) = v.as_str()
            && let Some(out) = uris.resource_uri(server, uri)
            && out != uri
        {
            *v = Value::String(out.to_string());
        }
    };
    if let Some(ui) = meta.0.get_mut("ui").and_then(|u| u.get_mut("resourceUri")) {
        map(ui);
    }
    if let Some(v) = meta.0.get_mut("ui/resourceUri") {
        map(v);
    }
}
