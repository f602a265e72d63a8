//! Long-lived hosts (chat, web app) re-make a connection that drops, with backoff, and
//! say so through events; one-shot hosts do not.

use std::time::Duration;

use switchboard_host::{HostEvent, HostOptions, ServerStatus};
use switchboard_testkit::python_stdio_command;

use crate::common::{connected, eventually, spec, started_host, stdio_target};

#[allow(unsafe_code)]
fn kill_group(pid: i32) {
    // SAFETY: kill(2) on a process group we started; no memory is touched.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_stdio_server_is_reconnected_and_the_host_says_so() {
    let target = stdio_target(python_stdio_command(), &[]);
    let host = started_host(
        vec![spec("py", target, Duration::from_secs(20))],
        HostOptions {
            reconnect: true,
            ..Default::default()
        },
    )
    .await;
    let mut events = host.subscribe();
    connected(&host, "py");
    let first_pid = host.connection("py").unwrap().pid().unwrap();
    kill_group(first_pid);

    // The drop is reported, a reconnect is scheduled, and the server comes back.
    let mut saw_reconnecting = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ev = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("events before the deadline")
            .expect("event stream open");
        match ev {
            HostEvent::Reconnecting {
                server,
                attempt,
                delay,
            } => {
                assert_eq!(server, "py");
                assert_eq!(attempt, 1);
                assert_eq!(delay, Duration::from_secs(1));
                saw_reconnecting = true;
            }
            HostEvent::Status {
                status: ServerStatus::Connected,
                ..
            } if saw_reconnecting => break,
            _ => {}
        }
    }
    let snap = connected(&host, "py");
    assert!(!snap.tools.is_empty());
    let conn = host.connection("py").unwrap();
    assert_ne!(
        conn.pid().unwrap(),
        first_pid,
        "a new process serves the connection"
    );
    let r = conn
        .call_tool(
            "echo",
            Some(crate::common::obj(serde_json::json!({"message": "again"}))),
            &Default::default(),
        )
        .await
        .unwrap();
    assert!(serde_json::to_string(&r).unwrap().contains("again"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_shot_hosts_report_the_drop_and_do_not_reconnect() {
    let target = stdio_target(python_stdio_command(), &[]);
    let host = started_host(
        vec![spec("py", target, Duration::from_secs(20))],
        HostOptions::default(),
    )
    .await;
    let conn = host.connection("py").unwrap();
    kill_group(conn.pid().unwrap());
    assert!(eventually(Duration::from_secs(5), || conn.is_closed()).await);
    assert!(
        host.connection("py").is_none(),
        "a closed connection is not handed out"
    );
    let snap = host.server("py").unwrap();
    assert_eq!(snap.status, ServerStatus::Disconnected);
    assert_eq!(snap.error.as_deref(), Some("the connection was lost"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(host.connection("py").is_none());
    host.shutdown().await;
}
