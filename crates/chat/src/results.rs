//! MCP tool results → what goes back to Gemini, and what the person sees.
//!
//! | MCP content block | to the model | shown to the person |
//! |---|---|---|
//! | text | the text | the text |
//! | image | a note + `inlineData` (inside `functionResponse.parts` on `gemini-3*` models, a sibling part otherwise) | `[Image: mime]` |
//! | audio | a note + a sibling `inlineData` part (never inside the function response) | `[Audio: mime]` |
//! | resource with text | its text | its text |
//! | resource with blob | a note + `inlineData` (text-like blobs are decoded to text) | `[Embedded Resource: mime]` |
//! | resource_link | `Resource Link: {title or name} at {uri}` | `[Link to {title or name}: uri]` |
//!
//! - `structuredContent` is sent as JSON when it adds information beyond the text (it is
//!   left out when a text block already holds the same JSON); with no text at all it
//!   becomes the output itself. When the tool has an `outputSchema`, the structured
//!   content is checked against it and a violation is noted in the response.
//! - `isError: true` → `{"error": ...}` instead of `{"output": ...}`.
//! - A result longer than the limit is cut, with an explicit note saying how much was
//!   left out — never silently. Media types the model cannot take are described in
//!   text instead of being sent.
//! - What this module builds is still the server's raw text: the chat loop passes the
//!   response through [`crate::untrusted::Untrusted::mark_response`] before it reaches
//!   the model (text wrapped in the conversation's untrusted-data tags, JSON kept
//!   structured); `display` stays unwrapped for the person.
//! - The result is already in the model's wire types ([`FunctionResponsePart`] and
//!   [`Part`] with a [`Blob`]), so nothing is parsed back, and nothing can be lost,
//!   between this module and the request.

use base64::Engine as _;
use serde_json::{Map, Value};
use switchboard_mcp::model::CallToolResult;
use switchboard_model::{Blob, FunctionResponsePart, Part, supports_multimodal_function_response};

/// A sensible default for `limit_chars` (about 25k tokens).
pub const DEFAULT_LIMIT_CHARS: usize = 100_000;

/// A tool result mapped for Gemini and for the person.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapped {
    /// `functionResponse.response`: `{"output": ...}` or `{"error": ...}`, plus
    /// `structuredContent` and `notes` when there are any.
    pub response: Map<String, Value>,
    /// Parts inside `functionResponse.parts` (images and PDFs on `gemini-3*` models).
    pub fr_parts: Vec<FunctionResponsePart>,
    /// `inlineData` parts to send after the function response parts in the same turn.
    pub sibling_parts: Vec<Part>,
    /// A readable form for the person.
    pub display: String,
    /// Whether the tool reported an error (`isError: true`).
    pub is_error: bool,
    /// Whether anything was cut to fit the limit.
    pub truncated: bool,
}

/// Where an inline blob may go.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Media {
    /// Image or PDF: inside the function response on Gemini 3, sibling otherwise.
    Visual,
    /// Audio or video: always a sibling part.
    Sibling,
    /// Text-like: decode and send as text.
    Text,
    /// The model cannot take it: describe it.
    Unsupported,
}

fn classify(mime: &str) -> Media {
    let m = mime.trim().to_ascii_lowercase();
    let m = m.split(';').next().unwrap_or("").trim();
    match m {
        "image/png" | "image/jpeg" | "image/jpg" | "image/webp" | "image/heic" | "image/heif"
        | "application/pdf" => Media::Visual,
        "image/svg+xml"
        | "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/x-yaml"
        | "application/yaml"
        | "application/toml" => Media::Text,
        _ if m.starts_with("text/") => Media::Text,
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/mp3" | "audio/mpeg" | "audio/aiff"
        | "audio/x-aiff" | "audio/aac" | "audio/ogg" | "audio/flac" | "audio/x-flac"
        | "audio/webm" => Media::Sibling,
        _ if m.starts_with("video/") => Media::Sibling,
        _ => Media::Unsupported,
    }
}

/// A part inside `functionResponse.parts`.
fn response_part(mime: &str, data: &str) -> FunctionResponsePart {
    FunctionResponsePart {
        inline_data: Some(Blob::new(mime, data)),
        ..FunctionResponsePart::default()
    }
}

/// The text of a text-like blob; `None` when it is not base64 of UTF-8, which the
/// caller turns into a note for the model ("could not be decoded as text"), so the
/// reason itself is not needed.
fn decode_text(data: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Cuts `s` to at most `limit` characters; returns the cut text and the full length in
/// characters when it was cut.
fn cut(s: &str, limit: usize) -> (String, Option<usize>) {
    if limit == 0 {
        return (s.to_string(), None);
    }
    match s.char_indices().nth(limit) {
        None => (s.to_string(), None),
        Some((idx, _)) => (s[..idx].to_string(), Some(s.chars().count())),
    }
}

fn truncation_note(total: usize, limit: usize) -> String {
    format!(
        "[Truncated: the result has {total} characters; only the first {limit} are shown, {} left out.]",
        total - limit
    )
}

struct Builder {
    multimodal: bool,
    texts: Vec<String>,
    display: Vec<String>,
    fr_parts: Vec<FunctionResponsePart>,
    sibling_parts: Vec<Part>,
    notes: Vec<String>,
}

impl Builder {
    /// An image/audio/blob: a note for the model plus the inline data where it can go.
    fn media(&mut self, kind: &str, mime: &str, data: Option<&str>, label: &str) {
        let Some(data) = data.filter(|d| !d.is_empty()) else {
            self.texts.push(format!("[{kind} ({mime}) with no data]"));
            self.display.push(format!("[{label}: {mime}]"));
            return;
        };
        match classify(mime) {
            Media::Visual => {
                if self.multimodal && kind != "Audio" {
                    self.texts.push(format!(
                        "[{kind} ({mime}) attached to this function response]"
                    ));
                    self.fr_parts.push(response_part(mime, data));
                } else {
                    self.texts.push(format!(
                        "[{kind} ({mime}) attached as inline data after this function response]"
                    ));
                    self.sibling_parts.push(Part::inline_data(mime, data));
                }
                self.display.push(format!("[{label}: {mime}]"));
            }
            Media::Sibling => {
                self.texts.push(format!(
                    "[{kind} ({mime}) attached as inline data after this function response]"
                ));
                self.sibling_parts.push(Part::inline_data(mime, data));
                self.display.push(format!("[{label}: {mime}]"));
            }
            Media::Text => match decode_text(data) {
                Some(text) => {
                    self.texts.push(text.clone());
                    self.display.push(text);
                }
                None => {
                    self.texts
                        .push(format!("[{kind} ({mime}) could not be decoded as text]"));
                    self.display.push(format!("[{label}: {mime}]"));
                }
            },
            Media::Unsupported => {
                self.texts.push(format!(
                    "[{kind} ({mime}, {} bytes of base64) not sent: the model cannot take this media type]",
                    data.len()
                ));
                self.display.push(format!("[{label}: {mime}]"));
            }
        }
    }

    fn block(&mut self, b: &Value) {
        let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
        let s = |k: &str| b.get(k).and_then(Value::as_str);
        match ty {
            "text" => {
                let t = s("text").unwrap_or("").to_string();
                self.texts.push(t.clone());
                self.display.push(t);
            }
            "image" => {
                let mime = s("mimeType").unwrap_or("image/png").to_string();
                self.media("Image", &mime, s("data"), "Image");
            }
            "audio" => {
                let mime = s("mimeType").unwrap_or("audio/wav").to_string();
                // Audio never goes inside the function response.
                match s("data").filter(|d| !d.is_empty()) {
                    Some(data) if classify(&mime) != Media::Unsupported => {
                        self.texts.push(format!(
                            "[Audio ({mime}) attached as inline data after this function response]"
                        ));
                        self.sibling_parts.push(Part::inline_data(&mime, data));
                        self.display.push(format!("[Audio: {mime}]"));
                    }
                    _ => self.media("Audio", &mime, s("data"), "Audio"),
                }
            }
            "resource" => {
                let r = b.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
                let mime = r
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream")
                    .to_string();
                if let Some(text) = r.get("text").and_then(Value::as_str) {
                    self.texts.push(text.to_string());
                    self.display.push(text.to_string());
                } else {
                    let kind = format!("Embedded resource {uri}");
                    self.media(
                        &kind,
                        &mime,
                        r.get("blob").and_then(Value::as_str),
                        "Embedded Resource",
                    );
                }
            }
            "resource_link" => {
                let uri = s("uri").unwrap_or("");
                let label = s("title")
                    .filter(|t| !t.is_empty())
                    .or(s("name"))
                    .unwrap_or(uri);
                self.texts.push(format!("Resource Link: {label} at {uri}"));
                self.display.push(format!("[Link to {label}: {uri}]"));
            }
            other => {
                let raw = b.to_string();
                let (raw, _) = cut(&raw, 2_000);
                let what = if other.is_empty() { "untyped" } else { other };
                self.texts
                    .push(format!("[Content block of type {what}: {raw}]"));
                self.display.push(format!("[{what} content]"));
            }
        }
    }
}

/// Maps an MCP `CallToolResult` (as JSON) for a Gemini `functionResponse`.
///
/// `model` decides where images go (see [`supports_multimodal_function_response`]);
/// `output_schema` is the tool's `outputSchema`, if any; `limit_chars` caps the text
/// sent to the model and shown to the person (`0` = no limit).
pub fn map_result(
    result: &Value,
    model: &str,
    output_schema: Option<&Value>,
    limit_chars: usize,
) -> Mapped {
    let mut b = Builder {
        multimodal: supports_multimodal_function_response(model),
        texts: Vec::new(),
        display: Vec::new(),
        fr_parts: Vec::new(),
        sibling_parts: Vec::new(),
        notes: Vec::new(),
    };
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(content) = result.get("content").and_then(Value::as_array) {
        for block in content {
            b.block(block);
        }
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());

    // outputSchema
    if let Some(schema) = output_schema {
        match (structured, is_error) {
            (Some(sc), _) => {
                if let Err(problem) = check_output(schema, sc) {
                    b.notes.push(format!(
                        "structuredContent does not match the tool's outputSchema: {problem}"
                    ));
                }
            }
            (None, false) => b.notes.push(
                "The tool declares an outputSchema but returned no structuredContent.".into(),
            ),
            (None, true) => {}
        }
    }

    // Does the structured content add anything beyond the text?
    let redundant = structured.is_some_and(|sc| {
        b.texts
            .iter()
            .any(|t| serde_json::from_str::<Value>(t.trim()).is_ok_and(|v| &v == sc))
    });
    let structured_extra = structured.filter(|_| !redundant);

    let text = b.texts.join("\n");
    let mut truncated = false;
    let mut response = Map::new();
    let key = if is_error { "error" } else { "output" };

    if !b.texts.is_empty() || structured_extra.is_none() {
        let body = if b.texts.is_empty() {
            if is_error {
                "The tool reported an error without details.".to_string()
            } else {
                "The tool returned no content.".to_string()
            }
        } else {
            text
        };
        let (mut body, cut_from) = cut(&body, limit_chars);
        if let Some(total) = cut_from {
            truncated = true;
            body.push_str("\n\n");
            body.push_str(&truncation_note(total, limit_chars));
        }
        let used = body.chars().count();
        response.insert(key.into(), Value::String(body));
        if let Some(sc) = structured_extra {
            let serialized = sc.to_string();
            let len = serialized.chars().count();
            if limit_chars == 0 || used + len <= limit_chars {
                response.insert("structuredContent".into(), sc.clone());
            } else {
                truncated = true;
                b.notes.push(format!(
                    "structuredContent ({len} characters of JSON) left out: the result exceeded the {limit_chars}-character limit."
                ));
            }
        }
    } else if let Some(sc) = structured_extra {
        // No text: the structured content is the output.
        let serialized = sc.to_string();
        let (cut_json, cut_from) = cut(&serialized, limit_chars);
        match cut_from {
            None => {
                response.insert(key.into(), sc.clone());
            }
            Some(total) => {
                truncated = true;
                response.insert(
                    key.into(),
                    Value::String(format!(
                        "{cut_json}\n\n{}",
                        truncation_note(total, limit_chars)
                    )),
                );
            }
        }
        b.display.push(pretty(sc));
    }
    if !b.notes.is_empty() {
        response.insert(
            "notes".into(),
            Value::Array(b.notes.iter().cloned().map(Value::String).collect()),
        );
    }

    let display = b.display.join("\n");
    let (mut display, cut_from) = cut(&display, limit_chars);
    if let Some(total) = cut_from {
        truncated = true;
        display.push('\n');
        display.push_str(&truncation_note(total, limit_chars));
    }
    for n in &b.notes {
        display.push_str(&format!("\n[Note: {n}]"));
    }

    Mapped {
        response,
        fr_parts: b.fr_parts,
        sibling_parts: b.sibling_parts,
        display,
        is_error,
        truncated,
    }
}

/// [`map_result`] for rmcp's `CallToolResult`.
pub fn map_call_result(
    result: &CallToolResult,
    model: &str,
    output_schema: Option<&Value>,
    limit_chars: usize,
) -> Mapped {
    match serde_json::to_value(result) {
        Ok(v) => map_result(&v, model, output_schema, limit_chars),
        Err(e) => Mapped::unreadable(&e),
    }
}

impl Mapped {
    /// The mapping of a result that could not be turned into JSON: an error the
    /// model and the person both see.
    pub fn unreadable(e: &serde_json::Error) -> Self {
        Self {
            response: Map::from_iter([(
                "error".to_string(),
                Value::String(format!("The tool result could not be read: {e}")),
            )]),
            display: format!("[unreadable tool result: {e}]"),
            is_error: true,
            ..Self::default()
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn check_output(schema: &Value, value: &Value) -> Result<(), String> {
    let validator = match jsonschema::options().build(schema) {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!(error = %e, "tool outputSchema does not compile; structuredContent not checked");
            return Ok(());
        }
    };
    let problems: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            let msg: String = e.to_string().chars().take(300).collect();
            if path.is_empty() {
                msg
            } else {
                format!("at {path}: {msg}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
#[path = "results_tests.rs"]
mod tests;
