//! A fake Gemini API for tests: an axum server on
//! `127.0.0.1:0` that serves `generateContent` and `streamGenerateContent` (`alt=sse`,
//! and the JSON-array form without it) with the real wire shapes, answering from a
//! script of [`FakeTurn`]s, and rejecting what the real API rejects.
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
//! - invalid function names (`switchboard_model::is_valid_function_name`: at most 64 characters), duplicate names,
//!   unknown fields in a declaration, a declaration with both `parameters` and
//!   `parametersJsonSchema`, a `parametersJsonSchema` that fails
//!   [`validate_for_gemini`](switchboard_model::validate_for_gemini), a `parameters` schema
//!   outside the OpenAPI subset, more than 512 declarations, function declarations on a
//!   Gemma model or next to `googleSearch`;
//! - `allowedFunctionNames` unless the mode is `ANY` or `VALIDATED`, an unknown mode;
//! - function call turns that do not follow a user turn, function response turns that do
//!   not follow a function call turn or whose count or names do not match its calls;
//! - on `gemini-3*` models, a model turn of the current exchange whose first function
//!   call lost its `thoughtSignature` ("Function call is missing a thought_signature");
//!   on every model, a signature this server did not issue ("Corrupted thought
//!   signature.");
//! - `functionResponse.parts` holding audio or video, or on a model before Gemini 3.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use switchboard_model::{
    GeminiClient, GeminiOptions, MAX_FUNCTION_NAME_LEN, ModelError, is_valid_function_name,
    validate_for_gemini,
};

/// The API key the fake accepts unless [`FakeOptions::api_key`] says otherwise.
pub const FAKE_API_KEY: &str = "fake-gemini-key";

/// The most function declarations one request may carry.
pub const MAX_DECLARATIONS: usize = 512;

/// Decides a turn from the request body.
pub type DynamicTurn = Box<dyn Fn(&Value) -> FakeTurn + Send + Sync>;

/// One scripted answer; each accepted request consumes the next one.
pub enum FakeTurn {
    /// Answer with this text (streamed in several increments).
    Text(String),
    /// Call these functions (name, args) in parallel, in one model turn.
    Calls(Vec<(String, Value)>),
    /// Answer with this HTTP status and an error body holding `message`.
    Error { status: u16, message: String },
    /// 429 `RESOURCE_EXHAUSTED`, with a `Retry-After` header (seconds) and/or a
    /// `RetryInfo.retryDelay` (such as `"0.2s"`) in the body when given.
    RateLimited {
        retry_after: Option<String>,
        retry_delay: Option<String>,
    },
    /// Answer with exactly this response JSON (one chunk when streamed).
    Raw(Value),
    /// Streamed requests only: send these strings as the SSE body, each its own write
    /// (a few milliseconds apart), so event boundaries can fall anywhere.
    RawSse(Vec<String>),
    /// Decide from the request body (for example "if the last function response is an
    /// error, call again with other arguments").
    Dynamic(DynamicTurn),
}

impl fmt::Debug for FakeTurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Self::Calls(c) => f.debug_tuple("Calls").field(c).finish(),
            Self::Error { status, message } => f
                .debug_struct("Error")
                .field("status", status)
                .field("message", message)
                .finish(),
            Self::RateLimited {
                retry_after,
                retry_delay,
            } => f
                .debug_struct("RateLimited")
                .field("retry_after", retry_after)
                .field("retry_delay", retry_delay)
                .finish(),
            Self::Raw(v) => f.debug_tuple("Raw").field(v).finish(),
            Self::RawSse(c) => f.debug_tuple("RawSse").field(c).finish(),
            Self::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

impl FakeTurn {
    /// [`FakeTurn::Text`].
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// [`FakeTurn::Calls`] with one call.
    pub fn call(name: impl Into<String>, args: Value) -> Self {
        Self::Calls(vec![(name.into(), args)])
    }

    /// [`FakeTurn::Calls`].
    pub fn calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        Self::Calls(calls.into_iter().map(|(n, a)| (n.into(), a)).collect())
    }

    /// [`FakeTurn::Error`].
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self::Error {
            status,
            message: message.into(),
        }
    }

    /// [`FakeTurn::Dynamic`].
    pub fn dynamic(f: impl Fn(&Value) -> FakeTurn + Send + Sync + 'static) -> Self {
        Self::Dynamic(Box::new(f))
    }
}

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

/// One request the fake received (accepted or not).
#[derive(Debug, Clone)]
pub struct FakeRequest {
    /// The model id from the path.
    pub model: String,
    /// `generateContent` or `streamGenerateContent`.
    pub method: String,
    /// Whether `alt=sse` was asked for.
    pub sse: bool,
    /// The key sent, if any.
    pub api_key: Option<String>,
    /// The body (a JSON string holding the raw text when it was not JSON).
    pub body: Value,
    /// The status answered.
    pub status: u16,
}

struct FakeState {
    options: FakeOptions,
    script: VecDeque<FakeTurn>,
    requests: Vec<FakeRequest>,
    signatures: HashSet<String>,
    served: usize,
}

type Shared = Arc<Mutex<FakeState>>;

fn lock(state: &Shared) -> MutexGuard<'_, FakeState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running fake Gemini API; stops when dropped.
pub struct FakeGemini {
    /// The base URL to give the client (no version path), e.g. `http://127.0.0.1:4321`.
    pub base_url: String,
    state: Shared,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl fmt::Debug for FakeGemini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeGemini")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl FakeGemini {
    /// Starts the fake with the default options.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (test fixture).
    pub async fn start(script: Vec<FakeTurn>) -> FakeGemini {
        Self::start_with(FakeOptions::default(), script).await
    }

    /// Starts the fake with these options.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (test fixture).
    pub async fn start_with(options: FakeOptions, script: Vec<FakeTurn>) -> FakeGemini {
        match Self::try_start(options, script).await {
            Ok(fake) => fake,
            Err(e) => panic!("FakeGemini: cannot listen on 127.0.0.1: {e}"),
        }
    }

    /// Starts the fake, reporting a bind failure.
    pub async fn try_start(
        options: FakeOptions,
        script: Vec<FakeTurn>,
    ) -> std::io::Result<FakeGemini> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state: Shared = Arc::new(Mutex::new(FakeState {
            options,
            script: script.into(),
            requests: Vec::new(),
            signatures: HashSet::new(),
            served: 0,
        }));
        let app = Router::new()
            .route("/v1beta/models/{action}", post(handle))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = served.await {
                tracing::debug!(%e, "FakeGemini stopped");
            }
        });
        Ok(FakeGemini {
            base_url: format!("http://{addr}"),
            state,
            shutdown: Some(tx),
            task,
        })
    }

    /// The key the fake accepts.
    pub fn api_key(&self) -> String {
        lock(&self.state).options.api_key.clone()
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

    /// The bodies of every request received so far, in order (rejected ones too).
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state)
            .requests
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// Every request received so far, with model, method, key and status.
    pub fn recorded(&self) -> Vec<FakeRequest> {
        lock(&self.state).requests.clone()
    }

    /// Adds a turn at the end of the script.
    pub fn push(&self, turn: FakeTurn) {
        lock(&self.state).script.push_back(turn);
    }

    /// A thought signature the fake will accept when it comes back in a model turn,
    /// for hand-written [`FakeTurn::Raw`] answers.
    pub fn issue_signature(&self, label: &str) -> String {
        mint_signature(&self.state, label)
    }

    /// How many scripted turns are left.
    pub fn remaining(&self) -> usize {
        lock(&self.state).script.len()
    }
}

impl Drop for FakeGemini {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

async fn not_found() -> Response {
    error_response(404, "NOT_FOUND", "Method not found.", None)
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

fn error_response(
    status: u16,
    status_text: &str,
    message: &str,
    details: Option<Value>,
) -> Response {
    json_response(status, &error_body(status, status_text, message, details))
}

fn json_response(status: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    response
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
    fn into_response(self) -> Response {
        error_response(self.status, self.status_text, &self.message, self.details)
    }
}

async fn handle(
    State(state): State<Shared>,
    Path(action): Path<String>,
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
    let parsed: Result<Value, String> = serde_json::from_slice(&body).map_err(|e| format!("{e}"));
    let recorded_body = match &parsed {
        Ok(v) => v.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
    };

    // Everything up to picking the turn happens under the lock, without awaiting.
    let outcome = {
        let mut st = lock(&state);
        let index = st.requests.len();
        st.requests.push(FakeRequest {
            model: model.clone(),
            method: method.clone(),
            sse,
            api_key: api_key.clone(),
            body: recorded_body,
            status: 0,
        });
        let result = admit(&mut st, &model, &method, api_key.as_deref(), parsed);
        match result {
            Err(rejection) => {
                if let Some(r) = st.requests.get_mut(index) {
                    r.status = rejection.status;
                }
                return rejection.into_response();
            }
            Ok(request) => match st.script.pop_front() {
                None => {
                    let served = st.served;
                    drop(st);
                    let rejection = Rejection {
                        status: 400,
                        status_text: "FAILED_PRECONDITION",
                        message: format!(
                            "FakeGemini: the script has no turn left (request #{}, {served} served)",
                            index + 1
                        ),
                        details: None,
                    };
                    set_status(&state, index, 400);
                    return rejection.into_response();
                }
                Some(turn) => {
                    st.served += 1;
                    (index, request, turn)
                }
            },
        }
    };
    let (index, request, turn) = outcome;
    let turn = resolve(turn, &request);
    let stream = method == "streamGenerateContent";
    let (status, response) = render(&state, index, &model, turn, stream, sse);
    set_status(&state, index, status);
    response
}

fn set_status(state: &Shared, index: usize, status: u16) {
    if let Some(r) = lock(state).requests.get_mut(index) {
        r.status = status;
    }
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
    st: &mut FakeState,
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
        Some(key) if key != st.options.api_key => {
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
    validate(model, &body, &st.signatures).map_err(invalid)?;
    Ok(body)
}

fn resolve(turn: FakeTurn, request: &Value) -> FakeTurn {
    let mut turn = turn;
    for _ in 0..16 {
        match turn {
            FakeTurn::Dynamic(f) => turn = f(request),
            other => return other,
        }
    }
    FakeTurn::Error {
        status: 500,
        message: "FakeGemini: Dynamic turns nested too deeply".into(),
    }
}

fn is_gemini3(model: &str) -> bool {
    model.starts_with("gemini-3")
}

fn parts_of(content: &Value) -> &[Value] {
    content
        .get("parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
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

const DECLARATION_FIELDS: [&str; 7] = [
    "name",
    "description",
    "parameters",
    "parametersJsonSchema",
    "response",
    "responseJsonSchema",
    "behavior",
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
            .find(|k| !DECLARATION_FIELDS.contains(&k.as_str()))
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

/// Mints a signature and remembers it.
fn mint_signature(state: &Shared, label: &str) -> String {
    let mut st = lock(state);
    let n = st.signatures.len() + 1;
    let sig = base64::engine::general_purpose::STANDARD
        .encode(format!("fake-thought-signature/{n}/{label}"));
    st.signatures.insert(sig.clone());
    sig
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

/// Splits text into up to three increments at char boundaries (words when possible).
fn split_text(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 3 {
        return vec![text.to_owned()];
    }
    let mut cuts = vec![chars.len() / 3, 2 * chars.len() / 3];
    for cut in &mut cuts {
        if let Some(space) = (*cut..chars.len()).find(|&k| chars[k] == ' ') {
            *cut = space;
        }
    }
    cuts.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts {
        if cut > start && cut < chars.len() {
            out.push(chars[start..cut].iter().collect());
            start = cut;
        }
    }
    out.push(chars[start..].iter().collect());
    out
}

/// The chunks of a scripted answer (one chunk when not streamed).
fn answer_chunks(
    state: &Shared,
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
                            json!(mint_signature(state, "text")),
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
                    let args = if args.is_object() {
                        args.clone()
                    } else {
                        json!({})
                    };
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
                            json!(mint_signature(state, name)),
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
    state: &Shared,
    index: usize,
    model: &str,
    turn: FakeTurn,
    stream: bool,
    sse: bool,
) -> (u16, Response) {
    let delay = lock(state).options.chunk_delay;
    match &turn {
        FakeTurn::Error { status, message } => {
            let status = *status;
            (
                status,
                error_response(status, canonical(status), message, None),
            )
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
            let mut response = error_response(
                429,
                "RESOURCE_EXHAUSTED",
                "Resource has been exhausted (e.g. check quota).",
                details,
            );
            if let Some(secs) = retry_after
                && let Ok(value) = HeaderValue::from_str(secs)
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            (429, response)
        }
        FakeTurn::RawSse(pieces) => {
            if !(stream && sse) {
                let r =
                    invalid("FakeGemini: a RawSse turn answers only streamGenerateContent?alt=sse");
                return (400, r.into_response());
            }
            let pieces: Vec<Bytes> = pieces.iter().map(|p| Bytes::from(p.clone())).collect();
            (200, sse_response(pieces, delay))
        }
        FakeTurn::Dynamic(_) => {
            let r = Rejection {
                status: 500,
                status_text: "INTERNAL",
                message: "FakeGemini: unresolved Dynamic turn".into(),
                details: None,
            };
            (500, r.into_response())
        }
        FakeTurn::Text(_) | FakeTurn::Calls(_) | FakeTurn::Raw(_) => {
            let chunks = answer_chunks(state, index, model, &turn, stream);
            if !stream {
                let body = chunks.into_iter().next().unwrap_or_else(|| json!({}));
                return (200, json_response(200, &body));
            }
            if sse {
                let pieces = chunks
                    .iter()
                    .map(|c| Bytes::from(format!("data: {c}\r\n\r\n")))
                    .collect();
                (200, sse_response(pieces, delay))
            } else {
                (200, json_response(200, &Value::Array(chunks)))
            }
        }
    }
}

fn sse_response(pieces: Vec<Bytes>, delay: Duration) -> Response {
    let stream = futures::stream::unfold(
        (pieces.into_iter(), true),
        move |(mut it, first)| async move {
            let piece = it.next()?;
            if !first {
                tokio::time::sleep(delay).await;
            }
            Some((Ok::<Bytes, Infallible>(piece), (it, false)))
        },
    );
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}
