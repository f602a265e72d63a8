//! The live session of a connected server: requests with a timeout (reset by progress,
//! capped at [`PROGRESS_CAP`] times), progress routing, cancellation
//! (`notifications/cancelled`), bounded list pagination, the typed calls, the state
//! the server declared, and closing.
//!
//! Limits: a request's timeout is the server's `timeout` (10 min by default); each
//! progress notification restarts it, up to [`PROGRESS_CAP`] (10) times the timeout in
//! all (rmcp's `reset_timeout_on_progress`); past either, or when the caller cancels, the
//! server is sent `notifications/cancelled`. A list follows at most [`MAX_LIST_PAGES`]
//! pages. After the resource set changed, a request waits up to 5 s for the server to
//! acknowledge it, so an update the request causes is heard. A caller's `_meta` goes to
//! the server without `progressToken` and the keys MCP reserves (`relayed_meta`).
#![allow(deprecated)] // logging/setLevel: deprecated by SEP-2577, still used by servers

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, CompleteRequestParams, CompleteResult,
    GetPromptResult, LoggingLevel, Prompt, ProtocolVersion, ReadResourceResult, Request,
    RequestMetaObject, Resource, ResourceTemplate, ServerCapabilities, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::transport::streamable_http_client::AuthRequiredError;
use serde_json::{Value, json};

use super::failure::strip_type_names;
use super::watch::{Watch, resources_filter};
use super::{CallOptions, Connection};
use crate::error::RequestError;
use crate::raw::RawLane;
use crate::stdio;
use crate::target::TransportKind;

/// The longest a request waits for the server to acknowledge a changed resource set
/// (then it goes anyway; a server that never answers gets its own error from the watch).
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// At most this many pages are fetched for one list request.
pub const MAX_LIST_PAGES: usize = 100;

impl Connection {
    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The transport in use.
    pub fn transport_kind(&self) -> TransportKind {
        self.kind
    }

    /// The protocol version agreed with the server.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.peer.peer_info().map(|i| i.protocol_version.clone())
    }

    /// The raw lane for `tools/call` (`switchboard_mcp::RawLane`): a stdio connection on
    /// a protocol before 2026-07-28 (a later server may answer a call with an
    /// `InputRequiredResult`, which only the typed path handles), while it is open.
    pub fn raw_lane(&self) -> Option<&RawLane> {
        let lane = self.raw.as_deref()?;
        let version = self.protocol_version()?;
        (version.as_str() < ProtocolVersion::V_2026_07_28.as_str() && !lane.is_closed())
            .then_some(lane)
    }

    /// The server's `serverInfo` name and version.
    pub fn server_info(&self) -> Option<(String, String)> {
        self.peer
            .peer_info()
            .and_then(|i| i.server_info.clone())
            .map(|s| (s.name, s.version))
    }

    /// The server's `instructions`, if any.
    pub fn instructions(&self) -> Option<String> {
        self.peer.peer_info().and_then(|i| i.instructions.clone())
    }

    /// What the server declared it offers.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.peer
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default()
    }

    /// True once the transport has closed (the server went away).
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// The last lines the server wrote to stderr (stdio servers).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.diag
            .as_ref()
            .map(stdio::stderr_tail)
            .unwrap_or_default()
    }

    /// The process id of a stdio server.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.pid())
    }

    /// The default request timeout of this connection.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Closes the connection: ends the session (DELETE for Streamable HTTP), closes
    /// stdin, and stops a stdio server's process group. As MCP's stdio shutdown asks,
    /// the server first gets `grace` to exit on its own after its stdin closes (reading
    /// what was written before, a cancellation say), then SIGTERM, then SIGKILL after
    /// `grace` more; whatever is left of its group is killed either way.
    pub async fn close(&self, grace: Duration) {
        // The list watch first: its stream is a request like any other.
        drop(self.watch.lock().ok().and_then(|mut w| w.take()));
        drop(self.resources.lock().ok().and_then(|mut w| w.take()));
        let service = self.service.lock().ok().and_then(|mut s| s.take());
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(grace).await;
        }
        if let Some(child) = &self.child {
            let _ = child.wait_exit(grace).await;
            child.terminate(grace).await;
        }
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        opts: &CallOptions,
    ) -> Result<ServerResult, RequestError> {
        let req = make_request(method, params)?;
        self.send(method, req, opts).await
    }

    /// Sends a request already built as rmcp's type (what [`Self::request`] builds
    /// from JSON; calls build it directly, with no JSON round trip per call).
    pub(super) async fn send(
        &self,
        method: &str,
        req: ClientRequest,
        opts: &CallOptions,
    ) -> Result<ServerResult, RequestError> {
        let timeout = opts.timeout.unwrap_or(self.request_timeout);
        // After a change of the resource set, the server hears this request after the
        // stream that names the new resources (a call that updates one is heard).
        let resources = self.resources.lock().ok().and_then(|w| w.clone());
        if let Some(watch) = resources {
            watch.settled(timeout.min(SETTLE_LIMIT)).await;
        }
        let mut options = request_options(timeout);
        options.meta = opts.meta.as_ref().and_then(relayed_meta);
        let handle = self
            .peer
            .send_request_with_option(req, options)
            .await
            .map_err(|e| map_service_error(method, timeout, e))?;
        let token = handle.progress_token.clone();
        if let Some(sink) = &opts.progress {
            self.progress.register(token.clone(), sink.clone());
        }
        let peer = handle.peer.clone();
        let id = handle.id.clone();
        let result = match &opts.cancel {
            Some(ct) => {
                tokio::select! {
                    r = handle.await_response() => r.map_err(|e| map_service_error(method, timeout, e)),
                    _ = ct.cancelled() => {
                        let note = json!({
                            "method": "notifications/cancelled",
                            "params": {"requestId": id, "reason": "cancelled by the user"}
                        });
                        if let Ok(n) = serde_json::from_value(note) {
                            let _ = peer.send_notification(n).await;
                        }
                        Err(RequestError::Cancelled { method: method.to_string() })
                    }
                }
            }
            None => handle
                .await_response()
                .await
                .map_err(|e| map_service_error(method, timeout, e)),
        };
        self.progress.unregister(&token);
        result
    }

    async fn list_all<T>(
        &self,
        method: &str,
        key: &str,
        opts: &CallOptions,
    ) -> Result<Vec<T>, RequestError>
    where
        T: serde::de::DeserializeOwned,
    {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..MAX_LIST_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let result = self.request(method, params, opts).await?;
            let value = serde_json::to_value(&result).map_err(|_| RequestError::Unexpected {
                method: method.into(),
            })?;
            let items = value
                .get(key)
                .cloned()
                .ok_or_else(|| RequestError::Unexpected {
                    method: method.into(),
                })?;
            let items: Vec<T> =
                serde_json::from_value(items).map_err(|e| RequestError::Transport {
                    method: method.into(),
                    message: format!("the server's `{key}` list is malformed: {e}"),
                })?;
            out.extend(items);
            match value.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => {
                    if !seen.insert(next.to_string()) {
                        return Err(RequestError::Pagination {
                            method: method.into(),
                            reason: format!(
                                "the server returned cursor `{next}` twice (a pagination loop)"
                            ),
                        });
                    }
                    cursor = Some(next.to_string());
                }
                _ => return Ok(out),
            }
        }
        Err(RequestError::Pagination {
            method: method.into(),
            reason: format!("more than {MAX_LIST_PAGES} pages"),
        })
    }

    /// `tools/list`, all pages.
    pub async fn list_tools(&self, opts: &CallOptions) -> Result<Vec<Tool>, RequestError> {
        self.list_all("tools/list", "tools", opts).await
    }

    /// `prompts/list`, all pages.
    pub async fn list_prompts(&self, opts: &CallOptions) -> Result<Vec<Prompt>, RequestError> {
        self.list_all("prompts/list", "prompts", opts).await
    }

    /// `resources/list`, all pages.
    pub async fn list_resources(&self, opts: &CallOptions) -> Result<Vec<Resource>, RequestError> {
        self.list_all("resources/list", "resources", opts).await
    }

    /// `resources/templates/list`, all pages.
    pub async fn list_resource_templates(
        &self,
        opts: &CallOptions,
    ) -> Result<Vec<ResourceTemplate>, RequestError> {
        self.list_all("resources/templates/list", "resourceTemplates", opts)
            .await
    }

    /// `tools/call`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        opts: &CallOptions,
    ) -> Result<CallToolResult, RequestError> {
        let build = |responses, state| {
            let mut params = CallToolRequestParams::new(name.to_string());
            params.arguments = arguments.clone();
            params.input_responses = responses;
            params.request_state = state;
            Ok(ClientRequest::CallToolRequest(Request::new(params)))
        };
        match self.send_with_input("tools/call", build, opts).await? {
            ServerResult::CallToolResult(r) => Ok(r),
            _ => Err(RequestError::Unexpected {
                method: "tools/call".into(),
            }),
        }
    }

    /// `resources/read`.
    pub async fn read_resource(
        &self,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<ReadResourceResult, RequestError> {
        let build = |responses, state| {
            make_request(
                "resources/read",
                with_input(json!({"uri": uri}), responses, state),
            )
        };
        match self.send_with_input("resources/read", build, opts).await? {
            ServerResult::ReadResourceResult(r) => Ok(r),
            _ => Err(RequestError::Unexpected {
                method: "resources/read".into(),
            }),
        }
    }

    /// `prompts/get`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
        opts: &CallOptions,
    ) -> Result<GetPromptResult, RequestError> {
        let build = |responses, state| {
            let params = json!({"name": name, "arguments": arguments});
            make_request("prompts/get", with_input(params, responses, state))
        };
        match self.send_with_input("prompts/get", build, opts).await? {
            ServerResult::GetPromptResult(r) => Ok(r),
            _ => Err(RequestError::Unexpected {
                method: "prompts/get".into(),
            }),
        }
    }

    /// `completion/complete`: argument completions for a prompt or a resource template.
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
        opts: &CallOptions,
    ) -> Result<CompleteResult, RequestError> {
        let method = "completion/complete";
        let params = serde_json::to_value(params).map_err(|e| RequestError::Transport {
            method: method.into(),
            message: format!("could not build the request: {e}"),
        })?;
        match self.request(method, params, opts).await? {
            ServerResult::CompleteResult(r) => Ok(r),
            _ => Err(RequestError::Unexpected {
                method: method.into(),
            }),
        }
    }

    /// `logging/setLevel`: the least severe level the server should send.
    pub async fn set_log_level(
        &self,
        level: LoggingLevel,
        opts: &CallOptions,
    ) -> Result<(), RequestError> {
        self.request("logging/setLevel", json!({"level": level}), opts)
            .await
            .map(|_| ())
    }

    /// `resources/subscribe`: the server sends `notifications/resources/updated` for
    /// `uri` (heard as [`ServerEvent::ResourceUpdated`](crate::ServerEvent)) until
    /// [`Self::unsubscribe`]. Only for a server that declared `resources.subscribe`.
    pub async fn subscribe(&self, uri: &str, opts: &CallOptions) -> Result<(), RequestError> {
        self.request("resources/subscribe", json!({"uri": uri}), opts)
            .await
            .map(|_| ())
    }

    /// The resources subscribed to on a server on protocol 2026-07-28, which has no
    /// `resources/subscribe`: `uris` replaces the set (empty: none), kept on one
    /// `subscriptions/listen` stream whose updates reach the hooks as
    /// [`ServerEvent::ResourceUpdated`](crate::ServerEvent::ResourceUpdated). The latest
    /// set wins, so callers that change it concurrently must order their calls (compute
    /// and set under one lock). Returns the set's ticket for
    /// [`Self::resource_subscriptions_acked`]. Requests sent after this wait (up to 5 s)
    /// until the server acknowledged the set, so that an update a call causes is
    /// heard on its stream.
    pub fn set_resource_subscriptions(&self, uris: Vec<String>) -> super::ResourceSet {
        let watch = self.resources.lock().ok().map(|mut w| {
            w.get_or_insert_with(|| {
                Arc::new(Watch::spawn(
                    self.peer.clone(),
                    self.name.clone(),
                    self.hooks.clone(),
                    None,
                ))
            })
            .clone()
        });
        super::ResourceSet(watch.map(|w| w.set(resources_filter(uris))).unwrap_or(0))
    }

    /// The URIs of `set` the server honours (its acknowledgment of the stream, or of a
    /// later set's), waiting up to `limit`; an error when no stream could be opened.
    pub async fn resource_subscriptions_acked(
        &self,
        set: super::ResourceSet,
        limit: Duration,
    ) -> Result<Vec<String>, RequestError> {
        const METHOD: &str = "subscriptions/listen";
        let watch = self.resources.lock().ok().and_then(|w| w.clone());
        let Some(watch) = watch else {
            return Err(RequestError::Closed(None));
        };
        watch
            .acked(set.0, limit)
            .await
            .map(|honoured| honoured.resource_subscriptions.unwrap_or_default())
            .map_err(|message| RequestError::Transport {
                method: METHOD.into(),
                message,
            })
    }

    /// `resources/unsubscribe`: no more updates for `uri`.
    pub async fn unsubscribe(&self, uri: &str, opts: &CallOptions) -> Result<(), RequestError> {
        self.request("resources/unsubscribe", json!({"uri": uri}), opts)
            .await
            .map(|_| ())
    }

    /// `notifications/roots/list_changed`: the roots offered to this server changed.
    /// For hooks whose [`ClientHooks::roots_list_changed`](crate::ClientHooks::roots_list_changed)
    /// is true (that is what `initialize` told the server).
    pub async fn notify_roots_changed(&self) -> Result<(), RequestError> {
        self.peer
            .notify_roots_list_changed()
            .await
            .map_err(|e| RequestError::Transport {
                method: "notifications/roots/list_changed".into(),
                message: e.to_string(),
            })
    }

    /// `ping`.
    pub async fn ping(&self, timeout: Duration) -> Result<(), RequestError> {
        let opts = CallOptions {
            timeout: Some(timeout),
            ..Default::default()
        };
        self.request("ping", json!({}), &opts).await.map(|_| ())
    }
}

/// `params` with a retry's `inputResponses` and `requestState` (see `input`).
fn with_input(
    mut params: Value,
    responses: Option<rmcp::model::InputResponses>,
    state: Option<String>,
) -> Value {
    if let Some(r) = responses {
        params["inputResponses"] = json!(r);
    }
    if let Some(s) = state {
        params["requestState"] = json!(s);
    }
    params
}

fn make_request(method: &str, params: Value) -> Result<ClientRequest, RequestError> {
    let value = if method == "ping" {
        json!({"method": method})
    } else {
        json!({"method": method, "params": params})
    };
    serde_json::from_value(value).map_err(|e| RequestError::Transport {
        method: method.into(),
        message: format!("could not build the request: {e}"),
    })
}

/// How long a request may wait: `timeout` without news from the server; each progress
/// notification for it starts that wait again, up to [`PROGRESS_CAP`] × `timeout` in
/// all. Past either limit the request fails and `notifications/cancelled` is sent.
fn request_options(timeout: Duration) -> PeerRequestOptions {
    PeerRequestOptions::with_timeout(timeout)
        .reset_timeout_on_progress()
        .with_max_total_timeout(timeout.saturating_mul(PROGRESS_CAP))
}

/// The part of a caller's `_meta` that may go to the server: everything but
/// `progressToken` and the keys MCP reserves for itself (a prefix with a label
/// `modelcontextprotocol` or `mcp`: `io.modelcontextprotocol/clientInfo`,
/// `modelcontextprotocol.io/…`, `tools.mcp.com/…`), which
/// describe the caller's own connection. `None` when nothing is left.
pub(crate) fn relayed_meta(meta: &serde_json::Map<String, Value>) -> Option<RequestMetaObject> {
    let kept: serde_json::Map<String, Value> = meta
        .iter()
        .filter(|(k, _)| k.as_str() != "progressToken" && !reserved_meta_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!kept.is_empty()).then(|| RequestMetaObject::from(kept))
}

fn reserved_meta_key(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix
            .split('.')
            .any(|label| label == "modelcontextprotocol" || label == "mcp")
    })
}

/// How many times its timeout a request that keeps reporting progress may run.
pub const PROGRESS_CAP: u32 = 10;

/// The `WWW-Authenticate` challenge when a transport error is the server's HTTP 401
/// (rmcp's `AuthRequiredError`, found by type along the error's source chain).
fn unauthorized(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(a) = e.downcast_ref::<AuthRequiredError>() {
            return Some(a.www_authenticate_header.clone());
        }
        cur = e.source();
    }
    None
}

fn map_service_error(method: &str, timeout: Duration, e: ServiceError) -> RequestError {
    match e {
        ServiceError::McpError(data) => RequestError::Server {
            method: method.into(),
            code: data.code.0,
            message: data.message.to_string(),
        },
        ServiceError::Timeout { timeout: after } => RequestError::Timeout {
            method: method.into(),
            after: after.max(timeout),
        },
        ServiceError::TransportClosed => RequestError::Closed(None),
        ServiceError::TransportSend(err) => match unauthorized(&err) {
            Some(challenge) => RequestError::Unauthorized {
                method: method.into(),
                www_authenticate: Some(challenge).filter(|c| !c.is_empty()),
            },
            None => RequestError::Closed(Some(strip_type_names(&err.to_string()))),
        },
        ServiceError::Cancelled { .. } => RequestError::Cancelled {
            method: method.into(),
        },
        ServiceError::UnexpectedResponse => RequestError::Unexpected {
            method: method.into(),
        },
        other => RequestError::Transport {
            method: method.into(),
            message: strip_type_names(&other.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::service::ServiceError;
    use rmcp::transport::DynamicTransportError;
    use rmcp::transport::streamable_http_client::{AuthRequiredError, StreamableHttpError};
    use serde_json::json;

    use super::{map_service_error, relayed_meta};
    use crate::error::RequestError;

    fn transport_error(e: StreamableHttpError<std::io::Error>) -> ServiceError {
        ServiceError::TransportSend(DynamicTransportError::from_parts(
            "streamable-http",
            std::any::TypeId::of::<()>(),
            Box::new(e),
        ))
    }

    #[test]
    fn an_http_401_is_typed_with_its_challenge_and_other_failures_are_not() {
        let e = map_service_error(
            "tools/call",
            Duration::from_secs(1),
            transport_error(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                "Bearer resource_metadata=\"http://127.0.0.1:1/.well-known/x\"".into(),
            ))),
        );
        assert!(e.is_unauthorized(), "{e:?}");
        match &e {
            RequestError::Unauthorized {
                method,
                www_authenticate,
            } => {
                assert_eq!(method, "tools/call");
                assert!(www_authenticate.as_deref().unwrap().starts_with("Bearer "));
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("HTTP 401"), "{e}");
        let other = map_service_error(
            "tools/call",
            Duration::from_secs(1),
            transport_error(StreamableHttpError::UnexpectedServerResponse(
                "HTTP 500".into(),
            )),
        );
        assert!(!other.is_unauthorized(), "{other:?}");
        assert!(matches!(other, RequestError::Closed(Some(_))), "{other:?}");
    }

    #[test]
    fn a_callers_meta_goes_without_the_keys_of_its_own_connection() {
        let meta = json!({
            "progressToken": 7,
            "io.modelcontextprotocol/clientInfo": {"name": "x"},
            "modelcontextprotocol.io/related-task": {"taskId": "t"},
            "dev.mcp/anything": 1,
            "traceparent": "00-1-2-01",
            "io.example/trace": "t-1",
            "com.mcpvendor/kept": true,
        });
        let kept = relayed_meta(meta.as_object().unwrap()).unwrap();
        let mut keys: Vec<&str> = kept.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["com.mcpvendor/kept", "io.example/trace", "traceparent"]
        );
        assert!(relayed_meta(json!({"progressToken": 1}).as_object().unwrap()).is_none());
    }
}
