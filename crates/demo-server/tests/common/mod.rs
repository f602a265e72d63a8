//! Shared helpers for the demo server's integration tests: a client handler
//! that records progress notifications and offers an initialize-era
//! protocol version.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use rmcp::{
    ClientHandler, RoleClient,
    model::{CallToolRequestParams, ClientConfig, ProgressNotificationParam, ProtocolVersion},
    service::NotificationContext,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A client that offers protocol 2025-11-25 (classic `initialize`) and
/// forwards every progress notification to a channel.
#[derive(Clone)]
pub struct TestClient {
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl TestClient {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
        let (progress, rx) = mpsc::unbounded_channel();
        (Self { progress }, rx)
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default().with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }
}

/// `tools/call` parameters for `name` with the JSON object `args`.
pub fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    let params = CallToolRequestParams::new(name);
    match args {
        Value::Object(map) => params.with_arguments(map),
        Value::Null => params,
        other => panic!("tool arguments must be an object, got {other}"),
    }
}

/// Serialize anything to JSON for easy assertions.
pub fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("serialize")
}

/// The text of the first text block of a serialized result's `content`.
pub fn first_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .expect("content array")
        .iter()
        .find(|block| block["type"] == json!("text"))
        .and_then(|block| block["text"].as_str())
        .expect("a text block")
        .to_owned()
}
