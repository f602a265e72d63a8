//! `--audit FILE`: one JSON line per downstream call (`tools/call`, `resources/read`,
//! `prompts/get`): time, client, server, what was called, duration, outcome and sizes.
//!
//! Without `--audit-payloads` a line holds names and classes only, never text an
//! upstream chose beyond its names: `error_class` (the JSON-RPC code's name, e.g.
//! `internal_error (-32603)`) but no `error` message (an upstream's error text may quote
//! paths, URLs or what it was given), and for `resources/read` the URI's scheme only
//! (`a:…`) in `tool` and `requested` ([`withheld_uri`]). With payloads, the arguments,
//! the result, the error message and the whole URIs are written too.
//!
//! Lines are appended under a sync mutex (never held across an `.await`); a write
//! failure is logged and never fails the call.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

/// The audit file.
#[derive(Debug)]
pub struct Audit {
    file: Mutex<File>,
    payloads: bool,
}

/// One audited call.
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// `clientInfo.name` from the downstream `initialize`.
    pub client: Option<String>,
    /// `tools/call`, `resources/read` or `prompts/get`.
    pub method: &'static str,
    /// The upstream server (absent when the name did not resolve).
    pub server: Option<String>,
    /// The tool or prompt name (upstream), or the resource URI (upstream; its scheme
    /// only without payloads).
    pub tool: String,
    /// The name the client used.
    pub requested: String,
    pub duration_ms: u64,
    /// `ok`, `tool_error` (a result with `isError`), `error`, `cancelled`, or
    /// `input_required` (a leg that asked a client on 2026-07-28 for input; its retry is
    /// a line of its own).
    pub outcome: &'static str,
    /// The error's class ([`error_class`]), for `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// The error message, for `error` (only with payloads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes of the arguments as JSON.
    pub request_bytes: usize,
    /// Bytes of the result as JSON.
    pub response_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

impl Audit {
    /// Opens (appends to, creates 0600) the audit file.
    pub fn open(path: &Path, payloads: bool) -> std::io::Result<Self> {
        let mut opts = OpenOptions::new();
        opts.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        }
        let file = opts.open(path)?;
        Ok(Self {
            file: Mutex::new(file),
            payloads,
        })
    }

    /// Whether arguments and results are written.
    pub fn payloads(&self) -> bool {
        self.payloads
    }

    /// Appends one line.
    pub fn record(&self, mut entry: AuditEntry) {
        if !self.payloads {
            entry.arguments = None;
            entry.result = None;
            entry.error = None;
            if entry.method == "resources/read" {
                entry.tool = withheld_uri(&entry.tool);
                entry.requested = withheld_uri(&entry.requested);
            }
        }
        let Ok(mut line) = serde_json::to_vec(&entry) else {
            return;
        };
        line.push(b'\n');
        let Ok(mut file) = self.file.lock() else {
            return;
        };
        if let Err(e) = file.write_all(&line) {
            tracing::warn!("could not write the audit line: {e}");
        }
    }
}

/// Now, as the audit's `time`.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A URI as the audit keeps it without payloads: its scheme only (`a:…`).
pub fn withheld_uri(uri: &str) -> String {
    match uri.split_once(':') {
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            format!("{scheme}:…")
        }
        _ => "…".to_string(),
    }
}

/// What the audit keeps of an error without payloads: the name of its JSON-RPC code.
pub fn error_class(code: i32) -> String {
    let name = match code {
        -32700 => "parse_error",
        -32600 => "invalid_request",
        -32601 => "method_not_found",
        -32602 => "invalid_params",
        -32603 => "internal_error",
        -32002 => "resource_not_found",
        -32042 => "url_elicitation_required",
        -32099..=-32000 => "server_error",
        _ => "error",
    };
    format!("{name} ({code})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_payloads_a_line_keeps_names_and_classes_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let entry = AuditEntry {
            time: now(),
            client: None,
            method: "resources/read",
            server: Some("a".into()),
            tool: "a://doc/MARKER".into(),
            requested: "a://doc/MARKER".into(),
            duration_ms: 1,
            outcome: "error",
            error_class: Some(error_class(-32603)),
            error: Some("upstream said MARKER".into()),
            request_bytes: 0,
            response_bytes: 0,
            arguments: None,
            result: None,
        };
        Audit::open(&path, false).unwrap().record(entry.clone());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("MARKER"), "{text}");
        assert!(text.contains(r#""tool":"a:…""#), "{text}");
        assert!(text.contains("internal_error (-32603)"), "{text}");
        std::fs::remove_file(&path).unwrap();
        Audit::open(&path, true).unwrap().record(entry);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("upstream said MARKER"), "{text}");
        assert!(text.contains(r#""tool":"a://doc/MARKER""#), "{text}");
    }
}
