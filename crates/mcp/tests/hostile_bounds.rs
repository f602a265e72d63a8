//! Hostile servers get bounded resources: on stdio, legacy SSE and Streamable HTTP, a
//! reply over the server's `maxMessageBytes` or nested too deep to parse fails its
//! request at once with an error naming the server (not after the request timeout), the
//! connection stays usable, and the host's memory stays bounded while a server floods.
//!
//! The peers are `tests/peers/python/bad/flood.py` (stdio) and `flood_http.py`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use switchboard_mcp::{CallOptions, ConnectOptions, Connection, StdioTarget, Target};
use switchboard_testkit::{PeerProcess, bad_peer, spawn_bad_http};

/// The limit the tests set: 1 MiB, so that floods of a few MiB are over it.
const LIMIT: usize = 1024 * 1024;
/// The size of the floods.
const FLOOD: &str = "8388608";
/// A request timeout far longer than the test: an error must come from the limit.
const PATIENCE: Duration = Duration::from_secs(600);

fn stdio_target() -> Target {
    let (program, args) = bad_peer("flood");
    Target::Stdio(StdioTarget {
        program,
        args,
        env: vec![
            ("FLOOD_BYTES".into(), FLOOD.into()),
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ],
        cwd: None,
    })
}

async fn http_peer(mode: &str) -> (PeerProcess, Target) {
    let peer = spawn_bad_http("flood_http", &["--mode", mode], &[("FLOOD_BYTES", FLOOD)]).await;
    let target = if mode == "sse" {
        Target::Sse {
            url: format!("{}/sse", peer.url),
            headers: vec![],
        }
    } else {
        Target::Http {
            url: format!("{}/mcp", peer.url),
            headers: vec![],
        }
    };
    (peer, target)
}

async fn connect(target: Target) -> Connection {
    let mut opts = ConnectOptions::new("flood", target);
    opts.max_message_bytes = LIMIT;
    opts.request_timeout = PATIENCE;
    opts.startup_timeout = Duration::from_secs(30);
    Connection::connect(opts).await.expect("connects")
}

/// Calls `tool` and returns its error text (the test fails if the call succeeds or
/// takes as long as a timeout would).
async fn call_error(conn: &Connection, tool: &str) -> String {
    let opts = CallOptions::default();
    let call = conn.call_tool(tool, None, &opts);
    match tokio::time::timeout(Duration::from_secs(120), call).await {
        Ok(Ok(result)) => panic!("{tool}: expected an error, got {result:?}"),
        Ok(Err(e)) => e.to_string(),
        Err(_) => panic!("{tool}: still waiting after 120 s (the reply was dropped silently)"),
    }
}

async fn echo_works(conn: &Connection) {
    let result = conn
        .call_tool("echo", None, &CallOptions::default())
        .await
        .expect("the connection is still usable");
    assert!(format!("{result:?}").contains("still here"), "{result:?}");
}

/// The peak resident memory of this test process (`VmHWM`), in bytes.
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

async fn oversized_and_deep_replies_fail_their_request(target: Target, transport: &str) {
    let conn = connect(target).await;
    for tool in ["big", "big_late"] {
        let e = call_error(&conn, tool).await;
        assert!(
            e.contains("'flood'") && e.contains("1 MiB") && e.contains("maxMessageBytes"),
            "{transport} {tool}: {e}"
        );
        echo_works(&conn).await;
    }
    let e = call_error(&conn, "deep").await;
    assert!(
        e.contains("'flood'") && e.contains("cannot be read"),
        "{transport} deep: {e}"
    );
    echo_works(&conn).await;
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_replies_over_the_limit_or_too_deep_fail_at_once() {
    oversized_and_deep_replies_fail_their_request(stdio_target(), "stdio").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_sse_replies_over_the_limit_or_too_deep_fail_at_once() {
    let (_peer, target) = http_peer("sse").await;
    oversized_and_deep_replies_fail_their_request(target, "sse").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_message_keeps_memory_bounded_on_stdio_and_sse() {
    // 256 MiB with no end: the old framing buffered all of it (about 1 GiB of RSS with
    // the copies); now at most the 1 MiB limit is held.
    const ENDLESS: &str = "268435456";
    let (program, args) = bad_peer("flood");
    let stdio = Target::Stdio(StdioTarget {
        program,
        args,
        env: vec![("FLOOD_BYTES".into(), ENDLESS.into())],
        cwd: None,
    });
    let conn = connect(stdio).await;
    let e = call_error(&conn, "unterminated").await;
    assert!(e.contains("1 MiB"), "stdio: {e}");
    // The flood is framed past and the next request is answered.
    echo_works(&conn).await;
    conn.close(Duration::from_secs(2)).await;

    let peer = spawn_bad_http(
        "flood_http",
        &["--mode", "sse"],
        &[("FLOOD_BYTES", ENDLESS)],
    )
    .await;
    let conn = connect(Target::Sse {
        url: format!("{}/sse", peer.url),
        headers: vec![],
    })
    .await;
    let e = call_error(&conn, "unterminated").await;
    assert!(e.contains("1 MiB"), "sse: {e}");
    conn.close(Duration::from_secs(2)).await;
    drop(peer);

    let peak = peak_rss();
    assert!(
        peak < 160 * 1024 * 1024,
        "peak RSS {} MiB while 2 x 256 MiB were flooded",
        peak / (1024 * 1024)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn streamable_http_replies_over_the_limit_or_too_deep_fail_at_once() {
    let (_peer, target) = http_peer("http").await;
    oversized_and_deep_replies_fail_their_request(target, "http").await;
}
