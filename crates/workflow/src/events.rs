//! What a run reports while it goes (for a live step log) and what it leaves behind:
//! steps, MCP App UIs, the failure. Also the client hooks of a run: elicitation is
//! answered without a person (accept when every field has a default, else decline)
//! and reported.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use switchboard_mcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use switchboard_mcp::{ClientHooks, ServerEvent, decline_elicitation};
use tokio::sync::mpsc::UnboundedSender;

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepStatus {
    Ok,
    /// It failed and the run stopped.
    Failed,
    /// It failed, but `continueOnError: "true"` saved the error text and went on.
    ContinuedAfterError,
}

/// An MCP App UI that a step produced (also its form in a saved run log).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AppInfo {
    /// The node (with sub-workflow nodes as `parent/child`).
    pub node: String,
    /// The configured server's name, when the call went to one.
    pub server: Option<String>,
    /// The server URL, for HTTP servers.
    pub server_url: Option<String>,
    pub resource_uri: String,
    pub mime_type: Option<String>,
    /// The tool that was called.
    pub tool: String,
    /// The arguments it was called with.
    pub arguments: Value,
    /// The tool result (`content`, `structuredContent`, `_meta`…), as JSON.
    pub result: Value,
}

/// Something that happened during a run.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// A node starts; `detail` says what it does (`demo.echo`, `GET https://…`).
    NodeStarted {
        node: String,
        kind: String,
        detail: String,
    },
    /// Progress reported by an MCP server for the running call.
    Progress {
        node: String,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// A node finished.
    NodeFinished {
        node: String,
        kind: String,
        status: StepStatus,
        summary: String,
        elapsed: Duration,
    },
    /// A server asked for input; it was answered without a person.
    Elicitation {
        server: String,
        message: String,
        accepted: bool,
    },
    /// A step produced an MCP App UI.
    App(AppInfo),
    /// Anything else worth a line in the log (tool calls inside a `command` node,
    /// tools left out of a model request, a UI resource that could not be read…).
    Notice {
        node: Option<String>,
        message: String,
    },
}

/// One finished step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub node: String,
    pub kind: String,
    pub status: StepStatus,
    pub summary: String,
    pub elapsed: Duration,
}

/// Client hooks for servers used by a workflow.
#[derive(Debug, Clone, Default)]
pub struct WorkflowHooks {
    events: Option<UnboundedSender<RunEvent>>,
}

impl WorkflowHooks {
    /// Hooks that report elicitations on `events`.
    pub fn new(events: Option<UnboundedSender<RunEvent>>) -> Self {
        Self { events }
    }
}

impl ClientHooks for WorkflowHooks {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let value = serde_json::to_value(&request).unwrap_or(Value::Null);
        let answer = answer_without_person(&value);
        let accepted = answer.action == ElicitationAction::Accept;
        let message = value
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        tracing::info!(server, accepted, "elicitation answered without a person");
        if let Some(tx) = &self.events {
            let _ = tx.send(RunEvent::Elicitation {
                server: server.to_string(),
                message,
                accepted,
            });
        }
        Box::pin(async move { answer })
    }

    fn on_event(&self, server: &str, event: ServerEvent) {
        if let ServerEvent::Log { level, data, .. } = event {
            tracing::info!(server, level, "{data}");
        }
    }
}

/// Accept with the defaults when every requested field has one; else (or for a URL
/// elicitation) decline.
pub fn answer_without_person(request: &Value) -> ElicitResult {
    if request.get("mode").and_then(Value::as_str) == Some("url") {
        return decline_elicitation();
    }
    let props = request
        .get("requestedSchema")
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let mut content = Map::new();
    for (name, prop) in props.into_iter().flatten() {
        match prop.get("default") {
            Some(d) => {
                content.insert(name.clone(), d.clone());
            }
            None => return decline_elicitation(),
        }
    }
    ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_accept_only_when_every_field_has_one() {
        let all = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "a": {"type": "string", "default": "x"}}}});
        let r = answer_without_person(&all);
        assert_eq!(r.action, ElicitationAction::Accept);
        assert_eq!(r.content, Some(json!({"a": "x"})));
        let some = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "a": {"type": "string", "default": "x"}, "b": {"type": "number"}}}});
        assert_eq!(
            answer_without_person(&some).action,
            ElicitationAction::Decline
        );
    }
}
