//! Resource subscriptions to a server on protocol 2026-07-28, which has no
//! `resources/subscribe`: the client names the resources in a `subscriptions/listen`
//! stream's `resourceSubscriptions`, and the server sends
//! `notifications/resources/updated` for them on that stream only. The connection keeps
//! one such stream for the set of URIs its owner wants now
//! ([`Connection::set_resource_subscriptions`](super::Connection::set_resource_subscriptions)):
//! a new set replaces the stream (cancelled, then opened with the new set), an empty set
//! ends it, and each update reaches the hooks as [`ServerEvent::ResourceUpdated`], as an
//! older server's would.
//!
//! Rules (those of the list watch, `watch`, plus):
//! - the latest set wins: sets are numbered, each acknowledgment says which set it
//!   answers, and a caller waits for its own set's (or a later one's);
//! - a stream that ends by itself is opened again with the same set after the list
//!   watch's waits, and every URI it carries is announced as updated (an update may
//!   have been missed); a refusal is final until the set changes;
//! - one task per connection, started by the first set, ended with the connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient, ServiceError};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::watch::{HEALTHY, OPEN_LIMIT, refused, wait_after};
use crate::handler::{ClientHooks, ServerEvent};

/// The set of URIs wanted now, numbered.
#[derive(Debug, Clone, Default)]
struct Wanted {
    set: u64,
    uris: Vec<String>,
}

/// The server's answer to set `set`: the URIs it honours, or why there is no stream.
#[derive(Debug, Clone)]
struct Ack {
    set: u64,
    outcome: Result<Vec<String>, String>,
}

/// The resource watch of one connection (see the module doc).
pub(crate) struct ResourceWatch {
    want: watch::Sender<Wanted>,
    acks: watch::Receiver<Ack>,
    _stop: DropGuard,
}

impl ResourceWatch {
    pub(crate) fn spawn(
        peer: Peer<RoleClient>,
        server: Arc<str>,
        hooks: Arc<dyn ClientHooks>,
    ) -> Self {
        let (want, want_rx) = watch::channel(Wanted::default());
        let (ack_tx, acks) = watch::channel(Ack {
            set: 0,
            outcome: Ok(Vec::new()),
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

    /// Replaces the set of URIs; returns its number, for [`Self::acked`].
    pub(crate) fn set(&self, uris: Vec<String>) -> u64 {
        let mut number = 0;
        self.want.send_modify(|w| {
            w.set += 1;
            w.uris = uris;
            number = w.set;
        });
        number
    }

    /// The server's answer to set `set` (or to a later one), waiting up to `limit`.
    pub(crate) async fn acked(&self, set: u64, limit: Duration) -> Result<Vec<String>, String> {
        let mut acks = self.acks.clone();
        match tokio::time::timeout(limit, acks.wait_for(|a| a.set >= set)).await {
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
    /// The set changed: open the new one at once.
    Changed,
    /// By itself, after living this long.
    After(Duration),
    /// The connection or the watch is gone.
    Stop,
}

impl Task {
    fn answer(&self, set: u64, outcome: Result<Vec<String>, String>) {
        self.acks.send_replace(Ack { set, outcome });
    }

    fn updated(&self, uri: String) {
        self.hooks
            .on_event(&self.server, ServerEvent::ResourceUpdated { uri });
    }

    /// Waits for a new set; `false` when the watch is gone.
    async fn next_set(&mut self) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            r = self.want.changed() => r.is_ok(),
        }
    }

    async fn run(mut self) {
        let mut failures = 0u32;
        let mut announce = false;
        loop {
            let wanted = self.want.borrow_and_update().clone();
            if wanted.uris.is_empty() {
                self.answer(wanted.set, Ok(Vec::new()));
                announce = false;
                if !self.next_set().await {
                    return;
                }
                continue;
            }
            let filter = SubscriptionFilter::builder()
                .resource_subscriptions(wanted.uris.clone())
                .build();
            let opened = tokio::select! {
                () = self.stop.cancelled() => return,
                r = self.want.changed() => {
                    if r.is_err() {
                        return;
                    }
                    continue;
                }
                r = tokio::time::timeout(OPEN_LIMIT, self.peer.listen(filter)) => r,
            };
            match opened {
                Ok(Ok(mut sub)) => {
                    let honoured = sub
                        .acknowledged()
                        .resource_subscriptions
                        .clone()
                        .unwrap_or_default();
                    self.answer(wanted.set, Ok(honoured.clone()));
                    if announce {
                        for uri in honoured {
                            self.updated(uri);
                        }
                    }
                    let opened_at = Instant::now();
                    let ended = loop {
                        tokio::select! {
                            () = self.stop.cancelled() => {
                                let _ = sub.cancel().await;
                                break Ended::Stop;
                            }
                            r = self.want.changed() => {
                                let _ = sub.cancel().await;
                                break if r.is_ok() { Ended::Changed } else { Ended::Stop };
                            }
                            n = sub.next() => match n {
                                Ok(Some(ServerNotification::ResourceUpdatedNotification(u))) => {
                                    self.updated(u.params.uri);
                                }
                                Ok(Some(_)) => {}
                                Ok(None) => break Ended::After(opened_at.elapsed()),
                                Err(e) => {
                                    tracing::debug!(server = %self.server, "resource subscriptions: {e}");
                                    break Ended::After(opened_at.elapsed());
                                }
                            },
                        }
                    };
                    match ended {
                        Ended::Stop => return,
                        Ended::Changed => {
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
                }
                Ok(Err(ServiceError::TransportClosed)) => {
                    self.answer(wanted.set, Err("the connection closed".into()));
                    return;
                }
                Ok(Err(e)) if refused(&e) => {
                    self.answer(
                        wanted.set,
                        Err(format!("the server refused `subscriptions/listen`: {e}")),
                    );
                    // Not asked again until the set changes.
                    if !self.next_set().await {
                        return;
                    }
                    continue;
                }
                Ok(Err(e)) => {
                    self.answer(
                        wanted.set,
                        Err(format!("`subscriptions/listen` failed: {e}")),
                    );
                    failures = failures.saturating_add(1);
                    announce = true;
                }
                Err(_) => {
                    self.answer(
                        wanted.set,
                        Err(format!(
                            "no acknowledgment of `subscriptions/listen` within {} s",
                            OPEN_LIMIT.as_secs()
                        )),
                    );
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
                r = self.want.changed() => {
                    if r.is_err() {
                        return;
                    }
                    // A new set is tried at once.
                    failures = 0;
                }
            }
        }
    }
}
