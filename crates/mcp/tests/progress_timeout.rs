//! Progress keeps a call alive: a request's timeout starts again with each progress
//! notification for it, up to 10 times the timeout in all; past that the call fails and
//! `notifications/cancelled` reaches the server. Against the official Python SDK server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use switchboard_mcp::{CallOptions, ConnectOptions, Connection, RequestError, StdioTarget, Target};

async fn connect(timeout: Duration, cancel_log: &std::path::Path) -> Connection {
    let (program, args) = switchboard_testkit::python_stdio_command();
    let mut opts = ConnectOptions::new(
        "py",
        Target::Stdio(StdioTarget {
            program,
            args,
            env: vec![(
                "SWITCHBOARD_CANCEL_LOG".into(),
                cancel_log.display().to_string(),
            )],
            cwd: None,
        }),
    );
    opts.request_timeout = timeout;
    opts.startup_timeout = Duration::from_secs(30);
    // Start-up is bounded by the request timeout too; the SDK server needs more than
    // the short timeouts below to start, so connect first with a roomy one.
    let conn = Connection::connect(opts).await.expect("connects");
    assert_eq!(conn.request_timeout(), timeout);
    conn
}

fn args(steps: u32, interval: f64) -> Option<serde_json::Map<String, serde_json::Value>> {
    json!({"steps": steps, "interval": interval})
        .as_object()
        .cloned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_reports_progress_outlives_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cancel.log");
    let conn = connect(Duration::from_secs(30), &log).await;
    // 8 steps 0.4 s apart: 3.2 s in all, never 1 s without progress.
    let opts = CallOptions {
        timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let result = conn
        .call_tool("slow_progress", args(8, 0.4), &opts)
        .await
        .expect("progress kept the call alive");
    assert!(format!("{result:?}").contains("done 8 steps"), "{result:?}");
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_extends_a_call_at_most_ten_times_its_timeout_and_then_cancels_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cancel.log");
    let conn = connect(Duration::from_secs(30), &log).await;
    let opts = CallOptions {
        timeout: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    // Progress every 0.2 s for 200 s: only the overall cap (5 s) can end it.
    let e = conn
        .call_tool("slow_progress", args(1000, 0.2), &opts)
        .await
        .expect_err("the overall cap ends the call");
    match &e {
        RequestError::Timeout { after, .. } => assert_eq!(*after, Duration::from_secs(5), "{e}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The server hears about it.
    let mut logged = String::new();
    for _ in 0..50 {
        logged = std::fs::read_to_string(&log).unwrap_or_default();
        if logged.contains("cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        logged.contains("cancelled"),
        "no notifications/cancelled: {logged:?}"
    );
    conn.close(Duration::from_secs(2)).await;
}
