//! The lean `switchboard-gateway` binary: driven end to end by the TS SDK client like
//! `switchboard gateway` (tests/gateway.rs), with the same flags, its own bundled demo
//! server when there is no settings file, and none of the web app, store or chat code
//! linked in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use switchboard_testkit::{ensure_peers, peers_dir};

const LEAN: &str = env!("CARGO_BIN_EXE_switchboard-gateway");
const FULL: &str = env!("CARGO_BIN_EXE_switchboard");

fn ts_driver(plan: Value, env: &common::Env) -> Value {
    let driver =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../gateway/tests/drivers/ts_client.mjs");
    // The SDK gives its stdio child HOME and PATH only: HOME is the throwaway one.
    let out = Command::new("timeout")
        .arg("180")
        .arg("node")
        .arg(driver)
        .arg(plan.to_string())
        .env("HOME", env.home.path())
        .env_remove("SWITCHBOARD_HOME")
        .current_dir(env.project.path())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "driver failed: {text}");
    serde_json::from_str(text.lines().last().unwrap_or("")).unwrap()
}

fn sdk_dir() -> PathBuf {
    peers_dir().join("node/node_modules/@modelcontextprotocol/sdk")
}

/// Over stdio with a settings file (`--config`), `--audit` and `--wait-ms`: the TS SDK
/// client lists the upstream's tools under `{server}__{tool}`, calls one with progress,
/// reads a resource and gets a prompt; the upstream is the lean binary's own hidden
/// `demo-server`; the audit file gets one line per call.
#[test]
fn ts_sdk_client_through_the_lean_binary() {
    ensure_peers();
    let env = common::Env::new();
    let config = env.project.path().join("settings.json");
    let audit = env.project.path().join("audit.jsonl");
    std::fs::write(
        &config,
        json!({"mcpServers": {"demo": {"command": LEAN, "args": ["demo-server"]}}}).to_string(),
    )
    .unwrap();
    let out = ts_driver(
        json!({
            "sdk": sdk_dir(),
            "transport": "stdio",
            "command": LEAN,
            "args": ["--config", config, "--audit", audit, "--wait-ms", "30000"],
            "echo": "demo__echo",
            "slow": {"name": "demo__slow", "arguments": {"seconds": 1, "steps": 3}},
            "resource": "demo://readme",
            "prompt": "demo__greet",
            "promptArgs": {"name": "Ada"},
        }),
        &env,
    );
    assert_eq!(out["serverName"], "switchboard-gateway");
    assert_eq!(out["echo"]["content"][0]["text"], "Echo: hi");
    assert!(out["slow"]["progress"].as_array().unwrap().len() >= 2);
    assert!(
        out["resource"][0]["text"]
            .as_str()
            .unwrap()
            .contains("demo server")
    );
    assert_eq!(out["prompt"][0], "Please greet Ada.");
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let echo = lines
        .iter()
        .find(|l| l["requested"] == "demo__echo")
        .expect("no audit line for demo__echo");
    assert_eq!(echo["outcome"], "ok");
    // Sizes are measured (so arguments and results are still seen with `--audit`)...
    assert!(echo["request_bytes"].as_u64().unwrap() > 0);
    assert!(echo["response_bytes"].as_u64().unwrap() > 0);
    // ...but not written without `--audit-payloads`.
    assert!(echo.get("arguments").is_none_or(Value::is_null));
}

/// With no settings file at all, the lean binary offers the bundled demo server, run
/// as itself (`switchboard-gateway demo-server`), as `switchboard gateway` does.
#[test]
fn without_settings_the_lean_binary_serves_its_demo_server() {
    ensure_peers();
    let env = common::Env::new();
    let out = ts_driver(
        json!({
            "sdk": sdk_dir(),
            "transport": "stdio",
            "command": LEAN,
            "args": ["--wait-ms", "30000"],
            "echo": "demo__echo",
        }),
        &env,
    );
    assert_eq!(out["echo"]["content"][0]["text"], "Echo: hi");
}

/// The long options in a `--help` text.
fn long_flags(help: &str) -> BTreeSet<String> {
    help.split_whitespace()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .split(['=', '<', '['])
                .next()
                .unwrap_or("")
                .to_string()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

fn help_of(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// `switchboard-gateway` takes exactly the flags of `switchboard gateway` (its own and
/// the global ones), and a flag it does not know is refused.
#[test]
fn the_lean_binary_has_the_flags_of_switchboard_gateway() {
    let mut lean = long_flags(&help_of(LEAN, &["--help"]));
    let full = long_flags(&help_of(FULL, &["gateway", "--help"]));
    // A program's own `--version` (`switchboard --version` has it at the top level).
    assert!(lean.remove("version"));
    assert_eq!(lean, full);
    for flag in [
        "http",
        "port",
        "bind",
        "token-file",
        "audit",
        "audit-payloads",
        "read-only",
    ] {
        assert!(lean.contains(flag), "--{flag} missing: {lean:?}");
    }
    for flag in [
        "config",
        "url-policy",
        "log-format",
        "color",
        "verbose",
        "wait-ms",
    ] {
        assert!(lean.contains(flag), "--{flag} missing: {lean:?}");
    }
    let out = Command::new(LEAN).arg("--no-such-flag").output().unwrap();
    assert!(!out.status.success());
    // `--port` needs `--http`, as in `switchboard gateway`.
    let out = Command::new(LEAN).args(["--port", "1"]).output().unwrap();
    assert!(!out.status.success());
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The lean binary links none of the web app, the team store (sqlx), chat or
/// workflows, which `switchboard` does (their symbol names are in its executable).
#[test]
fn the_lean_binary_links_no_web_store_chat_or_workflow_code() {
    let lean = std::fs::read(LEAN).unwrap();
    let full = std::fs::read(FULL).unwrap();
    for name in [
        "switchboard_web",
        "switchboard_store",
        "switchboard_chat",
        "switchboard_workflow",
        "sqlx_core",
    ] {
        assert!(
            contains(&full, name.as_bytes()),
            "{name} not found in switchboard itself"
        );
        assert!(
            !contains(&lean, name.as_bytes()),
            "{name} is linked into switchboard-gateway"
        );
    }
}
