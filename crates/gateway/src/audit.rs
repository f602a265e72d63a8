//! `--audit FILE`: one JSON line per downstream call (`tools/call`, `resources/read`,
//! `prompts/get`): time, client, server, what was called, duration, outcome and sizes;
//! arguments and results only when payloads were asked for.
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
    /// The tool or prompt name (upstream), or the resource URI (upstream).
    pub tool: String,
    /// The name the client used.
    pub requested: String,
    pub duration_ms: u64,
    /// `ok`, `tool_error` (a result with `isError`), `error`, `cancelled`, or
    /// `input_required` (a leg that asked a client on 2026-07-28 for input; its retry is
    /// a line of its own).
    pub outcome: &'static str,
    /// The error message, for `error`.
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
