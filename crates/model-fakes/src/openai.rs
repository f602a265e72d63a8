//! A fake OpenAI-compatible chat-completions server for tests: a [`FakeServer`] on
//! `127.0.0.1:0` serving `POST /v1/chat/completions` with the real wire shapes, answering from a script of [`FakeTurn`]s (the same turns as
//! [`FakeGemini`](crate::gemini::FakeGemini)), and rejecting what real servers reject.
//!
//! What it sends:
//! - not streamed: a `chat.completion` (`id`, `object`, `created`, `model`,
//!   `choices[0].message` with `content` and `tool_calls`, `finish_reason`, `usage`);
//! - streamed (`"stream": true`): `data: {chat.completion.chunk}\n\n` events — a first
//!   delta with the role, text in several `delta.content` increments, each tool call
//!   opened with its `id`, `type` and `name` and its `arguments` sent in small fragments
//!   (joined by `index`), a last delta with `finish_reason`, a usage chunk when
//!   `stream_options.include_usage` asks for one, then `data: [DONE]`;
//! - errors as `{"error": {"message", "type", "param", "code"}}`.
//!
//! What it rejects (400 `invalid_request_error` unless said otherwise), before consuming
//! a script turn:
//! - with [`FakeOpenAiOptions::api_key`] set, a missing or wrong `Authorization: Bearer`
//!   key (401); with [`FakeOpenAiOptions::models`] set, another model (404
//!   `model_not_found`);
//! - a body that is not a JSON object, an unknown top-level parameter, no `model`, no or
//!   empty `messages`, a non-boolean `stream`, `stream_options` without streaming;
//! - a message with an unknown role or a field its role does not have, missing or
//!   ill-typed `content` (a `null` assistant content is allowed only with `tool_calls`),
//!   content parts of an unknown type, an `image_url` that is neither `http(s)` nor a
//!   base64 `data:image/…` URI, `input_audio` that is not wav/mp3 base64;
//! - assistant `tool_calls` without an id, not of type `function`, or whose `arguments`
//!   is not a string holding JSON;
//! - a `tool` message whose `tool_call_id` does not answer a call of the assistant
//!   message before it (or answers one twice), and an assistant tool call left
//!   unanswered;
//! - a tool that is not `{"type": "function", "function": {…}}`, a function name not
//!   matching `^[a-zA-Z0-9_-]{1,64}$` ([`is_valid_tool_name`]: OpenAI's rule, the only
//!   copy; Gemini's is `switchboard_model::is_valid_function_name`), `parameters` that
//!   is not a JSON object schema (`"type": "object"`), more than 128 tools, unknown
//!   fields in a tool;
//! - a `tool_choice` that is not `auto`/`none`/`required` or a declared function, or one
//!   without `tools`.
//!
//! This module owns what is the chat-completions API's own: the route, the key/model
//! checks and the request validation, the `chat.completion` answers and chunks, and
//! OpenAI's error bodies. Serving, the script and the request log are the shared
//! [`FakeServer`]'s.

use std::collections::HashSet;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::Response;
use axum::routing::post;
use base64::Engine as _;
use serde_json::{Map, Value, json};

use switchboard_model::{ModelError, OpenAiClient, OpenAiOptions};

use crate::reply::{Reply, raw_pieces, split_text};
use crate::server::{FakeApi, FakeRequest, FakeServer, Shared, items, parse_body};
use crate::turn::FakeTurn;

/// The most tools one request may declare.
pub const MAX_TOOLS: usize = 128;

/// The `created` timestamp of every answer.
const CREATED: u64 = 1_750_000_000;

/// The longest function name OpenAI accepts.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// The `Content-Type` of OpenAI's JSON answers.
const JSON: &str = "application/json";

/// How to run the fake.
#[derive(Debug, Clone)]
pub struct FakeOpenAiOptions {
    /// The key it requires as `Authorization: Bearer …`; `None` (the default) accepts
    /// requests with or without one, as local servers do.
    pub api_key: Option<String>,
    /// The models it serves; `None` (the default) serves any model name.
    pub models: Option<Vec<String>>,
    /// The pause between two streamed writes.
    pub chunk_delay: Duration,
}

impl Default for FakeOpenAiOptions {
    fn default() -> Self {
        Self {
            api_key: None,
            models: None,
            chunk_delay: Duration::from_millis(2),
        }
    }
}

/// One request the fake received (accepted or not); `method` is `chat/completions` and
/// `sse` is `stream`.
pub type FakeOpenAiRequest = FakeRequest;

/// A running fake OpenAI-compatible server; stops when dropped. Its
/// [`base_url`](FakeServer::base_url) is the API base up to and including `/v1`, e.g.
/// `http://127.0.0.1:4321/v1`.
pub type FakeOpenAi = FakeServer<OpenAiApi>;

/// The chat-completions side of [`FakeOpenAi`]: its options.
#[derive(Debug)]
pub struct OpenAiApi {
    options: FakeOpenAiOptions,
}

impl FakeApi for OpenAiApi {
    const NAME: &'static str = "FakeOpenAi";
    const BASE_PATH: &'static str = "/v1";
    type Options = FakeOpenAiOptions;

    fn new(options: FakeOpenAiOptions) -> Self {
        Self { options }
    }

    fn routes() -> Router<Shared<Self>> {
        Router::new()
            .route("/v1/chat/completions", post(handle))
            .fallback(not_found)
    }

    fn exhausted(message: String) -> Reply {
        invalid(message, None).reply()
    }
}

impl FakeServer<OpenAiApi> {
    /// Client options pointing at the fake: its URL, its key (if it wants one), tiny
    /// backoff delays.
    pub fn options(&self) -> OpenAiOptions {
        OpenAiOptions {
            base_url: self.base_url.clone(),
            api_key: self.state.lock().api.options.api_key.clone(),
            backoff_base: Duration::from_millis(5),
            max_backoff: Duration::from_secs(5),
            ..OpenAiOptions::default()
        }
    }

    /// A client for the fake (see [`options`](Self::options)).
    pub fn client(&self) -> Result<OpenAiClient, ModelError> {
        OpenAiClient::new(self.options())
    }
}

/// The `tool` messages at the end of a request body (the answers to the last tool
/// calls), in order.
pub fn last_tool_messages(request: &Value) -> Vec<Value> {
    let messages = messages_of(request);
    let tail: Vec<Value> = messages
        .iter()
        .rev()
        .skip_while(|m| role_of(m) == "user")
        .take_while(|m| role_of(m) == "tool")
        .cloned()
        .collect();
    tail.into_iter().rev().collect()
}

/// The text of the last `user` message of a request body.
pub fn last_user_text(request: &Value) -> String {
    messages_of(request)
        .iter()
        .rev()
        .find(|m| role_of(m) == "user")
        .map(|m| match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .unwrap_or_default()
}

/// The names of the functions declared in a request body, in order.
pub fn declared_tool_names(request: &Value) -> Vec<String> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("function")?.get("name")?.as_str())
        .map(str::to_owned)
        .collect()
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`, the function names OpenAI accepts
/// (OpenAI's rule; Gemini's is `switchboard_model::is_valid_function_name`).
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

fn messages_of(request: &Value) -> &[Value] {
    items(request, "messages")
}

fn role_of(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

// ---------------------------------------------------------------------------------------
// Errors

struct Rejection {
    status: u16,
    message: String,
    kind: &'static str,
    param: Option<String>,
    code: Option<&'static str>,
}

impl Rejection {
    fn reply(self) -> Reply {
        let body = json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }});
        Reply::json(self.status, &body, JSON)
    }
}

fn invalid(message: impl Into<String>, param: impl Into<Option<String>>) -> Rejection {
    Rejection {
        status: 400,
        message: message.into(),
        kind: "invalid_request_error",
        param: param.into(),
        code: None,
    }
}

async fn not_found(method: Method, uri: Uri) -> Response {
    Rejection {
        status: 404,
        message: format!("Invalid URL ({method} {})", uri.path()),
        kind: "invalid_request_error",
        param: None,
        code: None,
    }
    .reply()
    .into_response()
}

fn error_kind(status: u16) -> (&'static str, Option<&'static str>) {
    match status {
        401 => ("invalid_request_error", Some("invalid_api_key")),
        404 => ("invalid_request_error", Some("model_not_found")),
        429 => ("requests", Some("rate_limit_exceeded")),
        400..=499 => ("invalid_request_error", None),
        _ => ("server_error", None),
    }
}

// ---------------------------------------------------------------------------------------
// The handler

async fn handle(
    State(state): State<Shared<OpenAiApi>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let api_key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|k| k.trim().to_owned());
    let (parsed, recorded_body) = parse_body(&body);
    let model = recorded_body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let stream = recorded_body.get("stream").and_then(Value::as_bool) == Some(true);
    let record = FakeRequest {
        path: uri.path().to_owned(),
        model: model.clone(),
        method: "chat/completions".to_owned(),
        stream,
        sse: stream,
        api_key: api_key.clone(),
        body: recorded_body,
        status: 0,
    };
    state.answer(
        record,
        |api| admit(&api.options, api_key.as_deref(), parsed).map_err(Rejection::reply),
        |index, turn, request| {
            let include_usage = request
                .get("stream_options")
                .and_then(|o| o.get("include_usage"))
                .and_then(Value::as_bool)
                == Some(true);
            let delay = state.lock().api.options.chunk_delay;
            render(index, &model, turn, stream, include_usage, delay)
        },
    )
}

fn admit(
    options: &FakeOpenAiOptions,
    api_key: Option<&str>,
    parsed: Result<Value, String>,
) -> Result<Value, Rejection> {
    if let Some(want) = &options.api_key {
        match api_key {
            None | Some("") => {
                return Err(Rejection {
                    status: 401,
                    message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).".into(),
                    kind: "invalid_request_error",
                    param: None,
                    code: None,
                });
            }
            Some(key) if key != want => {
                let tail: String = key
                    .chars()
                    .rev()
                    .take(4)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                return Err(Rejection {
                    status: 401,
                    message: format!("Incorrect API key provided: ****{tail}."),
                    kind: "invalid_request_error",
                    param: None,
                    code: Some("invalid_api_key"),
                });
            }
            Some(_) => {}
        }
    }
    let body = parsed.map_err(|e| {
        invalid(
            format!("We could not parse the JSON body of your request. ({e})"),
            None,
        )
    })?;
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    if model.is_empty() {
        return Err(invalid(
            "you must provide a model parameter",
            Some("model".to_owned()),
        ));
    }
    if let Some(models) = &options.models
        && !models.iter().any(|m| m == model)
    {
        return Err(Rejection {
            status: 404,
            message: format!("The model `{model}` does not exist or you do not have access to it."),
            kind: "invalid_request_error",
            param: None,
            code: Some("model_not_found"),
        });
    }
    validate(&body)?;
    Ok(body)
}

// ---------------------------------------------------------------------------------------
// Validation

const TOP_LEVEL: [&str; 32] = [
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "n",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "user",
    "response_format",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "metadata",
    "store",
    "reasoning_effort",
    "modalities",
    "audio",
    "prediction",
    "service_tier",
    "functions",
    "function_call",
    "web_search_options",
    "verbosity",
];

const ROLES: &str = "'system', 'assistant', 'user', 'function', 'tool', and 'developer'";

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(at: &str, want: &str, got: &Value) -> Rejection {
    invalid(
        format!(
            "Invalid type for '{at}': expected {want}, but got {} instead.",
            type_name(got)
        ),
        Some(at.to_owned()),
    )
}

fn missing(at: &str) -> Rejection {
    invalid(
        format!("Missing required parameter: '{at}'."),
        Some(at.to_owned()),
    )
}

fn unexpected_fields(
    at: &str,
    obj: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), Rejection> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(invalid(
            format!("Additional properties are not allowed ('{k}' was unexpected) - '{at}'"),
            Some(at.to_owned()),
        )),
        None => Ok(()),
    }
}

/// The checks a real chat-completions server makes on a body, as far as the fake knows
/// them.
fn validate(body: &Value) -> Result<(), Rejection> {
    let Some(request) = body.as_object() else {
        return Err(invalid(
            "We could not parse the JSON body of your request: expected an object.",
            None,
        ));
    };
    if let Some(k) = request.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
        return Err(invalid(
            format!("Unrecognized request argument supplied: {k}"),
            None,
        ));
    }
    let streaming = match request.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(wrong_type("stream", "a boolean", other)),
    };
    if request.get("stream_options").is_some_and(|o| !o.is_null()) && !streaming {
        return Err(invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            Some("stream_options".to_owned()),
        ));
    }
    let names = validate_tools(request)?;
    validate_tool_choice(request, &names)?;
    let messages = match request.get("messages") {
        None => return Err(missing("messages")),
        Some(Value::Array(m)) => m,
        Some(other) => return Err(wrong_type("messages", "an array", other)),
    };
    if messages.is_empty() {
        return Err(invalid(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            Some("messages".to_owned()),
        ));
    }
    for (i, message) in messages.iter().enumerate() {
        validate_message(i, message)?;
    }
    validate_tool_pairing(messages)
}

fn validate_tools(request: &Map<String, Value>) -> Result<HashSet<String>, Rejection> {
    let mut names = HashSet::new();
    let tools = match request.get("tools") {
        None | Some(Value::Null) => return Ok(names),
        Some(Value::Array(t)) => t,
        Some(other) => return Err(wrong_type("tools", "an array", other)),
    };
    if tools.len() > MAX_TOOLS {
        return Err(invalid(
            format!(
                "Invalid 'tools': array too long. Expected an array with maximum length {MAX_TOOLS}, but got an array with length {} instead.",
                tools.len()
            ),
            Some("tools".to_owned()),
        ));
    }
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let Some(obj) = tool.as_object() else {
            return Err(wrong_type(&at, "an object", tool));
        };
        match obj.get("type").and_then(Value::as_str) {
            None => return Err(missing(&format!("{at}.type"))),
            Some("function") => {}
            Some(other) => {
                return Err(invalid(
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'function' and 'custom'."
                    ),
                    Some(format!("{at}.type")),
                ));
            }
        }
        unexpected_fields(&at, obj, &["type", "function"])?;
        let function = match obj.get("function") {
            None => return Err(missing(&format!("{at}.function"))),
            Some(Value::Object(f)) => f,
            Some(other) => return Err(wrong_type(&format!("{at}.function"), "an object", other)),
        };
        let fat = format!("{at}.function");
        unexpected_fields(
            &fat,
            function,
            &["name", "description", "parameters", "strict"],
        )?;
        let name = match function.get("name") {
            None => return Err(missing(&format!("{fat}.name"))),
            Some(Value::String(n)) => n,
            Some(other) => return Err(wrong_type(&format!("{fat}.name"), "a string", other)),
        };
        if name.len() > MAX_TOOL_NAME_LEN {
            return Err(invalid(
                format!(
                    "Invalid '{fat}.name': string too long. Expected a string with maximum length {MAX_TOOL_NAME_LEN}, but got a string with length {} instead.",
                    name.len()
                ),
                Some(format!("{fat}.name")),
            ));
        }
        if !is_valid_tool_name(name) {
            return Err(invalid(
                format!(
                    "Invalid '{fat}.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
                ),
                Some(format!("{fat}.name")),
            ));
        }
        if let Some(d) = function.get("description")
            && !d.is_string()
        {
            return Err(wrong_type(&format!("{fat}.description"), "a string", d));
        }
        if let Some(params) = function.get("parameters") {
            let Some(schema) = params.as_object() else {
                return Err(wrong_type(
                    &format!("{fat}.parameters"),
                    "an object",
                    params,
                ));
            };
            let t = match schema.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(other) => other.to_string(),
                None => "None".to_owned(),
            };
            if t != "object" {
                return Err(invalid(
                    format!(
                        "Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{t}\"'."
                    ),
                    Some(format!("{fat}.parameters")),
                ));
            }
            if let Some(props) = schema.get("properties")
                && !props.is_object()
            {
                return Err(invalid(
                    format!(
                        "Invalid schema for function '{name}': {props} is not of type 'object'."
                    ),
                    Some(format!("{fat}.parameters")),
                ));
            }
        }
        names.insert(name.clone());
    }
    Ok(names)
}

fn validate_tool_choice(
    request: &Map<String, Value>,
    names: &HashSet<String>,
) -> Result<(), Rejection> {
    let Some(choice) = request.get("tool_choice").filter(|c| !c.is_null()) else {
        return Ok(());
    };
    if names.is_empty() {
        return Err(invalid(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            Some("tool_choice".to_owned()),
        ));
    }
    match choice {
        Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => Ok(()),
        Value::String(s) => Err(invalid(
            format!("Invalid value: '{s}'. Supported values are: 'none', 'auto', and 'required'."),
            Some("tool_choice".to_owned()),
        )),
        Value::Object(o) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if o.get("type").and_then(Value::as_str) != Some("function") || name.is_empty() {
                return Err(invalid(
                    "Invalid 'tool_choice': expected {\"type\": \"function\", \"function\": {\"name\": …}}.",
                    Some("tool_choice".to_owned()),
                ));
            }
            if !names.contains(name) {
                return Err(invalid(
                    format!(
                        "Invalid value for 'tool_choice': function '{name}' is not among the declared tools."
                    ),
                    Some("tool_choice".to_owned()),
                ));
            }
            Ok(())
        }
        other => Err(wrong_type("tool_choice", "a string or an object", other)),
    }
}

fn validate_message(i: usize, message: &Value) -> Result<(), Rejection> {
    let at = format!("messages[{i}]");
    let Some(obj) = message.as_object() else {
        return Err(wrong_type(&at, "an object", message));
    };
    let role = match obj.get("role") {
        None => return Err(missing(&format!("{at}.role"))),
        Some(Value::String(r)) => r.as_str(),
        Some(other) => return Err(wrong_type(&format!("{at}.role"), "a string", other)),
    };
    let allowed: &[&str] = match role {
        "system" | "developer" | "user" => &["role", "content", "name"],
        "assistant" => &[
            "role",
            "content",
            "name",
            "tool_calls",
            "refusal",
            "audio",
            "function_call",
        ],
        "tool" => &["role", "content", "tool_call_id"],
        "function" => &["role", "content", "name"],
        other => {
            return Err(invalid(
                format!("Invalid value: '{other}'. Supported values are: {ROLES}."),
                Some(format!("{at}.role")),
            ));
        }
    };
    unexpected_fields(&format!("messages.{i}"), obj, allowed)?;
    let content = obj.get("content");
    let cat = format!("{at}.content");
    match role {
        "system" | "developer" | "tool" | "function" => match content {
            None => return Err(missing(&cat)),
            Some(Value::String(_)) => {}
            Some(Value::Array(parts)) => validate_parts(&cat, parts, &["text"])?,
            Some(other) => return Err(wrong_type(&cat, "a string or an array", other)),
        },
        "user" => match content {
            None => return Err(missing(&cat)),
            Some(Value::String(_)) => {}
            Some(Value::Array(parts)) => {
                validate_parts(&cat, parts, &["text", "image_url", "input_audio", "file"])?;
            }
            Some(other) => return Err(wrong_type(&cat, "a string or an array", other)),
        },
        _ => {
            let has_calls = obj
                .get("tool_calls")
                .and_then(Value::as_array)
                .is_some_and(|c| !c.is_empty())
                || obj.get("function_call").is_some_and(|f| !f.is_null());
            match content {
                None | Some(Value::Null) if !has_calls => {
                    return Err(invalid(
                        "Invalid value for 'content': expected a string, got null.",
                        Some(cat),
                    ));
                }
                None | Some(Value::Null) | Some(Value::String(_)) => {}
                Some(Value::Array(parts)) => validate_parts(&cat, parts, &["text", "refusal"])?,
                Some(other) => return Err(wrong_type(&cat, "a string or an array", other)),
            }
            validate_tool_calls(&at, obj.get("tool_calls"))?;
        }
    }
    if role == "tool" {
        match obj.get("tool_call_id") {
            None => return Err(missing(&format!("{at}.tool_call_id"))),
            Some(Value::String(_)) => {}
            Some(other) => {
                return Err(wrong_type(&format!("{at}.tool_call_id"), "a string", other));
            }
        }
    }
    if role == "function" && !obj.get("name").is_some_and(Value::is_string) {
        return Err(missing(&format!("{at}.name")));
    }
    Ok(())
}

fn validate_parts(at: &str, parts: &[Value], kinds: &[&str]) -> Result<(), Rejection> {
    if parts.is_empty() {
        return Err(invalid(
            format!(
                "Invalid '{at}': empty array. Expected an array with minimum length 1, but got an empty array instead."
            ),
            Some(at.to_owned()),
        ));
    }
    for (j, part) in parts.iter().enumerate() {
        let pat = format!("{at}[{j}]");
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        if !kinds.contains(&kind) {
            let supported = kinds
                .iter()
                .map(|k| format!("'{k}'"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(invalid(
                format!("Invalid value: '{kind}'. Supported values are: {supported}."),
                Some(format!("{pat}.type")),
            ));
        }
        match kind {
            "text" | "refusal" if !part.get(kind).is_some_and(Value::is_string) => {
                return Err(missing(&format!("{pat}.{kind}")));
            }
            "image_url" => {
                let url = part
                    .get("image_url")
                    .and_then(|u| u.get("url"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(&format!("{pat}.image_url.url")))?;
                if !valid_image_url(url) {
                    let shown: String = url.chars().take(40).collect();
                    return Err(invalid(
                        format!(
                            "Invalid '{pat}.image_url.url'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value starting with '{shown}'."
                        ),
                        Some(format!("{pat}.image_url.url")),
                    ));
                }
            }
            "input_audio" => {
                let audio = part.get("input_audio");
                let format = audio
                    .and_then(|a| a.get("format"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !matches!(format, "wav" | "mp3") {
                    return Err(invalid(
                        format!(
                            "Invalid value: '{format}'. Supported values are: 'wav' and 'mp3'."
                        ),
                        Some(format!("{pat}.input_audio.format")),
                    ));
                }
                let data = audio
                    .and_then(|a| a.get("data"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .is_err()
                {
                    return Err(invalid(
                        format!("Invalid '{pat}.input_audio.data': expected base64-encoded audio."),
                        Some(format!("{pat}.input_audio.data")),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn valid_image_url(url: &str) -> bool {
    if url.starts_with("https://") || url.starts_with("http://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("data:image/") else {
        return false;
    };
    let Some((mime, data)) = rest.split_once(";base64,") else {
        return false;
    };
    !mime.is_empty()
        && !data.is_empty()
        && base64::engine::general_purpose::STANDARD
            .decode(data)
            .is_ok()
}

fn validate_tool_calls(at: &str, calls: Option<&Value>) -> Result<(), Rejection> {
    let calls = match calls {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(c)) => c,
        Some(other) => return Err(wrong_type(&format!("{at}.tool_calls"), "an array", other)),
    };
    for (j, call) in calls.iter().enumerate() {
        let cat = format!("{at}.tool_calls[{j}]");
        let Some(obj) = call.as_object() else {
            return Err(wrong_type(&cat, "an object", call));
        };
        unexpected_fields(&cat, obj, &["id", "type", "function"])?;
        match obj.get("id") {
            Some(Value::String(id)) if !id.is_empty() => {}
            Some(Value::String(_)) => {
                return Err(invalid(
                    format!(
                        "Invalid '{cat}.id': empty string. Expected a string with minimum length 1, but got an empty string instead."
                    ),
                    Some(format!("{cat}.id")),
                ));
            }
            None => return Err(missing(&format!("{cat}.id"))),
            Some(other) => return Err(wrong_type(&format!("{cat}.id"), "a string", other)),
        }
        match obj.get("type").and_then(Value::as_str) {
            Some("function") => {}
            None => return Err(missing(&format!("{cat}.type"))),
            Some(other) => {
                return Err(invalid(
                    format!("Invalid value: '{other}'. Supported values are: 'function'."),
                    Some(format!("{cat}.type")),
                ));
            }
        }
        let function = obj
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| missing(&format!("{cat}.function")))?;
        if !function.get("name").is_some_and(Value::is_string) {
            return Err(missing(&format!("{cat}.function.name")));
        }
        match function.get("arguments") {
            None => return Err(missing(&format!("{cat}.function.arguments"))),
            Some(Value::String(args)) => {
                if serde_json::from_str::<Value>(args).is_err() {
                    return Err(invalid(
                        format!(
                            "Invalid '{cat}.function.arguments': the string is not valid JSON ({args:?})."
                        ),
                        Some(format!("{cat}.function.arguments")),
                    ));
                }
            }
            Some(other) => {
                return Err(wrong_type(
                    &format!("{cat}.function.arguments"),
                    "a string",
                    other,
                ));
            }
        }
    }
    Ok(())
}

/// Every `tool` message answers a call of the assistant message right before its run of
/// `tool` messages, once; every such call is answered before the next other message.
fn validate_tool_pairing(messages: &[Value]) -> Result<(), Rejection> {
    // The index of the assistant message whose calls are open, with (id, answered).
    let mut open: Option<(usize, Vec<(String, bool)>)> = None;
    let unanswered = |open: &Option<(usize, Vec<(String, bool)>)>| -> Result<(), Rejection> {
        if let Some((at, calls)) = open {
            let missing: Vec<&str> = calls
                .iter()
                .filter(|(_, done)| !done)
                .map(|(id, _)| id.as_str())
                .collect();
            if !missing.is_empty() {
                return Err(invalid(
                    format!(
                        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                        missing.join(", ")
                    ),
                    Some(format!("messages.[{at}].role")),
                ));
            }
        }
        Ok(())
    };
    for (i, message) in messages.iter().enumerate() {
        if role_of(message) == "tool" {
            let id = message
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            let Some((_, calls)) = open.as_mut() else {
                return Err(invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                    Some(format!("messages.[{i}].role")),
                ));
            };
            match calls.iter_mut().find(|(c, _)| c == id) {
                Some((_, done)) if *done => {
                    return Err(invalid(
                        format!(
                            "Invalid parameter: 'tool_call_id' of '{id}' was answered more than once."
                        ),
                        Some(format!("messages.[{i}].tool_call_id")),
                    ));
                }
                Some((_, done)) => *done = true,
                None => {
                    return Err(invalid(
                        format!(
                            "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
                        ),
                        Some(format!("messages.[{i}].tool_call_id")),
                    ));
                }
            }
            continue;
        }
        unanswered(&open)?;
        open = None;
        if role_of(message) == "assistant" {
            let ids: Vec<(String, bool)> = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("id").and_then(Value::as_str))
                .map(|id| (id.to_owned(), false))
                .collect();
            if !ids.is_empty() {
                open = Some((i, ids));
            }
        }
    }
    unanswered(&open)
}

// ---------------------------------------------------------------------------------------
// Answers

fn usage() -> Value {
    json!({"prompt_tokens": 8, "completion_tokens": 4, "total_tokens": 12})
}

fn completion_id(index: usize) -> String {
    format!("chatcmpl-fake-{}", index + 1)
}

fn call_id(index: usize, k: usize) -> String {
    format!("call_fake{}x{}", index + 1, k + 1)
}

fn tool_calls(index: usize, calls: &[(String, Value)]) -> Vec<(String, String, String)> {
    calls
        .iter()
        .enumerate()
        .map(|(k, (name, args))| {
            let args = FakeTurn::call_args(args);
            (call_id(index, k), name.clone(), args.to_string())
        })
        .collect()
}

fn completion(
    index: usize,
    model: &str,
    content: Value,
    calls: &[(String, String, String)],
) -> Value {
    let mut message = json!({"role": "assistant", "content": content, "refusal": null});
    if !calls.is_empty()
        && let Some(obj) = message.as_object_mut()
    {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
        obj.insert("tool_calls".into(), Value::Array(calls));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    json!({
        "id": completion_id(index),
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage(),
        "system_fingerprint": "fp_fake",
    })
}

fn chunk(index: usize, model: &str, delta: Value, finish: Option<&str>, with_usage: bool) -> Value {
    let mut out = json!({
        "id": completion_id(index),
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    if with_usage && let Some(obj) = out.as_object_mut() {
        obj.insert("usage".into(), Value::Null);
    }
    out
}

/// Splits a string into pieces of at most `n` chars.
fn fragments(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// The SSE events of a scripted answer (without `[DONE]`).
fn stream_chunks(index: usize, model: &str, turn: &FakeTurn, with_usage: bool) -> Vec<Value> {
    let mut out = vec![chunk(
        index,
        model,
        json!({"role": "assistant", "content": ""}),
        None,
        with_usage,
    )];
    let finish = match turn {
        FakeTurn::Text(text) => {
            for piece in split_text(text) {
                out.push(chunk(
                    index,
                    model,
                    json!({"content": piece}),
                    None,
                    with_usage,
                ));
            }
            "stop"
        }
        FakeTurn::Calls(calls) => {
            for (k, (id, name, args)) in tool_calls(index, calls).into_iter().enumerate() {
                out.push(chunk(
                    index,
                    model,
                    json!({"tool_calls": [{
                        "index": k,
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }]}),
                    None,
                    with_usage,
                ));
                for piece in fragments(&args, 4) {
                    out.push(chunk(
                        index,
                        model,
                        json!({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}),
                        None,
                        with_usage,
                    ));
                }
            }
            "tool_calls"
        }
        _ => "stop",
    };
    out.push(chunk(index, model, json!({}), Some(finish), with_usage));
    if with_usage {
        out.push(json!({
            "id": completion_id(index),
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [],
            "usage": usage(),
        }));
    }
    out
}

/// `"0.2s"` (Gemini's `retryDelay` form) as milliseconds.
fn delay_ms(delay: &str) -> Option<String> {
    let secs: f64 = delay.trim().trim_end_matches('s').parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| format!("{}", (secs * 1000.0).round()))
}

fn render(
    index: usize,
    model: &str,
    turn: FakeTurn,
    stream: bool,
    include_usage: bool,
    delay: Duration,
) -> Reply {
    match &turn {
        FakeTurn::Error { status, message } => {
            let (kind, code) = error_kind(*status);
            Rejection {
                status: *status,
                message: message.clone(),
                kind,
                param: None,
                code,
            }
            .reply()
        }
        FakeTurn::RateLimited {
            retry_after,
            retry_delay,
        } => Rejection {
            status: 429,
            message: format!("Rate limit reached for {model} on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s."),
            kind: "requests",
            param: None,
            code: Some("rate_limit_exceeded"),
        }
        .reply()
        .with_header("retry-after", retry_after.as_deref())
        .with_header(
            "retry-after-ms",
            retry_delay.as_deref().and_then(delay_ms).as_deref(),
        ),
        FakeTurn::RawSse(pieces) => {
            if !stream {
                return invalid(
                    "FakeOpenAi: a RawSse turn answers only streamed requests",
                    None,
                )
                .reply();
            }
            Reply::sse(raw_pieces(pieces), delay)
        }
        FakeTurn::Dynamic(_) => Rejection {
            status: 500,
            message: "FakeOpenAi: unresolved Dynamic turn".into(),
            kind: "server_error",
            param: None,
            code: None,
        }
        .reply(),
        FakeTurn::Raw(value) => {
            if !stream {
                return Reply::json(200, value, JSON);
            }
            let pieces = vec![
                Bytes::from(format!("data: {value}\n\n")),
                Bytes::from_static(b"data: [DONE]\n\n"),
            ];
            Reply::sse(pieces, delay)
        }
        FakeTurn::Text(text) if !stream => {
            Reply::json(200, &completion(index, model, json!(text), &[]), JSON)
        }
        FakeTurn::Calls(calls) if !stream => {
            let calls = tool_calls(index, calls);
            Reply::json(200, &completion(index, model, Value::Null, &calls), JSON)
        }
        FakeTurn::Text(_) | FakeTurn::Calls(_) => {
            let mut pieces: Vec<Bytes> = stream_chunks(index, model, &turn, include_usage)
                .iter()
                .map(|c| Bytes::from(format!("data: {c}\n\n")))
                .collect();
            pieces.push(Bytes::from_static(b"data: [DONE]\n\n"));
            Reply::sse(pieces, delay)
        }
    }
}
