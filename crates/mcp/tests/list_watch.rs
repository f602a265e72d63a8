//! The list watch of a connection on protocol 2026-07-28 (`subscriptions/listen`, kept
//! open so the server's list changes are heard) against servers that misbehave: one
//! that ends every stream at once, one that floods a stream with notifications, one
//! that refuses to serve it. And the connection's resource subscriptions on that
//! revision (a set of URIs on one listen stream): updates heard, a new set replacing
//! the stream, a URI the server leaves out reported, an empty set ending it. Each is an rmcp server over Streamable HTTP on 127.0.0.1
//! (a 2026-07-28 client is served without a session). The watch must back off, stay
//! bounded, give up on a refusal, keep the connection usable, and end with the
//! connection. (The real peer — the Python SDK server's list change heard and its
//! changed tool withheld — is `switchboard-host`'s `pins` test.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig, ServerNotification,
    SubscriptionFilter, ToolListChangedNotification,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext, SubscriptionSink};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use switchboard_mcp::{
    CallOptions, ClientHooks, ConnectOptions, Connection, ServerEvent, Target, TransportKind,
};
use switchboard_testkit::free_port;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Acknowledges, then ends the stream at once (a graceful final result).
    EndsAtOnce,
    /// Acknowledges, sends this many `tools/list_changed`, then keeps the stream open.
    Floods(usize),
    /// Serves no `subscriptions/listen` (rmcp's default: no filter accepted).
    Refuses,
    /// Honours resource subscriptions except `file:///refused`, and sends one update for
    /// each honoured URI, then keeps the stream open.
    Resources,
    /// Honours resource subscriptions and sends this many updates of the first URI.
    ResourceFlood(usize),
    /// Honours resource subscriptions after `ack_delay`; its `touch` tool sends an
    /// update of its `uri` on every open stream that named it.
    Touch,
}

#[derive(Clone)]
struct Server {
    mode: Mode,
    /// `subscriptions/listen` requests seen (accepted or not).
    asked: Arc<AtomicUsize>,
    /// Streams open now.
    open: Arc<AtomicUsize>,
    /// How long `subscriptions/listen` for resources waits before its acknowledgment.
    ack_delay: Duration,
    /// The open streams' URIs and sinks (for `touch`).
    streams: Arc<std::sync::Mutex<Vec<Stream>>>,
}

/// An open stream: its number, the URIs it named, where its notifications go.
type Stream = (u64, Vec<String>, SubscriptionSink);

/// Counts a stream open for as long as it lives.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::default())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "touch" {
            let uri = request.arguments.unwrap()["uri"]
                .as_str()
                .unwrap()
                .to_string();
            let sinks: Vec<SubscriptionSink> = self
                .streams
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, uris, _)| uris.contains(&uri))
                .map(|(_, _, sink)| sink.clone())
                .collect();
            for sink in &sinks {
                let note = ServerNotification::ResourceUpdatedNotification(
                    ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(
                        uri.clone(),
                    )),
                );
                sink.send(note).await.unwrap();
            }
            let text = format!("touched on {} streams", sinks.len());
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("still here")]).into())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if requested.resource_subscriptions.is_some() {
            // Blocks one of the runtime's threads: the other serves the rest meanwhile.
            std::thread::sleep(self.ack_delay);
        }
        let mut honoured = requested.clone();
        if let Some(uris) = &mut honoured.resource_subscriptions {
            uris.retain(|u| u != "file:///refused");
        }
        (self.mode != Mode::Refuses).then_some(honoured)
    }

    async fn listen(&self, sub: SubscriptionContext) -> Result<(), ErrorData> {
        self.open.fetch_add(1, Ordering::SeqCst);
        let _open = Open(self.open.clone());
        match self.mode {
            Mode::EndsAtOnce | Mode::Refuses => Ok(()),
            Mode::Touch => {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let id = NEXT.fetch_add(1, Ordering::SeqCst);
                let uris = sub
                    .accepted()
                    .resource_subscriptions
                    .clone()
                    .unwrap_or_default();
                let streams = self.streams.clone();
                streams.lock().unwrap().push((id, uris, sub.sink().clone()));
                sub.cancelled().await;
                streams.lock().unwrap().retain(|(i, _, _)| *i != id);
                Ok(())
            }
            Mode::Resources => {
                for uri in sub.accepted().resource_subscriptions.iter().flatten() {
                    let note = ServerNotification::ResourceUpdatedNotification(
                        ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(
                            uri.clone(),
                        )),
                    );
                    let _ = sub.sink().send(note).await;
                }
                sub.cancelled().await;
                Ok(())
            }
            Mode::Floods(n) => {
                for _ in 0..n {
                    let note = ServerNotification::ToolListChangedNotification(
                        ToolListChangedNotification::default(),
                    );
                    if !send_unless_cancelled(&sub, note).await {
                        break;
                    }
                }
                sub.cancelled().await;
                Ok(())
            }
            Mode::ResourceFlood(n) => {
                if let Some(uri) = sub
                    .accepted()
                    .resource_subscriptions
                    .iter()
                    .flatten()
                    .next()
                {
                    for _ in 0..n {
                        let note = ServerNotification::ResourceUpdatedNotification(
                            ResourceUpdatedNotification::new(
                                ResourceUpdatedNotificationParam::new(uri.clone()),
                            ),
                        );
                        if !send_unless_cancelled(&sub, note).await {
                            break;
                        }
                    }
                }
                sub.cancelled().await;
                Ok(())
            }
        }
    }
}

/// Sends `note` on the stream; `false` once the client cancelled it (a flood stops
/// there, as rmcp's server would, so a cancelled stream is not counted open while the
/// flood drains) or it is closed.
async fn send_unless_cancelled(sub: &SubscriptionContext, note: ServerNotification) -> bool {
    tokio::select! {
        () = sub.cancelled() => false,
        r = sub.sink().send(note) => r.is_ok(),
    }
}

/// Counts the list changes the watch hands on, and keeps the resource updates.
#[derive(Default)]
struct Heard(AtomicUsize, std::sync::Mutex<Vec<String>>);

impl Heard {
    /// Whether an update of `uri` is heard within 5 s.
    async fn hears(&self, uri: &str) -> bool {
        until(Duration::from_secs(5), || {
            self.1.lock().unwrap().iter().any(|u| u == uri)
        })
        .await
    }
}

impl ClientHooks for Heard {
    fn on_event(&self, _server: &str, event: ServerEvent) {
        match event {
            ServerEvent::ToolsChanged => {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
            ServerEvent::ResourceUpdated { uri } => self.1.lock().unwrap().push(uri),
            _ => {}
        }
    }
}

struct Running {
    server: Server,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mode: Mode) -> Running {
    serve_acking_after(mode, Duration::ZERO).await
}

/// [`serve`], with resource streams acknowledged after `ack_delay`.
async fn serve_acking_after(mode: Mode, ack_delay: Duration) -> Running {
    let server = Server {
        mode,
        asked: Arc::default(),
        open: Arc::default(),
        ack_delay,
        streams: Arc::default(),
    };
    let port = free_port();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let handler = server.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Running {
        server,
        url: format!("http://127.0.0.1:{port}/mcp"),
        task,
    }
}

async fn connect(url: &str, heard: &Arc<Heard>) -> Connection {
    let mut opts = ConnectOptions::new(
        "watched",
        Target::Http {
            url: url.to_string(),
            headers: vec![],
        },
    );
    opts.hooks = heard.clone();
    opts.watch_lists = true;
    opts.request_timeout = Duration::from_secs(10);
    let conn = Connection::connect(opts).await.expect("connect");
    assert_eq!(conn.transport_kind(), TransportKind::StatelessHttp);
    conn
}

async fn still_answers(conn: &Connection) {
    let r = conn
        .call_tool("anything", None, &CallOptions::default())
        .await
        .expect("the connection still answers");
    assert!(serde_json::to_string(&r).unwrap().contains("still here"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ends_every_stream_is_asked_again_with_growing_waits() {
    let running = serve(Mode::EndsAtOnce).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    // Opened at once, then again after 2 s and 4 s more (each stream lived 0 s): three
    // in the first 6.5 s, not a loop.
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let asked = running.server.asked.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&asked),
        "listen asked {asked} times in 6.5 s"
    );
    // Each stream opened again says the lists may have changed meanwhile.
    let changes = heard.0.load(Ordering::SeqCst);
    assert!(
        (1..asked).contains(&changes),
        "{changes} changes announced for {asked} streams"
    );
    still_answers(&conn).await;
    conn.close(Duration::from_millis(500)).await;
    let after_close = running.server.asked.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        running.server.asked.load(Ordering::SeqCst),
        after_close,
        "no listen after close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_the_stream_stays_bounded_and_is_heard() {
    let running = serve(Mode::Floods(20_000)).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    assert!(
        until(Duration::from_secs(10), || heard.0.load(Ordering::SeqCst)
            > 0)
        .await,
        "the flood's list changes are heard"
    );
    still_answers(&conn).await;
    // However the flood went (read in time, or dropped as lagged and asked again),
    // at most one stream is open at a time and the connection is fine.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(running.server.open.load(Ordering::SeqCst) <= 1);
    still_answers(&conn).await;
    conn.close(Duration::from_millis(500)).await;
    assert!(
        until(Duration::from_secs(5), || {
            running.server.open.load(Ordering::SeqCst) == 0
        })
        .await,
        "closing the connection ends the server's stream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_listen_is_not_asked_again() {
    let running = serve(Mode::Refuses).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(running.server.asked.load(Ordering::SeqCst), 1);
    assert_eq!(heard.0.load(Ordering::SeqCst), 0);
    still_answers(&conn).await;
    conn.close(Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_watch_lists_no_stream_is_opened() {
    let running = serve(Mode::Floods(1)).await;
    let mut opts = ConnectOptions::new(
        "unwatched",
        Target::Http {
            url: running.url.clone(),
            headers: vec![],
        },
    );
    let heard = Arc::new(Heard::default());
    opts.hooks = heard.clone();
    let conn = Connection::connect(opts).await.expect("connect");
    still_answers(&conn).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(running.server.asked.load(Ordering::SeqCst), 0);
    conn.close(Duration::from_millis(500)).await;
}

async fn until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !f() {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_subscriptions_live_on_one_stream_that_follows_the_set() {
    let running = serve(Mode::Resources).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    let open = || running.server.open.load(Ordering::SeqCst);
    // The list watch's stream is one; the resource stream is the second.
    assert!(until(Duration::from_secs(5), || open() == 1).await);

    let a = "file:///a".to_string();
    let refused = "file:///refused".to_string();
    let set = conn.set_resource_subscriptions(vec![a.clone(), refused.clone()]);
    let honoured = conn
        .resource_subscriptions_acked(set, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(honoured, vec![a.clone()], "the server left one out");
    assert!(heard.hears(&a).await);
    assert_eq!(open(), 2);

    // A new set replaces the stream: still two open, the new URI heard.
    let b = "file:///b".to_string();
    let set = conn.set_resource_subscriptions(vec![a.clone(), b.clone()]);
    let honoured = conn
        .resource_subscriptions_acked(set, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(honoured, [a.clone(), b.clone()]);
    assert!(heard.hears(&b).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(open(), 2, "the old stream was cancelled");

    // An empty set ends it.
    let set = conn.set_resource_subscriptions(Vec::new());
    let honoured = conn
        .resource_subscriptions_acked(set, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(honoured.is_empty());
    assert!(until(Duration::from_secs(5), || open() == 1).await);
    still_answers(&conn).await;
    conn.close(Duration::from_millis(500)).await;
    assert!(
        until(Duration::from_secs(5), || open() == 0).await,
        "closed with the connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_subscriptions_refused_by_the_server_are_reported() {
    let running = serve(Mode::Refuses).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    let set = conn.set_resource_subscriptions(vec!["file:///a".into()]);
    let err = conn
        .resource_subscriptions_acked(set, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("subscriptions/listen"), "{err}");
    conn.close(Duration::from_millis(500)).await;
}

/// A server flooding one subscribed resource's updates: they are heard, at most two
/// streams (the lists' and the resources') are open at any time, and the connection
/// answers throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_resource_updates_stays_bounded() {
    let running = serve(Mode::ResourceFlood(20_000)).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    let set = conn.set_resource_subscriptions(vec!["file:///a".into()]);
    conn.resource_subscriptions_acked(set, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        until(Duration::from_secs(10), || !heard
            .1
            .lock()
            .unwrap()
            .is_empty())
        .await
    );
    still_answers(&conn).await;
    for _ in 0..20 {
        assert!(running.server.open.load(Ordering::SeqCst) <= 2);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    still_answers(&conn).await;
    conn.close(Duration::from_millis(500)).await;
    let open = || running.server.open.load(Ordering::SeqCst);
    assert!(until(Duration::from_secs(5), || open() == 0).await);
}

async fn touch(conn: &Connection, uri: &str) -> String {
    let args = serde_json::json!({"uri": uri});
    let r = conn
        .call_tool("touch", args.as_object().cloned(), &CallOptions::default())
        .await
        .expect("touch answers");
    serde_json::to_string(&r).unwrap()
}

/// A call sent right after the resource set changed reaches the server after the
/// stream naming the new resource (which the server takes 400 ms to acknowledge), so
/// the update it causes is heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_a_new_set_reaches_the_server_after_its_stream() {
    let running = serve_acking_after(Mode::Touch, Duration::from_millis(400)).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    let a = "file:///a".to_string();
    conn.set_resource_subscriptions(vec![a.clone()]);
    let out = touch(&conn, &a).await;
    assert!(out.contains("touched on 1 streams"), "{out}");
    assert!(heard.hears(&a).await);
    conn.close(Duration::from_millis(500)).await;
}

/// A new set keeps the old stream until the new one is acknowledged: an update of a
/// resource in both sets, sent meanwhile (by another client, which does not wait), is
/// heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_while_the_set_changes_is_not_lost() {
    let running = serve_acking_after(Mode::Touch, Duration::from_millis(600)).await;
    let heard = Arc::new(Heard::default());
    let conn = connect(&running.url, &heard).await;
    let other = connect(&running.url, &Arc::new(Heard::default())).await;
    let a = "file:///a".to_string();
    let set = conn.set_resource_subscriptions(vec![a.clone()]);
    conn.resource_subscriptions_acked(set, Duration::from_secs(5))
        .await
        .unwrap();

    let set = conn.set_resource_subscriptions(vec![a.clone(), "file:///b".into()]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let out = touch(&other, &a).await;
    assert!(
        out.contains("touched on 1 streams"),
        "the old stream is still open: {out}"
    );
    assert!(
        heard.hears(&a).await,
        "the update sent while the set changed is heard"
    );
    conn.resource_subscriptions_acked(set, Duration::from_secs(5))
        .await
        .unwrap();
    // Then only the new stream is open: the lists' and the resources'.
    let open = || running.server.open.load(Ordering::SeqCst);
    assert!(
        until(Duration::from_secs(5), || open() == 3).await,
        "{}",
        open()
    );
    other.close(Duration::from_millis(500)).await;
    conn.close(Duration::from_millis(500)).await;
}
