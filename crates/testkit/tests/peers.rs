//! The peers start, answer `initialize`, and leave no process behind once dropped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use switchboard_testkit::{
    EverythingMode, PeerProcess, PyMode, bad_peer, everything_stdio_command, http_initialize,
    initialize_request, process_group_alive, python_stdio_command, spawn_everything, spawn_python,
    sse_initialize, wait_group_gone,
};

fn server_name(reply: &Value) -> &str {
    reply["result"]["serverInfo"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("not an initialize result: {reply}"))
}

/// Drop the peer and check its whole process group is gone.
fn drop_and_check_gone(peer: PeerProcess) {
    let pgid = i32::try_from(peer.pid()).unwrap();
    assert!(
        process_group_alive(pgid),
        "peer died early:\n{}",
        peer.stderr()
    );
    drop(peer);
    assert!(
        wait_group_gone(pgid, Duration::from_secs(5)),
        "process group {pgid} still alive after drop"
    );
}

#[tokio::test]
async fn everything_streamable_http() {
    let peer = spawn_everything(EverythingMode::StreamableHttp).await;
    assert!(peer.url.starts_with("http://127.0.0.1:") && peer.url.ends_with("/mcp"));
    let reply = http_initialize(&peer.url).await;
    assert_eq!(
        server_name(&reply.message),
        "mcp-servers/everything",
        "{reply:?}"
    );
    assert!(
        reply.content_type.starts_with("text/event-stream"),
        "{reply:?}"
    );
    assert!(reply.session_id.is_some(), "{reply:?}");
    drop_and_check_gone(peer);
}

#[tokio::test]
async fn everything_sse() {
    let peer = spawn_everything(EverythingMode::Sse).await;
    assert!(peer.url.ends_with("/sse"));
    let reply = sse_initialize(&peer.url).await;
    assert_eq!(server_name(&reply), "mcp-servers/everything", "{reply}");
    drop_and_check_gone(peer);
}

#[tokio::test]
async fn everything_binds_loopback_only() {
    let peer = spawn_everything(EverythingMode::StreamableHttp).await;
    // /proc/net/tcp lists listening sockets (state 0A) as hex "ADDR:PORT".
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port_hex = format!(":{:04X}", peer.port);
    let listeners: Vec<&str> = table
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() > 3 && cols[3] == "0A" && cols[1].ends_with(&port_hex)).then_some(cols[1])
        })
        .collect();
    assert_eq!(listeners, vec![format!("0100007F{port_hex}").as_str()]);
    let table6 = std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
    assert!(
        !table6.lines().any(|l| l
            .split_whitespace()
            .nth(1)
            .is_some_and(|a| a.ends_with(&port_hex))
            && l.split_whitespace().nth(3) == Some("0A")),
        "server-everything also listens on IPv6"
    );
    drop_and_check_gone(peer);
}

#[tokio::test]
async fn python_http_modes() {
    // Started together: Python start-up dominates this test.
    let (sse_replies, json, stateless) = tokio::join!(
        spawn_python(PyMode::StreamableHttp, &[]),
        spawn_python(PyMode::Json, &[]),
        spawn_python(PyMode::Stateless, &[]),
    );
    // (mode, peer, JSON replies?, session id?)
    let cases = [
        (PyMode::StreamableHttp, sse_replies, false, true),
        (PyMode::Json, json, true, true),
        (PyMode::Stateless, stateless, false, false),
    ];
    for (mode, peer, json_reply, has_session) in cases {
        assert!(peer.url.ends_with("/mcp"), "{mode:?}: {}", peer.url);
        let reply = http_initialize(&peer.url).await;
        assert_eq!(
            server_name(&reply.message),
            "switchboard-py-peer",
            "{mode:?}: {reply:?}"
        );
        assert!(
            reply.message["result"]["instructions"].is_string(),
            "{mode:?}: {reply:?}"
        );
        assert_eq!(
            reply.content_type.starts_with("application/json"),
            json_reply,
            "{mode:?}: {reply:?}"
        );
        assert_eq!(
            reply.session_id.is_some(),
            has_session,
            "{mode:?}: {reply:?}"
        );
        drop_and_check_gone(peer);
    }
}

#[tokio::test]
async fn python_sse() {
    let peer = spawn_python(PyMode::Sse, &[("SWITCHBOARD_TEST_MARK", "1")]).await;
    assert!(peer.url.ends_with("/sse"));
    let reply = sse_initialize(&peer.url).await;
    assert_eq!(server_name(&reply), "switchboard-py-peer", "{reply}");
    drop_and_check_gone(peer);
}

/// Spawn a stdio command, send `initialize`, return the first line it writes.
fn stdio_initialize(program: &str, args: &[String]) -> (Option<Value>, std::process::ExitStatus) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", initialize_request()).unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    let _ = child.kill();
    let status = child.wait().unwrap();
    (serde_json::from_str(&line).ok(), status)
}

#[test]
fn stdio_peers_answer_initialize() {
    let (program, args) = python_stdio_command();
    let (reply, _) = stdio_initialize(&program, &args);
    assert_eq!(server_name(&reply.unwrap()), "switchboard-py-peer");

    let (program, args) = everything_stdio_command();
    let (reply, _) = stdio_initialize(&program, &args);
    assert_eq!(server_name(&reply.unwrap()), "mcp-servers/everything");

    let (program, args) = bad_peer("no_tools");
    let (reply, _) = stdio_initialize(&program, &args);
    let reply = reply.unwrap();
    assert_eq!(reply["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(reply["result"]["capabilities"], serde_json::json!({}));
}

#[test]
fn bad_peer_exits_on_init_with_status_2() {
    let (program, args) = bad_peer("exit_on_init");
    let (reply, status) = stdio_initialize(&program, &args);
    assert!(reply.is_none());
    assert_eq!(status.code(), Some(2));
}

#[test]
#[should_panic(expected = "no bad peer named")]
fn unknown_bad_peer_panics() {
    let _ = bad_peer("does_not_exist");
}

#[test]
fn drop_kills_grandchildren_and_captures_stderr() {
    let mut command = Command::new("sh");
    command.args(["-c", "echo started >&2; sleep 300 & sleep 300"]);
    let peer = PeerProcess::spawn("sh", command);
    let pgid = i32::try_from(peer.pid()).unwrap();
    let start = std::time::Instant::now();
    while !peer.stderr().contains("started") {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no output captured"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop_and_check_gone(peer);
    assert!(!process_group_alive(pgid));
}

/// Over stdio: initialize, call `hang` (id 5), cancel it, and wait for the peer to log
/// `cancelled 5` to `$SWITCHBOARD_CANCEL_LOG`.
fn check_cancel_logged(program: &str, args: &[String]) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cancel.log");
    let mut command = Command::new(program);
    command
        .args(args)
        .env("SWITCHBOARD_CANCEL_LOG", &log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    send(initialize_request());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":1"), "{program}: {line}");
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "hang", "arguments": {}}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    send(
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "test"}}),
    );
    let start = std::time::Instant::now();
    let logged = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if !text.is_empty() || start.elapsed() > Duration::from_secs(10) {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(logged, "cancelled 5\n", "{program} {args:?}");
}

#[test]
fn hanging_tools_record_cancellation() {
    let python = std::thread::spawn(|| {
        let (program, args) = python_stdio_command();
        check_cancel_logged(&program, &args);
    });
    let (program, args) = bad_peer("hang_tool");
    check_cancel_logged(&program, &args);
    python.join().unwrap();
}
