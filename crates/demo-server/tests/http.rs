//! The demo server over Streamable HTTP: in-process via `serve_http` /
//! `serve_http_with_shutdown`, and the binary's `http` mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{net::SocketAddr, process::Stdio, time::Duration};

use common::{TestClient, call, first_text, to_json};
use rmcp::{ServiceExt, transport::StreamableHttpClientTransport};
use serde_json::json;
use switchboard_demo_server::{DemoError, DemoOptions, serve_http, serve_http_with_shutdown};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    net::TcpListener,
    sync::oneshot,
    task::JoinHandle,
};

/// An in-process server on 127.0.0.1:0, stopped when dropped (even when a
/// test fails) or explicitly with [`HttpServer::stop`].
struct HttpServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), DemoError>>>,
}

impl HttpServer {
    async fn start(opts: DemoOptions) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_http_with_shutdown(listener, opts, async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    async fn stop(mut self) -> Result<(), DemoError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("server stops after shutdown")
            .expect("server task did not panic")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[tokio::test]
async fn tools_call_over_streamable_http() {
    let server = HttpServer::start(DemoOptions::default()).await;
    let (handler, _progress) = TestClient::new();
    let client = tokio::time::timeout(
        Duration::from_secs(20),
        handler.serve(StreamableHttpClientTransport::from_uri(server.url())),
    )
    .await
    .expect("initialize in time")
    .expect("initialize");

    let info = to_json(&*client.peer_info().expect("server info"));
    assert_eq!(info["serverInfo"]["name"], json!("switchboard-demo"));

    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 7);

    let echo = to_json(
        &client
            .call_tool(call("echo", json!({"message": "over http"})))
            .await
            .unwrap(),
    );
    assert_eq!(first_text(&echo), "Echo: over http");

    let add = to_json(
        &client
            .call_tool(call("add", json!({"a": 40, "b": 2})))
            .await
            .unwrap(),
    );
    assert_eq!(add["structuredContent"], json!({"sum": 42.0}));

    client.cancel().await.expect("close client");
    server.stop().await.expect("server ends cleanly");
}

#[tokio::test]
async fn slow_tool_progress_over_streamable_http() {
    let server = HttpServer::start(DemoOptions::default()).await;
    let (handler, mut progress) = TestClient::new();
    let client = handler
        .serve(StreamableHttpClientTransport::from_uri(server.url()))
        .await
        .expect("initialize");
    let result = to_json(
        &client
            .call_tool(call("slow", json!({"seconds": 0.3, "steps": 3})))
            .await
            .unwrap(),
    );
    assert_ne!(result["isError"], json!(true), "{result}");
    let mut steps = Vec::new();
    while steps.len() < 3 {
        let note = tokio::time::timeout(Duration::from_secs(5), progress.recv())
            .await
            .expect("progress notification")
            .expect("channel open");
        steps.push(note.progress);
    }
    assert_eq!(steps, [1.0, 2.0, 3.0]);
    client.cancel().await.expect("close client");
    server.stop().await.expect("server ends cleanly");
}

#[tokio::test]
async fn serve_http_honours_startup_delay() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // `serve_http` runs until aborted; the guard aborts it even if we panic.
    struct AbortOnDrop(JoinHandle<Result<(), DemoError>>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _server = AbortOnDrop(tokio::spawn(serve_http(
        listener,
        DemoOptions::default().with_startup_delay(Duration::from_millis(600)),
    )));
    let (handler, _progress) = TestClient::new();
    let started = tokio::time::Instant::now();
    let client = handler
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "http://{addr}/mcp"
        )))
        .await
        .expect("initialize");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(600),
        "initialize answered after {elapsed:?}"
    );
    let clock = to_json(&client.call_tool(call("clock", json!({}))).await.unwrap());
    assert!(clock["structuredContent"]["time"].is_string());
    client.cancel().await.expect("close client");
}

#[tokio::test]
async fn binary_http_mode_prints_its_url_and_serves() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard-demo-server"))
        .args(["http", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), stderr.next_line())
        .await
        .expect("listening line in time")
        .unwrap()
        .expect("a stderr line");
    let url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first stderr line: {line}"))
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(url.ends_with("/mcp"), "{url}");

    let (handler, _progress) = TestClient::new();
    let client = handler
        .serve(StreamableHttpClientTransport::from_uri(url))
        .await
        .expect("initialize");
    let echo = to_json(
        &client
            .call_tool(call("echo", json!({"message": "binary"})))
            .await
            .unwrap(),
    );
    assert_eq!(first_text(&echo), "Echo: binary");
    client.cancel().await.expect("close client");
    child.kill().await.expect("stop the server");
}
