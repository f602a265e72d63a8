//! A fake Gemini API for tests: a [`FakeServer`] on `127.0.0.1:0` that serves
//! `generateContent` and `streamGenerateContent` (`alt=sse`, and the JSON-array form
//! without it) with the real wire shapes, answering from a script of [`FakeTurn`]s, and
//! rejecting what the real API rejects.
//!
//! What it sends:
//! - every answer is a `GenerateContentResponse` (`candidates[0].content` with role
//!   `model`, `finishReason`, `usageMetadata`, `modelVersion`, `responseId`);
//! - streamed, each SSE event is `data: {json}\r\n\r\n` holding a complete response;
//!   text arrives in several increments, each function call whole in one chunk;
//! - function calls have ids (`fc-<request>-<n>`), and the first call of a turn carries
//!   a `thoughtSignature` (Gemini 3 models also get one on the last text part).
//!
//! What it rejects (400 `INVALID_ARGUMENT` with `{"error":{"code","message","status"}}`
//! unless said otherwise), before consuming a script turn:
//! - a missing key (403 `PERMISSION_DENIED`) or a wrong one (400, reason
//!   `API_KEY_INVALID`); a model that is not `gemini-*`/`gemma-*` (404 `NOT_FOUND`);
//! - a body that is not JSON, empty `contents`, a bad role, empty `parts`, a part with no
//!   or two data fields, inline data that is not base64;
//! - invalid function names ([`is_valid_function_name`], switchboard-model's one rule:
//!   at most 64 characters), duplicate names, unknown fields in a declaration (not in
//!   [`FUNCTION_DECLARATION_FIELDS`]), a declaration with both `parameters` and
//!   `parametersJsonSchema`, a `parametersJsonSchema` that fails
//!   [`validate_for_gemini`], a `parameters` schema outside the OpenAPI subset (the
//!   proto's fields and `Type` values, as the API parses them), more than 512 declarations, function declarations on a
//!   Gemma model or next to `googleSearch`;
//! - `allowedFunctionNames` unless the mode is `ANY` or `VALIDATED`, an unknown mode;
//! - function call turns that do not follow a user turn, function response turns that do
//!   not follow a function call turn or whose count or names do not match its calls;
//! - on `gemini-3*` models, a model turn of the current exchange whose first function
//!   call lost its `thoughtSignature` ("Function call is missing a thought_signature");
//!   on every model, a signature this server did not issue ("Corrupted thought
//!   signature.");
//! - `functionResponse.parts` holding audio or video, or on a model before Gemini 3.
//!
//! This module owns what is Gemini's own: the route, the key/model/method checks and
//! the request validation, the `GenerateContentResponse` answers, the thought
//! signatures it issues, and Google's error bodies. Serving, the script and the request
//! log are the shared [`FakeServer`]'s.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::post;
use base64::Engine as _;
use serde_json::{Map, Value, json};

use switchboard_model::{
    FUNCTION_DECLARATION_FIELDS, GeminiClient, GeminiOptions, MAX_FUNCTION_NAME_LEN, ModelError,
    is_valid_function_name, validate_for_gemini,
};

use crate::reply::{Reply, raw_pieces, split_text};
pub use crate::server::FakeRequest;
use crate::server::{FakeApi, FakeServer, Shared, items, parse_body};
pub use crate::turn::{DynamicTurn, FakeTurn};

/// The API key the fake accepts unless [`FakeOptions::api_key`] says otherwise.
pub const FAKE_API_KEY: &str = "fake-gemini-key";

/// The most function declarations one request may carry.
pub const MAX_DECLARATIONS: usize = 512;

/// The `functionResponse` objects of the last content of a request body, in order.
pub fn last_function_responses(request: &Value) -> Vec<Value> {
    request
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|c| c.last())
        .map(|content| {
            parts_of(content)
                .iter()
                .filter_map(|p| p.get("functionResponse").cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// The text of the last user content of a request body.
pub fn last_user_text(request: &Value) -> String {
    request
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .rev()
                .find(|c| c.get("role").and_then(Value::as_str) != Some("model"))
        })
        .map(|content| {
            parts_of(content)
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the functions declared in a request body, in order.
pub fn declared_function_names(request: &Value) -> Vec<String> {
    declarations_of(request)
        .into_iter()
        .filter_map(|(_, _, d)| d.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// How to run the fake.
#[derive(Debug, Clone)]
pub struct FakeOptions {
    /// The key it accepts (`x-goog-api-key` header or `key` query parameter).
    pub api_key: String,
    /// The pause between two streamed writes.
    pub chunk_delay: Duration,
}

impl Default for FakeOptions {
    fn default() -> Self {
        Self {
            api_key: FAKE_API_KEY.to_owned(),
            chunk_delay: Duration::from_millis(3),
        }
    }
}

/// A running fake Gemini API; stops when dropped.
pub type FakeGemini = FakeServer<GeminiApi>;

/// The Gemini side of [`FakeGemini`]: its options and the thought signatures it issued.
#[derive(Debug)]
pub struct GeminiApi {
    options: FakeOptions,
    signatures: HashSet<String>,
}

impl GeminiApi {
    /// Mints a signature and remembers it.
    fn mint_signature(&mut self, label: &str) -> String {
        let n = self.signatures.len() + 1;
        let sig = base64::engine::general_purpose::STANDARD
            .encode(format!("fake-thought-signature/{n}/{label}"));
        self.signatures.insert(sig.clone());
        sig
    }
}

impl FakeApi for GeminiApi {
    const NAME: &'static str = "FakeGemini";
    const BASE_PATH: &'static str = "";
    type Options = FakeOptions;

    fn new(options: FakeOptions) -> Self {
        Self {
            options,
            signatures: HashSet::new(),
        }
    }

    fn routes() -> Router<Shared<Self>> {
        Router::new()
            .route("/v1beta/models/{action}", post(handle))
            .fallback(not_found)
    }

    fn exhausted(message: String) -> Reply {
        Rejection {
            status: 400,
            status_text: "FAILED_PRECONDITION",
            message,
            details: None,
        }
        .reply()
    }
}

impl FakeServer<GeminiApi> {
    /// The key the fake accepts.
    pub fn api_key(&self) -> String {
        self.state.lock().api.options.api_key.clone()
    }

    /// Client options pointing at the fake: its key and URL, tiny backoff delays.
    pub fn options(&self) -> GeminiOptions {
        GeminiOptions {
            api_key: self.api_key(),
            base_url: self.base_url.clone(),
            backoff_base: Duration::from_millis(5),
            max_backoff: Duration::from_secs(5),
            ..GeminiOptions::default()
        }
    }

    /// A client for the fake (see [`options`](Self::options)).
    pub fn client(&self) -> Result<GeminiClient, ModelError> {
        GeminiClient::new(self.options())
    }

    /// A thought signature the fake will accept when it comes back in a model turn,
    /// for hand-written [`FakeTurn::Raw`] answers.
    pub fn issue_signature(&self, label: &str) -> String {
        self.state.lock().api.mint_signature(label)
    }
}

/// The `Content-Type` of Gemini's JSON answers.
const JSON: &str = "application/json; charset=UTF-8";

async fn not_found() -> Response {
    error_reply(404, "NOT_FOUND", "Method not found.", None).into_response()
}

fn canonical(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        502 => "UNKNOWN",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

fn error_body(status: u16, status_text: &str, message: &str, details: Option<Value>) -> Value {
    let mut error = json!({"code": status, "message": message, "status": status_text});
    if let (Some(details), Some(obj)) = (details, error.as_object_mut()) {
        obj.insert("details".into(), details);
    }
    json!({ "error": error })
}

fn error_reply(status: u16, status_text: &str, message: &str, details: Option<Value>) -> Reply {
    Reply::json(
        status,
        &error_body(status, status_text, message, details),
        JSON,
    )
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection {
        status: 400,
        status_text: "INVALID_ARGUMENT",
        message: message.into(),
        details: None,
    }
}

struct Rejection {
    status: u16,
    status_text: &'static str,
    message: String,
    details: Option<Value>,
}

impl Rejection {
    fn reply(self) -> Reply {
        error_reply(self.status, self.status_text, &self.message, self.details)
    }
}

async fn handle(
    State(state): State<Shared<GeminiApi>>,
    Path(action): Path<String>,
    uri: Uri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = parse_query(query.as_deref().unwrap_or(""));
    let (model, method) = match action.rsplit_once(':') {
        Some((m, op)) => (m.to_owned(), op.to_owned()),
        None => (action.clone(), String::new()),
    };
    let sse = query.get("alt").map(String::as_str) == Some("sse");
    let api_key = headers
        .get("x-goog-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| query.get("key").cloned());
    let (parsed, recorded_body) = parse_body(&body);
    let stream = method == "streamGenerateContent";
    let record = FakeRequest {
        path: uri.path().to_owned(),
        model: model.clone(),
        method: method.clone(),
        stream,
        sse,
        api_key: api_key.clone(),
        body: recorded_body,
        status: 0,
    };
    state.answer(
        record,
        |api| admit(api, &model, &method, api_key.as_deref(), parsed).map_err(Rejection::reply),
        |index, turn, _| render(&state, index, &model, turn, stream, sse),
    )
}

fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (kv.to_owned(), String::new()),
        })
        .collect()
}

/// Key, model and method checks, then the request checks. Returns the body.
fn admit(
    api: &GeminiApi,
    model: &str,
    method: &str,
    api_key: Option<&str>,
    parsed: Result<Value, String>,
) -> Result<Value, Rejection> {
    match api_key {
        None | Some("") => {
            return Err(Rejection {
                status: 403,
                status_text: "PERMISSION_DENIED",
                message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.".into(),
                details: None,
            });
        }
        Some(key) if key != api.options.api_key => {
            return Err(Rejection {
                status: 400,
                status_text: "INVALID_ARGUMENT",
                message: "API key not valid. Please pass a valid API key.".into(),
                details: Some(json!([{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"}
                }])),
            });
        }
        Some(_) => {}
    }
    if !matches!(method, "generateContent" | "streamGenerateContent") {
        return Err(Rejection {
            status: 404,
            status_text: "NOT_FOUND",
            message: format!("Method not found: {method:?}."),
            details: None,
        });
    }
    let known_family = model.starts_with("gemini-") || model.starts_with("gemma-");
    if !known_family || model.contains('/') {
        return Err(Rejection {
            status: 404,
            status_text: "NOT_FOUND",
            message: format!(
                "models/{model} is not found for API version v1beta, or is not supported for {method}. Call ListModels to see the list of available models and their supported methods."
            ),
            details: None,
        });
    }
    let body = parsed.map_err(|e| {
        invalid(format!(
            "Invalid JSON payload received. Unexpected token in the request body: {e}"
        ))
    })?;
    validate(model, &body, &api.signatures).map_err(invalid)?;
    Ok(body)
}

fn is_gemini3(model: &str) -> bool {
    model.starts_with("gemini-3")
}

fn parts_of(content: &Value) -> &[Value] {
    items(content, "parts")
}

/// `(tool index, declaration index, declaration)` of every function declaration.
fn declarations_of(request: &Value) -> Vec<(usize, usize, &Value)> {
    let mut out = Vec::new();
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        for (t, tool) in tools.iter().enumerate() {
            if let Some(decls) = tool.get("functionDeclarations").and_then(Value::as_array) {
                out.extend(decls.iter().enumerate().map(|(d, decl)| (t, d, decl)));
            }
        }
    }
    out
}

const PART_DATA_FIELDS: [&str; 7] = [
    "text",
    "inlineData",
    "functionCall",
    "functionResponse",
    "fileData",
    "executableCode",
    "codeExecutionResult",
];

const OPENAPI_SCHEMA_FIELDS: [&str; 22] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

const OPENAPI_TYPES: [&str; 8] = [
    "TYPE_UNSPECIFIED",
    "STRING",
    "NUMBER",
    "INTEGER",
    "BOOLEAN",
    "ARRAY",
    "OBJECT",
    "NULL",
];

fn is_base64(data: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .any(|engine| engine.decode(data).is_ok())
}

/// The checks the real API makes on a request body, as far as the fake knows them.
fn validate(model: &str, body: &Value, issued: &HashSet<String>) -> Result<(), String> {
    let Some(request) = body.as_object() else {
        return Err("Invalid JSON payload received. Expected an object.".into());
    };
    validate_tools(model, request)?;
    validate_tool_config(request)?;
    let contents = request
        .get("contents")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
        .ok_or("* GenerateContentRequest.contents: contents is not specified")?;
    if let Some(system) = request.get("systemInstruction") {
        for (j, part) in parts_of(system).iter().enumerate() {
            validate_part(model, &format!("system_instruction.parts[{j}]"), part)?;
        }
    }
    for (i, content) in contents.iter().enumerate() {
        let role = content
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        if !matches!(role, "user" | "model") {
            return Err(format!(
                "Please use a valid role: user, model. (contents[{i}].role is {role:?})"
            ));
        }
        let parts = content.get("parts").and_then(Value::as_array);
        if parts.is_none_or(Vec::is_empty) {
            return Err(format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            ));
        }
        for (j, part) in parts_of(content).iter().enumerate() {
            validate_part(model, &format!("contents[{i}].parts[{j}]"), part)?;
        }
    }
    validate_turns(contents)?;
    validate_signatures(model, contents, issued)
}

fn validate_part(model: &str, at: &str, part: &Value) -> Result<(), String> {
    let Some(obj) = part.as_object() else {
        return Err(format!(
            "Invalid JSON payload received. Expected an object at '{at}'."
        ));
    };
    let set: Vec<&str> = PART_DATA_FIELDS
        .iter()
        .copied()
        .filter(|f| obj.contains_key(*f))
        .collect();
    match set.as_slice() {
        [] => {
            return Err(format!(
                "* GenerateContentRequest.{at}.data: required oneof field 'data' must have one initialized field"
            ));
        }
        [_] => {}
        [_, second, ..] => {
            return Err(format!(
                "Invalid JSON payload received. Oneof field 'data' is already set. Cannot set '{second}' at '{at}'"
            ));
        }
    }
    if let Some(text) = obj.get("text")
        && !text.is_string()
    {
        return Err(format!(
            "Invalid value at '{at}.text' (TYPE_STRING), {text}"
        ));
    }
    if let Some(blob) = obj.get("inlineData") {
        validate_blob(&format!("{at}.inline_data"), blob)?;
    }
    if let Some(call) = obj.get("functionCall") {
        let name = call.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            return Err(format!(
                "* GenerateContentRequest.{at}.function_call.name: Name cannot be empty."
            ));
        }
        if let Some(args) = call.get("args")
            && !args.is_object()
        {
            return Err(format!(
                "Invalid value at '{at}.function_call.args' (type.googleapis.com/google.protobuf.Struct), {args}"
            ));
        }
    }
    if let Some(resp) = obj.get("functionResponse") {
        let name = resp.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            return Err(format!(
                "* GenerateContentRequest.{at}.function_response.name: Name cannot be empty."
            ));
        }
        match resp.get("response") {
            Some(r) if r.is_object() => {}
            Some(r) => {
                return Err(format!(
                    "Invalid value at '{at}.function_response.response' (type.googleapis.com/google.protobuf.Struct), {r}"
                ));
            }
            None => {
                return Err(format!(
                    "* GenerateContentRequest.{at}.function_response.response: response is required."
                ));
            }
        }
        if let Some(parts) = resp.get("parts") {
            let Some(parts) = parts.as_array() else {
                return Err(format!(
                    "Invalid value at '{at}.function_response.parts', expected a list"
                ));
            };
            if !is_gemini3(model) && !parts.is_empty() {
                return Err(format!(
                    "* GenerateContentRequest.{at}.function_response.parts: multimodal function responses are not supported by models/{model}; send images as sibling inlineData parts."
                ));
            }
            for (k, p) in parts.iter().enumerate() {
                let pat = format!("{at}.function_response.parts[{k}]");
                let blob = p
                    .get("inlineData")
                    .or_else(|| p.get("fileData"))
                    .ok_or_else(|| {
                        format!(
                            "* GenerateContentRequest.{pat}.data: required oneof field 'data' must have one initialized field"
                        )
                    })?;
                if p.get("inlineData").is_some() {
                    validate_blob(&format!("{pat}.inline_data"), blob)?;
                }
                let mime = blob.get("mimeType").and_then(Value::as_str).unwrap_or("");
                if mime.starts_with("audio/") || mime.starts_with("video/") {
                    return Err(format!(
                        "* GenerateContentRequest.{pat}: mime type {mime} is not supported in function response parts; only images and documents are."
                    ));
                }
            }
        }
    }
    if let Some(sig) = obj.get("thoughtSignature") {
        let ok = sig.as_str().is_some_and(is_base64);
        if !ok {
            return Err(format!(
                "Invalid value at '{at}.thought_signature' (TYPE_BYTES), Base64 decoding failed for {sig}"
            ));
        }
    }
    Ok(())
}

fn validate_blob(at: &str, blob: &Value) -> Result<(), String> {
    let mime = blob.get("mimeType").and_then(Value::as_str).unwrap_or("");
    if mime.is_empty() {
        return Err(format!(
            "* GenerateContentRequest.{at}.mime_type: mime_type is required."
        ));
    }
    let data = blob.get("data").and_then(Value::as_str);
    if !data.is_some_and(is_base64) {
        return Err(format!(
            "Invalid value at '{at}.data' (TYPE_BYTES), Base64 decoding failed"
        ));
    }
    Ok(())
}

fn validate_tools(model: &str, request: &Map<String, Value>) -> Result<(), String> {
    let Some(tools) = request.get("tools") else {
        return Ok(());
    };
    let Some(tools) = tools.as_array() else {
        return Err("Invalid value at 'tools', expected a list".into());
    };
    let decls = declarations_of(&Value::Object(request.clone()))
        .into_iter()
        .map(|(t, d, v)| (t, d, v.clone()))
        .collect::<Vec<_>>();
    if decls.is_empty() {
        return Ok(());
    }
    if model.starts_with("gemma-") {
        return Err(format!(
            "Function calling is not enabled for models/{model}"
        ));
    }
    if tools.iter().any(|t| t.get("googleSearch").is_some()) {
        return Err("Tool use with function calling is unsupported".into());
    }
    if decls.len() > MAX_DECLARATIONS {
        return Err(format!(
            "* GenerateContentRequest.tools: at most {MAX_DECLARATIONS} function declarations can be specified, got {}",
            decls.len()
        ));
    }
    let mut seen = HashSet::new();
    for (t, d, decl) in &decls {
        let at = format!("tools[{t}].function_declarations[{d}]");
        let Some(obj) = decl.as_object() else {
            return Err(format!(
                "Invalid JSON payload received. Expected an object at '{at}'."
            ));
        };
        if let Some(unknown) = obj
            .keys()
            .find(|k| !FUNCTION_DECLARATION_FIELDS.contains(&k.as_str()))
        {
            return Err(format!(
                "Invalid JSON payload received. Unknown name \"{unknown}\" at '{at}': Cannot find field."
            ));
        }
        let name = obj.get("name").and_then(Value::as_str).unwrap_or("");
        if !is_valid_function_name(name) {
            return Err(format!(
                "* GenerateContentRequest.{at}.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of {MAX_FUNCTION_NAME_LEN}. (got {name:?})"
            ));
        }
        if !seen.insert(name.to_owned()) {
            return Err(format!("Duplicate function declaration found: {name}"));
        }
        let params = obj.get("parameters");
        let json_schema = obj.get("parametersJsonSchema");
        if params.is_some() && json_schema.is_some() {
            return Err(format!(
                "* GenerateContentRequest.{at}: parameters and parameters_json_schema cannot both be set; use only one of them."
            ));
        }
        if let Some(schema) = json_schema
            && let Err(problems) = validate_for_gemini(schema)
        {
            return Err(format!(
                "* GenerateContentRequest.{at}.parameters_json_schema: {}",
                problems.join("; ")
            ));
        }
        if let Some(schema) = params {
            validate_openapi_schema(&format!("{at}.parameters"), schema)?;
        }
    }
    Ok(())
}

/// The OpenAPI 3.0 subset `Schema` of `parameters`: known fields only, `type` one
/// enum value (any case), nested schemas checked too.
fn validate_openapi_schema(at: &str, schema: &Value) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Err(format!(
            "Invalid JSON payload received. Expected an object at '{at}'."
        ));
    };
    if let Some(unknown) = obj
        .keys()
        .find(|k| !OPENAPI_SCHEMA_FIELDS.contains(&k.as_str()))
    {
        return Err(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\" at '{at}': Cannot find field."
        ));
    }
    if let Some(ty) = obj.get("type") {
        let ok = ty
            .as_str()
            .is_some_and(|t| OPENAPI_TYPES.contains(&t.to_ascii_uppercase().as_str()));
        if !ok {
            return Err(format!(
                "Invalid value at '{at}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), {ty}"
            ));
        }
    }
    if let Some(props) = obj.get("properties") {
        let Some(props) = props.as_object() else {
            return Err(format!(
                "Invalid value at '{at}.properties', expected a map"
            ));
        };
        for (name, sub) in props {
            validate_openapi_schema(&format!("{at}.properties[{name:?}].value"), sub)?;
        }
    }
    if let Some(items) = obj.get("items") {
        validate_openapi_schema(&format!("{at}.items"), items)?;
    }
    if let Some(any_of) = obj.get("anyOf") {
        let Some(any_of) = any_of.as_array() else {
            return Err(format!("Invalid value at '{at}.any_of', expected a list"));
        };
        for (k, sub) in any_of.iter().enumerate() {
            validate_openapi_schema(&format!("{at}.any_of[{k}]"), sub)?;
        }
    }
    for list in ["required", "enum", "propertyOrdering"] {
        if let Some(v) = obj.get(list) {
            let ok = v
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string));
            if !ok {
                return Err(format!("Invalid value at '{at}.{list}' (TYPE_STRING), {v}"));
            }
        }
    }
    Ok(())
}

fn validate_tool_config(request: &Map<String, Value>) -> Result<(), String> {
    let Some(config) = request
        .get("toolConfig")
        .and_then(|c| c.get("functionCallingConfig"))
    else {
        return Ok(());
    };
    let mode = match config.get("mode") {
        None => "MODE_UNSPECIFIED",
        Some(Value::String(m))
            if matches!(
                m.as_str(),
                "MODE_UNSPECIFIED" | "AUTO" | "ANY" | "NONE" | "VALIDATED"
            ) =>
        {
            m.as_str()
        }
        Some(other) => {
            return Err(format!(
                "Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), {other}"
            ));
        }
    };
    let has_allowed = config
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if has_allowed && !matches!(mode, "ANY" | "VALIDATED") {
        return Err(format!(
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names may only be set when mode is ANY or VALIDATED (mode is {mode})."
        ));
    }
    Ok(())
}

fn names_of<'a>(parts: &'a [Value], kind: &str) -> Vec<&'a str> {
    parts
        .iter()
        .filter_map(|p| p.get(kind))
        .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
        .collect()
}

fn role_of(content: &Value) -> &str {
    content
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user")
}

fn validate_turns(contents: &[Value]) -> Result<(), String> {
    for (i, content) in contents.iter().enumerate() {
        let parts = parts_of(content);
        let calls = names_of(parts, "functionCall");
        let responses = names_of(parts, "functionResponse");
        let previous = i.checked_sub(1).and_then(|p| contents.get(p));
        if role_of(content) == "model"
            && !calls.is_empty()
            && previous.is_none_or(|p| role_of(p) != "user")
        {
            return Err(format!(
                "Please ensure that function call turn comes immediately after a user turn or after a function response turn. (contents[{i}])"
            ));
        }
        if !responses.is_empty() {
            let prev_calls = previous
                .filter(|p| role_of(p) == "model")
                .map(|p| names_of(parts_of(p), "functionCall"))
                .unwrap_or_default();
            if prev_calls.is_empty() {
                return Err(format!(
                    "Please ensure that function response turn comes immediately after a function call turn. (contents[{i}])"
                ));
            }
            if prev_calls.len() != responses.len() {
                return Err(format!(
                    "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn. (contents[{i}] has {} function responses, contents[{}] has {} function calls)",
                    responses.len(),
                    i - 1,
                    prev_calls.len()
                ));
            }
            let mut want = prev_calls.clone();
            let mut got = responses.clone();
            want.sort_unstable();
            got.sort_unstable();
            if want != got {
                return Err(format!(
                    "Please ensure that the function response turn answers the calls of the function call turn: contents[{}] called {prev_calls:?}, contents[{i}] answered {responses:?}.",
                    i - 1
                ));
            }
            let call_ids: Vec<&str> = previous
                .map(|p| {
                    parts_of(p)
                        .iter()
                        .filter_map(|x| x.get("functionCall"))
                        .filter_map(|c| c.get("id").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            for part in parts {
                let id = part
                    .get("functionResponse")
                    .and_then(|r| r.get("id"))
                    .and_then(Value::as_str);
                if let Some(id) = id
                    && !call_ids.contains(&id)
                {
                    return Err(format!(
                        "Please ensure that every function response id matches a function call id of the function call turn: {id:?} is not among {call_ids:?}."
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Where the current exchange starts: at the last user content that is not a function
/// response turn (one holding no `functionResponse` part at all; a response turn may
/// carry sibling `inlineData` parts and still belong to the exchange).
fn current_turn_start(contents: &[Value]) -> usize {
    contents
        .iter()
        .rposition(|c| {
            role_of(c) == "user"
                && parts_of(c)
                    .iter()
                    .all(|p| p.get("functionResponse").is_none())
        })
        .unwrap_or(0)
}

fn validate_signatures(
    model: &str,
    contents: &[Value],
    issued: &HashSet<String>,
) -> Result<(), String> {
    for content in contents.iter().filter(|c| role_of(c) == "model") {
        for part in parts_of(content) {
            if let Some(sig) = part.get("thoughtSignature").and_then(Value::as_str)
                && !issued.contains(sig)
            {
                return Err("Corrupted thought signature.".into());
            }
        }
    }
    if !is_gemini3(model) {
        return Ok(());
    }
    let start = current_turn_start(contents);
    for content in contents
        .iter()
        .skip(start)
        .filter(|c| role_of(c) == "model")
    {
        let parts = parts_of(content);
        if let Some((position, first)) = parts
            .iter()
            .enumerate()
            .find(|(_, p)| p.get("functionCall").is_some())
            && first.get("thoughtSignature").is_none()
        {
            let name = first
                .get("functionCall")
                .and_then(|c| c.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(format!(
                "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{name}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                position + 1
            ));
        }
    }
    Ok(())
}

fn usage(prompt: u64, candidates: u64) -> Value {
    json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates,
    })
}

fn chunk(model: &str, response_id: &str, parts: Vec<Value>, last: bool) -> Value {
    let mut candidate = json!({
        "content": {"role": "model", "parts": parts},
        "index": 0,
    });
    if last && let Some(obj) = candidate.as_object_mut() {
        obj.insert("finishReason".into(), json!("STOP"));
    }
    let mut out = json!({
        "candidates": [candidate],
    });
    if let Some(obj) = out.as_object_mut() {
        if last {
            obj.insert("usageMetadata".into(), usage(8, 4));
        }
        obj.insert("modelVersion".into(), json!(model));
        obj.insert("responseId".into(), json!(response_id));
    }
    out
}

/// The chunks of a scripted answer (one chunk when not streamed).
fn answer_chunks(
    state: &Shared<GeminiApi>,
    index: usize,
    model: &str,
    turn: &FakeTurn,
    stream: bool,
) -> Vec<Value> {
    let response_id = format!("fake-response-{}", index + 1);
    match turn {
        FakeTurn::Text(text) => {
            let pieces = if stream {
                split_text(text)
            } else {
                vec![text.clone()]
            };
            let n = pieces.len();
            pieces
                .into_iter()
                .enumerate()
                .map(|(k, piece)| {
                    let last = k + 1 == n;
                    let mut part = json!({"text": piece});
                    if last
                        && is_gemini3(model)
                        && let Some(obj) = part.as_object_mut()
                    {
                        obj.insert(
                            "thoughtSignature".into(),
                            json!(state.lock().api.mint_signature("text")),
                        );
                    }
                    chunk(model, &response_id, vec![part], last)
                })
                .collect()
        }
        FakeTurn::Calls(calls) => {
            let parts: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(k, (name, args))| {
                    let args = FakeTurn::call_args(args);
                    let mut part = json!({
                        "functionCall": {
                            "id": format!("fc-{}-{}", index + 1, k + 1),
                            "name": name,
                            "args": args,
                        }
                    });
                    if k == 0
                        && let Some(obj) = part.as_object_mut()
                    {
                        obj.insert(
                            "thoughtSignature".into(),
                            json!(state.lock().api.mint_signature(name)),
                        );
                    }
                    part
                })
                .collect();
            if stream {
                let n = parts.len();
                parts
                    .into_iter()
                    .enumerate()
                    .map(|(k, part)| chunk(model, &response_id, vec![part], k + 1 == n))
                    .collect()
            } else {
                vec![chunk(model, &response_id, parts, true)]
            }
        }
        FakeTurn::Raw(value) => vec![value.clone()],
        _ => Vec::new(),
    }
}

fn render(
    state: &Shared<GeminiApi>,
    index: usize,
    model: &str,
    turn: FakeTurn,
    stream: bool,
    sse: bool,
) -> Reply {
    let delay = state.lock().api.options.chunk_delay;
    match &turn {
        FakeTurn::Error { status, message } => {
            error_reply(*status, canonical(*status), message, None)
        }
        FakeTurn::RateLimited {
            retry_after,
            retry_delay,
        } => {
            let details = retry_delay.as_ref().map(|d| {
                json!([{
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": d,
                }])
            });
            error_reply(
                429,
                "RESOURCE_EXHAUSTED",
                "Resource has been exhausted (e.g. check quota).",
                details,
            )
            .with_header("retry-after", retry_after.as_deref())
        }
        FakeTurn::RawSse(pieces) => {
            if !(stream && sse) {
                return invalid(
                    "FakeGemini: a RawSse turn answers only streamGenerateContent?alt=sse",
                )
                .reply();
            }
            Reply::sse(raw_pieces(pieces), delay)
        }
        FakeTurn::Dynamic(_) => Rejection {
            status: 500,
            status_text: "INTERNAL",
            message: "FakeGemini: unresolved Dynamic turn".into(),
            details: None,
        }
        .reply(),
        FakeTurn::Text(_) | FakeTurn::Calls(_) | FakeTurn::Raw(_) => {
            let chunks = answer_chunks(state, index, model, &turn, stream);
            if !stream {
                let body = chunks.into_iter().next().unwrap_or_else(|| json!({}));
                return Reply::json(200, &body, JSON);
            }
            if sse {
                let pieces = chunks
                    .iter()
                    .map(|c| Bytes::from(format!("data: {c}\r\n\r\n")))
                    .collect();
                Reply::sse(pieces, delay)
            } else {
                Reply::json(200, &Value::Array(chunks), JSON)
            }
        }
    }
}
