//! Expanding one line of chat input, for every front end (the CLI's `chat` and the web
//! app's chat): `/prompt args` runs an MCP prompt and sends its messages; `/prompt help`
//! explains its arguments; `@server:uri` (or `@uri` of a listed resource) attaches the
//! resource's content to the message. The parsing rules live in [`crate::commands`].
//! Prompt messages and resource contents are server text: they are wrapped with the
//! conversation's [`Untrusted`] marker ([`crate::chat::Chat::untrusted`]).

use crate::commands::{
    PromptArg, find_resource_refs, parse_prompt_args, prompt_command_name, prompt_help,
};
use crate::untrusted::{Kind, Untrusted};
use base64::Engine as _;
use serde_json::Value;
use switchboard_host::{Host, ServerStatus};
use switchboard_mcp::CallOptions;
use switchboard_model::Part;

/// What a line of input turned into.
#[derive(Debug)]
pub enum Expanded {
    /// Send these parts to the model.
    Parts(Vec<Part>),
    /// Answer locally with this text (help); nothing goes to the model.
    Reply(String),
}

/// Expands one line (see the module doc). Errors are for the person.
pub async fn expand_input(
    host: &Host,
    line: &str,
    untrusted: &Untrusted,
) -> Result<Expanded, String> {
    if let Some(rest) = line.strip_prefix('/') {
        let (cmd, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if cmd == "help" {
            return Ok(Expanded::Reply(help_text(host)));
        }
        for s in host.snapshot() {
            if s.status != ServerStatus::Connected {
                continue;
            }
            for p in &s.prompts {
                if prompt_command_name(&p.name) != cmd {
                    continue;
                }
                let pargs: Vec<PromptArg> = p
                    .arguments
                    .iter()
                    .flatten()
                    .map(|a| PromptArg {
                        name: a.name.clone(),
                        required: a.required.unwrap_or(false),
                        description: a.description.clone(),
                    })
                    .collect();
                if args.trim() == "help" {
                    return Ok(Expanded::Reply(prompt_help(
                        cmd,
                        p.description.as_deref(),
                        &pargs,
                    )));
                }
                let values = parse_prompt_args(args, &pargs).map_err(|e| format!("/{cmd}: {e}"))?;
                let conn = host
                    .connection(&s.name)
                    .ok_or_else(|| format!("server `{}` is not connected", s.name))?;
                let result = conn
                    .get_prompt(&p.name, values, &CallOptions::default())
                    .await
                    .map_err(|e| format!("/{cmd}: {e}"))?;
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                let source = format!("server `{}`, prompt `{}`", s.name, p.name);
                let mut parts = Vec::new();
                for m in value
                    .get("messages")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                {
                    let content = m.get("content").cloned().unwrap_or(Value::Null);
                    parts.extend(content_to_parts(&content, untrusted, Kind::Prompt, &source));
                }
                if parts.is_empty() {
                    return Err(format!("/{cmd}: the prompt has no text to send"));
                }
                parts.insert(
                    0,
                    Part::text(format!(
                        "The user ran the prompt /{cmd} from MCP server `{}`; its messages follow.",
                        s.name
                    )),
                );
                return Ok(Expanded::Parts(parts));
            }
        }
        return Err(format!("unknown command `/{cmd}`; /help lists commands"));
    }
    let snapshot = host.snapshot();
    let servers: Vec<String> = snapshot.iter().map(|s| s.name.clone()).collect();
    let owner = |uri: &str| -> Option<String> {
        snapshot
            .iter()
            .find(|s| s.resources.iter().any(|r| r.uri == uri))
            .map(|s| s.name.clone())
    };
    let refs = find_resource_refs(line, &servers, &owner);
    let mut parts = vec![Part::text(line.to_string())];
    for r in refs {
        let conn = host
            .connection(&r.server)
            .ok_or_else(|| format!("{}: server `{}` is not connected", r.token, r.server))?;
        let result = conn
            .read_resource(&r.uri, &CallOptions::default())
            .await
            .map_err(|e| format!("reading {}: {e}", r.token))?;
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        for c in value
            .get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            if let Some(text) = c.get("text").and_then(Value::as_str) {
                let source = format!("server `{}`, resource {}", r.server, r.uri);
                parts.push(Part::text(format!(
                    "Content of {} ({}):\n{}",
                    r.token,
                    r.uri,
                    untrusted.wrap(Kind::Resource, &source, text)
                )));
            } else if let Some(blob) = c.get("blob").and_then(Value::as_str) {
                let mime = c
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream");
                parts.push(Part::text(format!(
                    "Content of {} ({}) follows as {mime}.",
                    r.token, r.uri
                )));
                parts.push(Part::inline_data(mime, blob));
            }
        }
    }
    Ok(Expanded::Parts(parts))
}

/// MCP content blocks → model parts; text is wrapped as `kind` data from `source`.
pub fn content_to_parts(
    content: &Value,
    untrusted: &Untrusted,
    kind: Kind,
    source: &str,
) -> Vec<Part> {
    let blocks = match content {
        Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    };
    let mut parts = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(Part::text(untrusted.wrap(
                kind,
                source,
                b.get("text").and_then(Value::as_str).unwrap_or(""),
            ))),
            Some("image") | Some("audio") => {
                let mime = b
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream");
                let data = b.get("data").and_then(Value::as_str).unwrap_or("");
                if base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .is_ok()
                {
                    parts.push(Part::inline_data(mime, data));
                }
            }
            Some("resource") => {
                let res = b.get("resource").cloned().unwrap_or(Value::Null);
                if let Some(t) = res.get("text").and_then(Value::as_str) {
                    let uri = res.get("uri").and_then(Value::as_str).unwrap_or("");
                    parts.push(Part::text(format!(
                        "Resource {uri}:\n{}",
                        untrusted.wrap(kind, source, t)
                    )));
                }
            }
            Some("resource_link") => {
                let uri = b.get("uri").and_then(Value::as_str).unwrap_or("");
                parts.push(Part::text(format!(
                    "Resource Link: {}",
                    untrusted.wrap(kind, source, uri)
                )));
            }
            _ => {}
        }
    }
    parts
}

fn help_text(host: &Host) -> String {
    let mut out = String::from(
        "Type a message to talk to Gemini with your MCP servers' tools.\n  @server:uri   attach a resource to your message\n  /help         this list\n",
    );
    out.push_str(&prompt_commands_help(host));
    out
}

/// The "Prompts from MCP servers" part of a chat's help: one line per prompt of every
/// server, as its slash command; empty when no server has prompts. Every front end's
/// `/help` ends with it.
pub fn prompt_commands_help(host: &Host) -> String {
    let mut prompts = Vec::new();
    for s in host.snapshot() {
        for p in &s.prompts {
            prompts.push(format!(
                "  /{} ({})  — add `help` for its arguments",
                prompt_command_name(&p.name),
                s.name
            ));
        }
    }
    if prompts.is_empty() {
        return String::new();
    }
    format!("Prompts from MCP servers:\n{}\n", prompts.join("\n"))
}
