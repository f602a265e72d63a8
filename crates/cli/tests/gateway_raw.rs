//! The stdio gateway's raw relay (`switchboard-gateway`'s `raw_call`): a plain
//! `tools/call` to a stdio server is relayed as bytes. Driven by a client that speaks
//! newline-delimited JSON-RPC itself, so that ids, cancellations and the end of the
//! session are exactly what each test says; the upstreams are the demo server, the
//! Python SDK server and hostile peers. Each test checks that the raw path was taken
//! (the server sees the relay's own `"sb.N"` ids) and that it answers like the typed path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_testkit::{bad_peer, ensure_peers, python_stdio_command};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const WAIT: Duration = Duration::from_secs(20);

/// A client speaking newline-delimited JSON-RPC to `switchboard gateway` on its stdio.
struct LineClient {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    /// Messages read while waiting for another.
    seen: Vec<Value>,
    /// While set, the client reads nothing from the gateway's stdout.
    paused: Arc<AtomicBool>,
}

impl Drop for LineClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LineClient {
    fn start(env: &common::Env, args: &[&str]) -> Self {
        // The first list waits for every server (a loaded machine may take over the
        // default 5 s to start a Python one), so the first call finds its raw lane.
        let mut child = Command::new(BIN)
            .args(args)
            .args(["--wait-ms", "30000"])
            .env("HOME", env.home.path())
            .env("SWITCHBOARD_HOME", env.sb.path())
            .env_remove("SWITCHBOARD_LOG")
            .current_dir(env.project.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let paused = Arc::new(AtomicBool::new(false));
        let gate = paused.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                while gate.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the gateway wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            rx,
            seen: Vec::new(),
            paused,
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// `initialize` on 2025-11-25 with `capabilities`, then `notifications/initialized`.
    fn initialize(&mut self, capabilities: Value) {
        self.send(
            json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "line-client", "version": "1"}}}),
        );
        let r = self.reply(json!("init"), &mut |_| unreachable!());
        assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        // Listing waits for the servers' first connection attempts.
        self.send(json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}));
        let r = self.reply(json!("list"), &mut |_| unreachable!());
        assert!(r["result"]["tools"].is_array(), "{r}");
    }

    fn next(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.rx.recv_timeout(left).ok()
    }

    /// The reply to request `id`; the gateway's requests met meanwhile are answered
    /// with what `answer` returns.
    fn reply(&mut self, id: Value, answer: &mut dyn FnMut(&Value) -> Value) -> Value {
        let deadline = Instant::now() + WAIT;
        if let Some(i) = self.seen.iter().position(|m| is_reply_to(m, &id)) {
            return self.seen.remove(i);
        }
        loop {
            let m = self
                .next(deadline)
                .unwrap_or_else(|| panic!("no reply to {id} within {WAIT:?}"));
            if is_reply_to(&m, &id) {
                return m;
            }
            if m.get("method").is_some() && m.get("id").is_some() {
                let result = answer(&m);
                self.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": result}));
            } else if m.get("method").is_none() {
                self.seen.push(m);
            }
        }
    }

    /// Calls `name` with `arguments` under `id` (and `_meta` when given).
    fn call(&mut self, id: Value, name: &str, arguments: Value, meta: Option<Value>) -> Value {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
        self.reply(id, &mut |m| {
            panic!("unexpected request from the gateway: {m}")
        })
    }

    /// Asserts nothing answers `id` for `quiet`, using a ping to know the gateway
    /// has read what came before.
    fn assert_unanswered(&mut self, id: &Value, quiet: Duration) {
        std::thread::sleep(quiet);
        self.send(json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"}));
        let _ = self.reply(json!("ping"), &mut |_| json!({}));
        assert!(
            !self.seen.iter().any(|m| is_reply_to(m, id)),
            "{id} was answered: {:?}",
            self.seen
        );
    }

    /// Stops reading the gateway's stdout (after the line being read) until
    /// `set_reading(true)`.
    fn set_reading(&self, on: bool) {
        self.paused.store(!on, Ordering::Release);
    }

    fn close_stdin(&mut self) {
        self.stdin.take();
    }

    fn wait_exit(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

fn is_reply_to(m: &Value, id: &Value) -> bool {
    m.get("id") == Some(id) && m.get("method").is_none()
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {reply}"))
        .to_string()
}

fn wait_for_lines(path: &Path, needle: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let lines: Vec<String> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect();
        if lines.len() >= count || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write_settings(dir: &Path, servers: Value) -> String {
    let path = dir.join("settings.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path.display().to_string()
}

fn liar(cancel_log: &Path, extra: Value) -> Value {
    let (cmd, args) = bad_peer("lying_replies");
    let mut v = json!({"command": cmd, "args": args,
                       "env": {"SWITCHBOARD_CANCEL_LOG": cancel_log.display().to_string()}});
    if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    v
}

/// A plain call goes raw and a call with `_meta` goes typed; both answer alike, under
/// the client's own id (a number or a string), and both are audited.
#[test]
fn plain_calls_go_raw_and_answer_like_typed_ones() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let audit = env.project.path().join("audit.jsonl");
    let (py, py_args) = python_stdio_command();
    let config = write_settings(
        env.project.path(),
        json!({
            "demo": {"command": BIN, "args": ["demo-server"]},
            "py": {"command": py, "args": py_args},
            "liar": liar(&cancel_log, json!({})),
        }),
    );
    let audit_arg = audit.display().to_string();
    let mut c = LineClient::start(
        &env,
        &["gateway", "--config", &config, "--audit", &audit_arg],
    );
    c.initialize(json!({}));

    // What the server sees: the relay's own id for a plain call, rmcp's for a typed one.
    let raw = c.call(json!(1), "liar__id", json!({}), None);
    assert!(text_of(&raw).starts_with("\"sb."), "{raw}");
    let typed = c.call(json!(2), "liar__id", json!({}), Some(json!({"note": "x"})));
    assert!(text_of(&typed).parse::<u64>().is_ok(), "{typed}");

    let cases = [
        ("demo__echo", json!({"message": "hi"})),
        ("demo__add", json!({"a": 2, "b": 3})),
        ("py__add", json!({"a": 2, "b": 3})),
        ("py__image", json!({})),
        ("py__resource_link", json!({})),
        ("py__fail", json!({})),
    ];
    for (i, (name, args)) in cases.iter().enumerate() {
        let raw_id = json!(format!("raw-{i}"));
        let raw = c.call(raw_id.clone(), name, args.clone(), None);
        let typed_id = json!(100 + i);
        let typed = c.call(
            typed_id.clone(),
            name,
            args.clone(),
            Some(json!({"note": "x"})),
        );
        assert_eq!(raw["id"], raw_id);
        assert_eq!(typed["id"], typed_id);
        assert!(raw["result"].is_object(), "{name}: {raw}");
        assert_eq!(
            raw["result"], typed["result"],
            "{name}: raw and typed differ"
        );
    }
    // A negative number, and a string with escapes, come back exactly.
    for id in [json!(-7), json!("a \"quoted\" \\ id")] {
        let r = c.call(id.clone(), "demo__echo", json!({"message": "x"}), None);
        assert_eq!(r["id"], id);
        assert_eq!(text_of(&r), "Echo: x");
    }
    // Without `arguments` at all.
    c.send(
        json!({"jsonrpc": "2.0", "id": "noargs", "method": "tools/call",
                  "params": {"name": "liar__id"}}),
    );
    let r = c.reply(json!("noargs"), &mut |_| unreachable!());
    assert!(text_of(&r).starts_with("\"sb."), "{r}");

    c.close_stdin();
    assert!(
        c.wait_exit(WAIT),
        "the gateway did not exit when its stdin closed"
    );
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let fail: Vec<&Value> = lines
        .iter()
        .filter(|l| l["requested"] == "py__fail")
        .collect();
    assert_eq!(fail.len(), 2, "{lines:?}");
    for l in fail {
        assert_eq!(l["outcome"], "tool_error");
        assert_eq!(l["server"], "py");
        assert_eq!(l["tool"], "fail");
        assert_eq!(l["client"], "line-client");
        assert!(l.get("arguments").is_none());
    }
    let echo = lines
        .iter()
        .find(|l| l["requested"] == "demo__echo")
        .unwrap();
    assert_eq!(echo["outcome"], "ok");
    assert!(echo["response_bytes"].as_u64().unwrap() > 0, "{echo}");
    assert!(echo["request_bytes"].as_u64().unwrap() > 0, "{echo}");
}

/// A raw call is cancelled by the client (and not answered), times out on the server's
/// `timeout`, and is cancelled when the session ends — each time the server is told.
#[test]
fn a_raw_call_is_cancelled_timed_out_and_ended_on_the_server() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let config = write_settings(
        env.project.path(),
        json!({
            "demo": {"command": BIN, "args": ["demo-server"]},
            "liar": liar(&cancel_log, json!({"timeout": 1500})),
        }),
    );
    let mut c = LineClient::start(&env, &["gateway", "--config", &config]);
    c.initialize(json!({}));

    // Cancelled by the client: no answer, and the server hears it under its own id.
    c.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                  "params": {"name": "liar__silent", "arguments": {}}}));
    std::thread::sleep(Duration::from_millis(300));
    c.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 10, "reason": "changed my mind"}}),
    );
    let heard = wait_for_lines(&cancel_log, "cancelled sb.", 1);
    assert_eq!(heard.len(), 1, "the server never heard the cancellation");
    c.assert_unanswered(&json!(10), Duration::from_millis(300));
    // The id may be used again at once.
    let r = c.call(json!(10), "demo__echo", json!({"message": "again"}), None);
    assert_eq!(text_of(&r), "Echo: again");

    // Timed out: an error naming the server and the setting, and the server told.
    let started = Instant::now();
    let r = c.call(json!(11), "liar__silent", json!({}), None);
    let waited = started.elapsed();
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("server `liar`"), "{r}");
    assert!(message.contains("timed out after 1500 ms"), "{r}");
    assert!(
        waited >= Duration::from_millis(1400) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    assert_eq!(wait_for_lines(&cancel_log, "cancelled sb.", 2).len(), 2);

    // The session ends with a call in flight: the server is told.
    c.send(json!({"jsonrpc": "2.0", "id": 12, "method": "tools/call",
                  "params": {"name": "liar__silent", "arguments": {}}}));
    std::thread::sleep(Duration::from_millis(300));
    c.close_stdin();
    assert_eq!(
        wait_for_lines(&cancel_log, "cancelled sb.", 3).len(),
        3,
        "the server never heard that the session ended"
    );
    assert!(
        c.wait_exit(WAIT),
        "the gateway did not exit when its stdin closed"
    );
}

/// A server that lies in its replies fails only the call it lies to, at once, with
/// an error naming it; stray and repeated replies are dropped; a server that dies
/// mid-call fails its call at once. The other servers go on.
#[test]
fn lying_replies_fail_only_their_call_and_at_once() {
    ensure_peers();
    let env = common::Env::new();
    let cancel_log = env.project.path().join("cancel.log");
    let (die, die_args) = bad_peer("die_mid_call");
    let config = write_settings(
        env.project.path(),
        json!({
            "demo": {"command": BIN, "args": ["demo-server"]},
            "liar": liar(&cancel_log, json!({"maxMessageBytes": 65536})),
            "die": {"command": die, "args": die_args},
        }),
    );
    let mut c = LineClient::start(&env, &["gateway", "--config", &config]);
    c.initialize(json!({}));

    for (id, tool, words) in [
        (1, "liar__not_object", "needs an object `result`"),
        (2, "liar__both", "needs an object `result`"),
        (3, "liar__huge", "maxMessageBytes"),
    ] {
        let started = Instant::now();
        let r = c.call(json!(id), tool, json!({}), None);
        assert!(started.elapsed() < Duration::from_secs(5), "{tool} waited");
        assert_eq!(r["error"]["code"], -32603, "{tool}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("liar"), "{tool}: {r}");
        assert!(message.contains(words), "{tool}: {r}");
    }
    // Replies to ids it was never sent are dropped; the true one answers.
    let r = c.call(json!(4), "liar__stray", json!({}), None);
    assert_eq!(text_of(&r), "true");
    // A second reply to the same call is dropped too.
    let r = c.call(json!(5), "liar__twice", json!({}), None);
    assert_eq!(text_of(&r), "once");
    let r = c.call(json!(6), "liar__id", json!({}), None);
    assert!(text_of(&r).starts_with("\"sb."), "{r}");
    c.assert_unanswered(&json!(5), Duration::from_millis(200));
    assert_eq!(
        c.seen.iter().filter(|m| is_reply_to(m, &json!(6))).count(),
        0
    );

    // A server that exits mid-call: the call fails at once, naming it.
    let started = Instant::now();
    let r = c.call(json!(7), "die__boom", json!({}), None);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "die__boom waited"
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("server `die`"), "{r}");
    assert!(message.contains("closed"), "{r}");

    let r = c.call(
        json!(8),
        "demo__echo",
        json!({"message": "still here"}),
        None,
    );
    assert_eq!(text_of(&r), "Echo: still here");
}

/// A server's elicitation, sampling and roots requests during a raw call reach this
/// client, and its answers reach the server.
#[test]
fn questions_during_a_raw_call_reach_the_client() {
    ensure_peers();
    let env = common::Env::new();
    let (py, py_args) = python_stdio_command();
    let config = write_settings(
        env.project.path(),
        json!({"py": {"command": py, "args": py_args, "env": {"SWITCHBOARD_PY_RESOLVE": "1"}}}),
    );
    let mut c = LineClient::start(&env, &["gateway", "--config", &config]);
    c.initialize(json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {}}));
    // This server's plain calls go raw.
    let r = c.call(json!(0), "py__request_id", json!({}), None);
    assert!(text_of(&r).starts_with("sb."), "{r}");
    let mut answer = |m: &Value| match m["method"].as_str().unwrap() {
        "elicitation/create" => json!({"action": "accept", "content": {"name": "Ada"}}),
        "sampling/createMessage" => json!({"role": "assistant", "model": "m",
            "content": {"type": "text", "text": "a protocol"}}),
        "roots/list" => json!({"roots": [{"uri": "file:///home/alice/project"}]}),
        other => panic!("unexpected request {other}"),
    };
    for (id, tool, said) in [
        (1, "py__greet", "hello Ada"),
        (2, "py__summarize", "model said: a protocol"),
        (3, "py__where", "file:///home/alice/project"),
    ] {
        c.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": tool, "arguments": {}}}));
        let r = c.reply(json!(id), &mut answer);
        assert!(text_of(&r).contains(said), "{tool}: {r}");
    }
}

/// The gateway's anonymous memory (heap and stacks), in KiB.
fn rss_anon_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A client that sends thousands of calls with large replies and reads none of them
/// for a while: the gateway's memory stays bounded (the raw relay stops at its limits,
/// and the transport stops handing rmcp calls while 64 of its messages wait to be
/// written or 128 requests are served, so the client's writes wait), and once the
/// client reads again every call
/// is answered, in full. Before these bounds rmcp held every request and reply: 300 MB
/// more here; now about 15 MB, with or without other load on the machine.
#[test]
fn a_client_that_does_not_read_keeps_the_gateway_bounded() {
    ensure_peers();
    let env = common::Env::new();
    let config = write_settings(
        env.project.path(),
        json!({"demo": {"command": BIN, "args": ["demo-server"]}}),
    );
    let mut c = LineClient::start(&env, &["gateway", "--config", &config]);
    c.initialize(json!({}));
    let pid = c.child.id();
    let before = rss_anon_kb(pid);
    // 3,000 replies of 16 KiB: about 48 MiB, if the gateway kept them all.
    const CALLS: usize = 3000;
    let message = "x".repeat(16 * 1024);
    c.set_reading(false);
    let mut stdin = c.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..CALLS {
            let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "demo__echo", "arguments": {"message": message}}});
            writeln!(stdin, "{call}").unwrap();
        }
        stdin.flush().unwrap();
        stdin
    });
    let mut peak = before;
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        peak = peak.max(rss_anon_kb(pid));
        std::thread::sleep(Duration::from_millis(50));
    }
    // The gateway stopped reading: the client's writes wait.
    assert!(
        !writer.is_finished(),
        "the gateway read every call without a reader"
    );
    c.set_reading(true);
    c.stdin = Some(writer.join().unwrap());
    for i in 0..CALLS {
        let r = c.reply(json!(i), &mut |m| panic!("unexpected request: {m}"));
        assert_eq!(text_of(&r).len(), "Echo: ".len() + 16 * 1024, "call {i}");
    }
    assert!(
        peak < before + 40 * 1024,
        "the gateway grew from {before} KiB to {peak} KiB of anonymous memory"
    );
}
