//! Request and response types of the Gemini REST API (`generateContent`,
//! `streamGenerateContent`), kept close to the wire: camelCase names, optional fields
//! left out when unset, and every object that the model turn is made of ([`Content`],
//! [`Part`], [`FunctionCall`], [`FunctionResponse`], [`Blob`]) keeps the fields it does
//! not know in `extra`, so a model turn (with its `thoughtSignature`s) can be sent back
//! exactly as it came.
//!
//! [`StreamAccumulator`] folds the chunks of a streamed answer into one response whose
//! content is the model turn to append to the history.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Unknown fields of a wire object, kept so that they are sent back unchanged.
pub type Extra = Map<String, Value>;

/// One turn of the conversation (`role` is `user` or `model`), or the system
/// instruction (no role).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default)]
    pub parts: Vec<Part>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Content {
    /// A turn with the given role and parts.
    pub fn new(role: impl Into<String>, parts: Vec<Part>) -> Self {
        Self {
            role: Some(role.into()),
            parts,
            extra: Extra::new(),
        }
    }

    /// A `user` turn with the given parts.
    pub fn user(parts: Vec<Part>) -> Self {
        Self::new("user", parts)
    }

    /// A `user` turn holding one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(vec![Part::text(text)])
    }

    /// A `model` turn with the given parts.
    pub fn model(parts: Vec<Part>) -> Self {
        Self::new("model", parts)
    }

    /// A system instruction (no role) holding one text part.
    pub fn system(text: impl Into<String>) -> Self {
        Self {
            role: None,
            parts: vec![Part::text(text)],
            extra: Extra::new(),
        }
    }

    /// The text of the parts that are not thoughts, concatenated.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter(|p| p.thought != Some(true))
            .filter_map(|p| p.text.as_deref())
            .collect()
    }

    /// The function calls of this turn, in order.
    pub fn function_calls(&self) -> Vec<&FunctionCall> {
        self.parts
            .iter()
            .filter_map(|p| p.function_call.as_ref())
            .collect()
    }
}

/// One part of a turn. Exactly one data field (`text`, `inlineData`, `functionCall`,
/// `functionResponse`, or one kept in `extra` such as `fileData`) is normally set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse>,
    /// `true` when the part is a thought summary (not part of the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// Opaque signature of the model's reasoning; must be sent back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// An inline data part (`data` is base64).
    pub fn inline_data(mime_type: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            inline_data: Some(Blob::new(mime_type, data)),
            ..Self::default()
        }
    }

    /// A function call part (as the model sends it).
    pub fn function_call(call: FunctionCall) -> Self {
        Self {
            function_call: Some(call),
            ..Self::default()
        }
    }

    /// A function response part.
    pub fn function_response(response: FunctionResponse) -> Self {
        Self {
            function_response: Some(response),
            ..Self::default()
        }
    }
}

/// Inline bytes: `{"mimeType", "data"}` with `data` in base64.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    pub mime_type: String,
    pub data: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Blob {
    /// A blob of the given MIME type and base64 data.
    pub fn new(mime_type: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            mime_type: mime_type.into(),
            data: data.into(),
            extra: Extra::new(),
        }
    }
}

/// A call the model asks for: `{"id"?, "name", "args"?}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl FunctionCall {
    /// A call of `name` with `args` (and no id).
    pub fn new(name: impl Into<String>, args: Map<String, Value>) -> Self {
        Self {
            id: None,
            name: name.into(),
            args: Some(args),
            extra: Extra::new(),
        }
    }

    /// The arguments as a JSON object (`{}` when the model sent none).
    pub fn args_value(&self) -> Value {
        Value::Object(self.args.clone().unwrap_or_default())
    }
}

/// The answer to a [`FunctionCall`]: `{"id"?, "name", "response": {"output"|"error": …},
/// "parts"?}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub response: Map<String, Value>,
    /// Multimodal results (images, documents) inside the response; Gemini 3 models only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<FunctionResponsePart>>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl FunctionResponse {
    /// A successful result: `response: {"output": output}`.
    pub fn output(id: Option<String>, name: impl Into<String>, output: Value) -> Self {
        let mut response = Map::new();
        response.insert("output".into(), output);
        Self {
            id,
            name: name.into(),
            response,
            parts: None,
            extra: Extra::new(),
        }
    }

    /// A failed call: `response: {"error": error}`.
    pub fn error(id: Option<String>, name: impl Into<String>, error: Value) -> Self {
        let mut response = Map::new();
        response.insert("error".into(), error);
        Self {
            id,
            name: name.into(),
            response,
            parts: None,
            extra: Extra::new(),
        }
    }
}

/// A part inside `functionResponse.parts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponsePart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool offered to the model: function declarations, or a built-in tool such as
/// `googleSearch` (others kept in `extra`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_declarations: Option<Vec<FunctionDeclaration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub google_search: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Tool {
    /// A tool holding these function declarations.
    pub fn functions(declarations: Vec<FunctionDeclaration>) -> Self {
        Self {
            function_declarations: Some(declarations),
            ..Self::default()
        }
    }

    /// The built-in Google Search tool (`{"googleSearch": {}}`).
    pub fn google_search() -> Self {
        Self {
            google_search: Some(Value::Object(Map::new())),
            ..Self::default()
        }
    }
}

/// A function the model may call. Set `parametersJsonSchema` (plain JSON Schema) or
/// `parameters` (the OpenAPI 3.0 subset), never both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionDeclaration {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_json_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `toolConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_calling_config: Option<FunctionCallingConfig>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ToolConfig {
    /// `{"functionCallingConfig": {"mode": mode}}`.
    pub fn mode(mode: FunctionCallingMode) -> Self {
        Self {
            function_calling_config: Some(FunctionCallingConfig {
                mode: Some(mode),
                allowed_function_names: None,
            }),
            extra: Extra::new(),
        }
    }
}

/// `toolConfig.functionCallingConfig`. `allowedFunctionNames` only with `ANY` or
/// `VALIDATED`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCallingConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<FunctionCallingMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_function_names: Option<Vec<String>>,
}

/// How the model may call functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FunctionCallingMode {
    /// The model decides (the default).
    Auto,
    /// The model must call a function.
    Any,
    /// No function calls.
    None,
    /// Calls are checked against the schemas; the model may also answer in text.
    Validated,
    /// Unset, or a mode this crate does not know.
    #[serde(other)]
    ModeUnspecified,
}

/// `generationConfig`: the common fields, the rest in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_config: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The body of `generateContent` and `streamGenerateContent`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateRequest {
    pub contents: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_config: Option<GenerationConfig>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl GenerateRequest {
    /// A request with these contents and nothing else.
    pub fn new(contents: Vec<Content>) -> Self {
        Self {
            contents,
            ..Self::default()
        }
    }
}

/// A `GenerateContentResponse` (also each chunk of a stream).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateResponse {
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_feedback: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl GenerateResponse {
    /// The first candidate's content (the model turn), if any.
    pub fn content(&self) -> Option<&Content> {
        self.candidates.first().and_then(|c| c.content.as_ref())
    }

    /// The answer text of the first candidate (thought parts left out).
    pub fn text(&self) -> String {
        self.content().map(Content::text).unwrap_or_default()
    }

    /// The function calls of the first candidate, in order.
    pub fn function_calls(&self) -> Vec<&FunctionCall> {
        self.content()
            .map(Content::function_calls)
            .unwrap_or_default()
    }

    /// The first candidate's `finishReason`, if given.
    pub fn finish_reason(&self) -> Option<&str> {
        self.candidates
            .first()
            .and_then(|c| c.finish_reason.as_deref())
    }

    /// Why the prompt was blocked (`promptFeedback.blockReason`), if it was.
    pub fn block_reason(&self) -> Option<&str> {
        self.prompt_feedback
            .as_ref()
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
    }
}

/// One candidate answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_message: Option<String>,
    /// Everything else (`index`, `safetyRatings`, `avgLogprobs`, `groundingMetadata`…),
    /// in the order it came.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Token counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thoughts_token_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_token_count: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Folds the chunks of a streamed answer into one response.
///
/// Text increments are joined into one part while they belong together (same `thought`
/// flag, no signature on the part before, nothing unknown on either); every other part
/// (function calls, inline data, parts with unknown fields) is kept as it came, so the
/// resulting model turn can be sent back with its thought signatures in place. The last
/// chunk's `finishReason`, `usageMetadata`, `modelVersion` and `responseId` win.
#[derive(Debug, Clone, Default)]
pub struct StreamAccumulator {
    parts: Vec<Part>,
    role: Option<String>,
    content_extra: Extra,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    candidate_extra: Extra,
    last: GenerateResponse,
    chunks: usize,
}

impl StreamAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many chunks were pushed.
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// Adds one chunk.
    pub fn push(&mut self, chunk: &GenerateResponse) {
        self.chunks += 1;
        if let Some(candidate) = chunk.candidates.first() {
            if let Some(content) = &candidate.content {
                if content.role.is_some() {
                    self.role.clone_from(&content.role);
                }
                for (k, v) in &content.extra {
                    self.content_extra.insert(k.clone(), v.clone());
                }
                for part in &content.parts {
                    self.push_part(part);
                }
            }
            if candidate.finish_reason.is_some() {
                self.finish_reason.clone_from(&candidate.finish_reason);
            }
            if candidate.finish_message.is_some() {
                self.finish_message.clone_from(&candidate.finish_message);
            }
            for (k, v) in &candidate.extra {
                self.candidate_extra.insert(k.clone(), v.clone());
            }
        }
        if chunk.prompt_feedback.is_some() {
            self.last.prompt_feedback.clone_from(&chunk.prompt_feedback);
        }
        if chunk.usage_metadata.is_some() {
            self.last.usage_metadata.clone_from(&chunk.usage_metadata);
        }
        if chunk.model_version.is_some() {
            self.last.model_version.clone_from(&chunk.model_version);
        }
        if chunk.response_id.is_some() {
            self.last.response_id.clone_from(&chunk.response_id);
        }
    }

    fn push_part(&mut self, part: &Part) {
        let mergeable = |p: &Part| {
            p.text.is_some()
                && p.inline_data.is_none()
                && p.function_call.is_none()
                && p.function_response.is_none()
                && p.extra.is_empty()
        };
        if mergeable(part)
            && let Some(prev) = self.parts.last_mut()
            && mergeable(prev)
            && prev.thought_signature.is_none()
            && prev.thought == part.thought
        {
            if let (Some(text), Some(more)) = (prev.text.as_mut(), part.text.as_deref()) {
                text.push_str(more);
            }
            prev.thought_signature.clone_from(&part.thought_signature);
            return;
        }
        self.parts.push(part.clone());
    }

    /// The answer so far as one response (one candidate holding the model turn).
    pub fn response(&self) -> GenerateResponse {
        let mut out = self.last.clone();
        out.candidates = vec![Candidate {
            content: Some(Content {
                role: Some(self.role.clone().unwrap_or_else(|| "model".into())),
                parts: self.parts.clone(),
                extra: self.content_extra.clone(),
            }),
            finish_reason: self.finish_reason.clone(),
            finish_message: self.finish_message.clone(),
            extra: self.candidate_extra.clone(),
        }];
        out
    }

    /// The model turn to append to the history.
    pub fn content(&self) -> Content {
        Content {
            role: Some(self.role.clone().unwrap_or_else(|| "model".into())),
            parts: self.parts.clone(),
            extra: self.content_extra.clone(),
        }
    }
}
