//! The `command` node: one prompt to the model (Gemini, or an OpenAI-compatible server when
//! `provider: openai` is set), optionally with the tools of the servers in
//! `mcpServers` (comma-separated configured names), run without confirmations (the
//! workflow's author chose the servers).
//!
//! The chat's tool rules apply as in GemiHub: no MCP tools in web-search mode
//! (`ragSetting: __websearch__`) or for Gemma models; the log says so.
//!
//! The prompt and system prompt are the author's, but a variable in them that holds a
//! tool result or an HTTP answer is server text: it reaches the model wrapped as
//! untrusted data under the conversation's marker (`switchboard_chat::Untrusted`).

use std::sync::Arc;

use switchboard_chat::{AlwaysApprove, Chat, ChatEvent, ChatOptions};
use switchboard_model::Part;
use tokio::sync::mpsc;

use crate::events::RunEvent;
use crate::parse::Node;
use crate::run::{Runner, one_line};
use crate::template::{render, render_marking};
use crate::vars::Variables;

/// Runs a `command` node; returns the summary.
pub(crate) async fn run(
    runner: &Runner,
    node: &Node,
    vars: &mut Variables,
    scoped: &str,
) -> Result<String, String> {
    let r = |k: &str| node.get(k).map(|v| render(v, vars));
    let provider = runner.provider();
    let model = provider
        .model([r("model"), runner.options().default_model.clone()])
        .map_err(|e| format!("{e}, or `model` on the node"))?;
    let web_search = node.get("ragSetting") == Some("__websearch__");
    let wanted: Vec<String> = node
        .get("mcpServers")
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let client = runner.model_client()?;
    if !web_search {
        for name in &wanted {
            runner
                .server_connection(name)
                .await
                .map_err(|e| format!("mcpServers: {e}"))?;
        }
    }
    let host = runner.host().clone();
    let opts = ChatOptions {
        model: model.clone(),
        yolo: true,
        web_search,
        stream: false,
        ..Default::default()
    };
    let mut chat = Chat::new(host.clone(), client, opts, Arc::new(AlwaysApprove));
    // The prompt and system prompt are the author's, but a variable that holds a tool
    // result or an HTTP answer is server text: it reaches the model wrapped as untrusted
    // data, under this conversation's marker (and the system rule then names it).
    let marked = |k: &str| {
        node.get(k).map(|v| {
            render_marking(v, vars, |kind, source, text| {
                chat.untrusted().wrap(kind, source, &text)
            })
        })
    };
    let prompt = marked("prompt").unwrap_or_default();
    let system_prompt = marked("systemPrompt");
    chat.options_mut().system_prompt = system_prompt;
    for name in host.server_names() {
        if !wanted.contains(&name) {
            chat.set_server_enabled(&name, false);
        }
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let forward = {
        let events = runner.options().events.clone();
        let node = scoped.to_string();
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                let message = match ev {
                    ChatEvent::Notice(n) => n,
                    ChatEvent::ToolStart {
                        server, tool, args, ..
                    } => format!("model calls {server}.{tool} {args}"),
                    ChatEvent::ToolEnd {
                        server,
                        tool,
                        display,
                        is_error,
                        ..
                    } => format!(
                        "{} {server}.{tool}: {}",
                        if is_error { "✗" } else { "✓" },
                        one_line(&display)
                    ),
                    ChatEvent::Text(_) | ChatEvent::ToolProgress { .. } => continue,
                };
                if let Some(tx) = &events {
                    let _ = tx.send(RunEvent::Notice {
                        node: Some(node.clone()),
                        message,
                    });
                }
            }
        })
    };
    let cancel = runner.cancel().child_token();
    let answer = chat.send(vec![Part::text(prompt)], &tx, &cancel).await;
    drop(tx);
    let _ = forward.await;
    let answer = answer.map_err(|e| format!("{} ({model}): {e}", provider.api().short_name()))?;
    if let Some(to) = node.get("saveTo") {
        vars.set_text(to, answer.clone());
    }
    Ok(format!("{model}: {}", one_line(&answer)))
}
