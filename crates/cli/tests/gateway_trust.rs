//! The gateway's trust boundaries (issue #26) on the real binary: two upstream servers
//! behind `switchboard gateway` (over stdio and `--http`), one honest (`a`) and one
//! hostile (`b`: the catch-all template `{+u}` answering every read with forged
//! content, and a tool claiming `a`'s MCP Apps resource), driven by the Python SDK
//! client; the audit log without payloads; a `--token-file` others may read.
// Test code plays an HTTP client of its own.
#![allow(clippy::disallowed_methods, clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::gateway::{TOKEN, spawn_http_gateway};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use switchboard_testkit::{PeerProcess, ensure_peers, free_port, python_bin};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const MARKER: &str = "zq7marker";

fn drivers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../gateway/tests/drivers")
}

/// Settings with `a` and `b` (`trust_peer.py`); `b` logs the URIs it is asked to read.
fn trust_settings(dir: &Path, b_log: &Path) -> PathBuf {
    let py = python_bin().display().to_string();
    let peer = drivers().join("trust_peer.py").display().to_string();
    let env = json!({"TRUST_LOG": b_log.display().to_string(), "TRUST_MARKER": MARKER});
    let servers = json!({
        "a": {"command": py, "args": [peer, "a"], "env": env},
        "b": {"command": py, "args": [peer, "b"], "env": env},
    });
    let path = dir.join("settings.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

fn trust_driver(plan: Value) -> Value {
    // A throwaway HOME: the SDK hands a stdio gateway only HOME and PATH, so its pins
    // stay out of the real home.
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .arg("180")
        .arg(python_bin())
        .arg(drivers().join("py_trust_client.py"))
        .arg(plan.to_string())
        .env("HOME", home.path())
        .env_remove("SWITCHBOARD_HOME")
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "driver failed: {text}");
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("driver output {text}: {e}"))
}

/// What a client sees of `a`'s URIs, and what `b` was asked.
fn reads_plan() -> Value {
    json!({
        "calls": ["a__link"],
        "reads": ["a://doc/1", "a://doc/2", "x://made/by-a", "c://free"],
    })
}

fn check_reads(out: &Value, b_log: &Path) {
    // `a`'s listed URI, one in the origin `a` lists, and one `a` returned in a
    // `resource_link` (an origin nobody lists): all answered by `a`.
    assert_eq!(out["reads"]["a://doc/1"], json!(["A:a://doc/1"]), "{out}");
    assert_eq!(out["reads"]["a://doc/2"], json!(["A:a://doc/2"]), "{out}");
    assert_eq!(
        out["reads"]["x://made/by-a"],
        json!(["A:x://made/by-a"]),
        "{out}"
    );
    // An origin no server owns is the template's to answer.
    assert_eq!(out["reads"]["c://free"], json!(["FORGED"]), "{out}");
    let asked = std::fs::read_to_string(b_log).unwrap_or_default();
    assert_eq!(asked.lines().collect::<Vec<_>>(), ["c://free"], "{asked}");
    // `b`'s tool claiming `a`'s app lost its `_meta.ui`; its own app stays.
    let tools = &out["tools"];
    assert!(tools["b__app"].get("ui").is_none(), "{tools}");
    assert_eq!(
        tools["b__own_app"]["ui"]["resourceUri"], "ui://b/app.html",
        "{tools}"
    );
}

/// Over stdio (the tool call takes the raw relay: the Python client is on a protocol
/// before 2026-07-28): reads of `a`'s URIs reach `a`, never `b`'s catch-all template.
#[test]
fn a_catch_all_template_gets_no_read_of_another_servers_uris_over_stdio() {
    ensure_peers();
    let env = common::Env::new();
    let b_log = env.project.path().join("b.log");
    let config = trust_settings(env.project.path(), &b_log);
    let mut plan = reads_plan();
    plan["transport"] = json!("stdio");
    plan["command"] = json!(BIN);
    plan["args"] = json!(["gateway", "--config", config, "--wait-ms", "30000"]);
    let out = trust_driver(plan);
    check_reads(&out, &b_log);
}

/// The same over `--http` (the typed path), and the notice: the gateway's
/// instructions say which tool's app was dropped.
#[tokio::test(flavor = "multi_thread")]
async fn a_catch_all_template_gets_no_read_of_another_servers_uris_over_http() {
    ensure_peers();
    let env = common::Env::new();
    let b_log = env.project.path().join("b.log");
    let config = trust_settings(env.project.path(), &b_log);
    let gw = spawn_http_gateway(&config, &env, &[]).await;
    let mut plan = reads_plan();
    plan["transport"] = json!("http");
    plan["url"] = json!(gw.url);
    plan["token"] = json!(TOKEN);
    let out = tokio::task::spawn_blocking(move || trust_driver(plan))
        .await
        .unwrap();
    check_reads(&out, &b_log);
    // A second client, once every server is in: the notice is in the instructions.
    let plan = json!({"transport": "http", "url": gw.url, "token": TOKEN});
    let out = tokio::task::spawn_blocking(move || trust_driver(plan))
        .await
        .unwrap();
    let instructions = out["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("the app (`_meta.ui`) of `b__app` dropped"),
        "{instructions}"
    );
}

/// `--audit` without `--audit-payloads` keeps names and error classes: an upstream's
/// error text and the URIs read (both holding a marker) are not in the file; with
/// payloads they are.
#[test]
fn the_audit_log_without_payloads_keeps_no_upstream_text_or_uri() {
    ensure_peers();
    let env = common::Env::new();
    let b_log = env.project.path().join("b.log");
    let config = trust_settings(env.project.path(), &b_log);
    let plan = |audit: &Path, payloads: bool| {
        let mut args = json!([
            "gateway",
            "--config",
            config,
            "--wait-ms",
            "30000",
            "--audit",
            audit
        ]);
        if payloads {
            args.as_array_mut().unwrap().push(json!("--audit-payloads"));
        }
        json!({
            "transport": "stdio", "command": BIN, "args": args,
            "calls": ["a__fail"],
            "reads": [format!("a://doc/{MARKER}"), format!("a://doc/{MARKER}-fail")],
        })
    };
    let audit = env.project.path().join("audit.jsonl");
    let out = trust_driver(plan(&audit, false));
    // The client itself was told (the upstream's error passes through to it).
    assert!(
        out["calls"]["a__fail"].to_string().contains(MARKER),
        "{out}"
    );
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(!text.contains(MARKER), "{text}");
    let fail = lines
        .iter()
        .find(|l| l["tool"] == "fail")
        .expect("a__fail's line");
    assert_eq!(fail["error_class"], "internal_error (-32603)", "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l["method"] == "resources/read" && l["tool"] == "a:…")
    );

    let with = env.project.path().join("audit-payloads.jsonl");
    trust_driver(plan(&with, true));
    let text = std::fs::read_to_string(&with).unwrap();
    assert!(text.contains(&format!("{MARKER} broke reading")), "{text}");
    assert!(text.contains(&format!("a://doc/{MARKER}")), "{text}");
}

/// `--token-file` that others may read is refused (with the `chmod 600` to run); the
/// same file at 0600 serves.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_file_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let env = common::Env::new();
    let file = env.project.path().join("token");
    std::fs::write(&file, "a-long-enough-gateway-token-0123456789\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let shown = file.display().to_string();
    // Bounded: a gateway that accepted the file would serve until stopped.
    let out = Command::new("timeout")
        .args([
            "20",
            BIN,
            "gateway",
            "--http",
            "--port",
            "0",
            "--token-file",
            &shown,
        ])
        .env("HOME", env.home.path())
        .env("SWITCHBOARD_HOME", env.sb.path())
        .current_dir(env.project.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::stderr(&out));
    let err = common::stderr(&out);
    assert!(err.contains(&format!("chmod 600 {shown}")), "{err}");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = free_port();
    let mut cmd = Command::new(BIN);
    cmd.args([
        "gateway",
        "--http",
        "--port",
        &port.to_string(),
        "--token-file",
        &shown,
    ])
    .env("HOME", env.home.path())
    .env("SWITCHBOARD_HOME", env.sb.path())
    .current_dir(env.project.path());
    let mut gw = PeerProcess::spawn("gateway-token-file", cmd);
    gw.wait_for_port(port, std::time::Duration::from_secs(30))
        .await;
}
