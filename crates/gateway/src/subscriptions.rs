//! Resource subscriptions passed through: a client subscribes to one of the gateway's
//! resource URIs, the gateway subscribes to the server behind it (once, however many
//! clients want the same resource), and each `notifications/resources/updated` from
//! that server reaches every client subscribed to it, under the URI that client used.
//!
//! Two kinds of subscriber: a session (protocol 2025-11-25 and older, through
//! `resources/subscribe` / `resources/unsubscribe`; updates are notifications on the
//! session) and a `subscriptions/listen` request of a client on 2026-07-28 (its
//! filter's `resourceSubscriptions`; updates go out on that request's stream). A
//! subscriber that goes (a session ends, a listen is cancelled) takes its
//! subscriptions with it, and a server no client wants a resource of any more is told
//! `resources/unsubscribe`. A server that reconnects has lost its subscriptions: every
//! resource still wanted is subscribed again.
//!
//! Only servers that declared `resources.subscribe` can be subscribed to; anything else
//! is refused with the reason. A server on 2026-07-28, which replaced
//! `resources/subscribe` with `subscriptions/listen`, is subscribed to through the one
//! listen stream its connection keeps for every resource wanted from it
//! (`Connection::set_resource_subscriptions`): the set is recomputed and handed over
//! under the table's lock, so the latest set is always the table's; a subscription the
//! server's acknowledgment leaves out is refused.
//!
//! A second subscriber to a resource whose upstream subscription is still being made
//! waits for it, and is refused with it when it fails (before, it was told yes and then
//! heard nothing); a subscriber that goes away mid-way takes its entry with it. A
//! `resources/subscribe` the client cancelled while it was being made is undone (rmcp lets
//! the handler run on after a cancellation).
//!
//! A server that floods updates costs bounded memory: a session has at most one update
//! per resource on its way (another for the same resource meanwhile is the same news),
//! and a listen request's queue holds at most [`MAX_PER_SUBSCRIBER`] (256; more are dropped:
//! the client already has that many to act on).
//!
//! Must not: send an update to a client that did not subscribe to that resource,
//! hold the table's lock across an `.await`, or grow without bound (at most
//! [`MAX_PER_SUBSCRIBER`] per subscriber and [`MAX_SUBSCRIPTIONS`] (4096) in all).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use rmcp::model::{ErrorCode, ErrorData, ProtocolVersion, ResourceUpdatedNotificationParam};
use rmcp::service::{Peer, RoleServer};
use switchboard_mcp::{CallOptions, Connection, ResourceSet};
use tokio::sync::{mpsc, watch};

use crate::gateway::Shared;

/// At most this many subscriptions per session or listen request.
pub const MAX_PER_SUBSCRIBER: usize = 256;
/// At most this many in the whole gateway.
pub const MAX_SUBSCRIPTIONS: usize = 4096;
/// How long a server on 2026-07-28 gets to acknowledge a new set of subscriptions.
const ACK_LIMIT: Duration = Duration::from_secs(10);

/// Where one subscriber's updates go.
#[derive(Clone)]
pub(crate) enum Subscriber {
    /// A session: `notifications/resources/updated` on its peer.
    Session(Peer<RoleServer>),
    /// A `subscriptions/listen` request: the URI, for its stream (a queue of
    /// [`MAX_PER_SUBSCRIBER`], see [`listen_queue`]).
    Listen(mpsc::Sender<String>),
}

struct Entry {
    owner: u64,
    server: String,
    upstream: String,
    downstream: String,
    to: Subscriber,
}

/// The outcome of an upstream subscription being made: `None` until it is known, then
/// `Ok` or the refusal's message.
type Outcome = Option<Result<(), String>>;

/// Who is subscribed to what.
#[derive(Default)]
pub(crate) struct Subscriptions {
    entries: Mutex<Vec<Entry>>,
    /// (session, URI) of the updates on their way to a session.
    sending: Arc<Mutex<HashSet<(u64, String)>>>,
    /// Upstream subscriptions being made, by (server, upstream URI): their outcome.
    making: Mutex<HashMap<(String, String), watch::Receiver<Outcome>>>,
}

/// A listen request's queue of updated URIs.
pub(crate) fn listen_queue() -> (mpsc::Sender<String>, mpsc::Receiver<String>) {
    mpsc::channel(MAX_PER_SUBSCRIBER)
}

/// What [`Subscriptions::add`] did.
#[derive(Debug)]
enum Added {
    /// The first subscriber of this server's resource: subscribe upstream, then tell
    /// the others waiting through the sender ([`Making`]).
    First(watch::Sender<Outcome>),
    /// Someone (maybe this subscriber) already wants it; while its upstream
    /// subscription is being made, its outcome.
    Again(Option<watch::Receiver<Outcome>>),
}

impl Subscriptions {
    fn add(
        &self,
        owner: u64,
        route: (&str, &str),
        downstream: &str,
        to: Subscriber,
    ) -> Result<Added, String> {
        let (server, upstream) = route;
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| "the subscription table is unavailable".to_string())?;
        if entries
            .iter()
            .any(|e| e.owner == owner && e.downstream == downstream)
        {
            return Ok(Added::Again(None));
        }
        if entries.iter().filter(|e| e.owner == owner).count() >= MAX_PER_SUBSCRIBER {
            return Err(format!(
                "at most {MAX_PER_SUBSCRIBER} resource subscriptions per client; unsubscribe from one first"
            ));
        }
        if entries.len() >= MAX_SUBSCRIPTIONS {
            return Err(format!(
                "the gateway holds its limit of {MAX_SUBSCRIPTIONS} resource subscriptions; try again later"
            ));
        }
        let first = !entries
            .iter()
            .any(|e| e.server == server && e.upstream == upstream);
        let key = (server.to_owned(), upstream.to_owned());
        let mut making = self
            .making
            .lock()
            .map_err(|_| "the subscription table is unavailable".to_string())?;
        let added = if first {
            let (tx, rx) = watch::channel(None);
            making.insert(key, rx);
            Added::First(tx)
        } else {
            Added::Again(making.get(&key).cloned())
        };
        entries.push(Entry {
            owner,
            server: server.to_owned(),
            upstream: upstream.to_owned(),
            downstream: downstream.to_owned(),
            to,
        });
        Ok(added)
    }

    /// The upstream subscription to `server`'s `upstream` is made or refused: the
    /// subscribers waiting for it hear `outcome`.
    fn made(&self, server: &str, upstream: &str, tx: &watch::Sender<Outcome>, outcome: Outcome) {
        if let Ok(mut making) = self.making.lock() {
            // Only its own: a later first subscriber may have started another.
            let key = (server.to_owned(), upstream.to_owned());
            if making
                .get(&key)
                .is_some_and(|rx| rx.same_channel(&tx.subscribe()))
            {
                making.remove(&key);
            }
        }
        tx.send_replace(outcome);
    }

    /// Removes `owner`'s subscription to `downstream`: the server's resource, and
    /// whether no one wants it any more.
    fn remove(&self, owner: u64, downstream: &str) -> Option<(String, String, bool)> {
        let mut entries = self.entries.lock().ok()?;
        let i = entries
            .iter()
            .position(|e| e.owner == owner && e.downstream == downstream)?;
        let e = entries.swap_remove(i);
        let last = !entries
            .iter()
            .any(|o| o.server == e.server && o.upstream == e.upstream);
        Some((e.server, e.upstream, last))
    }

    /// Removes every subscription of `owner`: the servers' resources no one wants now.
    fn remove_owner(&self, owner: u64) -> Vec<(String, String)> {
        let Ok(mut entries) = self.entries.lock() else {
            return Vec::new();
        };
        let mut gone: Vec<(String, String)> = Vec::new();
        entries.retain(|e| {
            if e.owner == owner {
                gone.push((e.server.clone(), e.upstream.clone()));
                false
            } else {
                true
            }
        });
        gone.sort();
        gone.dedup();
        gone.retain(|(s, u)| !entries.iter().any(|e| &e.server == s && &e.upstream == u));
        gone
    }

    /// Who gets an update of `server`'s `upstream` resource, and under which URI.
    fn targets(&self, server: &str, upstream: &str) -> Vec<(u64, Subscriber, String)> {
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        entries
            .iter()
            .filter(|e| e.server == server && e.upstream == upstream)
            .map(|e| (e.owner, e.to.clone(), e.downstream.clone()))
            .collect()
    }

    /// The resources of `server` someone is subscribed to.
    fn wanted(&self, server: &str) -> Vec<String> {
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        wanted_in(&entries, server)
    }

    /// Hands `conn` (a server on 2026-07-28) the resources of `server` wanted now,
    /// under the table's lock, so that sets reach the connection in the table's order.
    fn hand_over(&self, conn: &Connection, server: &str) -> Option<ResourceSet> {
        let entries = self.entries.lock().ok()?;
        Some(conn.set_resource_subscriptions(wanted_in(&entries, server)))
    }
}

fn wanted_in(entries: &[Entry], server: &str) -> Vec<String> {
    let mut uris: Vec<String> = entries
        .iter()
        .filter(|e| e.server == server)
        .map(|e| e.upstream.clone())
        .collect();
    uris.sort();
    uris.dedup();
    uris
}

/// Whether `conn` speaks 2026-07-28, whose subscriptions live on a listen stream.
fn listens(conn: &Connection) -> bool {
    conn.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether `server`'s connection can be subscribed to; the reason when not.
pub(crate) fn subscribable(conn: &Connection, server: &str) -> Result<(), String> {
    let declared = conn
        .capabilities()
        .resources
        .and_then(|r| r.subscribe)
        .unwrap_or(false);
    if declared {
        Ok(())
    } else {
        Err(format!(
            "server `{server}` does not offer resource subscriptions; read the resource again \
             to see changes"
        ))
    }
}

fn refused(message: String) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, message, None)
}

/// Subscribes `owner` to `downstream` (the URI it used), which routes to `server`'s
/// `upstream`; the server hears `resources/subscribe` if no one had asked before.
pub(crate) async fn subscribe(
    shared: &Arc<Shared>,
    owner: u64,
    route: (&str, &str),
    downstream: &str,
    to: Subscriber,
) -> Result<(), ErrorData> {
    let server = route.0;
    let conn = shared.host.connection(server).ok_or_else(|| {
        refused(format!(
            "server `{server}` is not connected; subscribe again once it is"
        ))
    })?;
    subscribable(&conn, server).map_err(refused)?;
    let tx = match shared
        .subs
        .add(owner, route, downstream, to)
        .map_err(refused)?
    {
        Added::Again(None) => return Ok(()),
        Added::Again(Some(mut making)) => {
            // Another client's subscription to this resource is being made: its outcome
            // is this one's. Until it is known this entry stands on nothing, so it goes
            // if this future is dropped meanwhile.
            let mut waiting = Waiting {
                subs: &shared.subs,
                owner,
                downstream,
                keep: false,
            };
            let outcome = making
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|o| o.clone());
            if outcome == Some(Ok(())) {
                waiting.keep = true;
                return Ok(());
            }
            drop(waiting);
            if listens(&conn) {
                shared.subs.hand_over(&conn, server);
            }
            return Err(refused(match outcome {
                Some(Err(message)) => message,
                _ => format!(
                    "the subscription to server `{server}` was not finished; subscribe again"
                ),
            }));
        }
        Added::First(tx) => tx,
    };
    // However this ends (answered, refused, or this future dropped mid-way), the
    // others waiting hear it, and a subscription not made leaves no entry.
    let mut making = Making {
        shared,
        owner,
        route,
        downstream,
        tx,
        done: false,
    };
    let result = make_upstream(shared, &conn, owner, route, downstream).await;
    making.finish(&result);
    result
}

/// A later subscriber waiting for the first's upstream subscription: its entry is
/// removed unless the subscription was made.
struct Waiting<'a> {
    subs: &'a Subscriptions,
    owner: u64,
    downstream: &'a str,
    keep: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.keep {
            self.subs.remove(self.owner, self.downstream);
        }
    }
}

/// The first subscriber's upstream subscription, being made (see [`subscribe`]).
struct Making<'a> {
    shared: &'a Shared,
    owner: u64,
    route: (&'a str, &'a str),
    downstream: &'a str,
    tx: watch::Sender<Outcome>,
    done: bool,
}

impl Making<'_> {
    fn finish(&mut self, result: &Result<(), ErrorData>) {
        let outcome = result
            .as_ref()
            .map(|_| ())
            .map_err(|e| e.message.to_string());
        let (server, upstream) = self.route;
        self.shared
            .subs
            .made(server, upstream, &self.tx, Some(outcome));
        self.done = true;
    }
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        if !self.done {
            let (server, upstream) = self.route;
            self.shared.subs.remove(self.owner, self.downstream);
            self.shared.subs.made(server, upstream, &self.tx, None);
        }
    }
}

/// Makes `owner`'s subscription to `route` upstream (it is the resource's first
/// subscriber); on failure its entry is gone and the error says why.
async fn make_upstream(
    shared: &Shared,
    conn: &Connection,
    owner: u64,
    route: (&str, &str),
    downstream: &str,
) -> Result<(), ErrorData> {
    let (server, upstream) = route;
    if listens(conn) {
        let Some(set) = shared.subs.hand_over(conn, server) else {
            shared.subs.remove(owner, downstream);
            return Err(refused("the subscription table is unavailable".into()));
        };
        let refusal = match conn.resource_subscriptions_acked(set, ACK_LIMIT).await {
            Ok(honoured) if honoured.iter().any(|u| u == upstream) => return Ok(()),
            Ok(_) => refused(format!(
                "server `{server}` does not take a subscription to this resource; read it \
                 again to see changes"
            )),
            Err(e) => crate::server::upstream_error(server, e),
        };
        shared.subs.remove(owner, downstream);
        shared.subs.hand_over(conn, server);
        return Err(refusal);
    }
    if let Err(e) = conn.subscribe(upstream, &CallOptions::default()).await {
        shared.subs.remove(owner, downstream);
        return Err(crate::server::upstream_error(server, e));
    }
    Ok(())
}

/// Ends `owner`'s subscription to `downstream` (nothing when it had none).
pub(crate) async fn unsubscribe(shared: &Shared, owner: u64, downstream: &str) {
    if let Some((server, upstream, true)) = shared.subs.remove(owner, downstream) {
        tell_unsubscribed(shared, &server, &upstream).await;
    }
}

/// Ends every subscription of `owner` (a session ended, a listen was cancelled); the
/// servers are told in the background.
pub(crate) fn end(shared: &Arc<Shared>, owner: u64) {
    let gone = shared.subs.remove_owner(owner);
    if gone.is_empty() {
        return;
    }
    let shared = shared.clone();
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move {
            for (server, upstream) in gone {
                tell_unsubscribed(&shared, &server, &upstream).await;
            }
        });
    }
}

async fn tell_unsubscribed(shared: &Shared, server: &str, upstream: &str) {
    let Some(conn) = shared.host.connection(server) else {
        return;
    };
    if listens(&conn) {
        // The listen stream carries the rest (or ends, when nothing is left).
        shared.subs.hand_over(&conn, server);
        return;
    }
    if let Err(e) = conn.unsubscribe(upstream, &CallOptions::default()).await {
        tracing::debug!(server, "resources/unsubscribe: {e}");
    }
}

/// `server` says its `upstream` resource changed: every subscriber hears it (see the
/// module doc for how a flood is bounded).
pub(crate) fn updated(shared: &Shared, server: &str, upstream: &str) {
    shared.subs.deliver(server, upstream);
}

impl Subscriptions {
    fn deliver(&self, server: &str, upstream: &str) {
        for (owner, to, uri) in self.targets(server, upstream) {
            match to {
                Subscriber::Listen(tx) => {
                    // Full: the client has MAX_PER_SUBSCRIBER updates to act on already.
                    let _ = tx.try_send(uri);
                }
                Subscriber::Session(peer) => {
                    let Ok(handle) = tokio::runtime::Handle::try_current() else {
                        continue;
                    };
                    let key = (owner, uri);
                    let first = self.sending.lock().is_ok_and(|mut s| s.insert(key.clone()));
                    if !first {
                        continue;
                    }
                    let sending = Arc::clone(&self.sending);
                    handle.spawn(async move {
                        // Taken off first: an update after this point is news again.
                        if let Ok(mut s) = sending.lock() {
                            s.remove(&key);
                        }
                        let param = ResourceUpdatedNotificationParam::new(key.1);
                        if let Err(e) = peer.notify_resource_updated(param).await {
                            tracing::debug!("notifications/resources/updated: {e}");
                        }
                    });
                }
            }
        }
    }
}

/// `server` (re)connected: its subscriptions went with the old connection, so every
/// resource still wanted is subscribed again.
pub(crate) async fn resubscribe(shared: &Shared, server: &str) {
    let wanted = shared.subs.wanted(server);
    if wanted.is_empty() {
        return;
    }
    let Some(conn) = shared.host.connection(server) else {
        return;
    };
    if listens(&conn) {
        shared.subs.hand_over(&conn, server);
        return;
    }
    for uri in wanted {
        if let Err(e) = conn.subscribe(&uri, &CallOptions::default()).await {
            tracing::warn!(
                server,
                "subscribing again to a resource after reconnecting: {e}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn listen() -> (Subscriber, mpsc::Receiver<String>) {
        let (tx, rx) = listen_queue();
        (Subscriber::Listen(tx), rx)
    }

    #[test]
    fn one_upstream_subscription_for_many_subscribers_and_updates_under_each_uri() {
        let t = Subscriptions::default();
        let (a, mut arx) = listen();
        let (b, mut brx) = listen();
        let route = ("s", "file:///x");
        let Ok(Added::First(tx)) = t.add(1, route, "file:///x", a.clone()) else {
            panic!("the first subscriber makes the upstream subscription");
        };
        assert!(matches!(
            t.add(1, route, "file:///x", a),
            Ok(Added::Again(None))
        ));
        let qualified = "switchboard-gateway://s/file:///x";
        // Another subscriber while it is being made: told how it went.
        let Ok(Added::Again(Some(rx))) = t.add(2, route, qualified, b) else {
            panic!("the second subscriber waits for the first's outcome");
        };
        t.made("s", "file:///x", &tx, Some(Ok(())));
        assert_eq!(*rx.borrow(), Some(Ok(())));
        assert!(t.making.lock().unwrap().is_empty());
        t.deliver("s", "file:///x");
        assert_eq!(arx.try_recv().unwrap(), "file:///x");
        assert_eq!(brx.try_recv().unwrap(), qualified);
        assert!(arx.try_recv().is_err(), "one update each");
        assert!(t.targets("s", "file:///y").is_empty());
        assert!(t.targets("other", "file:///x").is_empty());
        assert_eq!(t.wanted("s"), ["file:///x"]);
        // The first to leave does not end the upstream subscription; the last does.
        assert_eq!(
            t.remove(1, "file:///x"),
            Some(("s".into(), "file:///x".into(), false))
        );
        assert_eq!(t.remove(1, "file:///x"), None, "already gone");
        assert_eq!(
            t.remove_owner(2),
            [("s".to_string(), "file:///x".to_string())]
        );
        assert!(t.wanted("s").is_empty());
    }

    /// The race of two clients subscribing at once when the upstream subscription
    /// fails: the second hears the failure instead of a yes that never brings news; and
    /// a first subscriber's late outcome never ends a later first subscriber's wait.
    #[test]
    fn a_second_subscriber_hears_how_the_first_upstream_subscription_went() {
        let t = Subscriptions::default();
        let route = ("s", "u");
        let Ok(Added::First(tx)) = t.add(1, route, "u", listen().0) else {
            panic!("first");
        };
        let Ok(Added::Again(Some(mut rx))) = t.add(2, route, "u", listen().0) else {
            panic!("second, while the first is being made");
        };
        assert_eq!(*rx.borrow_and_update(), None, "not known yet");
        // The first fails: its entry goes, and the second is told why.
        t.remove(1, "u");
        t.made("s", "u", &tx, Some(Err("no such resource".into())));
        assert_eq!(*rx.borrow(), Some(Err("no such resource".to_string())));

        // A stale outcome: the old first subscriber finishes after a new one started.
        let t = Subscriptions::default();
        let Ok(Added::First(old)) = t.add(1, route, "u", listen().0) else {
            panic!("first");
        };
        t.remove(1, "u");
        let Ok(Added::First(new)) = t.add(3, route, "u", listen().0) else {
            panic!("a new first subscriber");
        };
        t.made("s", "u", &old, Some(Err("late".into())));
        let Ok(Added::Again(Some(rx))) = t.add(4, route, "u", listen().0) else {
            panic!("the new first subscription is still being made");
        };
        assert_eq!(*rx.borrow(), None);
        t.made("s", "u", &new, Some(Ok(())));
        assert_eq!(*rx.borrow(), Some(Ok(())));
    }

    #[test]
    fn subscriptions_are_bounded_per_subscriber() {
        let t = Subscriptions::default();
        for i in 0..MAX_PER_SUBSCRIBER {
            let uri = format!("file:///{i}");
            t.add(7, ("s", &uri), &uri, listen().0).unwrap();
        }
        let err = t.add(7, ("s", "file:///one-more"), "file:///one-more", listen().0);
        assert!(err.unwrap_err().contains("at most"));
        assert!(
            t.add(8, ("s", "file:///0"), "file:///0", listen().0)
                .is_ok()
        );
        assert_eq!(
            t.remove_owner(7).len(),
            MAX_PER_SUBSCRIBER - 1,
            "file:///0 is still wanted by 8"
        );
    }

    /// A listen request's queue stays bounded however many updates a server sends.
    #[test]
    fn a_flood_of_updates_fills_a_listen_queue_only_to_its_bound() {
        let t = Subscriptions::default();
        let (tx, mut rx) = listen_queue();
        t.add(1, ("s", "u"), "u", Subscriber::Listen(tx)).unwrap();
        for _ in 0..10_000 {
            t.deliver("s", "u");
        }
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        assert_eq!(n, MAX_PER_SUBSCRIBER);
    }

    #[derive(Clone, Default)]
    struct Counting(Arc<Mutex<Vec<String>>>);

    impl rmcp::ClientHandler for Counting {
        async fn on_resource_updated(
            &self,
            params: ResourceUpdatedNotificationParam,
            _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
        ) {
            self.0.lock().unwrap().push(params.uri);
        }
    }

    struct Plain;
    impl rmcp::ServerHandler for Plain {}

    /// A flood of updates to a session spawns one send per resource at a time: 10,000
    /// updates in a row (nothing else runs meanwhile on this one-thread runtime) reach
    /// the client as one; the next update after it went out is sent again.
    #[tokio::test(flavor = "current_thread")]
    async fn a_flood_to_a_session_is_one_update_per_resource_in_flight() {
        use rmcp::ServiceExt;
        let (a, b) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move { Plain.serve(a).await.unwrap() });
        let seen = Counting::default();
        let client = seen.clone().serve(b).await.unwrap();
        let server = server.await.unwrap();
        let t = Subscriptions::default();
        let session = Subscriber::Session(server.peer().clone());
        t.add(1, ("s", "u"), "gw://u", session).unwrap();
        for _ in 0..10_000 {
            t.deliver("s", "u");
        }
        let wait = |n: usize| {
            let seen = seen.clone();
            async move {
                for _ in 0..200 {
                    if seen.0.lock().unwrap().len() >= n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        wait(1).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(*seen.0.lock().unwrap(), ["gw://u"]);
        t.deliver("s", "u");
        wait(2).await;
        assert_eq!(
            seen.0.lock().unwrap().len(),
            2,
            "news again once the first went out"
        );
        drop(client);
    }
}
