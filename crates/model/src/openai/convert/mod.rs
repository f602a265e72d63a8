//! The translation between the Gemini-shaped requests the chat loop builds and the
//! chat-completions wire format: [`to_chat_request`] on the way out,
//! [`from_chat_completion`] and [`ChunkAssembler`] (streamed chunks) on the way back, and
//! the stable tool-call ids that keep a history's translation the same every time.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::{ApiKind, ModelError};
use crate::http::snippet;

use super::api_error;
use crate::types::{
    Candidate, Content, FunctionCall, FunctionCallingMode, FunctionDeclaration, GenerateRequest,
    GenerateResponse, Part, UsageMetadata,
};

// ---------------------------------------------------------------------------------------
// Gemini request → chat-completions request

const ALNUM: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// 9 letters and digits from a hash of `seed` (the strictest tool-call id format in use,
/// Mistral's, accepts exactly that).
fn alnum_id(seed: &str) -> String {
    Sha256::digest(seed.as_bytes())
        .iter()
        .take(9)
        .map(|b| char::from(ALNUM[usize::from(*b) % ALNUM.len()]))
        .collect()
}

/// The id given to call `call` of history entry `content` when the call has none: the
/// same history always translates to the same ids.
pub fn stable_call_id(content: usize, call: usize, name: &str) -> String {
    alnum_id(&format!("switchboard/call/{content}/{call}/{name}"))
}

/// A fresh id for a tool call the server sent without one.
fn fresh_call_id() -> String {
    use std::hash::BuildHasher;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let salt = std::collections::hash_map::RandomState::new().hash_one(n);
    alnum_id(&format!("switchboard/fresh/{n}/{salt}"))
}

/// The calls of the last assistant message, waiting for their `tool` messages.
#[derive(Debug, Default)]
struct PendingCalls {
    calls: Vec<(String, String, bool)>,
}

impl PendingCalls {
    /// The id the response to `name` (with `id`, if it has one) answers, marking that
    /// call answered: its own id, else the first unanswered call of that name, else the
    /// first unanswered call, else a stable id from the name.
    fn answer(&mut self, id: Option<&str>, name: &str, content: usize, k: usize) -> String {
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            if let Some(c) = self.calls.iter_mut().find(|c| c.0 == id) {
                c.2 = true;
            }
            return id.to_owned();
        }
        let slot = self
            .calls
            .iter()
            .position(|c| !c.2 && c.1 == name)
            .or_else(|| self.calls.iter().position(|c| !c.2));
        match slot.and_then(|i| self.calls.get_mut(i)) {
            Some(c) => {
                c.2 = true;
                c.0.clone()
            }
            None => stable_call_id(content, k, name),
        }
    }
}

/// The `chat/completions` body for `request` (see the module docs for the mapping).
/// `stream` sets `"stream": true`.
pub fn to_chat_request(model: &str, request: &GenerateRequest, stream: bool) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system_instruction {
        let text = plain_text(&system.parts, "\n");
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    let mut pending = PendingCalls::default();
    for (i, content) in request.contents.iter().enumerate() {
        if content.role.as_deref() == Some("model") {
            messages.push(assistant_message(i, content, &mut pending));
        } else {
            user_messages(i, content, &mut pending, &mut messages);
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    let tools = tools_of(request);
    let has_tools = !tools.is_empty();
    if has_tools {
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice(request) {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(config) = &request.generation_config {
        if let Some(t) = config.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = config.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(m) = config.max_output_tokens {
            body.insert("max_tokens".into(), json!(m));
        }
        if let Some(stop) = config.stop_sequences.as_ref().filter(|s| !s.is_empty()) {
            body.insert("stop".into(), json!(stop));
        }
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The text of the non-thought text parts, joined with `sep`.
fn plain_text(parts: &[Part], sep: &str) -> String {
    parts
        .iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text.as_deref())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(sep)
}

fn assistant_message(index: usize, content: &Content, pending: &mut PendingCalls) -> Value {
    let text: String = content
        .parts
        .iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text.as_deref())
        .collect();
    pending.calls.clear();
    let mut tool_calls = Vec::new();
    for (k, call) in content.function_calls().into_iter().enumerate() {
        let id = call
            .id
            .clone()
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| stable_call_id(index, k, &call.name));
        let arguments =
            serde_json::to_string(&call.args_value()).unwrap_or_else(|_| "{}".to_owned());
        pending.calls.push((id.clone(), call.name.clone(), false));
        tool_calls.push(json!({
            "id": id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments},
        }));
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    if tool_calls.is_empty() {
        message.insert("content".into(), json!(text));
    } else {
        let content = if text.is_empty() {
            Value::Null
        } else {
            json!(text)
        };
        message.insert("content".into(), content);
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    Value::Object(message)
}

/// A user content: `tool` messages for its function responses, then one `user` message
/// with the rest (text, images, audio).
fn user_messages(
    index: usize,
    content: &Content,
    pending: &mut PendingCalls,
    out: &mut Vec<Value>,
) {
    let mut rest: Vec<&Part> = Vec::new();
    let mut attached: Vec<Part> = Vec::new();
    let mut answered = 0usize;
    for part in &content.parts {
        let Some(fr) = &part.function_response else {
            rest.push(part);
            continue;
        };
        let id = pending.answer(fr.id.as_deref(), &fr.name, index, answered);
        answered += 1;
        let text = serde_json::to_string(&fr.response).unwrap_or_else(|_| "{}".to_owned());
        out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
        for inner in fr.parts.iter().flatten() {
            if let Some(blob) = &inner.inline_data {
                attached.push(Part {
                    inline_data: Some(blob.clone()),
                    ..Part::default()
                });
            }
        }
    }
    let mut pieces: Vec<Value> = Vec::new();
    if answered > 0 && (!attached.is_empty() || rest.iter().any(|p| p.text.is_none())) {
        pieces.push(json!({"type": "text", "text": "Content returned by the tool calls above:"}));
    }
    for part in attached.iter().chain(rest.iter().copied()) {
        if let Some(piece) = user_piece(part) {
            pieces.push(piece);
        }
    }
    if pieces.is_empty() {
        return;
    }
    let text_only = pieces
        .iter()
        .all(|p| p.get("type").and_then(Value::as_str) == Some("text"));
    let content = if text_only {
        let texts: Vec<&str> = pieces
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        json!(texts.join("\n"))
    } else {
        Value::Array(pieces)
    };
    out.push(json!({"role": "user", "content": content}));
}

/// One content part of a user message, or `None` for a part that carries nothing here
/// (thoughts, empty text).
fn user_piece(part: &Part) -> Option<Value> {
    if part.thought == Some(true) {
        return None;
    }
    if let Some(text) = &part.text {
        return (!text.is_empty()).then(|| json!({"type": "text", "text": text}));
    }
    if let Some(blob) = &part.inline_data {
        let mime = blob.mime_type.to_ascii_lowercase();
        if mime.starts_with("image/") {
            return Some(json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{mime};base64,{}", blob.data)},
            }));
        }
        let format = match mime.as_str() {
            "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
            "audio/mpeg" | "audio/mp3" => Some("mp3"),
            _ => None,
        };
        return Some(match format {
            Some(format) => json!({
                "type": "input_audio",
                "input_audio": {"data": blob.data, "format": format},
            }),
            None => json!({
                "type": "text",
                "text": format!("[{mime} content left out: this model API takes only images and wav/mp3 audio]"),
            }),
        });
    }
    if let Some(file) = part.extra.get("fileData") {
        let uri = file.get("fileUri").and_then(Value::as_str).unwrap_or("");
        let mime = file.get("mimeType").and_then(Value::as_str).unwrap_or("");
        if mime.starts_with("image/") && (uri.starts_with("https://") || uri.starts_with("http://"))
        {
            return Some(json!({"type": "image_url", "image_url": {"url": uri}}));
        }
        return Some(json!({"type": "text", "text": format!("[file {uri} ({mime})]")}));
    }
    None
}

fn tools_of(request: &GenerateRequest) -> Vec<Value> {
    request
        .tools
        .iter()
        .flatten()
        .filter_map(|t| t.function_declarations.as_ref())
        .flatten()
        .map(tool_of)
        .collect()
}

fn tool_of(decl: &FunctionDeclaration) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(decl.name));
    if let Some(d) = decl.description.as_ref().filter(|d| !d.is_empty()) {
        function.insert("description".into(), json!(d));
    }
    let schema = match (&decl.parameters_json_schema, &decl.parameters) {
        (Some(s), _) => s.clone(),
        (None, Some(openapi)) => openapi_to_json_schema(openapi),
        (None, None) => json!({}),
    };
    function.insert("parameters".into(), object_schema(schema));
    json!({"type": "function", "function": function})
}

/// `parameters` must be an object schema: a missing `type` becomes `"object"`, missing
/// `properties` an empty map; anything that is not a JSON object becomes `{}`'s form.
fn object_schema(schema: Value) -> Value {
    let mut map = match schema {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if !map.contains_key("type") {
        map.insert("type".into(), json!("object"));
    }
    if map.get("type").and_then(Value::as_str) == Some("object") && !map.contains_key("properties")
    {
        map.insert("properties".into(), json!({}));
    }
    Value::Object(map)
}

/// The OpenAPI subset Gemini takes (`"type": "STRING"`, `nullable`) back to JSON Schema.
fn openapi_to_json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            let nullable = map.get("nullable").and_then(Value::as_bool) == Some(true);
            for (k, v) in map {
                match k.as_str() {
                    "nullable" | "propertyOrdering" => {}
                    "type" => {
                        let t = v.as_str().map(str::to_ascii_lowercase);
                        let t = match t.as_deref() {
                            Some("type_unspecified") | None => continue,
                            Some(t) => t.to_owned(),
                        };
                        out.insert(
                            "type".into(),
                            if nullable {
                                json!([t, "null"])
                            } else {
                                json!(t)
                            },
                        );
                    }
                    "properties" => {
                        let props = v
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(name, s)| (name.clone(), openapi_to_json_schema(s)))
                                    .collect::<Map<_, _>>()
                            })
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "items" => {
                        out.insert(k.clone(), openapi_to_json_schema(v));
                    }
                    "anyOf" => {
                        let items = v
                            .as_array()
                            .map(|a| a.iter().map(openapi_to_json_schema).collect())
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Array(items));
                    }
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn tool_choice(request: &GenerateRequest) -> Option<Value> {
    let config = request
        .tool_config
        .as_ref()?
        .function_calling_config
        .as_ref()?;
    match config.mode? {
        FunctionCallingMode::Auto | FunctionCallingMode::Validated => Some(json!("auto")),
        FunctionCallingMode::None => Some(json!("none")),
        FunctionCallingMode::Any => match config.allowed_function_names.as_deref() {
            Some([only]) => Some(json!({"type": "function", "function": {"name": only}})),
            _ => Some(json!("required")),
        },
        FunctionCallingMode::ModeUnspecified => None,
    }
}

// ---------------------------------------------------------------------------------------
// chat-completions answer → Gemini response

/// A `finish_reason` in Gemini's words.
pub fn map_finish_reason(reason: &str) -> String {
    match reason {
        "stop" | "tool_calls" | "function_call" | "eos" => "STOP".into(),
        "length" => "MAX_TOKENS".into(),
        "content_filter" => "SAFETY".into(),
        other => other.to_ascii_uppercase(),
    }
}

fn usage_of(usage: &Value) -> Option<UsageMetadata> {
    let obj = usage.as_object()?;
    let n = |k: &str| obj.get(k).and_then(Value::as_u64);
    let reasoning = obj
        .get("completion_tokens_details")
        .and_then(|d| d.get("reasoning_tokens"))
        .and_then(Value::as_u64);
    Some(UsageMetadata {
        prompt_token_count: n("prompt_tokens"),
        candidates_token_count: n("completion_tokens"),
        thoughts_token_count: reasoning,
        total_token_count: n("total_tokens"),
        extra: Map::new(),
    })
}

/// The reasoning text some servers add (`reasoning_content`: DeepSeek, vLLM,
/// llama.cpp; `reasoning`: Ollama, OpenRouter).
fn reasoning_of(message: &Value) -> Option<&str> {
    ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| message.get(*k).and_then(Value::as_str))
        .filter(|r| !r.is_empty())
}

/// `content` as text: a string, or the text of an array of `{type: "text"}` parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Tool-call arguments as an object: a JSON string (empty means `{}`), or an object
/// some servers send as is.
fn parse_arguments(name: &str, raw: Option<&Value>) -> Result<Map<String, Value>, ModelError> {
    let bad = |what: String| ModelError::Decode {
        api: ApiKind::OpenAi,
        message: format!(
            "the arguments of the model's call to `{name}` are not a JSON object: {what}"
        ),
    };
    match raw {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(Value::Null) => Ok(Map::new()),
            Ok(other) => Err(bad(snippet(&other.to_string()))),
            Err(e) => Err(bad(format!("{e}: {}", snippet(s)))),
        },
        Some(other) => Err(bad(snippet(&other.to_string()))),
    }
}

fn call_part(id: Option<&str>, name: &str, args: Map<String, Value>) -> Part {
    let id = id
        .filter(|i| !i.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(fresh_call_id);
    Part::function_call(FunctionCall {
        id: Some(id),
        name: name.to_owned(),
        args: Some(args),
        extra: Map::new(),
    })
}

fn response_of(
    parts: Vec<Part>,
    finish_reason: Option<String>,
    usage: Option<UsageMetadata>,
    model: Option<String>,
    id: Option<String>,
) -> GenerateResponse {
    GenerateResponse {
        candidates: vec![Candidate {
            content: Some(Content::model(parts)),
            finish_reason,
            finish_message: None,
            extra: Map::new(),
        }],
        prompt_feedback: None,
        usage_metadata: usage,
        model_version: model,
        response_id: id,
        extra: Map::new(),
    }
}

/// A `chat.completion` answer as a Gemini-shaped response: one candidate holding a
/// thought part (`reasoning_content`), a text part, then one `functionCall` per tool call
/// (ids kept, arguments parsed), with `finishReason` mapped.
pub fn from_chat_completion(body: &Value) -> Result<GenerateResponse, ModelError> {
    if let Some(error) = body.get("error") {
        return Err(stream_error(error));
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|x| x.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        })
        .ok_or_else(|| ModelError::Decode {
            api: ApiKind::OpenAi,
            message: format!(
                "the chat/completions answer has no choices: {}",
                snippet(&body.to_string())
            ),
        })?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut parts = Vec::new();
    if let Some(reasoning) = reasoning_of(message) {
        parts.push(Part {
            text: Some(reasoning.to_owned()),
            thought: Some(true),
            ..Part::default()
        });
    }
    let mut text = content_text(message.get("content"));
    if text.is_empty()
        && let Some(refusal) = message.get("refusal").and_then(Value::as_str)
    {
        text = refusal.to_owned();
    }
    if !text.is_empty() {
        parts.push(Part::text(text));
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if call
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "function")
        {
            continue;
        }
        let function = call.get("function").unwrap_or(&Value::Null);
        let name = function.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            return Err(ModelError::Decode {
                api: ApiKind::OpenAi,
                message: format!(
                    "a tool call has no function name: {}",
                    snippet(&call.to_string())
                ),
            });
        }
        let args = parse_arguments(name, function.get("arguments"))?;
        parts.push(call_part(
            call.get("id").and_then(Value::as_str),
            name,
            args,
        ));
    }
    if let Some(legacy) = message.get("function_call")
        && let Some(name) = legacy.get("name").and_then(Value::as_str)
    {
        let args = parse_arguments(name, legacy.get("arguments"))?;
        parts.push(call_part(None, name, args));
    }
    Ok(response_of(
        parts,
        choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(map_finish_reason),
        body.get("usage").and_then(usage_of),
        body.get("model").and_then(Value::as_str).map(str::to_owned),
        body.get("id").and_then(Value::as_str).map(str::to_owned),
    ))
}

/// An `error` object inside an answer or a stream.
fn stream_error(error: &Value) -> ModelError {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..=599).contains(c))
        .unwrap_or(500);
    api_error(status, Some(error), None, &error.to_string(), None)
}

#[derive(Debug, Default, Clone)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

/// Folds the `chat.completion.chunk`s of a streamed answer: [`push`](Self::push) gives
/// each chunk's text (and reasoning) increment as a Gemini-shaped chunk;
/// [`finish`](Self::finish) gives the final chunk with the complete function calls (tool
/// call fragments joined by `index`), the finish reason and usage.
#[derive(Debug, Default)]
pub struct ChunkAssembler {
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<UsageMetadata>,
    model: Option<String>,
    id: Option<String>,
}

impl ChunkAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a chunk carried a `finish_reason`.
    pub fn finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Adds one chunk; returns the text increment it carried, if any. An `error` event
    /// is returned as the error.
    pub fn push(&mut self, chunk: &Value) -> Result<Option<GenerateResponse>, ModelError> {
        if let Some(error) = chunk.get("error") {
            return Err(stream_error(error));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(id) = chunk.get("id").and_then(Value::as_str) {
            self.id = Some(id.to_owned());
        }
        if let Some(usage) = chunk.get("usage").and_then(usage_of) {
            self.usage = Some(usage);
        }
        let mut parts = Vec::new();
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(reasoning) = reasoning_of(delta) {
                parts.push(Part {
                    text: Some(reasoning.to_owned()),
                    thought: Some(true),
                    ..Part::default()
                });
            }
            let text = content_text(delta.get("content"));
            if !text.is_empty() {
                parts.push(Part::text(text));
            }
            for fragment in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.push_fragment(fragment);
            }
            if let Some(legacy) = delta.get("function_call") {
                let fragment = json!({"index": 0, "function": legacy});
                self.push_fragment(&fragment);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(map_finish_reason(reason));
            }
        }
        if parts.is_empty() {
            return Ok(None);
        }
        Ok(Some(response_of(
            parts,
            None,
            None,
            self.model.clone(),
            self.id.clone(),
        )))
    }

    fn push_fragment(&mut self, fragment: &Value) {
        let id = fragment
            .get("id")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty());
        let index = fragment.get("index").and_then(Value::as_u64).or_else(|| {
            // No index (some servers): the call with this id, a new call for a new id,
            // else the last call.
            match id {
                Some(id) => Some(
                    self.calls
                        .iter()
                        .find(|c| c.id == id)
                        .map(|c| c.index)
                        .unwrap_or(self.calls.len() as u64),
                ),
                None => self.calls.last().map(|c| c.index),
            }
        });
        let index = index.unwrap_or(0);
        let slot = match self.calls.iter().position(|c| c.index == index) {
            Some(i) => i,
            None => {
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            }
        };
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        let function = fragment.get("function").unwrap_or(&Value::Null);
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Object(whole)) => {
                call.arguments = Value::Object(whole.clone()).to_string();
            }
            _ => {}
        }
    }

    /// The final chunk: every function call, complete, in `index` order, with the
    /// finish reason and usage.
    pub fn finish(&mut self) -> Result<GenerateResponse, ModelError> {
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|c| c.index);
        let mut parts = Vec::with_capacity(calls.len());
        for call in calls {
            if call.name.is_empty() {
                return Err(ModelError::Decode {
                    api: ApiKind::OpenAi,
                    message: format!(
                        "streamed tool call #{} has no function name (arguments {})",
                        call.index,
                        snippet(&call.arguments)
                    ),
                });
            }
            let args = parse_arguments(&call.name, Some(&Value::String(call.arguments)))?;
            parts.push(call_part(Some(&call.id), &call.name, args));
        }
        Ok(response_of(
            parts,
            self.finish_reason.clone(),
            self.usage.clone(),
            self.model.clone(),
            self.id.clone(),
        ))
    }
}

#[cfg(test)]
mod tests;
