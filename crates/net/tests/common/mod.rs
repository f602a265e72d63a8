//! Local test servers on 127.0.0.1:0: a redirecting server that records what it
//! received, and a fake forward proxy. Nothing here listens beyond loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request a server received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<Seen>>>);

impl Log {
    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
    pub fn paths(&self) -> Vec<String> {
        self.all().into_iter().map(|s| s.path).collect()
    }
    fn push(&self, seen: Seen) {
        self.0.lock().unwrap().push(seen);
    }
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    pub log: Log,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

async fn record(log: &Log, method: Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) {
    log.push(Seen {
        method,
        path: uri
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default(),
        headers: headers.clone(),
        body: body.to_vec(),
    });
}

fn redirect(status: StatusCode, location: &str) -> Response {
    (status, [(header::LOCATION, location.to_owned())]).into_response()
}

/// Routes:
/// - `/chain/{n}`: 302 to `/chain/{n-1}`, and 200 `end` at 0.
/// - `/to?url=U&status=S`: redirect (302 unless `status`) to `U`.
/// - `/status/{code}`: that status, no `Location`.
/// - `/echo` (any method): 200 with the request body.
pub async fn redirect_server() -> Server {
    let log = Log::default();
    let app = Router::new()
        .route(
            "/chain/{n}",
            any(
                |State(log): State<Log>,
                 Path(n): Path<u32>,
                 method: Method,
                 uri: Uri,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    record(&log, method, &uri, &headers, &body).await;
                    if n == 0 {
                        (StatusCode::OK, "end").into_response()
                    } else {
                        redirect(StatusCode::FOUND, &format!("/chain/{}", n - 1))
                    }
                },
            ),
        )
        .route(
            "/to",
            any(
                |State(log): State<Log>,
                 Query(q): Query<HashMap<String, String>>,
                 method: Method,
                 uri: Uri,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    record(&log, method, &uri, &headers, &body).await;
                    let status = q
                        .get("status")
                        .and_then(|s| s.parse::<u16>().ok())
                        .and_then(|s| StatusCode::from_u16(s).ok())
                        .unwrap_or(StatusCode::FOUND);
                    redirect(status, q.get("url").map(String::as_str).unwrap_or("/"))
                },
            ),
        )
        .route(
            "/status/{code}",
            any(
                |State(log): State<Log>,
                 Path(code): Path<u16>,
                 method: Method,
                 uri: Uri,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    record(&log, method, &uri, &headers, &body).await;
                    StatusCode::from_u16(code).unwrap().into_response()
                },
            ),
        )
        .route(
            "/echo",
            any(
                |State(log): State<Log>,
                 method: Method,
                 uri: Uri,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    record(&log, method, &uri, &headers, &body).await;
                    (StatusCode::OK, body).into_response()
                },
            ),
        )
        .with_state(log.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Server { addr, log }
}

/// A fake forward proxy: records the request line of every request (absolute-form
/// `GET http://host/…` or `CONNECT host:port`) and answers 200 `proxied` to the first
/// and 403 to the second. It never connects anywhere.
pub async fn fake_proxy() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = lines.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&buf);
                let line = text.lines().next().unwrap_or_default().to_owned();
                let reply: &[u8] = if line.starts_with("CONNECT") {
                    b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                } else {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nproxied"
                };
                seen.lock().unwrap().push(line);
                let _ = sock.write_all(reply).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (addr, lines)
}
