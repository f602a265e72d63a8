//! Shared helpers: targets for the peers, process bookkeeping, result inspection.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use switchboard_host::{Host, HostOptions, ServerSnapshot, ServerSpec, ServerStatus};
use switchboard_mcp::{ConnectOptions, StdioTarget, Target};

/// How long any single step of a test may take before the test fails instead of hanging.
pub const STEP: Duration = Duration::from_secs(30);

/// The environment variable that tags the processes a test starts (see [`marker_pids`]).
pub const MARKER_VAR: &str = "SWITCHBOARD_TEST_MARKER";

/// A stdio target inheriting this process's environment plus `extra`.
pub fn stdio_target(cmd: (String, Vec<String>), extra: &[(&str, &str)]) -> Target {
    let (program, args) = cmd;
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .collect();
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Target::Stdio(StdioTarget {
        program,
        args,
        env,
        cwd: None,
    })
}

/// A value unique to one call, to tag the processes a test starts.
pub fn unique_marker(label: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{label}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A stdio target whose process (and its children) carry `MARKER_VAR=marker`.
pub fn marked_stdio(cmd: (String, Vec<String>), marker: &str) -> Target {
    stdio_target(cmd, &[(MARKER_VAR, marker)])
}

/// Live (not zombie) processes whose environment holds `MARKER_VAR=marker`.
pub fn marker_pids(marker: &str) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Waits until no process carries `marker` (at most `limit`); returns the stragglers.
pub async fn wait_marker_gone(marker: &str, limit: Duration) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let pids = marker_pids(marker);
        if pids.is_empty() || start.elapsed() > limit {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Asserts that no process tagged with `marker` is left (3 s of grace).
pub async fn assert_no_process_left(marker: &str) {
    let left = wait_marker_gone(marker, Duration::from_secs(3)).await;
    assert!(
        left.is_empty(),
        "processes tagged {marker} are still running: {left:?}"
    );
}

/// Asserts that the stdio server's process group is gone within 3 s.
pub async fn assert_group_gone(pid: i32) {
    let gone = tokio::task::spawn_blocking(move || {
        switchboard_testkit::wait_group_gone(pid, Duration::from_secs(3))
    })
    .await
    .unwrap();
    assert!(gone, "process group {pid} is still alive");
}

/// A JSON object literal as tool/prompt arguments.
pub fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not a JSON object: {other}"),
    }
}

/// Anything serializable, as JSON (to inspect results independently of rmcp's types).
pub fn json_of<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

/// All `text` fields of a result's `content` (or a prompt's `messages`), joined.
pub fn all_text(v: &Value) -> String {
    let mut out = Vec::new();
    collect_text(v, &mut out);
    out.join("\n")
}

fn collect_text(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(t)) = m.get("text") {
                out.push(t.clone());
            }
            for (k, child) in m {
                if k != "text" {
                    collect_text(child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        _ => {}
    }
}

/// The content blocks of a tool result with the given `type`.
pub fn blocks<'a>(result: &'a Value, kind: &str) -> Vec<&'a Value> {
    result["content"]
        .as_array()
        .map(|a| a.iter().filter(|b| b["type"] == kind).collect())
        .unwrap_or_default()
}

/// Connect options with short, test-friendly limits.
pub fn connect_opts(name: &str, target: Target, startup: Duration) -> ConnectOptions {
    let mut opts = ConnectOptions::new(name, target);
    opts.startup_timeout = startup;
    opts.request_timeout = STEP;
    opts
}

/// An ad-hoc spec with the given start-up timeout and a 30 s request timeout.
pub fn spec(name: &str, target: Target, startup: Duration) -> ServerSpec {
    let mut s = ServerSpec::adhoc(name, "ad-hoc", target);
    s.startup_timeout = startup;
    s.timeout = STEP;
    s
}

/// Builds a host, starts it (bounded by [`STEP`]) and returns it.
pub async fn started_host(specs: Vec<ServerSpec>, opts: HostOptions) -> Host {
    let host = Host::new(specs, opts);
    tokio::time::timeout(STEP * 2, host.start())
        .await
        .expect("Host::start settles");
    host
}

/// The snapshot of `name`, asserted to be connected.
pub fn connected(host: &Host, name: &str) -> ServerSnapshot {
    let snap = host.server(name).expect("server exists");
    assert_eq!(
        snap.status,
        ServerStatus::Connected,
        "{name} is not connected: error={:?} warnings={:?}",
        snap.error,
        snap.warnings
    );
    snap
}

/// Polls `f` every 25 ms until it is true or `limit` passes; returns the last value.
pub async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
