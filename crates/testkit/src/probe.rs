//! Raw HTTP probes: send `initialize` to a peer without any MCP client library, to check
//! a peer (and the test harness) independently of Switchboard's own client.

use std::time::Duration;

use serde_json::{Value, json};

const PROBE_LIMIT: Duration = Duration::from_secs(15);

/// A JSON-RPC `initialize` request (id 1) offering `2025-06-18`.
pub fn initialize_request() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "switchboard-testkit", "version": "0"}
        }
    })
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(PROBE_LIMIT)
        .build()
        .expect("build reqwest client")
}

/// What a Streamable HTTP peer answered to `initialize`.
#[derive(Debug, Clone)]
pub struct HttpInitReply {
    /// The JSON-RPC response.
    pub message: Value,
    /// The `Mcp-Session-Id` header, if any (none in stateless mode).
    pub session_id: Option<String>,
    /// The reply's `Content-Type` (`application/json` or `text/event-stream`).
    pub content_type: String,
}

/// POST `initialize` to a Streamable HTTP endpoint (`Accept: application/json,
/// text/event-stream`) and return the JSON-RPC response, whether it came as JSON or as
/// an SSE `message` event, with the session id and content type.
///
/// # Panics
/// On a transport error, a non-2xx status, or no response within 15 s.
pub async fn http_initialize(url: &str) -> HttpInitReply {
    let fut = async {
        let mut resp = client()
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(initialize_request().to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST initialize to {url}: {e}"));
        let status = resp.status();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header("content-type").unwrap_or_default();
        let session_id = header("mcp-session-id");
        if !content_type.starts_with("text/event-stream") {
            let body = resp.text().await.unwrap_or_default();
            assert!(
                status.is_success(),
                "POST initialize to {url}: {status}: {body}"
            );
            let message = serde_json::from_str(&body).unwrap_or_else(|e| {
                panic!("initialize reply from {url} is not JSON ({e}): {body}")
            });
            return HttpInitReply {
                message,
                session_id,
                content_type,
            };
        }
        assert!(status.is_success(), "POST initialize to {url}: {status}");
        let mut events = SseReader::default();
        loop {
            for event in events.drain() {
                if let Some(message) = response_with_id(&event, 1) {
                    return HttpInitReply {
                        message,
                        session_id,
                        content_type,
                    };
                }
            }
            match resp.chunk().await {
                Ok(Some(bytes)) => events.push(&bytes),
                Ok(None) => panic!("SSE reply from {url} ended without the initialize response"),
                Err(e) => panic!("reading SSE reply from {url}: {e}"),
            }
        }
    };
    tokio::time::timeout(PROBE_LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("no initialize response from {url} within {PROBE_LIMIT:?}"))
}

/// Legacy HTTP+SSE: `GET url`, wait for the `endpoint` event, POST `initialize` there and
/// return the JSON-RPC response that arrives on the stream.
///
/// # Panics
/// On a transport error, a non-2xx status, or no response within 15 s.
pub async fn sse_initialize(url: &str) -> Value {
    let fut = async {
        let http = client();
        let base = reqwest::Url::parse(url).unwrap_or_else(|e| panic!("bad url {url}: {e}"));
        let mut stream = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("build reqwest client")
            .get(url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert!(
            stream.status().is_success(),
            "GET {url}: {}",
            stream.status()
        );
        let mut events = SseReader::default();
        let mut posted = false;
        loop {
            for event in events.drain() {
                if event.name == "endpoint" && !posted {
                    let endpoint = base
                        .join(event.data.trim())
                        .unwrap_or_else(|e| panic!("bad endpoint {:?}: {e}", event.data));
                    assert_eq!(
                        endpoint.origin(),
                        base.origin(),
                        "endpoint event names another origin"
                    );
                    let resp = http
                        .post(endpoint.clone())
                        .header("content-type", "application/json")
                        .body(initialize_request().to_string())
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("POST {endpoint}: {e}"));
                    assert!(
                        resp.status().is_success(),
                        "POST {endpoint}: {}",
                        resp.status()
                    );
                    posted = true;
                } else if let Some(message) = response_with_id(&event, 1) {
                    return message;
                }
            }
            match stream.chunk().await {
                Ok(Some(bytes)) => events.push(&bytes),
                Ok(None) => panic!("SSE stream {url} ended without the initialize response"),
                Err(e) => panic!("reading SSE stream {url}: {e}"),
            }
        }
    };
    tokio::time::timeout(PROBE_LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("no initialize response from {url} within {PROBE_LIMIT:?}"))
}

fn response_with_id(event: &SseEvent, id: i64) -> Option<Value> {
    if event.name != "message" || event.data.is_empty() {
        return None;
    }
    let value: Value = serde_json::from_str(&event.data).ok()?;
    (value.get("id").and_then(Value::as_i64) == Some(id)).then_some(value)
}

#[derive(Debug)]
struct SseEvent {
    name: String,
    data: String,
}

/// Minimal incremental SSE parser (event + data fields; enough for probes).
#[derive(Debug, Default)]
struct SseReader {
    buf: String,
}

impl SseReader {
    fn push(&mut self, bytes: &[u8]) {
        self.buf
            .push_str(&String::from_utf8_lossy(bytes).replace("\r\n", "\n"));
    }

    fn drain(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(end) = self.buf.find("\n\n") {
            let block: String = self.buf.drain(..end + 2).collect();
            let mut name = String::from("message");
            let mut data: Vec<&str> = Vec::new();
            for line in block.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => name = value.to_owned(),
                    "data" => data.push(value),
                    _ => {}
                }
            }
            out.push(SseEvent {
                name,
                data: data.join("\n"),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_reader_splits_events_across_chunks() {
        let mut reader = SseReader::default();
        reader
            .push(b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\nid: 7\ndata: {\"id\"");
        let first = reader.drain();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].name, "endpoint");
        assert_eq!(first[0].data, "/messages/?session_id=1");
        reader.push(b":1}\n\n");
        let second = reader.drain();
        assert_eq!(second.len(), 1);
        assert!(response_with_id(&second[0], 1).is_some());
        assert!(response_with_id(&second[0], 2).is_none());
    }
}
