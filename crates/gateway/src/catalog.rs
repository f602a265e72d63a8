//! What the gateway offers downstream at one moment: every connected server's tools,
//! prompts, resources and templates under their downstream names, the tables back to
//! the upstream ones, and a status line per server.
//!
//! Built from [`switchboard_host::ServerSnapshot`]s only, so whatever the host applies
//! (`includeTools`/`excludeTools`, tools withheld by pinning) applies here as well. It
//! must not call a server. `--read-only` ([`CatalogOptions::read_only`]: only tools
//! annotated `readOnlyHint: true`) applies here too, and each server's lists are capped
//! ([`CatalogOptions::max_items_per_server`], 1,000 of each kind by default), the
//! server's status line naming what was left out or hidden.
//!
//! A tool the host withholds (`ServerSnapshot::withheld`: changed or renamed since it
//! was pinned, or its pin could not be checked) is not offered and not in
//! [`Catalog::tool_names`], so neither the typed path nor the raw relay can route a
//! call to it. It is still named (in the same table as the offered tools, so a name
//! does not move when its tool is withheld or accepted) and kept in
//! [`Catalog::withheld`]: a call to that name is refused with [`Withheld::refusal`]
//! (why, and `switchboard mcp pins accept SERVER TOOL`), and the server's status line
//! says how many are withheld, which, and the commands that review and accept them.
//!
//! A tool's MCP Apps resource (`_meta.ui.resourceUri`) must be its own server's
//! ([`UriTable::belongs`]: listed by it, or matching one of its templates that may
//! capture the URI): otherwise a client would render another server's app with this
//! tool's data, so `_meta.ui` is dropped and the server's status line (in the gateway's
//! `instructions`) says which tools lost their app.

use serde_json::Value;
use switchboard_host::{AuthStatus, ServerSnapshot, ServerStatus, WithheldReason, WithheldTool};
use switchboard_mcp::model::{Prompt, Resource, ResourceTemplate, Tool};

use crate::names::NameTable;
use crate::uris::{Offered, UriTable, qualify};

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

/// A tool a connected server lists that the host withholds (tool pinning).
#[derive(Debug, Clone, PartialEq)]
pub struct Withheld {
    /// The name it has downstream (the one it had, or would have, when offered).
    pub name: String,
    pub server: String,
    /// Its upstream name and why it is withheld.
    pub tool: WithheldTool,
}

impl Withheld {
    /// What a client that calls it is told: why, and what the user runs to offer it.
    /// A pin that could not be checked is told in the gateway's own words (the host's
    /// error names a local file); the details are in `switchboard mcp list`.
    pub fn refusal(&self) -> String {
        match &self.tool.reason {
            WithheldReason::Unverified { .. } => format!(
                "tool `{}` of server `{}` is withheld because its pin cannot be checked; details: `switchboard mcp list` on the machine running the gateway",
                self.tool.name, self.server
            ),
            _ => self.tool.message(&self.server),
        }
    }
}

/// The status-line note on a server's withheld tools: how many, which and why, and the
/// commands that review and accept them.
fn withheld_note(server: &str, withheld: &[WithheldTool]) -> String {
    let list: Vec<String> = withheld
        .iter()
        .map(|w| format!("`{}` ({})", w.name, w.why()))
        .collect();
    let n = withheld.len();
    let mut note = format!(
        "{n} tool{} withheld by tool pinning: {}",
        if n == 1 { "" } else { "s" },
        list.join(", ")
    );
    let unverified = |w: &WithheldTool| matches!(w.reason, WithheldReason::Unverified { .. });
    if withheld.iter().any(|w| !unverified(w)) {
        note.push_str(&format!(
            "; review with `switchboard mcp pins {server}`, then offer with `switchboard mcp pins accept {server} TOOL`"
        ));
    }
    if withheld.iter().any(unverified) {
        note.push_str("; pins not checked: details in `switchboard mcp list`");
    }
    note
}

/// The downstream view.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    /// The offered tools' names (a withheld tool is not in it: see [`Catalog::withheld`]).
    pub tool_names: NameTable,
    /// The tools withheld by pinning, with their downstream names.
    pub withheld: Vec<Withheld>,
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
            withheld: Vec<WithheldTool>,
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
            let withheld = capped(&snap.withheld, max, "withheld tools", &mut notes);
            if !withheld.is_empty() {
                notes.push(withheld_note(&snap.name, &withheld));
            }
            kept.push(Kept {
                server: snap.name.clone(),
                tools,
                withheld,
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
        // Withheld tools are named with the offered ones (so no name moves when a tool
        // is withheld or accepted), then taken out: nothing routes to them.
        let mut tool_names = NameTable::build(kept.iter().flat_map(|k| {
            k.tools
                .iter()
                .map(|t| (k.server.as_str(), t.name.as_ref()))
                .chain(
                    k.withheld
                        .iter()
                        .map(|w| (k.server.as_str(), w.name.as_str())),
                )
        }));
        let mut withheld = Vec::new();
        for k in &kept {
            for w in &k.withheld {
                if let Some(name) = tool_names.remove(&k.server, &w.name) {
                    withheld.push(Withheld {
                        name,
                        server: k.server.clone(),
                        tool: w.clone(),
                    });
                }
            }
        }
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
            withheld,
            prompt_names,
            status,
            upstream_instructions,
            read_only: opts.read_only,
            ..Default::default()
        };
        for k in &kept {
            let mut foreign_apps = Vec::new();
            for t in &k.tools {
                let Some(name) = cat.tool_names.name_of(&k.server, &t.name) else {
                    continue;
                };
                let mut t = t.clone();
                t.name = name.to_string().into();
                if !app_resource(&mut t, &k.server, &uris) {
                    foreign_apps.push(format!("`{name}`"));
                }
                cat.tools.push(t);
            }
            if !foreign_apps.is_empty() {
                let note = format!(
                    "the app (`_meta.ui`) of {} dropped: its resource is not this server's",
                    foreign_apps.join(", ")
                );
                if let Some(line) = cat.status.iter_mut().find(|l| l.server == k.server) {
                    line.note = Some(match line.note.take() {
                        Some(n) => format!("{n}; {note}"),
                        None => note,
                    });
                }
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

    /// The withheld tool a client knows as `name`, if it is one.
    pub fn withheld(&self, name: &str) -> Option<&Withheld> {
        self.withheld.iter().find(|w| w.name == name)
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

/// An MCP Apps tool points at its UI resource by URI (`_meta.ui.resourceUri`, or the
/// older `_meta["ui/resourceUri"]`). That resource must be the tool's own server's
/// ([`UriTable::belongs`]): then the URI becomes the one served downstream (qualified
/// when a plain read would not reach this server); else a client would render another
/// server's app with this tool's data, so `_meta.ui` and `_meta["ui/resourceUri"]` are
/// dropped and `false` is returned (the caller notes it on the server's status line).
fn app_resource(tool: &mut Tool, server: &str, uris: &UriTable) -> bool {
    let Some(meta) = tool.meta.as_mut() else {
        return true;
    };
    let downstream = |uri: &str| -> Option<String> {
        if !uris.belongs(server, uri) {
            return None;
        }
        Some(match uris.resource_uri(server, uri) {
            Some(out) => out.to_string(),
            None if uris.route(uri).is_ok_and(|(s, _)| s == server) => uri.to_string(),
            None => qualify(server, uri),
        })
    };
    let mut own = true;
    let mut check = |v: Option<&mut Value>| {
        if let Some(v) = v
            && let Some(uri) = v.as_str()
        {
            match downstream(uri) {
                Some(out) => *v = Value::String(out),
                None => own = false,
            }
        }
    };
    check(meta.0.get_mut("ui").and_then(|u| u.get_mut("resourceUri")));
    check(meta.0.get_mut("ui/resourceUri"));
    if !own {
        meta.0.remove("ui");
        meta.0.remove("ui/resourceUri");
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snap(name: &str, lists: serde_json::Value) -> ServerSnapshot {
        let list = |k: &str| lists.get(k).cloned().unwrap_or(json!([]));
        ServerSnapshot {
            name: name.into(),
            status: ServerStatus::Connected,
            transport: "stdio".into(),
            connected_via: None,
            target: String::new(),
            cwd: None,
            timeout: None,
            trust: false,
            origin: "user".into(),
            tools: serde_json::from_value(list("tools")).unwrap(),
            filtered_out: Vec::new(),
            withheld: Vec::new(),
            prompts: Vec::new(),
            resources: serde_json::from_value(list("resources")).unwrap(),
            resource_templates: serde_json::from_value(list("templates")).unwrap(),
            instructions: None,
            server_info: None,
            protocol_version: None,
            auth: None,
            error: None,
            hint: None,
            warnings: Vec::new(),
            gave_up_after: None,
        }
    }

    fn tool(name: &str, ui: &str) -> serde_json::Value {
        json!({"name": name, "inputSchema": {"type": "object"},
               "_meta": {"ui": {"resourceUri": ui}, "ui/resourceUri": ui, "other": 1}})
    }

    #[test]
    fn a_tools_app_must_be_its_own_servers_resource() {
        let a = snap(
            "a",
            json!({"resources": [{"uri": "ui://a/app.html", "name": "app"}],
                   "tools": [tool("mine", "ui://a/app.html")]}),
        );
        let b = snap(
            "b",
            json!({"templates": [{"uriTemplate": "{+u}", "name": "all"}],
                   "tools": [tool("theirs", "ui://a/app.html"), tool("own", "ui://b/x.html")]}),
        );
        let cat = Catalog::build(&[a, b], &CatalogOptions::default());
        let meta = |n: &str| {
            let t = cat.tools.iter().find(|t| t.name == n).unwrap();
            serde_json::to_value(t.meta.as_ref().unwrap()).unwrap()
        };
        assert_eq!(meta("a__mine")["ui"]["resourceUri"], "ui://a/app.html");
        // b's tool naming a's app: `_meta.ui` (both keys) dropped, the rest kept.
        let theirs = meta("b__theirs");
        assert!(theirs.get("ui").is_none() && theirs.get("ui/resourceUri").is_none());
        assert_eq!(theirs["other"], 1);
        assert_eq!(meta("b__own")["ui"]["resourceUri"], "ui://b/x.html");
        // The notice: b's status line, in the gateway's instructions.
        let text = cat.instructions();
        assert!(
            text.contains("- `b`: connected (the app (`_meta.ui`) of `b__theirs` dropped"),
            "{text}"
        );
        assert!(!text.contains("b__own`"), "{text}");
    }

    #[test]
    fn a_withheld_tool_is_not_offered_or_routed_but_named_refused_and_noted() {
        let mut a = snap(
            "a",
            json!({"tools": [{"name": "kept", "inputSchema": {"type": "object"}}]}),
        );
        a.withheld = vec![
            WithheldTool {
                name: "echo".into(),
                reason: WithheldReason::Changed,
            },
            WithheldTool {
                name: "say".into(),
                reason: WithheldReason::Renamed {
                    from: "talk".into(),
                },
            },
        ];
        let mut b = snap("b", json!({}));
        b.withheld = vec![WithheldTool {
            name: "t".into(),
            reason: WithheldReason::Unverified {
                error: "the pins file /home/me/.switchboard/pins.json is not valid".into(),
            },
        }];
        let cat = Catalog::build(&[a, b], &CatalogOptions::default());
        let names: Vec<&str> = cat.tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["a__kept"]);
        assert_eq!(cat.tool_names.resolve("a__echo"), None);
        assert_eq!(cat.tool_names.resolve("a__kept"), Some(("a", "kept")));
        let echo = cat.withheld("a__echo").unwrap();
        assert!(
            echo.refusal()
                .contains("`switchboard mcp pins accept a echo`"),
            "{}",
            echo.refusal()
        );
        assert!(
            cat.withheld("a__say")
                .unwrap()
                .refusal()
                .contains("looks like the pinned tool `talk`")
        );
        // A pin that cannot be checked: the gateway's words, not the local file's path.
        let t = cat.withheld("b__t").unwrap().refusal();
        assert!(
            t.contains("cannot be checked") && !t.contains("/home/me"),
            "{t}"
        );
        assert!(cat.withheld("a__kept").is_none());
        let text = cat.instructions();
        assert!(
            text.contains(
                "- `a`: connected (2 tools withheld by tool pinning: `echo` (changed since pinned), `say` (renamed from `talk`); review with `switchboard mcp pins a`, then offer with `switchboard mcp pins accept a TOOL`)"
            ),
            "{text}"
        );
        assert!(
            text.contains("- `b`: connected (1 tool withheld by tool pinning: `t` (pin not checked); pins not checked: details in `switchboard mcp list`)"),
            "{text}"
        );
        assert!(!text.contains("/home/me"), "{text}");
    }

    #[test]
    fn a_withheld_tool_keeps_the_name_it_had_when_its_name_collides() {
        // `a__b` + `c` and `a` + `b__c` both make `a__b__c`: hashed whether or not one
        // of them is withheld, so a client calling the name it saw is told why.
        let both = snap(
            "a",
            json!({"tools": [{"name": "b__c", "inputSchema": {"type": "object"}}]}),
        );
        let mut other = snap(
            "a__b",
            json!({"tools": [{"name": "c", "inputSchema": {"type": "object"}}]}),
        );
        let before = Catalog::build(&[both.clone(), other.clone()], &CatalogOptions::default());
        let seen = before.tool_names.name_of("a__b", "c").unwrap().to_string();
        other.tools.clear();
        other.withheld = vec![WithheldTool {
            name: "c".into(),
            reason: WithheldReason::Changed,
        }];
        let after = Catalog::build(&[both, other], &CatalogOptions::default());
        assert_eq!(after.withheld(&seen).unwrap().tool.name, "c");
        assert_eq!(
            after.tool_names.name_of("a", "b__c"),
            before.tool_names.name_of("a", "b__c")
        );
    }

    #[test]
    fn an_app_listed_by_two_servers_is_pointed_at_its_own_qualified_uri() {
        let res = json!([{"uri": "ui://shared/app.html", "name": "app"}]);
        let a = snap(
            "a",
            json!({"resources": res, "tools": [tool("t", "ui://shared/app.html")]}),
        );
        let b = snap("b", json!({"resources": res}));
        let cat = Catalog::build(&[a, b], &CatalogOptions::default());
        let t = serde_json::to_value(cat.tools[0].meta.as_ref().unwrap()).unwrap();
        let want = crate::uris::qualify("a", "ui://shared/app.html");
        assert_eq!(t["ui"]["resourceUri"], want.as_str());
        assert_eq!(
            cat.uris.route(&want),
            Ok(("a".into(), "ui://shared/app.html".into()))
        );
    }
}
