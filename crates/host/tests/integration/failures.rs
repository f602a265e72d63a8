//! Failure cases, each against a real (mis)behaving peer: the error says what happened,
//! nothing hangs, other servers are unaffected, and no process is left behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_host::{HostEvent, HostOptions, ServerStatus};
use switchboard_mcp::{CallOptions, ConnectError, Connection, RequestError, Target, TransportKind};
use switchboard_testkit::{
    EverythingMode, PeerProcess, PyMode, bad_peer, everything_bin, free_port, peers_dir,
    python_bin, python_server_script, python_stdio_command, spawn_everything, spawn_python,
};

use crate::common::{
    MARKER_VAR, all_text, assert_group_gone, assert_no_process_left, connect_opts, connected,
    eventually, json_of, marked_stdio, obj, spec, started_host, stdio_target, unique_marker,
};

/// Aborts a spawned task (a test HTTP server) when the test ends, even by panicking.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn echo_args(message: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    Some(obj(json!({ "message": message })))
}

async fn echo(conn: &Connection, message: &str) -> Result<String, RequestError> {
    let result = conn
        .call_tool("echo", echo_args(message), &CallOptions::default())
        .await?;
    Ok(all_text(&json_of(&result)))
}

fn with_timeout(t: Duration) -> CallOptions {
    CallOptions {
        timeout: Some(t),
        ..Default::default()
    }
}

/// Polls the cancel log a peer writes until it records a `notifications/cancelled`.
async fn wait_for_cancel_log(path: &std::path::Path) -> String {
    let mut text = String::new();
    let seen = eventually(Duration::from_secs(5), || {
        text = std::fs::read_to_string(path).unwrap_or_default();
        text.contains("cancelled")
    })
    .await;
    assert!(
        seen,
        "the server recorded no notifications/cancelled (log: {text:?})"
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_not_found() {
    let program = "switchboard-test-no-such-command-4711";
    let target = stdio_target((program.to_string(), vec!["--flag".into()]), &[]);

    let err = Connection::connect(connect_opts(
        "ghost",
        target.clone(),
        Duration::from_secs(5),
    ))
    .await
    .expect_err("a missing command cannot connect");
    match &err {
        ConnectError::CommandNotFound { command } => assert_eq!(command, program),
        other => panic!("expected CommandNotFound, got {other:?}"),
    }

    let host = started_host(
        vec![spec("ghost", target, Duration::from_secs(5))],
        HostOptions::default(),
    )
    .await;
    let snap = host.server("ghost").unwrap();
    assert_eq!(snap.status, ServerStatus::Disconnected);
    let error = snap.error.expect("the reason is kept");
    assert!(
        error.contains(program) && error.contains("was not found"),
        "{error}"
    );
    assert!(snap.hint.is_some(), "a hint says what to do");
    assert!(host.connection("ghost").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_exits_during_initialize_quotes_stderr() {
    let marker = unique_marker("exit-on-init");
    let target = marked_stdio(bad_peer("exit_on_init"), &marker);
    let err = Connection::connect(connect_opts("db", target.clone(), Duration::from_secs(15)))
        .await
        .expect_err("the server exits");
    match &err {
        ConnectError::ExitedDuringInit { status, stderr } => {
            assert!(status.contains('2'), "exit status 2 expected: {status}");
            assert!(
                stderr.iter().any(|l| l == "fatal: database not reachable"),
                "{stderr:?}"
            );
        }
        other => panic!("expected ExitedDuringInit, got {other:?}"),
    }
    assert!(
        err.to_string().contains("fatal: database not reachable"),
        "{err}"
    );

    // The host shows the same reason.
    let host = started_host(
        vec![spec("db", target, Duration::from_secs(15))],
        HostOptions::default(),
    )
    .await;
    let snap = host.server("db").unwrap();
    assert_eq!(snap.status, ServerStatus::Disconnected);
    assert!(
        snap.error
            .as_deref()
            .is_some_and(|e| e.contains("fatal: database not reachable")),
        "{:?}",
        snap.error
    );
    assert_no_process_left(&marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_tool_times_out_sends_cancel_and_others_are_unaffected() {
    let marker = unique_marker("hang-tool");
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().display().to_string();
    let hung = stdio_target(
        bad_peer("hang_tool"),
        &[(MARKER_VAR, &marker), ("SWITCHBOARD_CANCEL_LOG", &log_path)],
    );
    let other = marked_stdio(bad_peer("hang_tool"), &marker);
    let host = started_host(
        vec![
            spec("hung", hung, Duration::from_secs(15)),
            spec("other", other, Duration::from_secs(15)),
        ],
        HostOptions::default(),
    )
    .await;
    connected(&host, "hung");
    connected(&host, "other");
    let hung = host.connection("hung").unwrap();
    let other = host.connection("other").unwrap();

    let started = Instant::now();
    let hang = async {
        let r = hung
            .call_tool("hang", None, &with_timeout(Duration::from_millis(500)))
            .await;
        (r, started.elapsed())
    };
    // While `hang` is pending: the same connection and another server both answer.
    let same = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        echo(&hung, "same connection").await
    };
    let elsewhere = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        echo(&other, "other server").await
    };
    let ((hang, took), same, elsewhere) = tokio::join!(hang, same, elsewhere);

    match hang {
        Err(RequestError::Timeout { ref method, after }) => {
            assert_eq!(method, "tools/call");
            assert_eq!(after, Duration::from_millis(500));
        }
        ref other => panic!("expected a timeout, got {other:?}"),
    }
    let message = hang.unwrap_err().to_string();
    assert!(
        message.contains("500 ms") && message.contains("cancelled on the server"),
        "{message}"
    );
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(same.unwrap(), "same connection");
    assert_eq!(elsewhere.unwrap(), "other server");

    let text = wait_for_cancel_log(log.path()).await;
    assert_eq!(text.lines().count(), 1, "one cancelled request: {text:?}");

    // The connection survived its timed-out request.
    assert_eq!(echo(&hung, "still here").await.unwrap(), "still here");
    connected(&host, "hung");

    // Calls on one connection run concurrently: an echo answers while a hang is pending
    // (with a long timeout, so that this does not depend on scheduling).
    {
        let long = with_timeout(Duration::from_secs(20));
        let pending = hung.call_tool("hang", None, &long);
        tokio::pin!(pending);
        tokio::select! {
            biased;
            r = &mut pending => panic!("hang answered: {r:?}"),
            r = echo(&hung, "meanwhile") => assert_eq!(r.unwrap(), "meanwhile"),
        }
    }

    let pids = [hung.pid().unwrap(), other.pid().unwrap()];
    drop((hung, other));
    host.shutdown().await;
    for pid in pids {
        assert_group_gone(pid).await;
    }
    assert_no_process_left(&marker).await;
}

/// The same over HTTP against the Python SDK. With a session (the `initialize`
/// handshake) the timeout sends `notifications/cancelled`, which the server records. In
/// the stateless 2026-07-28 revision a request is cancelled by closing its response
/// stream instead (rmcp sends no notification there), so only the timeout and the
/// connection's health are checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_tool_over_http_times_out_and_is_cancelled() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().display().to_string();
    let peer = spawn_python(
        PyMode::StreamableHttp,
        &[("SWITCHBOARD_CANCEL_LOG", log_path.as_str())],
    )
    .await;
    for (hint, kind) in [
        (
            Some(TransportKind::StreamableHttp),
            TransportKind::StreamableHttp,
        ),
        (None, TransportKind::StatelessHttp),
    ] {
        std::fs::write(log.path(), "").unwrap();
        let target = Target::Http {
            url: peer.url.clone(),
            headers: vec![],
        };
        let mut opts = connect_opts("py", target, Duration::from_secs(15));
        opts.transport_hint = hint;
        let conn = Connection::connect(opts).await.expect("connect");
        assert_eq!(conn.transport_kind(), kind);
        let started = Instant::now();
        let err = conn
            .call_tool("hang", None, &with_timeout(Duration::from_millis(500)))
            .await
            .expect_err("hang never answers");
        assert!(
            matches!(err, RequestError::Timeout { .. }),
            "{kind:?}: {err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{kind:?}");
        if kind == TransportKind::StreamableHttp {
            let text = wait_for_cancel_log(log.path()).await;
            assert!(text.starts_with("cancelled "), "{text:?}");
        }
        assert_eq!(echo(&conn, "after").await.unwrap(), "after", "{kind:?}");
        conn.close(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_during_initialize_times_out_without_delaying_others() {
    let marker = unique_marker("hang-init");
    let startup = Duration::from_secs(4);
    let host = switchboard_host::Host::new(
        vec![
            spec(
                "hung",
                marked_stdio(bad_peer("hang_init"), &marker),
                startup,
            ),
            spec(
                "fast",
                marked_stdio(bad_peer("hang_tool"), &marker),
                startup,
            ),
        ],
        HostOptions::default(),
    );
    let mut events = host.subscribe();
    let t0 = Instant::now();
    let start = tokio::spawn({
        let host = host.clone();
        async move { host.start().await }
    });

    let fast_at = tokio::time::timeout(startup * 2, async {
        loop {
            match events.recv().await {
                Ok(HostEvent::Status {
                    server,
                    status: ServerStatus::Connected,
                    ..
                }) if server == "fast" => return t0.elapsed(),
                Ok(_) => {}
                Err(e) => panic!("event stream: {e}"),
            }
        }
    })
    .await
    .expect("fast connects");
    assert!(
        fast_at < startup - Duration::from_secs(1),
        "the fast server waited for the hung one: connected after {fast_at:?}"
    );
    assert_eq!(
        host.server("hung").unwrap().status,
        ServerStatus::Connecting,
        "the hung server is still starting"
    );

    start.await.unwrap();
    let total = t0.elapsed();
    assert!(
        total >= startup && total < startup + Duration::from_secs(2),
        "start() took {total:?} with a {startup:?} start-up timeout"
    );
    let hung = host.server("hung").unwrap();
    assert_eq!(hung.status, ServerStatus::Disconnected);
    let error = hung.error.unwrap_or_default();
    assert!(
        error.contains("did not finish start-up within 4000 ms"),
        "{error}"
    );
    connected(&host, "fast");

    // The connection layer says the same, as a typed error.
    let err = Connection::connect(connect_opts(
        "hung",
        marked_stdio(bad_peer("hang_init"), &marker),
        Duration::from_millis(700),
    ))
    .await
    .expect_err("hangs");
    assert!(
        matches!(err, ConnectError::StartupTimeout { after, .. } if after == Duration::from_millis(700)),
        "{err:?}"
    );

    host.shutdown().await;
    assert_no_process_left(&marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dies_mid_call() {
    let marker = unique_marker("die-mid-call");
    let conn = Connection::connect(connect_opts(
        "dies",
        marked_stdio(bad_peer("die_mid_call"), &marker),
        Duration::from_secs(15),
    ))
    .await
    .expect("connect");
    let pid = conn.pid().unwrap();
    let started = Instant::now();
    let err = conn
        .call_tool("boom", None, &with_timeout(Duration::from_secs(20)))
        .await
        .expect_err("the server died");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the failure took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            RequestError::Closed(_) | RequestError::Transport { .. }
        ),
        "{err:?}"
    );
    assert!(
        eventually(Duration::from_secs(5), || conn.is_closed()).await,
        "the connection knows it is closed"
    );
    assert!(
        conn.stderr_tail()
            .iter()
            .any(|l| l.contains("exiting during tools/call")),
        "{:?}",
        conn.stderr_tail()
    );
    // Later requests fail at once.
    let again = tokio::time::timeout(Duration::from_secs(5), echo(&conn, "x"))
        .await
        .expect("no hang");
    assert!(again.is_err());
    conn.close(Duration::from_millis(300)).await;
    assert_group_gone(pid).await;
    assert_no_process_left(&marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_on_stdout() {
    let marker = unique_marker("garbage");
    let err = Connection::connect(connect_opts(
        "garbage",
        marked_stdio(bad_peer("garbage"), &marker),
        Duration::from_millis(1500),
    ))
    .await
    .expect_err("no valid answer");
    // The unreadable reply to `initialize` fails the start-up at once (not after the
    // start-up timeout), saying why, with the bad line quoted.
    match &err {
        ConnectError::Initialize { message, stderr } => {
            assert!(
                message.contains("'garbage'") && message.contains("cannot be read"),
                "{message}"
            );
            assert!(
                stderr.iter().any(|l| l.contains("malformed JSON")),
                "{stderr:?}"
            );
        }
        other => panic!("expected an initialize error, got {other:?}"),
    }
    assert!(err.to_string().contains("malformed JSON"), "{err}");
    assert_no_process_left(&marker).await;
}

/// A tiny HTTP server answering `500 Internal Server Error` to every request.
async fn serve_500() -> (String, AbortOnDrop) {
    use axum::http::StatusCode;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(|| async {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "kaboom: the database is on fire",
        )
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://127.0.0.1:{port}/mcp"), AbortOnDrop(task))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_500_is_reported() {
    let (url, _server) = serve_500().await;
    let started = Instant::now();
    let err = Connection::connect(connect_opts(
        "five-hundred",
        Target::Http {
            url: url.clone(),
            headers: vec![],
        },
        Duration::from_secs(10),
    ))
    .await
    .expect_err("500 everywhere");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered promptly"
    );
    assert!(
        matches!(err, ConnectError::Initialize { .. }),
        "expected an initialize failure, got {err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("500"), "the status is quoted: {message}");

    // Auto: Streamable HTTP fails, legacy SSE fails too, and both are reported.
    let err = Connection::connect(connect_opts(
        "five-hundred",
        Target::Auto {
            url,
            headers: vec![],
        },
        Duration::from_secs(10),
    ))
    .await
    .expect_err("500 everywhere");
    match &err {
        ConnectError::AutoFailed { http, sse } => {
            assert!(http.contains("500"), "{http}");
            assert!(sse.contains("500"), "{sse}");
        }
        other => panic!("expected AutoFailed, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_unreachable() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let make = |target: Target| connect_opts("nobody", target, Duration::from_secs(10));
    for target in [
        Target::Http {
            url: url.clone(),
            headers: vec![],
        },
        Target::Auto {
            url: url.clone(),
            headers: vec![],
        },
        Target::Sse {
            url: url.clone(),
            headers: vec![],
        },
    ] {
        let started = Instant::now();
        let err = Connection::connect(make(target.clone()))
            .await
            .expect_err("nothing listens");
        assert!(started.elapsed() < Duration::from_secs(5), "{target:?}");
        match &err {
            ConnectError::Unreachable { url: u, detail } => {
                assert_eq!(u, &url);
                assert!(
                    detail.to_ascii_lowercase().contains("refused"),
                    "{target:?}: {detail}"
                );
            }
            other => panic!("{target:?}: expected Unreachable, got {other:?}"),
        }
    }
}

/// The Python-SDK server over Streamable HTTP on a fixed port (to restart it in place).
async fn python_http_on(port: u16) -> PeerProcess {
    let mut command = Command::new(python_bin());
    command
        .arg(python_server_script())
        .args(["--transport", "streamable-http", "--port"])
        .arg(port.to_string())
        .current_dir(peers_dir().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let mut peer = PeerProcess::spawn("python-restartable", command);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}/mcp");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}

/// server-everything over Streamable HTTP on a fixed port (to restart it in place).
async fn everything_http_on(port: u16) -> PeerProcess {
    let node_dir = peers_dir().join("node");
    let mut command = Command::new("node");
    command
        .arg(everything_bin())
        .arg("streamableHttp")
        .current_dir(&node_dir)
        .env("PORT", port.to_string())
        .env(
            "NODE_OPTIONS",
            format!(
                "--require \"{}\"",
                node_dir.join("bind-loopback.cjs").display()
            ),
        );
    let mut peer = PeerProcess::spawn("server-everything-restartable", command);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}/mcp");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}

/// The server forgets the session (it restarted): the next request gets 404 (the Python
/// SDK follows the spec), the client opens a new session and retries, and the call
/// succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_404_mid_run_reinitializes() {
    let port = free_port();
    let first = python_http_on(port).await;
    let mut opts = connect_opts(
        "py",
        Target::Http {
            url: first.url.clone(),
            headers: vec![],
        },
        Duration::from_secs(20),
    );
    // A session needs the `initialize` handshake (not the stateless revision).
    opts.transport_hint = Some(TransportKind::StreamableHttp);
    let conn = Connection::connect(opts).await.expect("connect");
    assert_eq!(conn.transport_kind(), TransportKind::StreamableHttp);
    assert_eq!(echo(&conn, "before").await.unwrap(), "before");

    drop(first); // SIGKILL: its sessions are gone with the process.
    let _second = python_http_on(port).await;

    let result = tokio::time::timeout(
        Duration::from_secs(20),
        conn.call_tool(
            "echo",
            echo_args("after"),
            &with_timeout(Duration::from_secs(15)),
        ),
    )
    .await
    .expect("the call does not hang");
    let text = all_text(&json_of(&result.expect("a new session answers")));
    assert_eq!(text, "after");
    assert!(!conn.is_closed());
    // The new session keeps working.
    assert_eq!(echo(&conn, "again").await.unwrap(), "again");
    conn.close(Duration::from_millis(500)).await;
}

/// server-everything forgets sessions too, but answers a stale session id with HTTP 400
/// and a JSON-RPC error without an `id` (not the spec's 404), so no new session is
/// opened. rmcp cannot tie that error to the request; the call must still end, with a
/// timeout, rather than hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_session_answered_with_400_fails_within_the_timeout() {
    let first = spawn_everything(EverythingMode::StreamableHttp).await;
    let (port, url) = (first.port, first.url.clone());
    let conn = Connection::connect(connect_opts(
        "everything",
        Target::Http {
            url,
            headers: vec![],
        },
        Duration::from_secs(20),
    ))
    .await
    .expect("connect");
    assert_eq!(conn.transport_kind(), TransportKind::StreamableHttp);
    assert!(echo(&conn, "before").await.unwrap().contains("before"));

    drop(first);
    let _second = everything_http_on(port).await;

    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        conn.call_tool(
            "echo",
            echo_args("after"),
            &with_timeout(Duration::from_secs(2)),
        ),
    )
    .await
    .expect("the call does not hang");
    let err = result.expect_err("the stale session is refused");
    assert!(
        matches!(
            err,
            RequestError::Timeout { .. }
                | RequestError::Server { .. }
                | RequestError::Transport { .. }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    conn.close(Duration::from_millis(500)).await;
}

/// The legacy SSE stream is cut (the server dies): the next call fails promptly and the
/// connection reports itself closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_stream_cut() {
    let mut peer = spawn_everything(EverythingMode::Sse).await;
    let conn = Connection::connect(connect_opts(
        "sse",
        Target::Sse {
            url: peer.url.clone(),
            headers: vec![],
        },
        Duration::from_secs(20),
    ))
    .await
    .expect("connect");
    assert_eq!(conn.transport_kind(), TransportKind::Sse);
    assert!(echo(&conn, "before").await.unwrap().contains("before"));

    peer.kill();
    let started = Instant::now();
    let err = conn
        .call_tool(
            "echo",
            echo_args("after"),
            &with_timeout(Duration::from_secs(20)),
        )
        .await
        .expect_err("the server is gone");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the error took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            RequestError::Closed(_) | RequestError::Transport { .. }
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains("rmcp::"), "no type names: {err}");
    assert!(
        eventually(Duration::from_secs(5), || conn.is_closed()).await,
        "the connection knows it is closed"
    );
}

/// Dropping a `Connection` (no `close()`) stops the server's process group, and so does
/// dropping a `Host` without `shutdown()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_stops_stdio_servers() {
    let conn = Connection::connect(connect_opts(
        "py",
        stdio_target(python_stdio_command(), &[]),
        Duration::from_secs(30),
    ))
    .await
    .expect("connect");
    let pid = conn.pid().unwrap();
    assert!(switchboard_testkit::process_group_alive(pid));
    drop(conn);
    assert_group_gone(pid).await;

    let marker = unique_marker("dropped-host");
    let host = started_host(
        vec![spec(
            "t",
            marked_stdio(bad_peer("hang_tool"), &marker),
            Duration::from_secs(15),
        )],
        HostOptions::default(),
    )
    .await;
    let pid = host.connection("t").unwrap().pid().unwrap();
    drop(host);
    assert_group_gone(pid).await;
    assert_no_process_left(&marker).await;
}
