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

/// How many progress notifications for a token nobody registered are kept.
const EARLY_KEPT: usize = 64;

/// Routes progress notifications to the request that asked for them.
///
/// rmcp picks a request's progress token and queues the request before the caller
/// can register its sink, and a fast server's first notification can be read in
/// between; so a notification for a token nobody has registered is kept (the newest
/// [`EARLY_KEPT`] of them) and handed to the sink registered for it later, before
/// anything newer. Tokens are never reused on a connection.
#[derive(Debug, Default)]
pub(crate) struct ProgressRouter {
    routes: Mutex<Routes>,
}

#[derive(Debug, Default)]
struct Routes {
    sinks: HashMap<ProgressToken, mpsc::UnboundedSender<Progress>>,
    early: std::collections::VecDeque<(ProgressToken, Progress)>,
}

impl ProgressRouter {
    pub(crate) fn register(&self, token: ProgressToken, sink: mpsc::UnboundedSender<Progress>) {
        if let Ok(mut r) = self.routes.lock() {
            r.early.retain(|(t, p)| {
                let ours = *t == token;
                if ours {
                    let _ = sink.send(p.clone());
                }
                !ours
            });
            r.sinks.insert(token, sink);
        }
    }
    pub(crate) fn unregister(&self, token: &ProgressToken) {
        if let Ok(mut r) = self.routes.lock() {
            r.sinks.remove(token);
        }
    }
    pub(crate) fn route(&self, params: ProgressNotificationParam) {
        let progress = Progress {
            progress: params.progress,
            total: params.total,
            message: params.message,
        };
        let Ok(mut r) = self.routes.lock() else {
            return;
        };
        match r.sinks.get(&params.progress_token) {
            Some(sink) => {
                let _ = sink.send(progress);
            }
            None => {
                if r.early.len() == EARLY_KEPT {
                    r.early.pop_front();
                }
                r.early.push_back((params.progress_token, progress));
            }
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

#[cfg(test)]
mod tests {
    use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
    use tokio::sync::mpsc;

    use super::{EARLY_KEPT, ProgressRouter};

    fn note(token: i64, progress: f64) -> ProgressNotificationParam {
        serde_json::from_value(serde_json::json!({
            "progressToken": token, "progress": progress
        }))
        .unwrap()
    }

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    /// A notification read before its call registered reaches that call first, in
    /// order; other tokens' wait; a flood of unknown tokens keeps only the newest.
    #[test]
    fn progress_read_before_its_sink_is_registered_is_not_lost() {
        let router = ProgressRouter::default();
        router.route(note(1, 1.0));
        router.route(note(2, 9.0));
        router.route(note(1, 2.0));
        let (tx, mut rx) = mpsc::unbounded_channel();
        router.register(token(1), tx);
        router.route(note(1, 3.0));
        let seen: Vec<f64> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|p| p.progress)
            .collect();
        assert_eq!(seen, [1.0, 2.0, 3.0]);
        // Token 2's notification still waits for its call.
        let (tx2, mut rx2) = mpsc::unbounded_channel();
        router.register(token(2), tx2);
        assert_eq!(rx2.try_recv().unwrap().progress, 9.0);

        // Unknown tokens: only the newest EARLY_KEPT are kept.
        for n in 0..(EARLY_KEPT as i64 + 10) {
            router.route(note(100 + n, n as f64));
        }
        let (tx3, mut rx3) = mpsc::unbounded_channel();
        router.register(token(100), tx3);
        assert!(rx3.try_recv().is_err(), "the oldest was kept");
        let (tx4, mut rx4) = mpsc::unbounded_channel();
        router.register(token(100 + EARLY_KEPT as i64 + 9), tx4);
        assert!(rx4.try_recv().is_ok(), "the newest was dropped");
    }
}
