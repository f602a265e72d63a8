//! Failures in words: rmcp's errors without its Rust type names, an error chain on one
//! line, the message of a failed handshake, and the diagnosis of a connection that
//! failed before any answer (blocked by the guard, or unreachable with the I/O cause),
//! which also decides that another transport would not help. A refused destination is
//! [`ConnectError::Blocked`](crate::ConnectError) on every transport and fallback, with
//! the policy and the fix; an unreachable one is worded by the guard's own verdict and
//! one guarded `HEAD` of at most 2 s, never by a connection beside the guard.

use std::time::Duration;

use rmcp::service::ClientInitializeError;

use super::ConnectOptions;
use super::http_setup::guard;
use crate::error::ConnectError;

pub(super) fn init_error_message(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::ConnectionClosed(_) => {
            "the server closed the connection during initialize".into()
        }
        other => error_chain(other),
    }
}

/// An error and its sources on one line, without rmcp's type names.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = strip_type_names(&e.to_string());
    let mut source = e.source();
    while let Some(s) = source {
        let s_msg = s.to_string();
        if !msg.contains(&s_msg) {
            msg.push_str(": ");
            msg.push_str(&s_msg);
        }
        source = s.source();
    }
    msg
}

/// Removes rmcp's Rust type names (`Transport [rmcp::…<…>] error:`) from a message.
pub(super) fn strip_type_names(msg: &str) -> String {
    let mut out = msg.to_string();
    while let Some(start) = out.find(" [rmcp::") {
        let rest = &out[start..];
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(e) => out.replace_range(start..start + e + 1, ""),
            None => break,
        }
    }
    out
}

/// The innermost I/O error text of a connection failure ("Connection refused").
fn io_detail(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut found = None;
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            found = Some(io.to_string());
        }
        source = s.source();
    }
    found
}

/// The error for a connection that failed before any answer.
///
/// `Blocked` when the guard refused the destination: found in the error chain, or,
/// when the transport did not keep the cause, by the guard's own verdict on the URL
/// (a DNS lookup through its resolver, no connection). Otherwise `Unreachable` with the
/// I/O error; when the transport dropped that too, one bodiless `HEAD` through the same
/// guard recovers it ("Connection refused"). No socket is opened outside the guard.
pub(super) async fn connect_failure(
    opts: &ConnectOptions,
    url: &str,
    e: &(dyn std::error::Error + Send + Sync + 'static),
) -> ConnectError {
    let blocked = |b: &switchboard_net::Blocked| ConnectError::Blocked {
        url: url.to_string(),
        reason: b.to_string(),
    };
    if let Some(b) = switchboard_net::find_blocked(e) {
        return blocked(b);
    }
    let Ok(g) = guard(opts) else {
        return unreachable(url, error_chain(e));
    };
    match g.check_destination(url).await {
        Err(b) if b.is_policy_verdict() => return blocked(&b),
        Err(b) => return unreachable(url, b.to_string()),
        Ok(_) => {}
    }
    if let Some(d) = io_detail(e) {
        return unreachable(url, d);
    }
    let retry = g
        .request(reqwest::Method::HEAD, url)
        .timeout(UNREACHABLE_PROBE_TIMEOUT);
    match g.send(retry).await {
        Err(net) => match net.blocked() {
            Some(b) if b.is_policy_verdict() => blocked(b),
            _ => unreachable(url, io_detail(&net).unwrap_or_else(|| error_chain(e))),
        },
        Ok(_) => unreachable(url, error_chain(e)),
    }
}

/// How long the guarded `HEAD` that words an unreachable error may take.
const UNREACHABLE_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

fn unreachable(url: &str, detail: String) -> ConnectError {
    ConnectError::Unreachable {
        url: url.to_string(),
        detail,
    }
}

/// A connection-level failure (refused, DNS): another transport will not help.
pub(super) fn is_connect_failure(e: &ClientInitializeError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(re) = s.downcast_ref::<reqwest::Error>()
            && re.is_connect()
        {
            return true;
        }
        source = s.source();
    }
    let text = init_error_message(e).to_ascii_lowercase();
    text.contains("connection refused")
        || text.contains("error trying to connect")
        || text.contains("error sending request")
}
