//! Cancellation from the upstream side: a server that asks the client for input
//! (elicitation) and then cancels its request makes the gateway cancel the request it
//! forwarded to the downstream client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, ContentBlock,
    ElicitRequestParams, ElicitResult, ErrorData, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, Request, ServerCapabilities, ServerConfig, ServerRequest, Tool,
};
use rmcp::service::{PeerRequestOptions, RequestContext, RoleClient, RoleServer};
use rmcp::{ClientHandler, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::sync::mpsc;

/// Asks for a name, then cancels the question after 300 ms.
#[derive(Clone)]
struct Asker;

impl ServerHandler for Asker {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    /// Server-to-client requests exist only up to 2025-11-25.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object"}).as_object().unwrap().clone();
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "ask",
            "Asks, then changes its mind",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
        }))
        .unwrap();
        let handle = context
            .peer
            .send_request_with_option(
                ServerRequest::ElicitRequest(Request::new(params)),
                PeerRequestOptions::no_options(),
            )
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = handle.cancel(Some("changed my mind".into())).await;
        Ok(CallToolResult::success(vec![ContentBlock::text("upstream cancelled")]).into())
    }
}

/// Declares elicitation and reports whether a forwarded question was cancelled.
#[derive(Clone)]
struct Patient {
    seen: mpsc::UnboundedSender<&'static str>,
}

impl ClientHandler for Patient {
    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "patient", "version": "1"}
        }))
        .unwrap()
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let _ = self.seen.send("asked");
        tokio::select! {
            () = context.ct.cancelled() => {
                let _ = self.seen.send("cancelled");
                Err(ErrorData::internal_error("cancelled", None))
            }
            () = tokio::time::sleep(Duration::from_secs(30)) => {
                Ok(switchboard_mcp::decline_elicitation())
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_cancellation_reaches_the_client() {
    let (gateway, served) = crate::upstream::gateway_over("asker", Asker).await;
    let client_io = crate::upstream::session(&gateway);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = Patient { seen: tx }.serve(client_io).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "asker__ask"), "{tools:?}");
    let result = client
        .call_tool(CallToolRequestParams::new("asker__ask"))
        .await
        .unwrap();
    assert!(
        serde_json::to_string(&result)
            .unwrap()
            .contains("upstream cancelled")
    );
    let mut seen = Vec::new();
    while let Ok(Some(s)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        seen.push(s);
        if s == "cancelled" {
            break;
        }
    }
    assert_eq!(seen, ["asked", "cancelled"]);
    gateway.shutdown().await;
    served.abort();
}
