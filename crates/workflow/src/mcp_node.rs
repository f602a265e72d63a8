//! The `mcp` node: call one tool on one server, GemiHub's way.
//!
//! - The server is `server: <configured name>` (ours) or `url`. A `url` that matches a
//!   configured server's URL (trailing slashes ignored) uses that server's connection;
//!   with node `headers` it gets its own connection with the configured headers and the
//!   node's merged in. Any other URL gets a one-off connection (through the URL guard),
//!   closed after the call.
//! - The tool must exist (and not be filtered out by settings); a result with
//!   `isError`, a failed call or a timeout (60 s, or the node's `timeout`) fails the
//!   node.
//! - `saveTo`: the text parts joined by `\n`, else `structuredContent` as JSON, else
//!   the content as JSON. `saveUiTo`: `{serverUrl, resourceUri, mimeType, content}`
//!   when the result (or the tool's definition) has `_meta.ui.resourceUri`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use switchboard_mcp::{CallOptions, ConnectOptions, Connection, RequestError, Target};
use tokio::sync::mpsc;

use crate::events::{AppInfo, RunEvent};
use crate::parse::Node;
use crate::run::{Runner, one_line};
use crate::template::render;
use crate::vars::{Variables, value_text};

/// How long reading the UI resource may take.
const UI_READ_TIMEOUT: Duration = Duration::from_secs(30);

enum Via {
    /// A configured server's connection (stays open).
    Shared { name: String, conn: Arc<Connection> },
    /// A connection for this call only.
    OneOff { conn: Box<Connection> },
}

impl Via {
    fn conn(&self) -> &Connection {
        match self {
            Via::Shared { conn, .. } => conn,
            Via::OneOff { conn } => conn,
        }
    }
}

fn normalize_url(u: &str) -> &str {
    u.trim_end_matches('/')
}

fn target_url(t: &Target) -> Option<&str> {
    match t {
        Target::Http { url, .. } | Target::Sse { url, .. } | Target::Auto { url, .. } => Some(url),
        Target::Stdio(_) => None,
    }
}

/// `target` with `extra` headers merged in (same names replaced, case-insensitively).
fn with_headers(target: Target, extra: &[(String, String)]) -> Result<Target, String> {
    let merge = |mut base: Vec<(String, String)>| {
        for (k, v) in extra {
            base.retain(|(bk, _)| !bk.eq_ignore_ascii_case(k));
            base.push((k.clone(), v.clone()));
        }
        base
    };
    Ok(match target {
        Target::Http { url, headers } => Target::Http {
            url,
            headers: merge(headers),
        },
        Target::Sse { url, headers } => Target::Sse {
            url,
            headers: merge(headers),
        },
        Target::Auto { url, headers } => Target::Auto {
            url,
            headers: merge(headers),
        },
        Target::Stdio(_) => return Err("`headers` only apply to HTTP servers".into()),
    })
}

fn json_object(key: &str, text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(format!(
            "`{key}` must be a JSON object, got: {}",
            one_line(text)
        )),
        Err(e) => Err(format!("invalid JSON in `{key}` ({e}): {}", one_line(text))),
    }
}

async fn one_off(
    runner: &Runner,
    label: &str,
    target: Target,
    timeout: Duration,
) -> Result<Connection, String> {
    let mut copts = ConnectOptions::new(label.to_string(), target);
    copts.request_timeout = timeout;
    copts.startup_timeout = runner.options().startup_timeout;
    copts.guard = Some(runner.guard()?);
    copts.hooks = runner.hooks();
    Connection::connect(copts)
        .await
        .map_err(|e| format!("cannot connect to {label}: {e}"))
}

/// Runs an `mcp` node. Returns the summary and the UI it produced, if any.
pub(crate) async fn run(
    runner: &Runner,
    node: &Node,
    vars: &mut Variables,
    scoped: &str,
) -> Result<(String, Option<AppInfo>), String> {
    let r = |k: &str| node.get(k).map(|v| render(v, vars));
    let tool = r("tool").unwrap_or_default();
    let args = match r("args") {
        Some(text) => json_object("args", &text)?,
        None => Map::new(),
    };
    let headers: Vec<(String, String)> = match r("headers") {
        Some(text) => json_object("headers", &text)?
            .into_iter()
            .map(|(k, v)| (k, value_text(&v)))
            .collect(),
        None => Vec::new(),
    };
    let timeout = match r("timeout") {
        Some(t) => Duration::from_millis(
            t.trim()
                .parse::<u64>()
                .map_err(|_| format!("`timeout` is not a number of milliseconds: `{t}`"))?,
        ),
        None => runner.options().mcp_timeout,
    };

    let host = runner.host();
    let mut url = None;
    let via = if let Some(name) = node.get("server") {
        if headers.is_empty() {
            Via::Shared {
                name: name.to_string(),
                conn: runner.server_connection(name).await?,
            }
        } else {
            let spec = host
                .spec(name)
                .ok_or_else(|| format!("no configured server named `{name}`"))?;
            let target = spec
                .target
                .ok_or_else(|| format!("server `{name}` has no usable target"))?;
            url = target_url(&target).map(str::to_string);
            let target = with_headers(target, &headers)?;
            Via::OneOff {
                conn: Box::new(one_off(runner, name, target, timeout).await?),
            }
        }
    } else {
        let u = r("url").unwrap_or_default();
        url = Some(u.clone());
        let matched = host.server_names().into_iter().find(|n| {
            host.spec(n)
                .and_then(|s| s.target)
                .as_ref()
                .and_then(target_url)
                .is_some_and(|t| normalize_url(t) == normalize_url(&u))
        });
        match matched {
            Some(name) if headers.is_empty() => Via::Shared {
                conn: runner.server_connection(&name).await?,
                name,
            },
            Some(name) => {
                let target = host
                    .spec(&name)
                    .and_then(|s| s.target)
                    .ok_or_else(|| format!("server `{name}` has no usable target"))?;
                Via::OneOff {
                    conn: Box::new(
                        one_off(runner, &name, with_headers(target, &headers)?, timeout).await?,
                    ),
                }
            }
            None => Via::OneOff {
                conn: Box::new(
                    one_off(
                        runner,
                        &u,
                        Target::Auto {
                            url: u.clone(),
                            headers,
                        },
                        timeout,
                    )
                    .await?,
                ),
            },
        }
    };
    let label = match &via {
        Via::Shared { name, .. } => format!("`{name}`"),
        Via::OneOff { .. } => url.clone().unwrap_or_default(),
    };
    let server_name = match &via {
        Via::Shared { name, .. } => Some(name.clone()),
        Via::OneOff { .. } => node.get("server").map(str::to_string),
    };
    if url.is_none()
        && let Some(name) = &server_name
    {
        url = host
            .spec(name)
            .and_then(|s| s.target)
            .as_ref()
            .and_then(target_url)
            .map(str::to_string);
    }

    let arguments = Value::Object(args.clone());
    let outcome = call(runner, &via, &label, &tool, args, timeout, scoped).await;
    let result = match outcome {
        Ok(v) => v,
        Err(e) => {
            close(via).await;
            return Err(e);
        }
    };
    let (result, tool_def) = result;
    let text = result_text(&result);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        close(via).await;
        return Err(format!("`{tool}` on {label} returned an error: {text}"));
    }
    if let Some(to) = node.get("saveTo") {
        vars.set_external(
            to,
            text.clone(),
            switchboard_chat::UntrustedKind::ToolResult,
            format!("server {label}, tool `{tool}`"),
        );
    }
    let ui_uri = ui_resource_uri(&result).or_else(|| tool_def.as_ref().and_then(ui_resource_uri));
    let mut app = None;
    if let Some(uri) = ui_uri {
        let opts = CallOptions {
            timeout: Some(UI_READ_TIMEOUT),
            cancel: Some(runner.cancel().child_token()),
            ..Default::default()
        };
        let mut mime = None;
        match via.conn().read_resource(&uri, &opts).await {
            Ok(res) => {
                let res = serde_json::to_value(&res).unwrap_or(Value::Null);
                let first = res
                    .get("contents")
                    .and_then(Value::as_array)
                    .and_then(|c| c.first())
                    .cloned()
                    .unwrap_or(Value::Null);
                let mime_type = first
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("text/html")
                    .to_string();
                let content = first
                    .get("text")
                    .or_else(|| first.get("blob"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                mime = Some(mime_type.clone());
                if let Some(to) = node.get("saveUiTo") {
                    let mut ui = json!({
                        "serverUrl": url,
                        "resourceUri": uri,
                        "mimeType": mime_type,
                        "content": content,
                    });
                    if let Some(name) = &server_name {
                        ui["server"] = json!(name);
                    }
                    vars.set_text(to, ui.to_string());
                }
            }
            Err(e) => runner.emit(RunEvent::Notice {
                node: Some(scoped.to_string()),
                message: format!("could not read the UI resource {uri}: {e}"),
            }),
        }
        app = Some(AppInfo {
            node: scoped.to_string(),
            server: server_name,
            server_url: url,
            resource_uri: uri,
            mime_type: mime,
            tool: tool.clone(),
            arguments,
            result: result.clone(),
        });
    }
    close(via).await;
    Ok((one_line(&text), app))
}

async fn close(via: Via) {
    if let Via::OneOff { conn } = via {
        conn.close(Duration::from_millis(500)).await;
    }
}

/// Checks the tool exists, then calls it. Returns the result and the tool's definition.
async fn call(
    runner: &Runner,
    via: &Via,
    label: &str,
    tool: &str,
    args: Map<String, Value>,
    timeout: Duration,
    scoped: &str,
) -> Result<(Value, Option<Value>), String> {
    let conn = via.conn();
    // A tool withheld by pinning (changed since pinned): its name and why.
    let (tools, filtered_out, withheld) = match via {
        Via::Shared { name, .. } => {
            let snap = runner
                .host()
                .server(name)
                .ok_or_else(|| format!("server `{name}` is not known"))?;
            let withheld: Vec<(String, String)> = snap
                .withheld
                .iter()
                .map(|w| (w.name.clone(), w.message(name)))
                .collect();
            (snap.tools, snap.filtered_out, withheld)
        }
        Via::OneOff { .. } => {
            let opts = CallOptions {
                timeout: Some(runner.options().startup_timeout),
                cancel: Some(runner.cancel().child_token()),
                ..Default::default()
            };
            let tools = conn
                .list_tools(&opts)
                .await
                .map_err(|e| format!("cannot list the tools of {label}: {e}"))?;
            (tools, Vec::new(), Vec::new())
        }
    };
    let def = tools.iter().find(|t| t.name == tool);
    let Some(def) = def else {
        if let Some((_, why)) = withheld.iter().find(|(t, _)| t == tool) {
            return Err(why.clone());
        }
        if filtered_out.iter().any(|t| t == tool) {
            return Err(format!(
                "tool `{tool}` on {label} is hidden by the server's includeTools/excludeTools settings"
            ));
        }
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        return Err(format!(
            "{label} has no tool `{tool}`; its tools: {}",
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        ));
    };
    let def = serde_json::to_value(def).ok();
    let (ptx, mut prx) = mpsc::unbounded_channel::<switchboard_mcp::Progress>();
    let forward = {
        let events = runner.options().events.clone();
        let node = scoped.to_string();
        tokio::spawn(async move {
            while let Some(p) = prx.recv().await {
                if let Some(tx) = &events {
                    let _ = tx.send(RunEvent::Progress {
                        node: node.clone(),
                        progress: p.progress,
                        total: p.total,
                        message: p.message,
                    });
                }
            }
        })
    };
    let opts = CallOptions {
        timeout: Some(timeout),
        progress: Some(ptx),
        cancel: Some(runner.cancel().child_token()),
        meta: None,
    };
    let result = conn.call_tool(tool, Some(args), &opts).await;
    drop(opts);
    let _ = tokio::time::timeout(Duration::from_millis(200), forward).await;
    match result {
        Ok(r) => Ok((serde_json::to_value(&r).unwrap_or(Value::Null), def)),
        Err(RequestError::Timeout { after, .. }) => Err(format!(
            "`{tool}` on {label} timed out after {} ms (the node's `timeout`, default {} ms) and was cancelled",
            after.as_millis(),
            runner.options().mcp_timeout.as_millis()
        )),
        Err(RequestError::Cancelled { .. }) => Err("the run was cancelled".into()),
        Err(e) => Err(format!("calling `{tool}` on {label} failed: {e}")),
    }
}

/// GemiHub's text form of a result: text parts joined by `\n`, else
/// `structuredContent` as JSON, else the content as JSON.
pub(crate) fn result_text(result: &Value) -> String {
    let content = result
        .get("content")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let texts: Vec<&str> = content
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .filter(|t| !t.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    if let Some(sc) = result.get("structuredContent") {
        return sc.to_string();
    }
    content.to_string()
}

/// `_meta.ui.resourceUri` (or the older `_meta["ui/resourceUri"]`) of a result or a
/// tool definition.
fn ui_resource_uri(v: &Value) -> Option<String> {
    let meta = v.get("_meta")?;
    meta.get("ui")
        .and_then(|ui| ui.get("resourceUri"))
        .or_else(|| meta.get("ui/resourceUri"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_text_rules() {
        assert_eq!(
            result_text(
                &json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]})
            ),
            "a\nb"
        );
        assert_eq!(
            result_text(&json!({"content": [], "structuredContent": {"sum": 3}})),
            r#"{"sum":3}"#
        );
        assert_eq!(
            result_text(&json!({"content": [{"type": "image", "data": "x"}]})),
            r#"[{"type":"image","data":"x"}]"#
        );
    }

    #[test]
    fn ui_uri_from_meta() {
        assert_eq!(
            ui_resource_uri(&json!({"_meta": {"ui": {"resourceUri": "ui://a"}}})).as_deref(),
            Some("ui://a")
        );
        assert_eq!(
            ui_resource_uri(&json!({"_meta": {"ui/resourceUri": "ui://b"}})).as_deref(),
            Some("ui://b")
        );
        assert!(ui_resource_uri(&json!({})).is_none());
    }
}
