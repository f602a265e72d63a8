//! A hostile-input witness: a TCP listener on 127.0.0.1 that records every byte it
//! receives, for tests asserting that a secret never leaves the machine's trust
//! boundary ("nothing arrives", "no `Authorization` arrives").
//!
//! Every connection is accepted and read until the peer stops sending, or for at most
//! [`RecordingListener::MAX_RECORDED`] bytes in all; each request gets the configured
//! canned HTTP answer (by default 404 with an empty body) and the connection is closed.
//! The listener stops when dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What the listener answers to each request it reads.
#[derive(Debug, Clone)]
pub struct CannedReply {
    /// Status line code, e.g. 200, 401, 404.
    pub status: u16,
    /// Extra headers, e.g. `("WWW-Authenticate", "Bearer")`.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Default for CannedReply {
    fn default() -> Self {
        Self {
            status: 404,
            headers: Vec::new(),
            body: String::new(),
        }
    }
}

impl CannedReply {
    /// A reply with this status and body (`Content-Type: application/json` when the
    /// body starts with `{`).
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        let body = body.into();
        let mut headers = Vec::new();
        if body.starts_with('{') {
            headers.push(("Content-Type".to_string(), "application/json".to_string()));
        }
        Self {
            status,
            headers,
            body,
        }
    }

    fn render(&self) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {} X\r\n", self.status);
        for (k, v) in &self.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
            self.body.len(),
            self.body
        ));
        out.into_bytes()
    }
}

/// A listener that records what it receives. See the module docs.
#[derive(Debug)]
pub struct RecordingListener {
    port: u16,
    received: Arc<Mutex<Vec<u8>>>,
    connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl RecordingListener {
    /// The most bytes kept (later bytes are counted as connections but not stored).
    pub const MAX_RECORDED: usize = 4 * 1024 * 1024;

    /// Starts a listener answering 404 to everything.
    pub async fn start() -> Self {
        Self::with_reply(CannedReply::default()).await
    }

    /// Starts a listener answering `reply` to every request.
    pub async fn with_reply(reply: CannedReply) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received: Arc<Mutex<Vec<u8>>> = Arc::default();
        let connections = Arc::new(AtomicUsize::new(0));
        let task = {
            let received = received.clone();
            let connections = connections.clone();
            let answer = reply.render();
            tokio::spawn(async move {
                while let Ok((mut sock, _)) = listener.accept().await {
                    connections.fetch_add(1, Ordering::SeqCst);
                    let received = received.clone();
                    let answer = answer.clone();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        let mut seen = Vec::new();
                        loop {
                            let n = match tokio::time::timeout(
                                Duration::from_millis(300),
                                sock.read(&mut buf),
                            )
                            .await
                            {
                                Ok(Ok(n)) if n > 0 => n,
                                _ => break,
                            };
                            seen.extend_from_slice(&buf[..n]);
                            if let Ok(mut r) = received.lock() {
                                let room = Self::MAX_RECORDED.saturating_sub(r.len());
                                r.extend_from_slice(&buf[..n.min(room)]);
                            }
                            if request_complete(&seen) {
                                break;
                            }
                        }
                        let _ = sock.write_all(&answer).await;
                        let _ = sock.shutdown().await;
                    });
                }
            })
        };
        Self {
            port,
            received,
            connections,
            task,
        }
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:{port}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Everything received so far, as (lossy) text.
    pub fn received(&self) -> String {
        let bytes = self.received.lock().map(|r| r.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Panics (showing what arrived) if `needle` appears in what was received.
    pub fn assert_never_saw(&self, needle: &str) {
        let got = self.received();
        assert!(
            !got.contains(needle),
            "the recording listener received {needle:?}; everything it got:\n{got}"
        );
    }
}

impl Drop for RecordingListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether `seen` holds a whole HTTP request: headers, and `Content-Length` bytes of body.
fn request_complete(seen: &[u8]) -> bool {
    let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    seen.len() >= end + 4 + len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_requests_and_answers_the_canned_reply() {
        let l = RecordingListener::with_reply(CannedReply::new(401, "{\"e\":1}")).await;
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", l.port()))
            .await
            .unwrap();
        s.write_all(
            b"POST /x HTTP/1.1\r\nContent-Length: 5\r\nAuthorization: Bearer s3cret\r\n\r\nhello",
        )
        .await
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        assert!(answer.ends_with("{\"e\":1}"), "{answer}");
        assert_eq!(l.connections(), 1);
        assert!(l.received().contains("Bearer s3cret"));
        l.assert_never_saw("other");
        let caught = std::panic::catch_unwind(|| l.assert_never_saw("s3cret"));
        assert!(caught.is_err());
    }
}
