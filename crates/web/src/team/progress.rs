//! Progress of a team chat's tool call: the server's `notifications/progress` for the
//! call become `tool-progress` events on the turn's event stream (the page of the
//! instance running the turn shows them while the call runs). Progress is not stored:
//! it means nothing once the call has ended, and the result is saved as it is now.
//!
//! Must not: hold more than one event per notification (a long message is cut to
//! [`MAX_MESSAGE_CHARS`]), or outlive the call (the task ends when the call drops its
//! sender).

use serde_json::{Value, json};
use switchboard_mcp::Progress;
use tokio::sync::mpsc;

/// The longest progress message passed on, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// A progress sink for one call (its `CallOptions::progress`): each notification is
/// sent to `events` as `{type: "tool-progress", id, server, tool, progress, total?,
/// message?}`.
pub(crate) fn forward(
    events: mpsc::UnboundedSender<Value>,
    id: &str,
    server: &str,
    tool: &str,
) -> mpsc::UnboundedSender<Progress> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Progress>();
    let (id, server, tool) = (id.to_owned(), server.to_owned(), tool.to_owned());
    tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let _ = events.send(event(&id, &server, &tool, &p));
        }
    });
    tx
}

fn event(id: &str, server: &str, tool: &str, p: &Progress) -> Value {
    let p = with_message_cut(p, MAX_MESSAGE_CHARS);
    json!({
        "type": "tool-progress", "id": id, "server": server, "tool": tool,
        "progress": p.progress, "total": p.total, "message": p.message,
    })
}

/// `p` with its message cut to `max_chars` characters.
pub(crate) fn with_message_cut(p: &Progress, max_chars: usize) -> Progress {
    Progress {
        message: p
            .message
            .as_deref()
            .map(|m| m.chars().take(max_chars).collect()),
        ..p.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_notification_becomes_one_bounded_event() {
        let (events, mut rx) = mpsc::unbounded_channel();
        let sink = forward(events, "call-1", "demo", "slow");
        sink.send(Progress {
            progress: 2.0,
            total: Some(5.0),
            message: Some("x".repeat(2 * MAX_MESSAGE_CHARS)),
        })
        .unwrap();
        drop(sink);
        let ev = rx.recv().await.unwrap();
        assert_eq!(
            (&ev["type"], &ev["id"], &ev["server"], &ev["tool"]),
            (
                &json!("tool-progress"),
                &json!("call-1"),
                &json!("demo"),
                &json!("slow")
            )
        );
        assert_eq!(
            (ev["progress"].as_f64(), ev["total"].as_f64()),
            (Some(2.0), Some(5.0))
        );
        assert_eq!(ev["message"].as_str().unwrap().len(), MAX_MESSAGE_CHARS);
        assert!(
            rx.recv().await.is_none(),
            "the task ends with the call's sender"
        );
    }
}
