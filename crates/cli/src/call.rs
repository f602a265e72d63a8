//! `mcp call`, `mcp read`, `mcp prompt`: use one server (configured, an ad-hoc URL, or
//! `--stdio`), print the result readably (or raw with `--json`), and stop the server.
//! Exit 1 when the call fails or the result has `isError`. Ctrl-C cancels the request
//! (the server is sent `notifications/cancelled`) and exits 130.
//!
//! Before calling, `mcp call` checks the arguments against the tool's input schema: a
//! missing required argument is an error naming its type and how to add it, a key the
//! schema does not have is a warning on stderr naming the known keys (the call still
//! goes out; none when the schema allows other keys), and a bare word where `key=value`
//! is expected suggests `KEY=word` for the first required string property. An unknown
//! server, tool or prompt name gets "did you mean" (`switchboard_config::did_you_mean`,
//! the helper `run` uses); a server that lists no prompts is asked for any prompt name.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value};
use switchboard_host::{Host, HostOptions, ServerStatus};
use switchboard_mcp::{CallOptions, Connection};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ctx::{self, AdHoc, Globals};
use crate::hooks::CliHooks;
use crate::render;

pub struct CallArgs {
    pub positional: Vec<String>,
    pub args: Option<String>,
    pub json: bool,
    pub timeout_ms: Option<u64>,
    pub adhoc: AdHoc,
}

/// Splits `[server] name rest…` depending on whether `--stdio` names the server.
fn split_positional(
    positional: &[String],
    adhoc: &AdHoc,
    what: &str,
) -> Result<(Option<String>, String, Vec<String>)> {
    let mut it = positional.iter().cloned();
    let server = if adhoc.stdio.is_some() {
        None
    } else {
        it.next()
    };
    let name = it.next().with_context(|| {
        format!(
            "missing the {what} name: `switchboard mcp {what_cmd} <server> <{what}>`",
            what_cmd = if what == "tool" { "call" } else { what }
        )
    })?;
    Ok((server, name, it.collect()))
}

/// Connects the one server a command needs.
async fn connect_one(
    g: &Globals,
    server: Option<&str>,
    adhoc: &AdHoc,
    json: bool,
) -> Result<(Host, Arc<Connection>)> {
    let (spec, settings) = ctx::resolve_one(g, server, adhoc)?;
    let guard = ctx::guard(g, settings.as_ref())?;
    let name = spec.name.clone();
    let host = Host::new(
        vec![spec],
        HostOptions {
            hooks: Arc::new(CliHooks),
            transport_cache: ctx::transport_cache(),
            pins: ctx::pin_store(),
            token_source: crate::auth_cmd::token_source(settings.as_ref(), &guard, true),
            guard: Some(guard),
            // One call and exit: no list watch.
            watch_lists: false,
            ..Default::default()
        },
    );
    let spinner = crate::progress::Spinner::start(
        json,
        format!("Connecting to {}…", crate::term::visible(&name)),
    );
    host.start().await;
    drop(spinner);
    if let Some(conn) = host.connection(&name) {
        return Ok((host, conn));
    }
    let snap = host.server(&name);
    host.shutdown().await;
    let Some(snap) = snap else {
        bail!("server `{name}` is not known");
    };
    let mut msg = match snap.status {
        ServerStatus::Disabled => format!("server `{name}` is disabled"),
        ServerStatus::Blocked => format!("server `{name}` is blocked"),
        _ => format!("could not connect to `{name}`"),
    };
    if let Some(e) = &snap.error {
        msg.push_str(": ");
        msg.push_str(e);
    }
    if let Some(h) = &snap.hint {
        msg.push_str(&format!("\nhint: {h}"));
    }
    Err(anyhow!(msg))
}

/// Types `key=value` arguments by the tool's input schema.
pub fn typed_kv(
    pairs: &[String],
    schema: Option<&Map<String, Value>>,
) -> Result<Map<String, Value>> {
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let mut out = Map::new();
    for pair in pairs {
        let pair = pair.strip_prefix("--").unwrap_or(pair);
        let Some((k, v)) = pair.split_once('=') else {
            bail!("{}", not_key_value(pair, schema));
        };
        let ty = props
            .and_then(|p| p.get(k))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let value = match ty {
            Some("string") => Value::String(v.to_string()),
            Some("number") => v
                .parse::<f64>()
                .map(Value::from)
                .map_err(|_| anyhow!("argument `{k}` must be a number, got `{v}`"))?,
            Some("integer") => v
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| anyhow!("argument `{k}` must be an integer, got `{v}`"))?,
            Some("boolean") => match v {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => bail!("argument `{k}` must be true or false, got `{v}`"),
            },
            Some("array") | Some("object") => {
                serde_json::from_str(v).map_err(|e| anyhow!("argument `{k}` must be JSON ({e})"))?
            }
            _ => serde_json::from_str::<Value>(v)
                .ok()
                .filter(|j| !j.is_string())
                .unwrap_or_else(|| Value::String(v.to_string())),
        };
        out.insert(k.to_string(), value);
    }
    Ok(out)
}

/// The error for a bare `word` where `key=value` is expected: with a schema, it suggests
/// `KEY=word` for the first required string property.
fn not_key_value(word: &str, schema: Option<&Map<String, Value>>) -> String {
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let first_string = required(schema).into_iter().find(|k| {
        props
            .and_then(|p| p.get(*k))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            == Some("string")
    });
    match first_string {
        Some(k) => format!("argument `{word}` is not key=value (did you mean `{k}={word}`?)"),
        None => format!("argument `{word}` is not key=value: write each argument as `key=value`"),
    }
}

/// The `required` property names of an input schema.
fn required(schema: Option<&Map<String, Value>>) -> Vec<&str> {
    schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Checks `arguments` against the tool's input schema before the call: an error naming
/// every missing required argument (with its type and how to add it), and one warning
/// per key the schema does not have (naming the known keys) unless the schema allows
/// other keys.
fn check_arguments(
    tool: &str,
    schema: &Map<String, Value>,
    arguments: &Map<String, Value>,
) -> Result<Vec<String>> {
    let props = schema.get("properties").and_then(Value::as_object);
    let missing: Vec<String> = required(Some(schema))
        .into_iter()
        .filter(|k| !arguments.contains_key(*k))
        .map(|k| {
            let ty = props
                .and_then(|p| p.get(k))
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("any type");
            format!("missing required argument `{k}` ({ty}): add `{k}=…`")
        })
        .collect();
    if !missing.is_empty() {
        bail!("tool `{tool}`: {}", missing.join("; "));
    }
    let open = schema.get("additionalProperties").and_then(Value::as_bool) == Some(true);
    let Some(props) = props.filter(|_| !open) else {
        return Ok(Vec::new());
    };
    let known: Vec<&str> = props.keys().map(String::as_str).collect();
    Ok(arguments
        .keys()
        .filter(|k| !props.contains_key(*k))
        .map(|k| {
            format!(
                "tool `{tool}` has no argument `{k}`{}, sending it anyway; known keys: {}",
                switchboard_config::did_you_mean(k, &known),
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    known.join(", ")
                }
            )
        })
        .collect())
}

pub async fn call(g: &Globals, a: CallArgs) -> Result<ExitCode> {
    let (server, tool, kv) = split_positional(&a.positional, &a.adhoc, "tool")?;
    let mut arguments = match &a.args {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => bail!("--args must be a JSON object, like '{{\"message\": \"hi\"}}'"),
            Err(e) => bail!("--args is not valid JSON: {e}"),
        },
        None => Map::new(),
    };
    let (host, conn) = connect_one(g, server.as_deref(), &a.adhoc, a.json).await?;
    let outcome = call_inner(&host, &conn, &tool, &kv, &mut arguments, &a).await;
    host.shutdown().await;
    outcome
}

async fn call_inner(
    host: &Host,
    conn: &Connection,
    tool: &str,
    kv: &[String],
    arguments: &mut Map<String, Value>,
    a: &CallArgs,
) -> Result<ExitCode> {
    let snapshot = host.server(conn.name());
    let known = snapshot
        .as_ref()
        .and_then(|s| s.tools.iter().find(|t| t.name == tool).cloned());
    if let Some(w) = host.withheld_tool(conn.name(), tool) {
        bail!("{}", w.message(conn.name()));
    }
    if known.is_none() {
        let names: Vec<String> = snapshot
            .map(|s| s.tools.iter().map(|t| t.name.to_string()).collect())
            .unwrap_or_default();
        let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
        bail!(
            "server `{}` has no tool `{tool}`{}; its tools: {}",
            conn.name(),
            switchboard_config::did_you_mean(tool, &candidates),
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    let schema = known.as_ref().map(|t| t.input_schema.as_ref().clone());
    if !kv.is_empty() {
        arguments.extend(typed_kv(kv, schema.as_ref())?);
    }
    if let Some(schema) = &schema {
        for w in check_arguments(tool, schema, arguments)? {
            errln!("warning: {w}");
        }
    }
    let (ptx, mut prx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let opts = CallOptions {
        timeout: a.timeout_ms.map(Duration::from_millis),
        progress: Some(ptx),
        cancel: Some(cancel.clone()),
        meta: None,
    };
    let bar = crate::progress::ProgressLine::start(a.json, tool);
    let printer = tokio::spawn(async move {
        while let Some(p) = prx.recv().await {
            if let Some(bar) = &bar {
                bar.update(p.progress, p.total, p.message.as_deref());
            }
        }
    });
    let ctrl_c = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        })
    };
    let result = conn
        .call_tool(tool, Some(std::mem::take(arguments)), &opts)
        .await;
    ctrl_c.abort();
    printer.abort();
    // The bar is cleared when the aborted printer task drops it; wait for that before
    // printing the result.
    let _ = printer.await;
    let result = match result {
        Ok(r) => r,
        Err(switchboard_mcp::RequestError::Cancelled { .. }) => {
            errln!("cancelled");
            return Ok(ExitCode::from(130));
        }
        Err(e) => return Err(anyhow!(e)).context(format!("calling `{tool}` on `{}`", conn.name())),
    };
    let value = serde_json::to_value(&result)?;
    let is_error = result.is_error.unwrap_or(false);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let mut out = String::new();
        let blocks = value
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        render::content_blocks(&blocks, &mut out);
        if let Some(sc) = value.get("structuredContent") {
            out.push_str("structuredContent:\n");
            out.push_str(&serde_json::to_string_pretty(sc)?);
            out.push('\n');
        }
        if is_error {
            errout!("error: the tool reported an error:\n{out}");
        } else {
            out!("{out}");
        }
    }
    Ok(if is_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub async fn read(
    g: &Globals,
    positional: Vec<String>,
    json: bool,
    adhoc: AdHoc,
) -> Result<ExitCode> {
    let (server, uri, rest) = split_positional(&positional, &adhoc, "read")?;
    if !rest.is_empty() {
        bail!("unexpected arguments after the URI: {}", rest.join(" "));
    }
    let (host, conn) = connect_one(g, server.as_deref(), &adhoc, json).await?;
    let result = conn.read_resource(&uri, &CallOptions::default()).await;
    host.shutdown().await;
    let result = result.with_context(|| format!("reading `{uri}` from `{}`", conn.name()))?;
    let value = serde_json::to_value(&result)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let mut out = String::new();
        let contents = value
            .get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        render::resource_contents(&contents, &mut out);
        out!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn prompt(
    g: &Globals,
    positional: Vec<String>,
    kv: Vec<String>,
    json: bool,
    adhoc: AdHoc,
) -> Result<ExitCode> {
    let (server, name, mut rest) = split_positional(&positional, &adhoc, "prompt")?;
    rest.extend(kv);
    let (host, conn) = connect_one(g, server.as_deref(), &adhoc, json).await?;
    if let Err(e) = known_prompt(&host, &conn, &name) {
        host.shutdown().await;
        return Err(e);
    }
    let args: Result<Map<String, Value>> = rest
        .iter()
        .map(|pair| {
            let pair = pair.strip_prefix("--").unwrap_or(pair);
            let (k, v) = pair
                .split_once('=')
                .with_context(|| format!("prompt argument `{pair}` is not name=value"))?;
            Ok((k.to_string(), Value::String(v.to_string())))
        })
        .collect();
    let result = match args {
        Ok(args) => conn
            .get_prompt(&name, args, &CallOptions::default())
            .await
            .map_err(anyhow::Error::from),
        Err(e) => Err(e),
    };
    host.shutdown().await;
    let result =
        result.with_context(|| format!("getting prompt `{name}` from `{}`", conn.name()))?;
    let value = serde_json::to_value(&result)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let mut out = String::new();
        if let Some(d) = value.get("description").and_then(Value::as_str) {
            out.push_str(&format!("# {d}\n"));
        }
        for m in value
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
            out.push_str(&format!("[{role}]\n"));
            let content = m.get("content").cloned().unwrap_or(Value::Null);
            let blocks = match content {
                Value::Array(a) => a,
                other => vec![other],
            };
            render::content_blocks(&blocks, &mut out);
        }
        out!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses a prompt name the server does not list, with "did you mean" and its prompts.
/// A server that lists no prompts is asked anyway (it may not support listing them).
fn known_prompt(host: &Host, conn: &Connection, name: &str) -> Result<()> {
    let names: Vec<String> = host
        .server(conn.name())
        .map(|s| s.prompts.iter().map(|p| p.name.to_string()).collect())
        .unwrap_or_default();
    if names.is_empty() || names.iter().any(|n| n == name) {
        return Ok(());
    }
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    bail!(
        "server `{}` has no prompt `{name}`{}; its prompts: {}",
        conn.name(),
        switchboard_config::did_you_mean(name, &candidates),
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kv_is_typed_by_schema() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "s": {"type": "string"}, "b": {"type": "boolean"},
            "l": {"type": "array"}}});
        let m = typed_kv(
            &[
                "a=2.5".into(),
                "s=42".into(),
                "b=true".into(),
                "l=[1,2]".into(),
                "x=hi".into(),
                "--n=3".into(),
            ],
            schema.as_object(),
        )
        .unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"a": 2.5, "s": "42", "b": true, "l": [1, 2], "x": "hi", "n": 3})
        );
        assert!(typed_kv(&["a=x".into()], schema.as_object()).is_err());
        assert!(typed_kv(&["novalue".into()], schema.as_object()).is_err());
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let schema = json!({"type": "object", "required": ["n", "s"], "properties": {
            "n": {"type": "number"}, "s": {"type": "string"}}});
        let schema = schema.as_object().unwrap();
        let err = check_arguments("t", schema, json!({"s": "x"}).as_object().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing required argument `n` (number): add `n=…`"),
            "{err}"
        );
        let warnings = check_arguments(
            "t",
            schema,
            json!({"n": 1, "s": "x", "nn": 2}).as_object().unwrap(),
        )
        .unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("`nn`") && warnings[0].contains("known keys: n, s"));
        let open = json!({"type": "object", "additionalProperties": true, "properties": {}});
        let warnings = check_arguments(
            "t",
            open.as_object().unwrap(),
            json!({"x": 1}).as_object().unwrap(),
        )
        .unwrap();
        assert!(warnings.is_empty());
        // No required string property: no KEY=word suggestion, but the fix is said.
        assert!(not_key_value("hi", Some(schema)).contains("did you mean `s=hi`?"));
        let only_numbers = json!({"required": ["n"], "properties": {"n": {"type": "number"}}});
        assert!(not_key_value("hi", only_numbers.as_object()).contains("`key=value`"));
    }
}
