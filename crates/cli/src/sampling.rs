//! Server-initiated `sampling/createMessage`, answered with the chat's model after the
//! person approves (or without asking for `--yolo` and `trust: true` servers). Without
//! a terminal to ask, untrusted requests are declined.
#![allow(deprecated)] // sampling types: deprecated upstream (SEP-2577), still used by servers

use std::collections::HashSet;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use switchboard_mcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ErrorCode,
    ErrorData,
};
use switchboard_mcp::{ClientHooks, ServerEvent};
use switchboard_model::ModelClient;
use switchboard_model::{Content, GenerateRequest, GenerationConfig, Part};

use crate::hooks::CliHooks;

/// The chat's hooks: terminal elicitation (as the CLI) plus sampling with the model.
pub struct ChatHooks {
    pub client: Arc<dyn ModelClient>,
    pub model: String,
    pub yolo: bool,
    pub trusted: HashSet<String>,
}

impl ClientHooks for ChatHooks {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        CliHooks.elicit(server, request)
    }

    fn supports_sampling(&self) -> bool {
        true
    }

    fn sample(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>> {
        let client = self.client.clone();
        let model = self.model.clone();
        let server = server.to_string();
        let skip_asking = self.yolo || self.trusted.contains(&server);
        let value = serde_json::to_value(&params).unwrap_or(Value::Null);
        Box::pin(async move {
            let request = to_request(&value)
                .map_err(|e| ErrorData::new(ErrorCode::INVALID_PARAMS, e, None))?;
            if !skip_asking {
                let summary = summarize(&value);
                let srv = server.clone();
                let approved = tokio::task::spawn_blocking(move || approve(&srv, &summary))
                    .await
                    .unwrap_or(false);
                if !approved {
                    return Err(ErrorData::new(
                        ErrorCode::INVALID_REQUEST,
                        "the user declined the sampling request",
                        None,
                    ));
                }
            }
            let response = client.generate(&model, &request).await.map_err(|e| {
                ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!("the model failed: {e}"),
                    None,
                )
            })?;
            let text = response.text();
            let stop = match response.finish_reason() {
                Some("MAX_TOKENS") => "maxTokens",
                _ => "endTurn",
            };
            serde_json::from_value(json!({
                "role": "assistant",
                "content": {"type": "text", "text": text},
                "model": model,
                "stopReason": stop,
            }))
            .map_err(|e| ErrorData::new(ErrorCode::INTERNAL_ERROR, e.to_string(), None))
        })
    }

    fn on_event(&self, server: &str, event: ServerEvent) {
        CliHooks.on_event(server, event);
    }
}

/// `sampling/createMessage` params → a Gemini request.
pub fn to_request(params: &Value) -> Result<GenerateRequest, String> {
    let messages = params
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("sampling request without `messages`")?;
    let mut contents = Vec::new();
    for m in messages {
        let role = match m.get("role").and_then(Value::as_str) {
            Some("assistant") => "model",
            _ => "user",
        };
        let blocks = match m.get("content") {
            Some(Value::Array(a)) => a.clone(),
            Some(other) => vec![other.clone()],
            None => Vec::new(),
        };
        let mut parts = Vec::new();
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => parts.push(Part::text(
                    b.get("text").and_then(Value::as_str).unwrap_or(""),
                )),
                Some("image") | Some("audio") => {
                    let mime = b
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("application/octet-stream");
                    let data = b.get("data").and_then(Value::as_str).unwrap_or("");
                    parts.push(Part::inline_data(mime, data));
                }
                _ => {}
            }
        }
        if !parts.is_empty() {
            contents.push(Content::new(role, parts));
        }
    }
    if contents.is_empty() {
        return Err("the sampling request has no text or media to send".into());
    }
    let system_instruction = params
        .get("systemPrompt")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(Content::system);
    let generation_config =
        params
            .get("maxTokens")
            .and_then(Value::as_u64)
            .map(|n| GenerationConfig {
                max_output_tokens: Some(n.min(u32::MAX as u64) as u32),
                temperature: params.get("temperature").and_then(Value::as_f64),
                ..Default::default()
            });
    Ok(GenerateRequest {
        contents,
        system_instruction,
        generation_config,
        ..Default::default()
    })
}

fn summarize(params: &Value) -> String {
    let first = params
        .pointer("/messages/0/content/text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(200)
        .collect::<String>();
    let n = params
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::len)
        .unwrap_or(0);
    format!("{n} message(s); first: {first:?}")
}

fn approve(server: &str, summary: &str) -> bool {
    let mut err = std::io::stderr();
    if !std::io::stdin().is_terminal() {
        errln!(
            "declined a sampling request from `{server}`: no terminal to ask (use --yolo or set `trust: true` for the server)"
        );
        return false;
    }
    errln!("\n⚙ `{server}` asks the model to answer ({summary}).");
    errout!("  Allow? [y/N]: ");
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).unwrap_or(0) == 0 {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_params_become_a_gemini_request() {
        let r = to_request(&json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "hi"}},
                {"role": "assistant", "content": [{"type": "text", "text": "yes?"}]}
            ],
            "systemPrompt": "be brief",
            "maxTokens": 50
        }))
        .unwrap();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["contents"][0]["role"], "user");
        assert_eq!(v["contents"][1]["role"], "model");
        assert_eq!(v["contents"][1]["parts"][0]["text"], "yes?");
        assert_eq!(v["generationConfig"]["maxOutputTokens"], 50);
        assert!(v["systemInstruction"].to_string().contains("be brief"));
        assert!(to_request(&json!({"messages": []})).is_err());
    }
}
