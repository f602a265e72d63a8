//! `switchboard gateway` driven by real, pinned MCP clients: the TS SDK client and the
//! Python SDK client (over stdio and Streamable HTTP) and Gemini CLI (`gemini mcp
//! list`), with real upstreams (the demo server, the Python SDK server,
//! server-everything) and hostile ones.
// Test code plays an HTTP client of its own.
#![allow(clippy::disallowed_methods, clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_testkit::{
    EverythingMode, PeerProcess, bad_peer, ensure_peers, free_port, peers_dir,
    python_stdio_command, spawn_everything,
};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
pub(crate) const TOKEN: &str = "gateway-test-token-0123456789abcdef";

fn drivers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../gateway/tests/drivers")
}

fn sdk_dir() -> PathBuf {
    peers_dir().join("node/node_modules/@modelcontextprotocol/sdk")
}

/// A settings file with the demo server and the Python SDK server (its cancellations
/// logged to `cancel_log`), plus `extra` entries.
fn settings(dir: &Path, cancel_log: &Path, extra: Value) -> PathBuf {
    let (py, py_args) = python_stdio_command();
    let mut servers = json!({
        "demo": {"command": BIN, "args": ["demo-server"]},
        "py": {"command": py, "args": py_args,
               "env": {"SWITCHBOARD_CANCEL_LOG": cancel_log.display().to_string()}},
    });
    if let (Some(m), Some(e)) = (servers.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    let path = dir.join("settings.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

/// Runs a client driver with a throwaway HOME: the SDKs hand a stdio child only HOME and
/// PATH, so a gateway they spawn keeps its pins (and anything else under
/// `~/.switchboard`) there, never in the real home where other tests' pins would judge it.
fn run_driver(mut cmd: Command) -> Value {
    let home = tempfile::tempdir().unwrap();
    let out = cmd
        .env("HOME", home.path())
        .env_remove("SWITCHBOARD_HOME")
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "driver failed: {text}");
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("driver output {text}: {e}"))
}

fn ts_driver(plan: Value) -> Value {
    let mut cmd = Command::new("timeout");
    cmd.arg("180")
        .arg("node")
        .arg(drivers().join("ts_client.mjs"))
        .arg(plan.to_string());
    run_driver(cmd)
}

fn py_driver(plan: Value) -> Value {
    let mut cmd = Command::new("timeout");
    cmd.arg("180")
        .arg(switchboard_testkit::python_bin())
        .arg(drivers().join("py_client.py"))
        .arg(plan.to_string());
    run_driver(cmd)
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn wait_for(path: &Path, needle: &str) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// The gateway over HTTP on a free port, with the test token.
pub(crate) async fn spawn_http_gateway(
    config: &Path,
    env: &common::Env,
    extra: &[&str],
) -> PeerProcess {
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
    .args(extra)
    .arg("--config")
    .arg(config)
    .env("HOME", env.home.path())
    .env("SWITCHBOARD_HOME", env.sb.path())
    .env("SWITCHBOARD_GATEWAY_TOKEN", TOKEN)
    .current_dir(env.project.path());
    let mut peer = PeerProcess::spawn("gateway-http", cmd);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}/mcp");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}

fn raw_post(port: u16, auth: Option<&str>) -> (String, String) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    raw_post_with(port, &auth, body)
}

/// POSTs `body` to the gateway with `headers` (each ending in CRLF); head and body.
fn raw_post_with(port: u16, headers: &str, body: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (head.to_string(), body.to_string())
}

/// The TS SDK client over stdio: lists the tools of both upstreams under
/// `{server}__{tool}`, calls echo (structuredContent kept), gets progress from the demo
/// server's `slow`, cancels the Python server's `hang` (the upstream hears the
/// cancellation), reads a resource, gets a prompt; `--audit` writes one line per call
/// without arguments.
#[test]
fn ts_sdk_client_over_stdio() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let audit = env.project.path().join("audit.jsonl");
    let config = settings(env.project.path(), &cancel_log, json!({}));
    let out = ts_driver(json!({
        "sdk": sdk_dir(),
        "transport": "stdio",
        "command": BIN,
        "args": ["gateway", "--config", config, "--audit", audit, "--wait-ms", "30000"],
        "echo": "demo__echo",
        "add": "py__add",
        "slow": {"name": "demo__slow", "arguments": {"seconds": 1, "steps": 3}},
        "hang": {"name": "py__hang", "afterMs": 800},
        "resource": "demo://readme",
        "prompt": "demo__greet",
        "promptArgs": {"name": "Ada"},
    }));
    assert_eq!(out["serverName"], "switchboard-gateway");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in ["demo__echo", "demo__slow", "py__echo", "py__hang"] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    // Definitions pass through: annotations and output schemas.
    assert_eq!(
        out["toolDefs"]["demo__echo"]["annotations"]["readOnlyHint"],
        true
    );
    assert!(out["toolDefs"]["demo__add"]["outputSchema"].is_object());
    assert_eq!(text_of(&out["echo"]), "Echo: hi");
    assert_eq!(out["add"]["structuredContent"]["sum"], 5.0);
    let progress = out["slow"]["progress"].as_array().unwrap();
    assert!(progress.len() >= 2, "progress: {progress:?}");
    assert_eq!(progress[0]["total"], 3);
    assert!(out["hang"]["cancelled"].as_bool().unwrap());
    assert!(out["hang"]["ms"].as_u64().unwrap() < 5_000);
    assert!(
        wait_for(&cancel_log, "cancelled"),
        "the Python server never heard the cancellation"
    );
    assert!(
        out["resource"][0]["text"]
            .as_str()
            .unwrap()
            .contains("demo server")
    );
    assert_eq!(out["prompt"][0], "Please greet Ada.");
    assert!(
        out["templates"]
            .as_array()
            .unwrap()
            .contains(&json!("demo://greeting/{name}"))
    );
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let echo = lines
        .iter()
        .find(|l| l["requested"] == "demo__echo")
        .expect("an audit line for demo__echo");
    assert_eq!(echo["server"], "demo");
    assert_eq!(echo["tool"], "echo");
    assert_eq!(echo["outcome"], "ok");
    assert_eq!(echo["client"], "ts-driver");
    assert!(echo["response_bytes"].as_u64().unwrap() > 0);
    assert!(echo.get("arguments").is_none() && echo.get("result").is_none());
    assert!(lines.iter().any(|l| l["method"] == "resources/read"));
    assert!(lines.iter().any(|l| l["requested"] == "py__hang"));
}

/// The Python SDK client over Streamable HTTP with the bearer token: the same calls;
/// without the token the gateway answers 401 with an empty body.
#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_client_over_http_and_401_without_token() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let config = settings(env.project.path(), &cancel_log, json!({}));
    let audit = env.project.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let gw = spawn_http_gateway(&config, &env, &["--audit", &audit_arg, "--audit-payloads"]).await;
    let port = gw.port;
    let (head, body) = tokio::task::spawn_blocking(move || raw_post(port, None))
        .await
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: bearer")
    );
    assert!(
        body.trim().is_empty() || body.trim() == "0",
        "body: {body:?}"
    );
    let (head, _) = tokio::task::spawn_blocking(move || raw_post(port, Some("Bearer wrong-token")))
        .await
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");

    let url = gw.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        py_driver(json!({
            "transport": "http",
            "url": url,
            "token": TOKEN,
            "echo": "py__echo",
            "slow": {"name": "demo__slow", "arguments": {"seconds": 1, "steps": 3}},
            "hang": {"name": "py__hang", "afterMs": 800},
            "resource": "py://item/7",
            "prompt": "py__review",
            "promptArgs": {"code": "x = 1"},
        }))
    })
    .await
    .unwrap();
    let tools = out["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("demo__echo")) && tools.contains(&json!("py__echo")));
    assert_eq!(out["echo"][0], "hi");
    assert!(out["slow"]["progress"].as_array().unwrap().len() >= 2);
    assert!(out["hang"]["cancelled"].as_bool().unwrap());
    assert_eq!(out["afterCancel"][0], "after");
    assert!(out["resource"][0].as_str().unwrap().contains('7'));
    assert!(out["prompt"][0].as_str().unwrap().contains("x = 1"));
    assert!(wait_for(&cancel_log, "cancelled"));
    // --audit-payloads: arguments and results are in the line, and the client's name.
    let text = std::fs::read_to_string(&audit).unwrap();
    let echo: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["requested"] == "py__echo")
        .expect("an audit line for py__echo");
    assert_eq!(echo["arguments"]["message"], "hi");
    assert_eq!(echo["result"]["content"][0]["text"], "hi");
    assert!(echo["client"].is_string());
    assert!(echo["duration_ms"].is_u64());
}

fn py_modern_driver(plan: Value) -> Value {
    let mut cmd = Command::new("timeout");
    cmd.arg("180")
        .arg(switchboard_testkit::python_bin())
        .arg(drivers().join("py_modern_client.py"))
        .arg(plan.to_string());
    run_driver(cmd)
}

/// The Python SDK's default client on 2026-07-28, through the stdio gateway started
/// with `args`, names `uri` in its `subscriptions/listen`, calls the tool `trigger`
/// names (`name`, `arguments`) and hears the resource updated on that stream.
fn py_client_hears_on_its_listen(args: &Value, uri: &str, trigger: Value) {
    let mut listen = trigger;
    listen["uri"] = json!(uri);
    let out = py_modern_driver(json!({
        "transport": "stdio",
        "command": BIN,
        "args": args,
        "listenResource": listen,
    }));
    assert_eq!(out["version"], "2026-07-28", "{out}");
    assert_eq!(out["listenResource"]["honored"], json!([uri]), "{out}");
    assert_eq!(
        out["listenResource"]["events"][0],
        json!(["ResourceUpdated", uri]),
        "{out}"
    );
}

/// Upstreams for a client on 2026-07-28: the demo server, server-everything (it asks for
/// elicitation and sampling, and reports progress) and the Python SDK server with its
/// `rug_pull` tool (changes `echo` and says its tools changed) — over stdio on a session,
/// or, given `rug_url`, over HTTP on 2026-07-28, where the change is heard only on the
/// `subscriptions/listen` stream the gateway keeps open to it —, and the Python SDK
/// server on 2026-07-28 over HTTP, whose `greet` asks for the name through an
/// `InputRequiredResult` of its own (so the question crosses two such hops).
fn modern_settings(dir: &Path, resolve_url: &str, rug_url: Option<&str>) -> PathBuf {
    let (node, node_args) = switchboard_testkit::everything_stdio_command();
    let (py, py_args) = python_stdio_command();
    let rug = match rug_url {
        Some(url) => json!({"httpUrl": url}),
        None => json!({"command": py, "args": py_args, "env": {"SWITCHBOARD_PY_RUG_PULL": "1"}}),
    };
    let servers = json!({
        "demo": {"command": BIN, "args": ["demo-server"]},
        "everything": {"command": node, "args": node_args},
        "rug": rug,
        "resolve": {"httpUrl": resolve_url},
    });
    let path = dir.join("settings.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

/// What the default Python SDK client must get through the gateway on 2026-07-28,
/// whatever the transport.
fn check_modern(out: &Value) {
    assert_eq!(out["version"], "2026-07-28", "{out}");
    // Results carry `resultType` (the SDK refuses one without it).
    assert_eq!(out["echo"][0], "Echo: hi", "{out}");
    assert!(
        out["slow"]["progress"].as_array().unwrap().len() >= 2,
        "{out}"
    );
    // The upstream's elicitation and sampling came back as an InputRequiredResult,
    // were answered by the client's callbacks, and the answers reached the tool.
    let asked: Vec<&str> = out["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["elicitation", "sampling", "elicitation"], "{out}");
    let elicit = out["elicit"].as_array().unwrap();
    assert!(
        elicit.iter().any(|t| t
            .as_str()
            .unwrap()
            .contains("User provided the requested information")),
        "{out}"
    );
    assert!(
        elicit
            .iter()
            .any(|t| t.as_str().unwrap().contains("Ada Lovelace")),
        "the answer's content reached the tool: {out}"
    );
    assert!(
        out["sample"][0]
            .as_str()
            .unwrap()
            .contains("sampled by the python client"),
        "{out}"
    );
    assert!(out["resource"][0].as_str().unwrap().contains('7'), "{out}");
    // The upstream's own InputRequiredResult, answered by the downstream client.
    assert_eq!(out["more"][0][0], "hello Ada Lovelace", "{out}");
    assert_eq!(out["asked"][2]["kind"], "elicitation", "{out}");
    // subscriptions/listen: the rug pull changes `rug__echo`, and the listener hears it.
    assert_eq!(out["listen"], json!(["ToolsListChanged"]), "{out}");
    assert!(
        out["toolsAfter"]
            .as_array()
            .unwrap()
            .contains(&json!("demo__echo")),
        "{out}"
    );
}

fn modern_plan() -> Value {
    json!({
        "echo": "demo__echo",
        "slow": {"name": "demo__slow", "arguments": {"seconds": 1, "steps": 3}},
        "elicit": {"name": "everything__trigger-elicitation-request"},
        "elicitContent": {"name": "Ada Lovelace"},
        "sample": {"name": "everything__trigger-sampling-request",
                   "arguments": {"prompt": "hello", "maxTokens": 20}},
        // Offered by two servers (rug, resolve): read through its qualified URI.
        "resource": "switchboard-gateway://rug/py://item/7",
        "more": [{"name": "resolve__greet"}],
        "listen": {"name": "rug__rug_pull", "arguments": {"text": "changed under you"}},
    })
}

/// The Python SDK's default client (`mcp.Client`, which speaks 2026-07-28 to a server
/// that does) through the gateway over Streamable HTTP and over stdio: no session, so
/// the upstream's elicitation and sampling reach it as `InputRequiredResult`s answered
/// by retrying the call, progress still arrives, results carry `resultType`, and a
/// list change reaches it on `subscriptions/listen`.
#[tokio::test(flavor = "multi_thread")]
async fn python_default_client_on_2026_07_28_over_http_and_stdio() {
    ensure_peers();
    let resolve = switchboard_testkit::spawn_python(
        switchboard_testkit::PyMode::StreamableHttp,
        &[("SWITCHBOARD_PY_RESOLVE", "1")],
    )
    .await;
    // Over HTTP the rug puller speaks 2026-07-28 to the gateway too: its change reaches
    // the client across two `subscriptions/listen` streams.
    let rug = switchboard_testkit::spawn_python(
        switchboard_testkit::PyMode::StreamableHttp,
        &[("SWITCHBOARD_PY_RUG_PULL", "1")],
    )
    .await;
    let env = common::Env::new();
    let config = modern_settings(env.project.path(), &resolve.url, Some(&rug.url));
    let audit = env.project.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let gw = spawn_http_gateway(&config, &env, &["--audit", &audit_arg]).await;
    let mut plan = modern_plan();
    plan["transport"] = json!("http");
    plan["url"] = json!(gw.url);
    plan["token"] = json!(TOKEN);
    let out = tokio::task::spawn_blocking(move || py_modern_driver(plan))
        .await
        .unwrap();
    check_modern(&out);
    // The audit log has the leg that asked and the retry that finished, each a line,
    // with the client's name from the request itself (there is no session).
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["requested"] == "everything__trigger-elicitation-request")
        .collect();
    let outcomes: Vec<&str> = lines
        .iter()
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["input_required", "ok"], "{lines:?}");
    assert!(lines[0]["client"].is_string(), "{lines:?}");
    // A 2026-07-28 call whose answer is the only message comes back as one JSON body
    // (not an event stream), with its `resultType`; a call with progress still streams.
    let port = gw.port;
    let (head, body) = tokio::task::spawn_blocking(move || {
        let headers = format!(
            "Authorization: Bearer {TOKEN}\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: demo__echo\r\n"
        );
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}"#;
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"demo__echo","arguments":{{"message":"plain"}},{meta}}}}}"#
        );
        let plain = raw_post_with(port, &headers, &call);
        let slow = format!(
            r#"{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{{"name":"demo__slow","arguments":{{"seconds":1,"steps":2}},{}}}}}"#,
            meta.replace(r#""_meta":{"#, r#""_meta":{"progressToken":"p1","#)
        );
        let headers = headers.replace("Mcp-Name: demo__echo", "Mcp-Name: demo__slow");
        (plain, raw_post_with(port, &headers, &slow))
    })
    .await
    .unwrap();
    let ((head, body), (slow_head, slow_body)) = (head, body);
    let slow_lower = slow_head.to_ascii_lowercase();
    assert!(
        slow_lower.contains("content-type: text/event-stream"),
        "{slow_head}"
    );
    assert!(slow_body.contains("notifications/progress"), "{slow_body}");
    assert!(slow_body.contains(r#""id":8"#), "{slow_body}");
    let lower = head.to_ascii_lowercase();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    assert!(lower.contains("content-type: application/json"), "{head}");
    let answer: Value = serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "Echo: plain",
        "{answer}"
    );
    drop(gw);

    // Over stdio (a second home: the first one's pins now hold the changed `echo`).
    let env = common::Env::new();
    let config = modern_settings(env.project.path(), &resolve.url, None);
    let mut plan = modern_plan();
    plan["transport"] = json!("stdio");
    plan["command"] = json!("env");
    plan["args"] = json!([
        format!("HOME={}", env.home.path().display()),
        format!("SWITCHBOARD_HOME={}", env.sb.path().display()),
        BIN,
        "gateway",
        "--wait-ms",
        "30000",
        "--config",
        config.display().to_string(),
    ]);
    let out = tokio::task::spawn_blocking(move || py_modern_driver(plan))
        .await
        .unwrap();
    check_modern(&out);
}

/// The Python SDK client over stdio: it hands the gateway pipes (the TS SDK hands it
/// sockets), so this is the reopened non-blocking pipe path end to end, with a reply
/// larger than a pipe's buffer (the write waits for the client, in pieces) and a
/// cancellation.
#[test]
fn python_sdk_client_over_stdio_pipes() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let config = settings(env.project.path(), &cancel_log, json!({}));
    let out = py_driver(json!({
        "transport": "stdio",
        "command": BIN,
        "args": ["gateway", "--config", config, "--wait-ms", "30000"],
        "echo": "py__echo",
        "bigEcho": {"name": "py__echo", "bytes": 600_000},
        "hang": {"name": "py__hang", "afterMs": 800},
    }));
    assert_eq!(out["echo"][0], "hi");
    assert_eq!(out["bigEcho"], 600_000);
    assert!(out["hang"]["cancelled"].as_bool().unwrap());
    assert_eq!(out["afterCancel"][0], "after");
    assert!(wait_for(&cancel_log, "cancelled"));
}

/// The TS SDK client over HTTP, with server-everything over Streamable HTTP as an
/// upstream whose settings carry a secret header: its elicitation and sampling requests
/// reach the client (which answers them, and the answers reach the tool), progress
/// comes through, and the secret appears nowhere in what the client saw.
#[tokio::test(flavor = "multi_thread")]
async fn ts_sdk_over_http_elicitation_and_no_upstream_credentials() {
    ensure_peers();
    let env = common::Env::new();
    let everything = spawn_everything(EverythingMode::StreamableHttp).await;
    let secret = "upstream-secret-value-42";
    let cancel_log = env.project.path().join("cancel.log");
    let config = settings(
        env.project.path(),
        &cancel_log,
        json!({"everything": {"httpUrl": everything.url,
               "headers": {"Authorization": format!("Bearer {secret}"), "X-Api-Key": secret}}}),
    );
    let gw = spawn_http_gateway(&config, &env, &[]).await;
    let url = gw.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        ts_driver(json!({
            "sdk": sdk_dir(),
            "transport": "http",
            "url": url,
            "token": TOKEN,
            "echo": "everything__echo",
            "elicit": {"name": "everything__trigger-elicitation-request"},
            "sample": {"name": "everything__trigger-sampling-request",
                       "arguments": {"prompt": "say hi", "maxTokens": 10}},
            "slow": {"name": "everything__trigger-long-running-operation",
                     "arguments": {"duration": 1, "steps": 3}},
        }))
    })
    .await
    .unwrap();
    assert!(text_of(&out["echo"]).contains("hi"), "{}", out["echo"]);
    assert!(
        out["elicited"].is_string(),
        "no elicitation reached the client"
    );
    assert!(out["slow"]["progress"].as_array().unwrap().len() >= 2);
    assert!(
        !out.to_string().contains(secret),
        "an upstream credential reached the client"
    );
}

/// Gemini CLI, in a throwaway HOME, shows the gateway connected over stdio and over
/// HTTP.
#[tokio::test(flavor = "multi_thread")]
async fn gemini_cli_lists_the_gateway_connected() {
    ensure_peers();
    let gemini = peers_dir().join("clients/node_modules/.bin/gemini");
    assert!(gemini.exists(), "run scripts/install-peers.sh (Gemini CLI)");
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let config = settings(env.project.path(), &cancel_log, json!({}));
    let gw = spawn_http_gateway(&config, &env, &[]).await;
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        home.path().join(".gemini/trustedFolders.json"),
        json!({work.display().to_string(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();
    std::fs::write(
        home.path().join(".gemini/settings.json"),
        json!({"mcpServers": {
            "sbstdio": {"command": BIN, "args": ["gateway", "--config", config],
                        "env": {"SWITCHBOARD_HOME": env.sb.path()}},
            "sbhttp": {"httpUrl": gw.url, "headers": {"Authorization": format!("Bearer {TOKEN}")}},
            "sbnotoken": {"httpUrl": gw.url},
        }})
        .to_string(),
    )
    .unwrap();
    let home_path = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("timeout")
            .arg("120")
            .arg(&gemini)
            .args(["mcp", "list"])
            .env("HOME", &home_path)
            .env_remove("GEMINI_API_KEY")
            .current_dir(&work)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} not listed: {text}"))
            .to_string()
    };
    assert!(line("sbstdio").contains("Connected"), "{text}");
    assert!(line("sbhttp").contains("Connected"), "{text}");
    assert!(!line("sbnotoken").contains("- Connected"), "{text}");
}

/// Bound beyond loopback without a configured token, the gateway refuses to start.
#[test]
fn http_beyond_loopback_needs_a_configured_token() {
    let env = common::Env::new();
    let out = env.run(&["gateway", "--http", "--bind", "0.0.0.0", "--port", "0"]);
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(err.contains("without a configured token"), "{err}");
    assert!(err.contains("--token-file"), "{err}");
}

/// An upstream that hangs in `initialize` and one that floods do not keep the others
/// from being listed and called; the hung one is named in the instructions.
#[test]
fn hostile_upstreams_do_not_block_the_others() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let (hang, hang_args) = bad_peer("hang_init");
    let (flood, flood_args) = bad_peer("flood");
    let config = settings(
        env.project.path(),
        &cancel_log,
        json!({"hung": {"command": hang, "args": hang_args, "startupTimeout": 60000},
               "flood": {"command": flood, "args": flood_args}}),
    );
    let started = Instant::now();
    let out = ts_driver(json!({
        "sdk": sdk_dir(),
        "transport": "stdio",
        "command": BIN,
        "args": ["gateway", "--config", config, "--wait-ms", "8000"],
        "echo": "demo__echo",
    }));
    assert!(started.elapsed() < Duration::from_secs(40));
    assert_eq!(text_of(&out["echo"]), "Echo: hi");
    let tools = out["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("demo__echo")));
    assert!(
        !tools
            .iter()
            .any(|t| t.as_str().unwrap().starts_with("hung__"))
    );
    let instructions = out["instructions"].as_str().unwrap();
    assert!(instructions.contains("`hung`"), "{instructions}");
}

/// `--read-only` offers only tools annotated `readOnlyHint: true` and refuses the rest.
#[test]
fn read_only_offers_only_read_only_tools() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let config = settings(env.project.path(), &cancel_log, json!({}));
    let out = ts_driver(json!({
        "sdk": sdk_dir(),
        "transport": "stdio",
        "command": BIN,
        "args": ["gateway", "--read-only", "--config", config, "--wait-ms", "30000"],
        "echo": "demo__echo",
    }));
    let tools = out["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("demo__echo")), "{tools:?}");
    // The Python server's tools carry no readOnlyHint.
    assert!(!tools.contains(&json!("py__hang")), "{tools:?}");
    assert_eq!(text_of(&out["echo"]), "Echo: hi");
    assert!(
        out["instructions"].as_str().unwrap().contains("read-only"),
        "{}",
        out["instructions"]
    );
}

fn roots_driver(plan: Value) -> Value {
    let mut cmd = Command::new("timeout");
    cmd.arg("180")
        .arg("node")
        .arg(drivers().join("ts_roots_client.mjs"))
        .arg(plan.to_string());
    run_driver(cmd)
}

/// Upstreams that show what they are sent: the Python SDK server with its `meta` and
/// `roots` tools (SWITCHBOARD_PY_META), and server-everything over stdio (it asks for
/// roots after `initialize` and again on `notifications/roots/list_changed`).
fn roots_settings(dir: &Path) -> PathBuf {
    let (py, py_args) = python_stdio_command();
    let (node, node_args) = switchboard_testkit::everything_stdio_command();
    let path = dir.join("settings.json");
    let servers = json!({
        "py": {"command": py, "args": py_args, "env": {"SWITCHBOARD_PY_META": "1"}},
        "everything": {"command": node, "args": node_args},
    });
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Roots and `_meta` over stdio, with the TS SDK client: an upstream's `roots/list`
/// during a call is answered with the client's own roots; after the client changes
/// them and sends `notifications/roots/list_changed`, the upstream asks again and sees
/// the new list (server-everything only re-asks on that notification, so its
/// `get-roots-list` proves the forwarding). A call's own `_meta` reaches the upstream on
/// tools/call, resources/read and prompts/get, without the client's MCP-reserved keys.
#[test]
fn roots_and_meta_reach_the_upstreams() {
    ensure_peers();
    let env = common::Env::new();
    let config = roots_settings(env.project.path());
    let (a, b) = (
        "file:///tmp/switchboard-roots-a",
        "file:///tmp/switchboard-roots-b",
    );
    let meta = json!({
        "io.example/trace": "t-1",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "io.modelcontextprotocol/clientInfo": {"name": "spoofed", "version": "0"},
    });
    let out = roots_driver(json!({
        "sdk": sdk_dir(),
        "transport": "stdio",
        "command": BIN,
        "args": ["gateway", "--config", config, "--wait-ms", "30000"],
        "clients": [{"roots": [a], "changedRoots": [b]}],
        "rootsTool": "py__roots",
        "everythingRootsTool": "everything__get-roots-list",
        "metaTool": "py__meta",
        "metaResource": "py://meta/x",
        "metaPrompt": "py__meta",
        "meta": meta,
    }));
    let c = &out["clients"][0];
    assert_eq!(strings(&c["roots"]), [a], "py's roots/list during a call");
    assert_eq!(
        strings(&c["changedRoots"]),
        [b],
        "py's roots/list after the change"
    );
    let everything = c["everything"].as_str().unwrap();
    assert!(
        everything.contains(a),
        "server-everything's roots: {everything}"
    );
    let changed = c["everythingChanged"].as_str().unwrap();
    assert!(
        changed.contains(b) && !changed.contains(a),
        "server-everything never re-asked after roots/list_changed: {changed}"
    );
    assert!(
        c["asked"].as_u64().unwrap() >= 3,
        "roots/list reached the client: {c}"
    );
    for what in ["metaTool", "metaResource", "metaPrompt"] {
        let seen = &out[what];
        assert_eq!(seen["io.example/trace"], "t-1", "{what}: {seen}");
        assert_eq!(seen["traceparent"], meta["traceparent"], "{what}: {seen}");
        assert_ne!(
            seen["io.modelcontextprotocol/clientInfo"]["name"], "spoofed",
            "{what}: a client's reserved key went upstream: {seen}"
        );
    }
}

/// Roots per downstream session over HTTP: two TS SDK clients with different roots
/// each get their own list back from the upstream's `roots/list`, and a client without
/// the roots capability gets an empty list (the gateway never makes roots up).
#[tokio::test(flavor = "multi_thread")]
async fn roots_are_per_downstream_session_over_http() {
    ensure_peers();
    let env = common::Env::new();
    let config = roots_settings(env.project.path());
    let gw = spawn_http_gateway(&config, &env, &[]).await;
    let (a, b) = (
        "file:///tmp/switchboard-roots-a",
        "file:///tmp/switchboard-roots-b",
    );
    let url = gw.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        roots_driver(json!({
            "sdk": sdk_dir(),
            "transport": "http",
            "url": url,
            "token": TOKEN,
            "clients": [{"roots": [a]}, {"roots": [b]}, {"noRoots": true}],
            "rootsTool": "py__roots",
        }))
    })
    .await
    .unwrap();
    assert_eq!(strings(&out["clients"][0]["roots"]), [a]);
    assert_eq!(strings(&out["clients"][1]["roots"]), [b]);
    assert!(strings(&out["clients"][2]["roots"]).is_empty());
    assert_eq!(out["clients"][2]["asked"], 0);
}

/// A downstream session that declared roots ends (the TS SDK client's DELETE over
/// HTTP): the roots offered upstream change, so the gateway sends
/// `notifications/roots/list_changed`, and server-everything (which only re-asks on
/// that notification) asks again and gets the remaining client's roots, not the
/// departed one's.
#[tokio::test(flavor = "multi_thread")]
async fn a_departing_client_with_roots_changes_the_roots_upstream() {
    ensure_peers();
    let env = common::Env::new();
    let config = roots_settings(env.project.path());
    let gw = spawn_http_gateway(&config, &env, &[]).await;
    let (a, b) = (
        "file:///tmp/switchboard-roots-stays",
        "file:///tmp/switchboard-roots-leaves",
    );
    let url = gw.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        roots_driver(json!({
            "sdk": sdk_dir(),
            "transport": "http",
            "url": url,
            "token": TOKEN,
            "clients": [{"roots": [a]}, {"roots": [b]}],
            "leave": {"client": 1, "observer": 0, "tool": "everything__get-roots-list",
                      "before": b, "after": a},
        }))
    })
    .await
    .unwrap();
    let before = out["beforeLeave"].as_str().unwrap();
    assert!(
        before.contains(b),
        "the latest client's roots went upstream: {before}"
    );
    let after = out["afterLeave"].as_str().unwrap();
    assert!(
        after.contains(a) && !after.contains(b),
        "server-everything was not told the roots changed when a client left: {after}"
    );
}

/// A settings file in `env`'s project with the demo server and server-everything, both
/// over stdio.
pub(crate) fn demo_and_everything(env: &common::Env) -> PathBuf {
    let (node, node_args) = switchboard_testkit::everything_stdio_command();
    let servers = json!({
        "demo": {"command": BIN, "args": ["demo-server"]},
        "everything": {"command": node, "args": node_args},
    });
    let config = env.project.path().join("settings.json");
    std::fs::write(&config, json!({"mcpServers": servers}).to_string()).unwrap();
    config
}

/// Resource subscriptions to a server on 2026-07-28 (the Python SDK server over
/// Streamable HTTP), which has no `resources/subscribe`: the gateway names the resources
/// in the one `subscriptions/listen` stream it keeps to that server, and the updates
/// reach both kinds of client — the TS SDK client's `resources/subscribe` on 2025-11-25
/// and the Python SDK client's own listen on 2026-07-28. After the TS client
/// unsubscribes, a second touch reaches it no more.
#[test]
fn resource_subscriptions_to_a_2026_07_28_server() {
    ensure_peers();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let py = rt.block_on(switchboard_testkit::spawn_python(
        switchboard_testkit::PyMode::StreamableHttp,
        &[("SWITCHBOARD_PY_RUG_PULL", "1")],
    ));
    let env = common::Env::new();
    let config = env.project.path().join("settings.json");
    let servers = json!({"rug": {"httpUrl": py.url}});
    std::fs::write(&config, json!({"mcpServers": servers}).to_string()).unwrap();
    let uri = "py://item/7";
    let touch = json!({"name": "rug__touch", "arguments": {"id": "7"}});
    let args = json!(["gateway", "--config", config, "--wait-ms", "30000"]);

    let out = ts_driver(json!({
        "sdk": sdk_dir(),
        "transport": "stdio",
        "command": BIN,
        "args": args,
        "subscribe": {"uri": uri, "trigger": touch, "triggerAgain": true, "quietMs": 1500},
    }));
    assert_eq!(out["resourceCaps"]["subscribe"], true, "{out}");
    assert_eq!(out["updated"], json!([uri]), "{out}");
    assert_eq!(out["updatedAfterUnsubscribe"], json!([]), "{out}");

    py_client_hears_on_its_listen(
        &args,
        uri,
        json!({"name": "rug__touch", "arguments": {"id": "7"}}),
    );
    drop(py);
}

/// Resource subscriptions pass through, for both kinds of client, with
/// server-everything upstream (it declares `resources.subscribe` and, once its
/// `toggle-subscriber-updates` tool runs, sends `notifications/resources/updated` for
/// every subscribed URI at once and every 5 s):
/// - the TS SDK client on 2025-11-25 subscribes through `resources/subscribe` and hears
///   the update under the URI it used; after `resources/unsubscribe` it hears nothing
///   more, and server-everything logged the unsubscribe it was sent; a subscription to
///   the demo server (which offers none) is refused with the reason;
/// - the Python SDK's default client on 2026-07-28 names the resource in
///   `subscriptions/listen` and hears the update on that stream.
#[test]
fn resource_subscriptions_pass_through() {
    ensure_peers();
    let env = common::Env::new();
    let config = demo_and_everything(&env);
    let uri = "switchboard-gateway://everything/demo://resource/dynamic/text/1";
    let toggle = json!({"name": "everything__toggle-subscriber-updates"});
    let args = json!(["gateway", "--config", config, "--wait-ms", "30000"]);

    let out = ts_driver(json!({
        "sdk": sdk_dir(),
        "transport": "stdio",
        "command": BIN,
        "args": args,
        "subscribe": {"uri": uri, "trigger": toggle, "quietMs": 6000,
                      "refused": "demo://readme"},
    }));
    assert_eq!(out["resourceCaps"]["subscribe"], true, "{out}");
    assert_eq!(
        out["updated"][0], uri,
        "the update, under the client's URI: {out}"
    );
    assert_eq!(
        out["updatedAfterUnsubscribe"],
        json!([]),
        "nothing after unsubscribing (server-everything repeats every 5 s): {out}"
    );
    let logs = out["logs"].to_string();
    assert!(
        logs.contains("Received Unsubscribe Resource request"),
        "server-everything was told to unsubscribe: {logs}"
    );
    let refused = out["refused"].as_str().unwrap();
    assert!(
        refused.contains("`demo` does not offer resource subscriptions"),
        "{refused}"
    );

    py_client_hears_on_its_listen(
        &args,
        uri,
        json!({"name": "everything__toggle-subscriber-updates"}),
    );
}
