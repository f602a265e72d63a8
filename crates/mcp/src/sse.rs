//! Client side of the legacy MCP "HTTP+SSE" transport (protocol revision 2024-11-05).
//!
//! rmcp 3.x no longer ships this transport, so Switchboard implements
//! [`rmcp::transport::Transport<RoleClient>`] itself:
//!
//! 1. [`SseTransport::connect`] sends `GET <sse url>` with `Accept: text/event-stream`
//!    (plus the configured headers) and waits, up to [`SseOptions::connect_timeout`],
//!    for the server's `endpoint` event.
//! 2. The endpoint is a URI reference resolved against the SSE URL. It must have the
//!    same origin (scheme, host, port) as the configured SSE URL; anything else is refused
//!    with [`SseError::CrossOriginEndpoint`] so a server cannot make us POST elsewhere.
//! 3. Every outgoing JSON-RPC message is POSTed to the endpoint as JSON; the server
//!    answers 2xx (usually 202) and the replies arrive on the GET stream as `message`
//!    events.
//!
//! A background task reads the GET stream and queues parsed messages for
//! [`Transport::receive`]. When the stream ends or breaks, `receive()` yields what was
//! already queued and then `None`, which rmcp treats as the connection closing. A legacy
//! session cannot be resumed (a new GET starts a new session), so the task never
//! reconnects; `retry:` hints are only logged. The task is aborted by
//! [`Transport::close`] and when the transport is dropped.
//!
//! The stream is parsed by Switchboard's bounded [`SseParser`]: one event is at most
//! [`SseOptions::max_message_bytes`]; a larger one is scanned, not buffered, and when it
//! is a reply its request fails at once with an error naming the server and the limit.
//! A reply that cannot be parsed (nested too deep, say) fails its request the same way.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use http::HeaderMap;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use url::Url;

use crate::framing::{self, EnvelopeScan, SseEvent, SseFrame, SseParser};

/// How many bytes of an HTTP error body are kept in [`SseError::HttpStatus`].
const BODY_EXCERPT_BYTES: usize = 512;
/// How many characters of a malformed message are quoted in the log.
const LOG_EXCERPT_CHARS: usize = 200;
/// Capacity of the queue between the reader task and `receive()`.
const CHANNEL_CAPACITY: usize = 64;

/// Options for [`SseTransport::connect`].
#[derive(Debug, Clone)]
pub struct SseOptions {
    /// Headers sent with the GET and with every POST (e.g. `Authorization`).
    pub headers: HeaderMap,
    /// How long to wait for the GET response and the server's `endpoint` event.
    pub connect_timeout: Duration,
    /// Limit for each POST (request and response body); `None` for no limit.
    pub post_timeout: Option<Duration>,
    /// The largest event (one message) read from the stream, in bytes.
    pub max_message_bytes: usize,
    /// The server's name, for error messages (the SSE URL when empty).
    pub server: String,
}

impl Default for SseOptions {
    fn default() -> Self {
        Self {
            headers: HeaderMap::new(),
            connect_timeout: Duration::from_secs(30),
            post_timeout: None,
            max_message_bytes: framing::DEFAULT_MAX_MESSAGE_BYTES,
            server: String::new(),
        }
    }
}

/// Errors of the legacy HTTP+SSE transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// The server answered the GET or a POST with a non-success status.
    #[error("{method} {url} failed with HTTP {status}{}", body_suffix(.body))]
    HttpStatus {
        /// `GET` (opening the event stream) or `POST` (sending a message).
        method: &'static str,
        /// The URL that was requested.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body (may be empty).
        body: String,
    },
    /// The GET was answered with something other than `text/event-stream`.
    #[error(
        "{url} did not answer with an event stream (Content-Type: {content_type}); it is not a \
         legacy HTTP+SSE MCP endpoint — maybe it is a Streamable HTTP server (configure it with \
         `httpUrl` or `type: \"http\"`)"
    )]
    NotEventStream {
        /// The SSE URL.
        url: String,
        /// The content type the server sent (`<none>` when absent).
        content_type: String,
    },
    /// The server did not send its `endpoint` event in time.
    #[error(
        "{url} did not announce its message endpoint (the `endpoint` event) within {}ms",
        .timeout.as_millis()
    )]
    EndpointTimeout {
        /// The SSE URL.
        url: String,
        /// The configured [`SseOptions::connect_timeout`].
        timeout: Duration,
    },
    /// The `endpoint` event's data is not a valid URI reference.
    #[error("the server sent an invalid `endpoint` event {data:?}: {source}")]
    InvalidEndpoint {
        /// The (trimmed) event data.
        data: String,
        /// Why it could not be resolved.
        #[source]
        source: url::ParseError,
    },
    /// The `endpoint` event points to another origin than the SSE URL.
    #[error(
        "refusing message endpoint {endpoint}: it is not on the same origin as the SSE URL \
         ({origin}); a legacy SSE server may only direct messages to its own origin"
    )]
    CrossOriginEndpoint {
        /// The resolved endpoint.
        endpoint: String,
        /// The origin of the SSE URL (`scheme://host:port`).
        origin: String,
    },
    /// The event stream ended: before the `endpoint` event, or before a send.
    #[error("the SSE event stream was closed by the server")]
    StreamClosed,
    /// The event stream could not be read or parsed while waiting for the endpoint.
    #[error("reading the SSE event stream failed: {0}")]
    Stream(#[source] reqwest::Error),
    /// An outgoing message could not be serialized.
    #[error("could not serialize a JSON-RPC message: {0}")]
    Serialize(#[from] serde_json::Error),
    /// A network-level HTTP failure (connection refused, timeout, TLS, ...).
    #[error("HTTP request failed: {0}")]
    Http(#[from] reqwest::Error),
}

fn body_suffix(body: &str) -> String {
    if body.is_empty() {
        String::new()
    } else {
        format!(": {body}")
    }
}

impl SseError {
    /// The HTTP status code behind this error, if there is one.
    pub fn status(&self) -> Option<u16> {
        match self {
            SseError::HttpStatus { status, .. } => Some(*status),
            SseError::Http(e) => e.status().map(|s| s.as_u16()),
            _ => None,
        }
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<SseFrame, reqwest::Error>> + Send>>;

/// What the reader needs to word its errors.
#[derive(Debug, Clone)]
struct StreamInfo {
    sse_url: String,
    server: String,
    max: usize,
}

/// The response body as bounded SSE frames (see [`SseParser`]). An event left
/// unterminated when the body ends is dropped, as the SSE rules say.
fn bounded_events<S, B>(body: S, max: usize) -> EventStream
where
    S: Stream<Item = Result<B, reqwest::Error>> + Send + 'static,
    B: AsRef<[u8]>,
{
    let state = (
        Box::pin(body),
        SseParser::new(max),
        std::collections::VecDeque::<SseFrame>::new(),
        false,
    );
    Box::pin(futures::stream::unfold(
        state,
        |(mut body, mut parser, mut queue, mut done)| async move {
            loop {
                if let Some(frame) = queue.pop_front() {
                    return Some((Ok(frame), (body, parser, queue, done)));
                }
                if done {
                    return None;
                }
                match body.next().await {
                    Some(Ok(bytes)) => {
                        let mut out = Vec::new();
                        parser.push(bytes.as_ref(), &mut out);
                        queue.extend(out);
                    }
                    Some(Err(e)) => {
                        done = true;
                        return Some((Err(e), (body, parser, queue, done)));
                    }
                    None => done = true,
                }
            }
        },
    ))
}

/// Aborts the wrapped task when dropped, so the reader never outlives the transport.
#[derive(Debug)]
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A connected legacy HTTP+SSE client transport; see the module docs.
#[derive(Debug)]
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    post_timeout: Option<Duration>,
    rx: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Set when the event stream has ended (or the transport was closed).
    closed: Arc<AtomicBool>,
    reader: AbortOnDrop,
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the server's `endpoint` event.
    ///
    /// The whole phase (GET response plus `endpoint` event) is bounded by
    /// [`SseOptions::connect_timeout`]. `client` must not have a total request timeout
    /// (`ClientBuilder::timeout`): it would also cut the long-lived event stream. Use
    /// [`SseOptions::post_timeout`] to bound the POSTs instead.
    pub async fn connect(
        client: reqwest::Client,
        url: Url,
        opts: SseOptions,
    ) -> Result<Self, SseError> {
        let timeout = opts.connect_timeout;
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let info = StreamInfo {
            sse_url: url.to_string(),
            server: if opts.server.is_empty() {
                url.to_string()
            } else {
                opts.server.clone()
            },
            max: opts.max_message_bytes,
        };
        let opened = tokio::time::timeout(
            timeout,
            open_stream(&client, &url, &opts.headers, &tx, &info),
        )
        .await
        .map_err(|_| SseError::EndpointTimeout {
            url: url.to_string(),
            timeout,
        })??;
        let (endpoint, events) = opened;
        tracing::debug!(sse_url = %url, endpoint = %endpoint, "legacy SSE session opened");

        let closed = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(read_events(events, tx, closed.clone(), info));
        Ok(Self {
            client,
            endpoint,
            headers: opts.headers,
            post_timeout: opts.post_timeout,
            rx,
            closed,
            reader: AbortOnDrop(task),
        })
    }

    /// The message endpoint the server announced (absolute, same origin as the SSE URL).
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }
}

/// GETs the event stream and reads it up to the `endpoint` event. Messages that arrive
/// before it are queued on `tx`.
async fn open_stream(
    client: &reqwest::Client,
    url: &Url,
    headers: &HeaderMap,
    tx: &mpsc::Sender<ServerJsonRpcMessage>,
    info: &StreamInfo,
) -> Result<(Url, EventStream), SseError> {
    let mut request_headers = headers.clone();
    request_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    request_headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let response = client
        .get(url.clone())
        .headers(request_headers)
        .send()
        .await?;

    let status = response.status();
    if !status.is_success() {
        return Err(SseError::HttpStatus {
            method: "GET",
            url: url.to_string(),
            status: status.as_u16(),
            body: body_excerpt(response).await,
        });
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let is_event_stream = content_type.as_deref().is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("text/event-stream"))
    });
    if !is_event_stream {
        return Err(SseError::NotEventStream {
            url: url.to_string(),
            content_type: content_type.unwrap_or_else(|| "<none>".to_owned()),
        });
    }

    // Relative endpoints resolve against the URL actually retrieved (after redirects);
    // the origin check is against the URL the user configured.
    let base = response.url().clone();
    let mut events = bounded_events(response.bytes_stream(), info.max);
    loop {
        match events.next().await {
            None => return Err(SseError::StreamClosed),
            Some(Err(e)) => return Err(SseError::Stream(e)),
            Some(Ok(SseFrame::Event(event))) if event.event.as_deref() == Some("endpoint") => {
                let endpoint = resolve_endpoint(url, &base, &event.data)?;
                return Ok((endpoint, events));
            }
            Some(Ok(frame)) => {
                if let Some(message) = handle_frame(frame, info) {
                    // The receiver lives in the caller; it cannot be gone yet.
                    if tx.send(message).await.is_err() {
                        return Err(SseError::StreamClosed);
                    }
                }
            }
        }
    }
}

/// Resolves the `endpoint` event data and enforces the same-origin rule.
fn resolve_endpoint(sse_url: &Url, base: &Url, data: &str) -> Result<Url, SseError> {
    let data = data.trim();
    let endpoint = base
        .join(data)
        .map_err(|source| SseError::InvalidEndpoint {
            data: data.to_owned(),
            source,
        })?;
    let origin = sse_url.origin();
    if endpoint.origin() != origin || !origin.is_tuple() {
        return Err(SseError::CrossOriginEndpoint {
            endpoint: endpoint.to_string(),
            origin: origin.ascii_serialization(),
        });
    }
    Ok(endpoint)
}

/// Turns one frame into a JSON-RPC message: the server's own, or an error standing in
/// for a reply that was too large or unreadable; anything else is logged and skipped.
fn handle_frame(frame: SseFrame, info: &StreamInfo) -> Option<ServerJsonRpcMessage> {
    match frame {
        SseFrame::Event(event) => handle_event(event, info),
        SseFrame::Oversized { envelope, bytes } => {
            let text = framing::oversized_message(&info.server, bytes, info.max);
            tracing::warn!(sse_url = %info.sse_url, "{text}");
            envelope
                .reply_id()
                .and_then(|id| framing::stand_in(id, text))
        }
    }
}

/// Turns one SSE event into a JSON-RPC message, logging and skipping anything else.
fn handle_event(event: SseEvent, info: &StreamInfo) -> Option<ServerJsonRpcMessage> {
    let sse_url = info.sse_url.as_str();
    if let Some(retry) = event.retry {
        tracing::debug!(
            sse_url,
            retry_ms = retry,
            "server sent an SSE retry hint; legacy SSE sessions cannot resume, ignoring it"
        );
    }
    match event.event.as_deref() {
        None | Some("message") => {}
        Some("endpoint") => {
            tracing::debug!(sse_url, "ignoring a repeated `endpoint` event");
            return None;
        }
        Some(other) => {
            tracing::debug!(sse_url, event = other, "ignoring SSE event of unknown type");
            return None;
        }
    }
    let data = event.data;
    if data.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
        Ok(message) => Some(message),
        Err(error) => {
            tracing::warn!(
                sse_url,
                %error,
                data = excerpt(&data, LOG_EXCERPT_CHARS),
                "skipping an SSE message that is not a valid JSON-RPC message"
            );
            let envelope = EnvelopeScan::of(data.as_bytes());
            let id = envelope.reply_id()?;
            let text = framing::unreadable_message(&info.server, &error.to_string());
            framing::stand_in(id, text)
        }
    }
}

/// The reader task: forwards messages until the stream ends, breaks, or nobody listens.
async fn read_events(
    mut events: EventStream,
    tx: mpsc::Sender<ServerJsonRpcMessage>,
    closed: Arc<AtomicBool>,
    info: StreamInfo,
) {
    let sse_url = info.sse_url.as_str();
    loop {
        match events.next().await {
            None => {
                tracing::info!(sse_url, "the server closed the SSE event stream");
                break;
            }
            Some(Err(e)) => {
                tracing::warn!(sse_url, error = %e, "the SSE event stream broke");
                break;
            }
            Some(Ok(frame)) => {
                if let Some(message) = handle_frame(frame, &info)
                    && tx.send(message).await.is_err()
                {
                    break;
                }
            }
        }
    }
    closed.store(true, Ordering::SeqCst);
    // Dropping `tx` here lets `receive()` drain the queue and then return `None`.
}

/// Reads at most [`BODY_EXCERPT_BYTES`] of a response body, lossily as UTF-8.
async fn body_excerpt(mut response: reqwest::Response) -> String {
    let mut buf: Vec<u8> = Vec::new();
    while buf.len() < BODY_EXCERPT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let trimmed = text.trim();
    if trimmed.len() > BODY_EXCERPT_BYTES {
        excerpt_bytes(trimmed, BODY_EXCERPT_BYTES)
    } else {
        trimmed.to_owned()
    }
}

/// The first `max` characters of `s`, with `…` appended when cut.
fn excerpt(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((idx, _)) => format!("{}…", &s[..idx]),
        None => s.to_owned(),
    }
}

/// The longest prefix of `s` of at most `max` bytes ending on a char boundary, plus `…`.
fn excerpt_bytes(s: &str, max: usize) -> String {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

async fn post_message(
    client: reqwest::Client,
    endpoint: Url,
    mut headers: HeaderMap,
    post_timeout: Option<Duration>,
    body: Vec<u8>,
) -> Result<(), SseError> {
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let mut request = client.post(endpoint.clone()).headers(headers).body(body);
    if let Some(timeout) = post_timeout {
        request = request.timeout(timeout);
    }
    let response = request.send().await?;
    let status = response.status();
    if !status.is_success() {
        return Err(SseError::HttpStatus {
            method: "POST",
            url: endpoint.to_string(),
            status: status.as_u16(),
            body: body_excerpt(response).await,
        });
    }
    // Drain the (normally tiny, e.g. "Accepted") body so the connection can be reused.
    if let Err(error) = response.bytes().await {
        tracing::debug!(%endpoint, %error, "could not read the body of a POST response");
    }
    Ok(())
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> Cow<'static, str> {
        Cow::Borrowed("SseTransport")
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let body = serde_json::to_vec(&item);
        let closed = self.closed.load(Ordering::SeqCst);
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        let post_timeout = self.post_timeout;
        async move {
            if closed {
                return Err(SseError::StreamClosed);
            }
            post_message(client, endpoint, headers, post_timeout, body?).await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.store(true, Ordering::SeqCst);
        self.reader.0.abort();
        self.rx.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_endpoint_resolves_against_sse_url() {
        let sse = Url::parse("http://127.0.0.1:8080/sse").unwrap_or_else(|e| panic!("{e}"));
        let ep = resolve_endpoint(&sse, &sse, " /message?sessionId=abc\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ep.as_str(), "http://127.0.0.1:8080/message?sessionId=abc");
        let ep = resolve_endpoint(&sse, &sse, "messages/1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ep.as_str(), "http://127.0.0.1:8080/messages/1");
    }

    #[test]
    fn other_origins_are_refused() {
        let sse = Url::parse("http://127.0.0.1:8080/sse").unwrap_or_else(|e| panic!("{e}"));
        for bad in [
            "http://127.0.0.1:8081/message",
            "https://127.0.0.1:8080/message",
            "http://localhost:8080/message",
            "//evil.example/message",
            "data:text/plain,hi",
        ] {
            let err = resolve_endpoint(&sse, &sse, bad).err();
            assert!(
                matches!(err, Some(SseError::CrossOriginEndpoint { .. })),
                "{bad} must be refused, got {err:?}"
            );
        }
        let ok = resolve_endpoint(&sse, &sse, "http://127.0.0.1:8080/m");
        assert!(ok.is_ok());
    }

    #[test]
    fn default_port_counts_as_same_origin() {
        let sse = Url::parse("https://example.com/sse").unwrap_or_else(|e| panic!("{e}"));
        let ep = resolve_endpoint(&sse, &sse, "https://example.com:443/msg");
        assert!(ep.is_ok(), "{ep:?}");
    }

    #[test]
    fn excerpts_respect_char_boundaries() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(excerpt("hi", 5), "hi");
        assert_eq!(excerpt_bytes("héllo", 2), "h…");
    }

    #[test]
    fn non_message_events_are_skipped() {
        let info = StreamInfo {
            sse_url: "x".into(),
            server: "s".into(),
            max: 1024,
        };
        let event = |kind: Option<&str>, data: &str| SseEvent {
            event: kind.map(str::to_owned),
            data: data.to_owned(),
            ..Default::default()
        };
        assert!(handle_event(event(Some("ping"), "{}"), &info).is_none());
        assert!(handle_event(event(Some("message"), "{not json"), &info).is_none());
        let good = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert!(handle_event(event(None, good), &info).is_some());
    }

    #[test]
    fn an_unreadable_reply_becomes_an_error_for_its_request() {
        let info = StreamInfo {
            sse_url: "x".into(),
            server: "deep".into(),
            max: 1 << 20,
        };
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"v":{}{}}}}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        match handle_event(
            SseEvent {
                data: deep,
                ..Default::default()
            },
            &info,
        ) {
            Some(ServerJsonRpcMessage::Error(e)) => {
                assert!(
                    e.error.message.contains("server 'deep'"),
                    "{}",
                    e.error.message
                );
            }
            other => panic!("expected an error reply, got {other:?}"),
        }
    }
}
