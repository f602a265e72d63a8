//! Errors of one connection: failing to connect, and failing requests.
//!
//! Every message names what went wrong and, where there is one, the next step.
//!
//! An HTTP 401 is a type, not a text: a request the server answered with 401 is
//! [`RequestError::Unauthorized`] with the server's `WWW-Authenticate` challenge (found by
//! type along the transport error's source chain), and `is_unauthorized()` on
//! [`RequestError`] and [`ConnectError`] tells it, so no caller matches error text.

use std::time::Duration;

/// Why a server could not be connected.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "command `{command}` was not found: check that it is installed and on PATH, or use an absolute path"
    )]
    CommandNotFound { command: String },
    #[error("could not start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("server exited during initialize ({status}){}", stderr_suffix(.stderr))]
    ExitedDuringInit { status: String, stderr: Vec<String> },
    #[error("server did not finish start-up within {} ms (startupTimeout){}", .after.as_millis(), stderr_suffix(.stderr))]
    StartupTimeout {
        after: Duration,
        stderr: Vec<String>,
    },
    #[error(
        "the server requires authorization (HTTP 401): run `switchboard mcp login {server}`, or set an `Authorization` header"
    )]
    AuthRequired {
        server: String,
        www_authenticate: Option<String>,
    },
    /// The token source could not give a token (a saved login that can no longer
    /// be refreshed, an OAuth error); the reason says what to do.
    #[error("{reason}")]
    AuthFailed { server: String, reason: String },
    #[error("{reason}")]
    Blocked { url: String, reason: String },
    #[error("cannot reach {url}: {detail} (is the server running, and is the URL right?)")]
    Unreachable { url: String, detail: String },
    #[error("invalid header `{name}`: {reason}")]
    BadHeader { name: String, reason: String },
    #[error("invalid URL `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("initialize failed: {message}{}", stderr_suffix(.stderr))]
    Initialize {
        message: String,
        stderr: Vec<String>,
    },
    #[error("could not connect over Streamable HTTP ({http}) nor legacy SSE ({sse})")]
    AutoFailed { http: String, sse: String },
}

fn stderr_suffix(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = lines.iter().map(|l| format!("  | {l}")).collect();
        format!("; server stderr:\n{}", quoted.join("\n"))
    }
}

impl ConnectError {
    /// True when the server answered HTTP 401 while connecting (no credentials, or
    /// refused ones); [`ConnectError::is_auth`] also covers a token source that failed.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, ConnectError::AuthRequired { .. })
    }

    /// True when the failure is about authorization (log in, or fix the credentials).
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            ConnectError::AuthRequired { .. } | ConnectError::AuthFailed { .. }
        )
    }
}

/// Why one request to a connected server failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RequestError {
    #[error(
        "`{method}` timed out after {} ms (the server's `timeout` setting, restarted by each \
         progress notification up to 10 times over) and was cancelled on the server",
        .after.as_millis()
    )]
    Timeout { method: String, after: Duration },
    #[error("the server connection is closed{}", .0.as_deref().map(|s| format!(": {s}")).unwrap_or_default())]
    Closed(Option<String>),
    #[error("the server answered `{method}` with error {code}: {message}")]
    Server {
        method: String,
        code: i32,
        message: String,
    },
    #[error("`{method}` was cancelled")]
    Cancelled { method: String },
    #[error("the server gave an unexpected answer to `{method}`")]
    Unexpected { method: String },
    #[error("`{method}` failed: {message}")]
    Transport { method: String, message: String },
    #[error("`{method}` pagination stopped: {reason}")]
    Pagination { method: String, reason: String },
    /// The server answered the request with HTTP 401: the credentials sent (an OAuth
    /// token, an `Authorization` header) were refused or missing.
    #[error(
        "the server answered `{method}` with HTTP 401 (authorization required): sign in to it again, or fix its `Authorization` header"
    )]
    Unauthorized {
        method: String,
        /// The server's `WWW-Authenticate` challenge, as sent.
        www_authenticate: Option<String>,
    },
}

impl RequestError {
    /// True when the server answered HTTP 401 to this request.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, RequestError::Unauthorized { .. })
    }
}
