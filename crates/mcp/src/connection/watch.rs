//! The `subscriptions/listen` streams of a server on protocol 2026-07-28. A server on
//! an older revision sends `notifications/*/list_changed` and
//! `notifications/resources/updated` unasked (the handler passes them on); one on
//! 2026-07-28 sends them only on a stream the client opened and only for what it named
//! there (SEP-2575: "the server MUST NOT send notification types the client has not
//! explicitly requested"; `resources/subscribe` is gone). A connection keeps up to two:
//! - the list watch, opened at connect for the list kinds the server declared
//!   (`tools`/`prompts`/`resources` `listChanged`, [`filter_for`]), for its life;
//! - the resource watch, from the first
//!   [`Connection::set_resource_subscriptions`](super::Connection::set_resource_subscriptions)
//!   on: the URIs wanted now; a new set replaces the stream (the new one opened first,
//!   the old one heard until the new one is acknowledged, then cancelled: an update of a
//!   URI in both sets is not lost in between, and may come twice), an empty set ends
//!   it. Requests sent on the connection after a change wait for its acknowledgment
//!   ([`Watch::settled`]), so an update they cause is heard.
//!
//! Both are one [`Watch`]: a task keeping one stream open for the latest filter, each
//! notification handed to the hooks as the handler would ([`ServerEvent`]). Rules:
//! - the latest filter wins: filters are numbered, each acknowledgment says which one
//!   it answers, and a caller waits for its own (or a later one's) with [`Watch::acked`];
//! - a stream that ends by itself (the server closed it, the transport broke it, the
//!   consumer lagged) is opened again, and everything it carries is announced as
//!   changed or updated, since news may have been missed in between; the wait before
//!   opening again starts at 1 s and doubles with each stream that failed or lived less
//!   than [`HEALTHY`] (30 s), up to [`MAX_WAIT`] (60 s), so a server that closes every
//!   stream at once costs one request a minute, not a loop;
//! - a refusal (method not found, invalid request or params), or an acknowledgment
//!   that honours nothing, is final until the filter changes (for the list watch: for
//!   the connection's life);
//! - one task per watch, ended when the watch is dropped (with the connection, or by
//!   [`Connection::close`](super::Connection::close)) and when the transport closes;
//! - memory: rmcp's buffer of
//!   [`DEFAULT_SUBSCRIPTION_CHANNEL_CAPACITY`](rmcp::service::DEFAULT_SUBSCRIPTION_CHANNEL_CAPACITY)
//!   (64) notifications per stream; a server that floods it ends the stream as lagged, which
//!   counts as a short-lived stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{ErrorCode, ServerCapabilities, ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient, ServiceError, Subscription, SubscriptionEnd};
use tokio::sync::watch;
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
const OPEN_LIMIT: Duration = Duration::from_secs(30);

/// The list kinds to ask `caps`'s server for: those it declared `listChanged` for.
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

/// The filter naming `uris` (`None`, no stream, when there are none).
pub(crate) fn resources_filter(uris: Vec<String>) -> Option<SubscriptionFilter> {
    (!uris.is_empty()).then(|| {
        SubscriptionFilter::builder()
            .resource_subscriptions(uris)
            .build()
    })
}

/// The wait before the next attempt after `failures` failed or short-lived streams in
/// a row: 1 s, 2 s, 4 s, … up to [`MAX_WAIT`].
pub(crate) fn wait_after(failures: u32) -> Duration {
    FIRST_WAIT
        .saturating_mul(1u32 << failures.min(6))
        .min(MAX_WAIT)
}

/// The event a notification on a stream stands for.
fn event_of(n: ServerNotification) -> Option<ServerEvent> {
    match n {
        ServerNotification::ToolListChangedNotification(_) => Some(ServerEvent::ToolsChanged),
        ServerNotification::PromptListChangedNotification(_) => Some(ServerEvent::PromptsChanged),
        ServerNotification::ResourceListChangedNotification(_) => {
            Some(ServerEvent::ResourcesChanged)
        }
        ServerNotification::ResourceUpdatedNotification(u) => {
            Some(ServerEvent::ResourceUpdated { uri: u.params.uri })
        }
        _ => None,
    }
}

/// Everything `accepted` carries, as events (what a reopened stream announces).
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
    for uri in accepted.resource_subscriptions.iter().flatten() {
        out.push(ServerEvent::ResourceUpdated { uri: uri.clone() });
    }
    out
}

/// The next notification on `sub` (pending while there is none to read); `None` once
/// it ended, however.
async fn next_on(sub: &mut Option<Subscription>) -> Option<ServerNotification> {
    match sub {
        Some(s) => s.next().await.ok().flatten(),
        None => std::future::pending().await,
    }
}

/// Cancels `sub`'s stream, if there is one.
async fn end_stream(sub: &mut Option<Subscription>) {
    if let Some(mut s) = sub.take() {
        let _ = s.cancel().await;
    }
}

/// Whether `e` says the server does not serve `subscriptions/listen` at all.
fn refused(e: &ServiceError) -> bool {
    matches!(e, ServiceError::McpError(d)
        if d.code == ErrorCode::METHOD_NOT_FOUND
            || d.code == ErrorCode::INVALID_REQUEST
            || d.code == ErrorCode::INVALID_PARAMS)
}

/// The filter wanted now, numbered (`None`: no stream).
#[derive(Debug, Clone, Default)]
struct Wanted {
    number: u64,
    filter: Option<SubscriptionFilter>,
}

/// The server's answer to filter `number`: what it honours, or why there is no stream.
#[derive(Debug, Clone)]
struct Ack {
    number: u64,
    outcome: Result<SubscriptionFilter, String>,
}

/// One kept stream (see the module doc); its task ends when this is dropped.
pub(crate) struct Watch {
    want: watch::Sender<Wanted>,
    acks: watch::Receiver<Ack>,
    _stop: DropGuard,
}

impl Watch {
    /// Starts keeping a stream to `peer` for `filter` (`None`: none until
    /// [`Self::set`]).
    pub(crate) fn spawn(
        peer: Peer<RoleClient>,
        server: Arc<str>,
        hooks: Arc<dyn ClientHooks>,
        filter: Option<SubscriptionFilter>,
    ) -> Self {
        let (want, want_rx) = watch::channel(Wanted { number: 0, filter });
        let (ack_tx, acks) = watch::channel(Ack {
            number: 0,
            outcome: Ok(SubscriptionFilter::default()),
        });
        let stop = CancellationToken::new();
        let task = Task {
            peer,
            server,
            hooks,
            want: want_rx,
            acks: ack_tx,
            stop: stop.clone(),
        };
        tokio::spawn(task.run());
        Self {
            want,
            acks,
            _stop: stop.drop_guard(),
        }
    }

    /// Replaces the filter; returns its number, for [`Self::acked`].
    pub(crate) fn set(&self, filter: Option<SubscriptionFilter>) -> u64 {
        let mut number = 0;
        self.want.send_modify(|w| {
            w.number += 1;
            w.filter = filter;
            number = w.number;
        });
        number
    }

    /// Waits, up to `limit`, until the server answered the latest filter (at once when
    /// it has): a request sent afterwards reaches the server after the stream it asked
    /// for, so an update that request causes is heard.
    pub(crate) async fn settled(&self, limit: Duration) {
        let latest = self.want.borrow().number;
        if self.acks.borrow().number < latest {
            let _ = self.acked(latest, limit).await;
        }
    }

    /// The server's answer to filter `number` (or to a later one), waiting up to
    /// `limit`.
    pub(crate) async fn acked(
        &self,
        number: u64,
        limit: Duration,
    ) -> Result<SubscriptionFilter, String> {
        let mut acks = self.acks.clone();
        match tokio::time::timeout(limit, acks.wait_for(|a| a.number >= number)).await {
            Ok(Ok(ack)) => ack.outcome.clone(),
            Ok(Err(_)) => Err("the connection closed".into()),
            Err(_) => Err(format!(
                "no acknowledgment within {} s",
                limit.as_secs_f32()
            )),
        }
    }
}

struct Task {
    peer: Peer<RoleClient>,
    server: Arc<str>,
    hooks: Arc<dyn ClientHooks>,
    want: watch::Receiver<Wanted>,
    acks: watch::Sender<Ack>,
    stop: CancellationToken,
}

/// How one stream ended.
enum Ended {
    /// The filter changed: open the new one at once, keeping this stream until then.
    Changed(Box<Subscription>),
    /// By itself, after living this long.
    After(Duration),
    /// The watch or the connection is gone.
    Stop,
}

impl Task {
    fn answer(&self, number: u64, outcome: Result<SubscriptionFilter, String>) {
        self.acks.send_replace(Ack { number, outcome });
    }

    fn tell(&self, event: ServerEvent) {
        self.hooks.on_event(&self.server, event);
    }

    /// How `sub`, open since `opened_at`, ended by itself.
    fn ended_by_itself(&self, sub: &Subscription, opened_at: Instant) -> Ended {
        if let Some(SubscriptionEnd::Lagged { capacity }) = sub.end() {
            tracing::debug!(server = %self.server, "subscriptions/listen: more than {capacity} notifications unread; listening again");
        }
        Ended::After(opened_at.elapsed())
    }

    /// Waits for a new filter; `false` when the watch is gone.
    async fn next_filter(&mut self) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            r = self.want.changed() => r.is_ok(),
        }
    }

    async fn run(mut self) {
        let mut failures = 0u32;
        // Whether news may have been missed: set once an attempt fails or a stream ends
        // by itself (what the stream carries was read before it was asked for).
        let mut announce = false;
        // The stream of the filter before this one, heard until this one's stream is
        // acknowledged or fails (make before break: what the two share is never
        // unheard in between).
        let mut old: Option<Subscription> = None;
        'filters: loop {
            let wanted = self.want.borrow_and_update().clone();
            let Some(filter) = wanted.filter else {
                end_stream(&mut old).await;
                self.answer(wanted.number, Ok(SubscriptionFilter::default()));
                announce = false;
                if !self.next_filter().await {
                    return;
                }
                continue;
            };
            let opened = {
                let listen = tokio::time::timeout(OPEN_LIMIT, self.peer.listen(filter));
                tokio::pin!(listen);
                loop {
                    tokio::select! {
                        () = self.stop.cancelled() => {
                            end_stream(&mut old).await;
                            return;
                        }
                        r = self.want.changed() => {
                            if r.is_err() {
                                end_stream(&mut old).await;
                                return;
                            }
                            continue 'filters;
                        }
                        r = &mut listen => break r,
                        n = next_on(&mut old), if old.is_some() => match n {
                            Some(n) => {
                                if let Some(e) = event_of(n) {
                                    self.tell(e);
                                }
                            }
                            None => {
                                // It ended by itself before the new one came.
                                old = None;
                                announce = true;
                            }
                        },
                    }
                }
            };
            end_stream(&mut old).await;
            let ended = match opened {
                Ok(Ok(mut sub)) => {
                    let accepted = sub.acknowledged().clone();
                    self.answer(wanted.number, Ok(accepted.clone()));
                    let carried = events_of(&accepted);
                    if carried.is_empty() {
                        tracing::debug!(server = %self.server, "subscriptions/listen: the server honours nothing asked for");
                        let _ = sub.cancel().await;
                        if !self.next_filter().await {
                            return;
                        }
                        continue;
                    }
                    if announce {
                        for e in carried {
                            self.tell(e);
                        }
                    }
                    let opened_at = Instant::now();
                    loop {
                        tokio::select! {
                            () = self.stop.cancelled() => {
                                let _ = sub.cancel().await;
                                break Ended::Stop;
                            }
                            r = self.want.changed() => {
                                if r.is_err() {
                                    let _ = sub.cancel().await;
                                    break Ended::Stop;
                                }
                                break Ended::Changed(Box::new(sub));
                            }
                            n = sub.next() => match n {
                                Ok(Some(n)) => {
                                    if let Some(e) = event_of(n) {
                                        self.tell(e);
                                    }
                                }
                                Ok(None) => break self.ended_by_itself(&sub, opened_at),
                                Err(e) => {
                                    tracing::debug!(server = %self.server, "subscriptions/listen: {e}");
                                    break self.ended_by_itself(&sub, opened_at);
                                }
                            },
                        }
                    }
                }
                Ok(Err(ServiceError::TransportClosed)) => {
                    self.answer(wanted.number, Err("the connection closed".into()));
                    return;
                }
                Ok(Err(e)) if refused(&e) => {
                    tracing::debug!(server = %self.server, "subscriptions/listen refused ({e})");
                    self.answer(
                        wanted.number,
                        Err(format!("the server refused `subscriptions/listen`: {e}")),
                    );
                    if !self.next_filter().await {
                        return;
                    }
                    continue;
                }
                Ok(Err(e)) => {
                    tracing::debug!(server = %self.server, "subscriptions/listen failed: {e}");
                    self.answer(
                        wanted.number,
                        Err(format!("`subscriptions/listen` failed: {e}")),
                    );
                    Ended::After(Duration::ZERO)
                }
                Err(_) => {
                    let why = format!(
                        "no acknowledgment of `subscriptions/listen` within {} s",
                        OPEN_LIMIT.as_secs()
                    );
                    tracing::debug!(server = %self.server, "{why}");
                    self.answer(wanted.number, Err(why));
                    Ended::After(Duration::ZERO)
                }
            };
            match ended {
                Ended::Stop => return,
                Ended::Changed(sub) => {
                    // Kept until the new filter's stream is acknowledged.
                    old = Some(*sub);
                    failures = 0;
                    announce = false;
                    continue;
                }
                Ended::After(lived) => {
                    announce = true;
                    failures = if lived >= HEALTHY {
                        0
                    } else {
                        failures.saturating_add(1)
                    };
                }
            }
            if self.peer.is_transport_closed() {
                return;
            }
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(wait_after(failures)) => {}
                r = self.want.changed() => {
                    if r.is_err() {
                        return;
                    }
                    // A new filter is tried at once.
                    failures = 0;
                }
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

        let f = resources_filter(vec!["file:///a".into()]).unwrap();
        assert_eq!(
            events_of(&f),
            [ServerEvent::ResourceUpdated {
                uri: "file:///a".into()
            }]
        );
        assert!(resources_filter(Vec::new()).is_none());
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
