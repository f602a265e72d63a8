//! Hearing a server's list changes on protocol 2026-07-28. A server on an older
//! revision sends `notifications/*/list_changed` unasked, and the handler passes them
//! on; one on 2026-07-28 sends them only on a `subscriptions/listen` stream the client
//! opened (SEP-2575: "the server MUST NOT send notification types the client has not
//! explicitly requested"). So a connection on that revision keeps one open, asking
//! for the kinds the server declared (`tools`/`prompts`/`resources` `listChanged`),
//! and hands each notification to the hooks as the handler would.
//!
//! Rules:
//! - one task per connection, ended when the connection closes or is dropped (the
//!   guard in [`Connection`](super::Connection)) and when its transport closes;
//! - a stream that ends (the server closed it, the transport broke it, the consumer
//!   lagged) is opened again, and every kind it carries is announced as changed, since
//!   a change may have been missed in between; the wait before opening again doubles
//!   with each stream that failed or lived less than [`HEALTHY`], up to [`MAX_WAIT`],
//!   so a server that closes every stream at once costs one request per minute, not a loop;
//! - a server that does not serve `subscriptions/listen` (method not found, invalid
//!   request or params) is not asked again on this connection;
//! - memory: rmcp's buffer of
//!   [`DEFAULT_SUBSCRIPTION_CHANNEL_CAPACITY`](rmcp::service::DEFAULT_SUBSCRIPTION_CHANNEL_CAPACITY) notifications
//!   per stream; a server that floods it ends the stream as lagged, which counts as a
//!   short-lived stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{ErrorCode, ServerCapabilities, ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient, ServiceError, SubscriptionEnd};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::handler::{ClientHooks, ServerEvent};

/// A stream that lived at least this long was healthy: the next one opens after
/// [`FIRST_WAIT`], as after the first.
pub(crate) const HEALTHY: Duration = Duration::from_secs(30);
/// The wait before opening again after a healthy stream ended.
pub(crate) const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(60);
/// How long the server gets to acknowledge a stream.
pub(crate) const OPEN_LIMIT: Duration = Duration::from_secs(30);

/// The kinds to ask `caps`'s server for: those it declared `listChanged` for.
/// `None` when it declared none (nothing to listen for).
pub(crate) fn filter_for(caps: &ServerCapabilities) -> Option<SubscriptionFilter> {
    let mut f = SubscriptionFilter::builder();
    let mut any = false;
    if caps.tools.as_ref().and_then(|t| t.list_changed) == Some(true) {
        f = f.tools_list_changed();
        any = true;
    }
    if caps.prompts.as_ref().and_then(|p| p.list_changed) == Some(true) {
        f = f.prompts_list_changed();
        any = true;
    }
    if caps.resources.as_ref().and_then(|r| r.list_changed) == Some(true) {
        f = f.resources_list_changed();
        any = true;
    }
    any.then(|| f.build())
}

/// The wait before the next attempt after `failures` failed or short-lived streams in
/// a row: 1 s, 2 s, 4 s, … up to [`MAX_WAIT`].
pub(crate) fn wait_after(failures: u32) -> Duration {
    FIRST_WAIT
        .saturating_mul(1u32 << failures.min(6))
        .min(MAX_WAIT)
}

/// The events a notification on the stream stands for.
fn event_of(n: &ServerNotification) -> Option<ServerEvent> {
    match n {
        ServerNotification::ToolListChangedNotification(_) => Some(ServerEvent::ToolsChanged),
        ServerNotification::PromptListChangedNotification(_) => Some(ServerEvent::PromptsChanged),
        ServerNotification::ResourceListChangedNotification(_) => {
            Some(ServerEvent::ResourcesChanged)
        }
        _ => None,
    }
}

/// Every kind `accepted` carries, as events (what a reopened stream announces).
fn events_of(accepted: &SubscriptionFilter) -> Vec<ServerEvent> {
    let mut out = Vec::new();
    if accepted.tools_list_changed == Some(true) {
        out.push(ServerEvent::ToolsChanged);
    }
    if accepted.prompts_list_changed == Some(true) {
        out.push(ServerEvent::PromptsChanged);
    }
    if accepted.resources_list_changed == Some(true) {
        out.push(ServerEvent::ResourcesChanged);
    }
    out
}

/// Whether `e` says the server does not serve `subscriptions/listen` at all.
pub(crate) fn refused(e: &ServiceError) -> bool {
    matches!(e, ServiceError::McpError(d)
        if d.code == ErrorCode::METHOD_NOT_FOUND
            || d.code == ErrorCode::INVALID_REQUEST
            || d.code == ErrorCode::INVALID_PARAMS)
}

/// Starts watching `peer`'s lists for `filter`'s kinds; the watch ends when the
/// returned guard is dropped.
pub(crate) fn spawn(
    peer: Peer<RoleClient>,
    server: Arc<str>,
    hooks: Arc<dyn ClientHooks>,
    filter: SubscriptionFilter,
) -> DropGuard {
    let stop = CancellationToken::new();
    let watch = Watch {
        peer,
        server,
        hooks,
        filter,
        stop: stop.clone(),
    };
    tokio::spawn(watch.run());
    stop.drop_guard()
}

struct Watch {
    peer: Peer<RoleClient>,
    server: Arc<str>,
    hooks: Arc<dyn ClientHooks>,
    filter: SubscriptionFilter,
    stop: CancellationToken,
}

impl Watch {
    async fn run(self) {
        let mut failures = 0u32;
        // Whether a change may have been missed: set once an attempt fails or a stream
        // ends (the lists were read at connect, so not before the first attempt).
        let mut announce = false;
        loop {
            let opened = tokio::select! {
                () = self.stop.cancelled() => return,
                r = tokio::time::timeout(OPEN_LIMIT, self.peer.listen(self.filter.clone())) => r,
            };
            match opened {
                Ok(Ok(mut sub)) => {
                    let accepted = events_of(sub.acknowledged());
                    if accepted.is_empty() {
                        tracing::debug!(server = %self.server, "subscriptions/listen: the server honours none of the list changes asked for");
                        return;
                    }
                    // Whatever changed while no stream was open.
                    if announce {
                        for e in &accepted {
                            self.hooks.on_event(&self.server, e.clone());
                        }
                    }
                    announce = true;
                    let opened_at = Instant::now();
                    loop {
                        let next = tokio::select! {
                            () = self.stop.cancelled() => {
                                let _ = sub.cancel().await;
                                return;
                            }
                            n = sub.next() => n,
                        };
                        match next {
                            Ok(Some(n)) => {
                                if let Some(e) = event_of(&n) {
                                    self.hooks.on_event(&self.server, e);
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                tracing::debug!(server = %self.server, "subscriptions/listen: {e}");
                                break;
                            }
                        }
                    }
                    if let Some(SubscriptionEnd::Lagged { capacity }) = sub.end() {
                        tracing::debug!(server = %self.server, "subscriptions/listen: more than {capacity} notifications unread; listening again");
                    }
                    if opened_at.elapsed() >= HEALTHY {
                        failures = 0;
                    } else {
                        failures = failures.saturating_add(1);
                    }
                }
                Ok(Err(ServiceError::TransportClosed)) => return,
                Ok(Err(e)) if refused(&e) => {
                    tracing::debug!(server = %self.server, "subscriptions/listen refused ({e}); its list changes will not be heard");
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(server = %self.server, "subscriptions/listen failed: {e}");
                    failures = failures.saturating_add(1);
                    announce = true;
                }
                Err(_) => {
                    tracing::debug!(server = %self.server, "subscriptions/listen: no acknowledgment within {OPEN_LIMIT:?}");
                    failures = failures.saturating_add(1);
                    announce = true;
                }
            }
            if self.peer.is_transport_closed() {
                return;
            }
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(wait_after(failures)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_only_for_what_the_server_declared() {
        let none = ServerCapabilities::default();
        assert!(filter_for(&none).is_none());

        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .build();
        let f = filter_for(&caps).unwrap();
        assert_eq!(f.tools_list_changed, Some(true));
        assert_eq!(f.prompts_list_changed, None);
        assert_eq!(f.resources_list_changed, None);
        assert_eq!(f.resource_subscriptions, None);

        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .build();
        let f = filter_for(&caps).unwrap();
        assert_eq!(f.resources_list_changed, Some(true));
        assert_eq!(events_of(&f).len(), 2);
    }

    #[test]
    fn the_wait_doubles_and_is_capped() {
        assert_eq!(wait_after(0), Duration::from_secs(1));
        assert_eq!(wait_after(1), Duration::from_secs(2));
        assert_eq!(wait_after(3), Duration::from_secs(8));
        assert_eq!(wait_after(6), MAX_WAIT);
        assert_eq!(wait_after(u32::MAX), MAX_WAIT);
    }
}
