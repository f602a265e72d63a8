//! Every progress notification a server sends before its result reaches the caller
//! before the call returns: they are routed as the transport reads them (rmcp would
//! hand them over in tasks of their own, after the result; under load that lost the
//! last one in 3–12% of calls). Against the official Python SDK server, 200 calls of
//! three progress steps with no pause between them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use switchboard_mcp::{CallOptions, ConnectOptions, Connection, StdioTarget, Target};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_progress_is_lost_behind_the_result() {
    switchboard_testkit::ensure_peers();
    let (program, args) = switchboard_testkit::python_stdio_command();
    let mut opts = ConnectOptions::new(
        "py",
        Target::Stdio(StdioTarget {
            program,
            args,
            env: Vec::new(),
            cwd: None,
        }),
    );
    opts.startup_timeout = Duration::from_secs(30);
    let conn = Connection::connect(opts).await.unwrap();
    let arguments = json!({"steps": 3, "interval": 0}).as_object().cloned();
    for call in 0..200 {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let opts = CallOptions {
            progress: Some(tx),
            ..Default::default()
        };
        conn.call_tool("slow_progress", arguments.clone(), &opts)
            .await
            .unwrap();
        let mut seen = Vec::new();
        while let Ok(p) = rx.try_recv() {
            seen.push(p.progress);
        }
        assert_eq!(seen, [1.0, 2.0, 3.0], "call {call}: in order, none missing");
    }
    conn.close(Duration::from_secs(2)).await;
}
