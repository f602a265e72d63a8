//! Tests of the legacy HTTP+SSE client transport against a small in-process legacy SSE
//! MCP server (axum on 127.0.0.1:0).
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use futures::channel::mpsc::{UnboundedSender, unbounded};
use rmcp::ServiceExt;
use rmcp::model::{ClientConfig, ClientJsonRpcMessage, ProtocolVersion, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use switchboard_mcp::{SseError, SseOptions, SseTransport};
use tokio::task::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// A working legacy server: relative endpoint, answers MCP requests on the stream.
    Normal,
    /// Sends an absolute endpoint URL on its own origin.
    AbsoluteSameOrigin,
    /// Sends an endpoint on another origin.
    CrossOrigin,
    /// Never sends the endpoint event (only a comment, a ping event and a retry hint).
    NoEndpoint,
    /// Every POST fails with 500.
    Post500,
    /// The GET answers JSON like a Streamable HTTP server would.
    NotEventStream,
    /// The GET answers 401.
    GetUnauthorized,
    /// Endpoint sent; everything else comes from the test through `push` / `cut`.
    Scripted,
}

/// (HTTP method, value of `x-api-key`, content type) of one request.
type RequestLog = (String, Option<String>, Option<String>);

struct Inner {
    mode: Mode,
    addr: SocketAddr,
    next_session: AtomicU64,
    sessions: Mutex<HashMap<String, UnboundedSender<Bytes>>>,
    /// Every POST body, in arrival order.
    posts: Mutex<Vec<Value>>,
    /// (method, value of `x-api-key`, content type) for every request.
    requests: Mutex<Vec<RequestLog>>,
}

/// The test server; its accept loop is aborted on drop (also when a test panics), and the
/// test runtime's shutdown ends the connection tasks.
struct TestServer {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    async fn start(mode: Mode) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            mode,
            addr,
            next_session: AtomicU64::new(1),
            sessions: Mutex::new(HashMap::new()),
            posts: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/sse", get(sse_handler))
            .route("/message", post(message_handler))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { inner, task }
    }

    fn sse_url(&self) -> url::Url {
        url::Url::parse(&format!("http://{}/sse", self.inner.addr)).unwrap()
    }

    /// Writes raw SSE text to every open event stream.
    fn push(&self, raw: &str) {
        let sessions = self.inner.sessions.lock().unwrap();
        assert!(!sessions.is_empty(), "no open event stream to push to");
        for tx in sessions.values() {
            tx.unbounded_send(Bytes::from(raw.to_owned())).unwrap();
        }
    }

    /// Ends every open event stream.
    fn cut(&self) {
        self.inner.sessions.lock().unwrap().clear();
    }

    fn posts(&self) -> Vec<Value> {
        self.inner.posts.lock().unwrap().clone()
    }

    fn requests(&self) -> Vec<RequestLog> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// Whether every event stream the server opened has been dropped by the client side.
    fn all_streams_gone(&self) -> bool {
        self.inner
            .sessions
            .lock()
            .unwrap()
            .values()
            .all(|tx| tx.is_closed())
    }
}

fn record(inner: &Inner, method: &str, headers: &HeaderMap) {
    let get = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_owned())
    };
    inner.requests.lock().unwrap().push((
        method.to_owned(),
        get("x-api-key"),
        get(header::CONTENT_TYPE.as_str()),
    ));
}

fn sse_frame(event: Option<&str>, data: &str) -> Bytes {
    let mut out = String::new();
    if let Some(event) = event {
        out.push_str(&format!("event: {event}\n"));
    }
    out.push_str(&format!("data: {data}\n\n"));
    Bytes::from(out)
}

async fn sse_handler(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    record(&inner, "GET", &headers);
    match inner.mode {
        Mode::NotEventStream => {
            return (
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"POST only"}}"#,
            )
                .into_response();
        }
        Mode::GetUnauthorized => {
            return (StatusCode::UNAUTHORIZED, "missing token").into_response();
        }
        _ => {}
    }
    let id = inner
        .next_session
        .fetch_add(1, Ordering::SeqCst)
        .to_string();
    let (tx, rx) = unbounded::<Bytes>();
    match inner.mode {
        Mode::NoEndpoint => {
            tx.unbounded_send(Bytes::from_static(
                b": keep-alive\n\nevent: ping\ndata: x\n\nretry: 500\n\n",
            ))
            .unwrap();
        }
        Mode::CrossOrigin => {
            tx.unbounded_send(sse_frame(
                Some("endpoint"),
                &format!(
                    "http://evil.invalid:{}/message?sessionId={id}",
                    inner.addr.port()
                ),
            ))
            .unwrap();
        }
        Mode::AbsoluteSameOrigin => {
            tx.unbounded_send(sse_frame(
                Some("endpoint"),
                &format!("http://{}/message?sessionId={id}", inner.addr),
            ))
            .unwrap();
        }
        _ => {
            tx.unbounded_send(sse_frame(
                Some("endpoint"),
                &format!("/message?sessionId={id}"),
            ))
            .unwrap();
        }
    }
    inner.sessions.lock().unwrap().insert(id, tx);
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(rx.map(Ok::<_, Infallible>)))
        .unwrap()
}

async fn message_handler(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&inner, "POST", &headers);
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "invalid JSON").into_response();
    };
    inner.posts.lock().unwrap().push(message.clone());
    if inner.mode == Mode::Post500 {
        return (StatusCode::INTERNAL_SERVER_ERROR, "boom: internal failure").into_response();
    }
    let Some(tx) = query
        .get("sessionId")
        .and_then(|id| inner.sessions.lock().unwrap().get(id).cloned())
    else {
        return (StatusCode::NOT_FOUND, "unknown session").into_response();
    };
    if let Some(reply) = answer(&message) {
        let _ = tx.unbounded_send(sse_frame(Some("message"), &reply.to_string()));
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

/// A minimal MCP server: initialize, ping, tools/list; notifications get no answer.
fn answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let method = message.get("method")?.as_str()?;
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy-sse-test", "version": "0.0.1"}
        }),
        "ping" => json!({}),
        "tools/list" => json!({
            "tools": [{
                "name": "echo",
                "description": "Echo the message back",
                "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}
            }]
        }),
        _ => {
            return Some(json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32601, "message": format!("method not found: {method}")}
            }));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn options() -> SseOptions {
    let mut headers = http::HeaderMap::new();
    headers.insert("x-api-key", http::HeaderValue::from_static("secret-123"));
    SseOptions {
        headers,
        connect_timeout: Duration::from_secs(10),
        post_timeout: Some(Duration::from_secs(10)),
        ..SseOptions::default()
    }
}

fn ping(id: u64) -> ClientJsonRpcMessage {
    serde_json::from_value(json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).unwrap()
}

async fn connect(server: &TestServer, opts: SseOptions) -> Result<SseTransport, SseError> {
    tokio::time::timeout(
        Duration::from_secs(20),
        SseTransport::connect(reqwest::Client::new(), server.sse_url(), opts),
    )
    .await
    .expect("connect hung")
}

async fn recv(transport: &mut SseTransport) -> Option<ServerJsonRpcMessage> {
    tokio::time::timeout(Duration::from_secs(10), transport.receive())
        .await
        .expect("receive hung")
}

fn to_json(message: &ServerJsonRpcMessage) -> Value {
    serde_json::to_value(message).unwrap()
}

#[tokio::test]
async fn rmcp_client_handshake_and_tools_list() {
    let server = TestServer::start(Mode::Normal).await;
    let transport = connect(&server, options()).await.unwrap();
    let endpoint = transport.endpoint().clone();
    assert_eq!(endpoint.path(), "/message");
    assert_eq!(endpoint.origin(), server.sse_url().origin());
    assert!(
        endpoint
            .query()
            .unwrap_or_default()
            .starts_with("sessionId=")
    );

    let config = ClientConfig::default().with_protocol_version(ProtocolVersion::V_2024_11_05);
    let client = tokio::time::timeout(Duration::from_secs(20), config.serve(transport))
        .await
        .expect("handshake hung")
        .unwrap();
    let info = client
        .peer()
        .peer_info()
        .expect("server info after initialize");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2024_11_05);

    let tools = tokio::time::timeout(
        Duration::from_secs(20),
        client.peer().list_tools(Default::default()),
    )
    .await
    .expect("tools/list hung")
    .unwrap();
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo"]);

    let methods: Vec<String> = server
        .posts()
        .iter()
        .map(|m| m["method"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        methods,
        ["initialize", "notifications/initialized", "tools/list"]
    );
    assert_eq!(server.posts()[0]["params"]["protocolVersion"], "2024-11-05");

    // Configured headers go with the GET and every POST; POSTs are JSON.
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    for (method, api_key, content_type) in &requests {
        assert_eq!(
            api_key.as_deref(),
            Some("secret-123"),
            "{method} lacks the header"
        );
        if method == "POST" {
            assert_eq!(content_type.as_deref(), Some("application/json"));
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn absolute_same_origin_endpoint_is_accepted() {
    let server = TestServer::start(Mode::AbsoluteSameOrigin).await;
    let mut transport = connect(&server, options()).await.unwrap();
    assert_eq!(transport.endpoint().origin(), server.sse_url().origin());
    transport.send(ping(1)).await.unwrap();
    let reply = recv(&mut transport).await.expect("a reply");
    assert_eq!(
        to_json(&reply),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );
}

#[tokio::test]
async fn cross_origin_endpoint_is_refused() {
    let server = TestServer::start(Mode::CrossOrigin).await;
    let err = connect(&server, options())
        .await
        .expect_err("must be refused");
    match &err {
        SseError::CrossOriginEndpoint { endpoint, origin } => {
            assert!(endpoint.starts_with("http://evil.invalid:"), "{endpoint}");
            assert_eq!(origin, &format!("http://{}", server.inner.addr));
        }
        other => panic!("expected CrossOriginEndpoint, got {other:?}"),
    }
    assert!(err.to_string().contains("same origin"), "{err}");
    assert!(server.posts().is_empty());
}

#[tokio::test]
async fn missing_endpoint_event_times_out() {
    let server = TestServer::start(Mode::NoEndpoint).await;
    let opts = SseOptions {
        connect_timeout: Duration::from_millis(400),
        ..options()
    };
    let started = Instant::now();
    let err = connect(&server, opts).await.expect_err("must time out");
    assert!(
        matches!(err, SseError::EndpointTimeout { timeout, .. } if timeout == Duration::from_millis(400)),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(err.to_string().contains("endpoint"), "{err}");
}

#[tokio::test]
async fn post_failure_keeps_status_and_body() {
    let server = TestServer::start(Mode::Post500).await;
    let mut transport = connect(&server, options()).await.unwrap();
    let err = transport.send(ping(1)).await.expect_err("POST must fail");
    assert_eq!(err.status(), Some(500), "{err:?}");
    assert!(err.to_string().contains("boom: internal failure"), "{err}");
    assert!(err.to_string().contains("500"), "{err}");
}

#[tokio::test]
async fn non_event_stream_answer_is_reported() {
    let server = TestServer::start(Mode::NotEventStream).await;
    let err = connect(&server, options()).await.expect_err("must fail");
    assert!(matches!(err, SseError::NotEventStream { .. }), "{err:?}");
    assert!(err.to_string().contains("Streamable HTTP"), "{err}");
    assert_eq!(err.status(), None);
}

#[tokio::test]
async fn get_error_status_is_kept() {
    let server = TestServer::start(Mode::GetUnauthorized).await;
    let err = connect(&server, options()).await.expect_err("must fail");
    assert_eq!(err.status(), Some(401), "{err:?}");
    assert!(err.to_string().contains("missing token"), "{err}");
}

#[tokio::test]
async fn stream_cut_drains_then_ends() {
    let server = TestServer::start(Mode::Scripted).await;
    let mut transport = connect(&server, options()).await.unwrap();
    server.push("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
    server.push("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n");
    server.cut();

    let first = recv(&mut transport).await.expect("first queued message");
    assert_eq!(to_json(&first)["id"], 1);
    let second = recv(&mut transport).await.expect("second queued message");
    assert_eq!(
        to_json(&second)["method"],
        "notifications/tools/list_changed"
    );
    assert!(
        recv(&mut transport).await.is_none(),
        "stream ended: receive() must give None"
    );

    let err = transport
        .send(ping(2))
        .await
        .expect_err("send after the stream ended");
    assert!(matches!(err, SseError::StreamClosed), "{err:?}");
}

#[tokio::test]
async fn malformed_and_foreign_events_are_skipped() {
    let server = TestServer::start(Mode::Scripted).await;
    let mut transport = connect(&server, options()).await.unwrap();
    server.push("event: message\ndata: {not json at all\n\n");
    server.push("event: ping\ndata: {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n\n");
    server.push("retry: 1500\n\n");
    server.push(": just a comment\n\n");
    server.push("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"missing-method\"}\n\n");
    server.push("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n");
    server.push("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n");

    let first = recv(&mut transport).await.expect("the first valid message");
    assert_eq!(
        to_json(&first)["method"],
        "notifications/tools/list_changed"
    );
    let second = recv(&mut transport)
        .await
        .expect("the second valid message");
    assert_eq!(
        to_json(&second),
        json!({"jsonrpc": "2.0", "id": 7, "result": {}})
    );
}

#[tokio::test]
async fn close_and_drop_stop_the_reader() {
    let server = TestServer::start(Mode::Scripted).await;
    let mut transport = connect(&server, options()).await.unwrap();
    transport.close().await.unwrap();
    assert!(recv(&mut transport).await.is_none());
    wait_until_streams_gone(&server).await;

    let transport = connect(&server, options()).await.unwrap();
    assert!(!server.all_streams_gone());
    drop(transport);
    wait_until_streams_gone(&server).await;
}

async fn wait_until_streams_gone(server: &TestServer) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.all_streams_gone() {
        assert!(
            Instant::now() < deadline,
            "the client kept the event stream open after close/drop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
