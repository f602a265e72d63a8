//! A server on protocol 2026-07-28 asks for input by answering a call with an
//! `InputRequiredResult` (SEP-2322): the official Python SDK server's `Resolve` tools
//! ask for elicitation, sampling and roots that way over Streamable HTTP, and with
//! requests of their own over stdio (2025-11-25). Either way the same hooks answer and
//! the tool gets the answers; a decline reaches the tool as a decline.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(deprecated)] // sampling and roots: deprecated by SEP-2577

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, ErrorData, Root,
};
use serde_json::json;
use switchboard_mcp::{CallOptions, ClientHooks, ConnectOptions, Connection, StdioTarget, Target};
use switchboard_testkit::{PyMode, spawn_python};

/// Answers like a person and a model would; records what was asked.
#[derive(Default)]
struct Answering {
    asked: Mutex<Vec<String>>,
    decline: bool,
}

impl ClientHooks for Answering {
    fn elicit(
        &self,
        _server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let message = serde_json::to_value(&request).unwrap()["message"].clone();
        self.asked.lock().unwrap().push(format!("elicit {message}"));
        let r = if self.decline {
            ElicitResult::new(ElicitationAction::Decline)
        } else {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ada"}))
        };
        Box::pin(async move { r })
    }

    fn sample(
        &self,
        _server: &str,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>> {
        self.asked
            .lock()
            .unwrap()
            .push(format!("sample {} message(s)", params.messages.len()));
        let r = serde_json::from_value(json!({
            "role": "assistant", "model": "hooks-model",
            "content": {"type": "text", "text": "a protocol for tools"}
        }))
        .unwrap();
        Box::pin(async move { Ok(r) })
    }

    fn supports_sampling(&self) -> bool {
        true
    }

    fn list_roots(&self, _server: &str) -> BoxFuture<'static, Result<Vec<Root>, ErrorData>> {
        self.asked.lock().unwrap().push("roots".into());
        Box::pin(async { Ok(vec![Root::new("file:///work/project")]) })
    }
}

fn text(r: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(r).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn answers_reach_the_tools(conn: &Connection, hooks: &Answering) {
    let opts = CallOptions::default();
    let r = conn.call_tool("greet", None, &opts).await.unwrap();
    assert_eq!(text(&r), "hello Ada");
    let r = conn.call_tool("summarize", None, &opts).await.unwrap();
    assert_eq!(text(&r), "model said: a protocol for tools");
    let r = conn.call_tool("where", None, &opts).await.unwrap();
    assert_eq!(text(&r), r#"["file:///work/project"]"#);
    let asked = hooks.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            "elicit \"What is your name?\"",
            "sample 1 message(s)",
            "roots"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn input_required_results_are_answered_by_the_hooks_over_http() {
    switchboard_testkit::ensure_peers();
    let py = spawn_python(PyMode::StreamableHttp, &[("SWITCHBOARD_PY_RESOLVE", "1")]).await;
    let hooks = Arc::new(Answering::default());
    let mut opts = ConnectOptions::new(
        "py",
        Target::Http {
            url: py.url.clone(),
            headers: Vec::new(),
        },
    );
    opts.hooks = hooks.clone();
    let conn = Connection::connect(opts).await.unwrap();
    assert_eq!(
        conn.protocol_version().map(|v| v.to_string()).as_deref(),
        Some("2026-07-28"),
        "the server speaks the stateless revision, so it asks through InputRequiredResult"
    );
    answers_reach_the_tools(&conn, &hooks).await;

    // A decline reaches the tool as a decline (its resolver aborts the call).
    let declining = Arc::new(Answering {
        decline: true,
        ..Default::default()
    });
    let mut opts = ConnectOptions::new(
        "py",
        Target::Http {
            url: py.url.clone(),
            headers: Vec::new(),
        },
    );
    opts.hooks = declining.clone();
    let conn = Connection::connect(opts).await.unwrap();
    let r = conn
        .call_tool("greet", None, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("decline"), "{}", text(&r));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_tools_ask_with_requests_over_stdio_and_the_same_hooks_answer() {
    switchboard_testkit::ensure_peers();
    let (program, args) = switchboard_testkit::python_stdio_command();
    let hooks = Arc::new(Answering::default());
    let mut opts = ConnectOptions::new(
        "py",
        Target::Stdio(StdioTarget {
            program,
            args,
            env: vec![("SWITCHBOARD_PY_RESOLVE".into(), "1".into())],
            cwd: None,
        }),
    );
    opts.hooks = hooks.clone();
    opts.startup_timeout = Duration::from_secs(30);
    let conn = Connection::connect(opts).await.unwrap();
    answers_reach_the_tools(&conn, &hooks).await;
    conn.close(Duration::from_secs(2)).await;
}
