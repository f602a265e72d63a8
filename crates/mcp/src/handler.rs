//! Answers what a server asks of us (elicitation, roots, sampling) and forwards what it
//! tells us (list changes, log messages) to the embedding host; progress goes to the
//! call that asked for it through the [`ProgressRouter`], fed by the connection's
//! transport tap.
//!
//! Sampling, roots and logging are marked deprecated by SEP-2577 in the newest
//! revision, but servers on 2024-11-05 … 2025-11-25 use them, so we keep answering.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, ErrorData, Implementation,
    ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ResourceUpdatedNotificationParam, Root,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use tokio::sync::mpsc;

/// Something a server told us, forwarded to the host.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    ResourceUpdated {
        uri: String,
    },
    Log {
        level: String,
        logger: Option<String>,
        data: serde_json::Value,
    },
}

/// Progress of one request, as reported by the server (its JSON is the notification's
/// `progress`, `total` and `message`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// How the host answers server-initiated requests and hears server notifications.
///
/// Every method has a safe default: decline elicitation, decline sampling, offer the
/// working directory as the only root, and drop events.
pub trait ClientHooks: Send + Sync + 'static {
    /// A server asks the user for input. The default declines.
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let _ = (server, request);
        Box::pin(async { decline_elicitation() })
    }

    /// A server asks us to run the model (`sampling/createMessage`). The default declines.
    fn sample(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>> {
        let _ = params;
        let server = server.to_string();
        Box::pin(async move {
            Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "sampling declined: no model is configured for server `{server}` in this host"
                ),
                None,
            ))
        })
    }

    /// Whether `sample` can do anything (decides whether the capability is declared).
    fn supports_sampling(&self) -> bool {
        false
    }

    /// A server asks for the roots (`roots/list`). The default answers [`Self::roots`].
    fn list_roots(&self, server: &str) -> BoxFuture<'static, Result<Vec<Root>, ErrorData>> {
        let _ = server;
        Box::pin(std::future::ready(Ok(self.roots())))
    }

    /// Whether the roots may change while connected (declared as the roots
    /// capability's `listChanged`; then `Connection::notify_roots_changed` tells the
    /// server). The default is false.
    fn roots_list_changed(&self) -> bool {
        false
    }

    /// The roots offered to servers. The default is the current working directory.
    fn roots(&self) -> Vec<Root> {
        std::env::current_dir()
            .ok()
            .and_then(|dir| url_from_path(&dir))
            .map(|uri| {
                let mut root = Root::new(uri);
                root.name = Some("working directory".into());
                vec![root]
            })
            .unwrap_or_default()
    }

    /// A server notification for the host (list changes, log lines).
    fn on_event(&self, server: &str, event: ServerEvent) {
        let _ = (server, event);
    }
}

/// Hooks that take every default.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultHooks;
impl ClientHooks for DefaultHooks {}

/// An elicitation answer that declines.
pub fn decline_elicitation() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

fn url_from_path(path: &std::path::Path) -> Option<String> {
    let s = path.to_str()?;
    let mut out = String::from("file://");
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    Some(out)
}

/// Routes progress notifications to the request that asked for them.
#[derive(Debug, Default)]
pub(crate) struct ProgressRouter {
    sinks: Mutex<HashMap<ProgressToken, mpsc::UnboundedSender<Progress>>>,
}

impl ProgressRouter {
    pub(crate) fn register(&self, token: ProgressToken, sink: mpsc::UnboundedSender<Progress>) {
        if let Ok(mut m) = self.sinks.lock() {
            m.insert(token, sink);
        }
    }
    pub(crate) fn unregister(&self, token: &ProgressToken) {
        if let Ok(mut m) = self.sinks.lock() {
            m.remove(token);
        }
    }
    pub(crate) fn route(&self, params: ProgressNotificationParam) {
        let sink = self
            .sinks
            .lock()
            .ok()
            .and_then(|m| m.get(&params.progress_token).cloned());
        if let Some(sink) = sink {
            let _ = sink.send(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }
}

/// The rmcp client handler of one connection.
pub(crate) struct HostHandler {
    pub(crate) server: Arc<str>,
    pub(crate) hooks: Arc<dyn ClientHooks>,
    pub(crate) info: ClientConfig,
}

/// The extension id of MCP Apps, advertised in `initialize`.
pub const UI_EXTENSION_ID: &str = "io.modelcontextprotocol/ui";

/// What the host declares in `initialize`, besides its name and version.
pub(crate) struct Declared {
    pub(crate) sampling: bool,
    pub(crate) ui_extension: bool,
    pub(crate) roots_list_changed: bool,
}

pub(crate) fn client_info(name: &str, version: &str, declared: Declared) -> ClientConfig {
    let Declared {
        sampling,
        ui_extension,
        roots_list_changed,
    } = declared;
    let mut caps = serde_json::json!({
        "roots": {"listChanged": roots_list_changed},
        "elicitation": {"form": {}},
    });
    if sampling {
        caps["sampling"] = serde_json::json!({});
    }
    if ui_extension {
        caps["extensions"] = serde_json::json!({
            UI_EXTENSION_ID: {"mimeTypes": ["text/html;profile=mcp-app"]}
        });
    }
    let capabilities: ClientCapabilities = serde_json::from_value(caps).unwrap_or_default();
    let mut info = ClientConfig::new(
        capabilities,
        Implementation::new(name.to_string(), version.to_string()),
    );
    info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
    info
}

fn cancelled_by_server() -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        "the server cancelled this request".to_string(),
        None,
    )
}

impl ClientHandler for HostHandler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    /// When the server cancels its request (`notifications/cancelled`), the hook's
    /// future is dropped, so whatever it was waiting on (a person, a downstream client)
    /// can stop too.
    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + Send + '_ {
        let fut = self.hooks.elicit(&self.server, request);
        async move {
            tokio::select! {
                r = fut => Ok(r),
                () = context.ct.cancelled() => Err(cancelled_by_server()),
            }
        }
    }

    fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<CreateMessageResult, ErrorData>> + Send + '_ {
        let fut = self.hooks.sample(&self.server, params);
        async move {
            tokio::select! {
                r = fut => r,
                () = context.ct.cancelled() => Err(cancelled_by_server()),
            }
        }
    }

    fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorData>> + Send + '_ {
        let fut = self.hooks.list_roots(&self.server);
        async move {
            tokio::select! {
                r = fut => r.map(ListRootsResult::new),
                () = context.ct.cancelled() => Err(cancelled_by_server()),
            }
        }
    }

    // Progress is routed by the connection's transport tap, in the order the server
    // sent it (`connection::tap`); rmcp's own handling of it goes on as usual.

    fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "info".into());
        self.hooks.on_event(
            &self.server,
            ServerEvent::Log {
                level,
                logger: params.logger,
                data: params.data,
            },
        );
        std::future::ready(())
    }

    fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.hooks.on_event(
            &self.server,
            ServerEvent::ResourceUpdated { uri: params.uri },
        );
        std::future::ready(())
    }

    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.hooks
            .on_event(&self.server, ServerEvent::ResourcesChanged);
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.hooks.on_event(&self.server, ServerEvent::ToolsChanged);
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.hooks
            .on_event(&self.server, ServerEvent::PromptsChanged);
        std::future::ready(())
    }
}
