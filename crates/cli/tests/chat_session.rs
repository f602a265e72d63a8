//! A real terminal session of `switchboard chat`, driven through tmux (a pty, line
//! editing, streamed output, a tool call, `/mcp`, Ctrl-D). The transcript is kept in
//! `docs/chat-session.md`; this test fails when the program's behaviour and the doc
//! drift apart. Regenerate the doc with `SWITCHBOARD_UPDATE_DOCS=1`.
//!
//! The other sessions here check what the doc does not show: the confirmation answered
//! by one key (and `S` saving trust), counts in the banner, a server connecting late
//! announced cleanly, and Ctrl-C ending a turn at once — at a confirmation (the call never
//! made) or with a call in flight (the server told) — then the prompt back and Ctrl-C
//! twice quitting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_model_fakes::gemini::{FakeGemini, FakeTurn, last_function_responses};

/// The server's text inside the untrusted-data wrapper of a tool result (the model
/// quotes the data, not the tags).
fn inner(wrapped: &str) -> String {
    let lines: Vec<&str> = wrapped.lines().collect();
    match lines.as_slice() {
        [open, body @ .., close]
            if open.starts_with("<untrusted-data-") && close.starts_with("</untrusted-data-") =>
        {
            body.join("\n")
        }
        _ => wrapped.to_string(),
    }
}

struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }
    fn send(&self, keys: &[&str]) {
        let st = self
            .cmd()
            .args(["send-keys", "-t", "s"])
            .args(keys)
            .status()
            .unwrap();
        assert!(st.success());
    }
    fn capture(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "s", "-S", "-200"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    async fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if screen.contains(needle) {
                return screen;
            }
            if start.elapsed() > Duration::from_secs(20) {
                panic!("`{needle}` did not appear; screen:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn interactive_session_matches_the_doc() {
    assert!(
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success()),
        "tmux is required for this test (apt-get install tmux)"
    );
    let fake = FakeGemini::start(vec![
        FakeTurn::text("Hello! I can use your MCP servers' tools."),
        FakeTurn::call("mcp_demo_echo", json!({"message": "from the terminal"})),
        FakeTurn::dynamic(|req| {
            let frs = last_function_responses(req);
            let out = inner(frs[0]["response"]["output"].as_str().unwrap_or("?"));
            FakeTurn::text(format!("The echo tool answered: {out}"))
        }),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let tmux = Tmux {
        socket: format!("sb-test-{}", std::process::id()),
    };
    let command = format!(
        "cd {} && env SWITCHBOARD_HOME={} GEMINI_API_KEY={} GEMINI_BASE_URL={} {} chat --model gemini-2.5-flash",
        project.path().display(),
        home.path().display(),
        fake.api_key(),
        fake.base_url,
        env!("CARGO_BIN_EXE_switchboard")
    );
    let st = tmux
        .cmd()
        .args([
            "new-session",
            "-d",
            "-s",
            "s",
            "-x",
            "100",
            "-y",
            "40",
            &command,
        ])
        .status()
        .unwrap();
    assert!(st.success());
    tmux.wait_for("Ctrl-D to quit.").await;
    tmux.wait_for("›").await;
    tmux.send(&["hello", "Enter"]);
    tmux.wait_for("I can use your MCP servers' tools.").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    tmux.send(&["please echo something", "Enter"]);
    tmux.wait_for("The echo tool answered: Echo: from the terminal")
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    tmux.send(&["/tools", "Enter"]);
    tmux.wait_for("mcp_demo_tiny_image").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let screen = tmux.capture();
    // Ctrl-D at the prompt ends the program (and so the tmux session).
    tmux.send(&["C-d"]);
    let start = Instant::now();
    while tmux
        .cmd()
        .args(["has-session", "-t", "s"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "chat did not exit on Ctrl-D"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let transcript: String = screen
        .lines()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .replace(&fake.base_url, "<fake-gemini>")
        .to_string();
    // The real server answered through the real connection.
    assert!(
        transcript.contains("✓ demo.echo: Echo: from the terminal"),
        "{transcript}"
    );
    assert!(transcript.contains("MCP: demo (7 tools"), "{transcript}");

    let doc_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/chat-session.md");
    let doc = format!(
        "# A `switchboard chat` session\n\nCaptured by `crates/cli/tests/chat_session.rs` in a real terminal (tmux), with the\nbundled demo server and a local fake of the Gemini API; the test fails if this\ntranscript and the program drift apart.\n\n```text\n{transcript}\n```\n"
    );
    if std::env::var_os("SWITCHBOARD_UPDATE_DOCS").is_some() {
        std::fs::write(&doc_path, &doc).unwrap();
    }
    let kept = std::fs::read_to_string(&doc_path).unwrap_or_default();
    assert_eq!(
        kept, doc,
        "docs/chat-session.md is stale: rerun with SWITCHBOARD_UPDATE_DOCS=1 and review"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn confirmation_prompt_runs_once_and_can_save_trust() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_mine_echo", json!({"message": "first"})),
        FakeTurn::dynamic(|req| {
            FakeTurn::text(format!(
                "one: {}",
                inner(
                    last_function_responses(req)[0]["response"]["output"]
                        .as_str()
                        .unwrap_or("?")
                )
            ))
        }),
        FakeTurn::call("mcp_mine_echo", json!({"message": "second"})),
        FakeTurn::dynamic(|req| {
            FakeTurn::text(format!(
                "two: {}",
                inner(
                    last_function_responses(req)[0]["response"]["output"]
                        .as_str()
                        .unwrap_or("?")
                )
            ))
        }),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let settings = home.path().join("settings.json");
    std::fs::write(
        &settings,
        json!({"keep": 1, "mcpServers": {"mine": {"command": env!("CARGO_BIN_EXE_switchboard"), "args": ["demo-server"]}}}).to_string(),
    )
    .unwrap();
    let tmux = Tmux {
        socket: format!("sb-confirm-{}", std::process::id()),
    };
    let command = format!(
        "cd {} && env SWITCHBOARD_HOME={} GEMINI_API_KEY={} GEMINI_BASE_URL={} {} chat",
        project.path().display(),
        home.path().display(),
        fake.api_key(),
        fake.base_url,
        env!("CARGO_BIN_EXE_switchboard")
    );
    assert!(
        tmux.cmd()
            .args([
                "new-session",
                "-d",
                "-s",
                "s",
                "-x",
                "160",
                "-y",
                "50",
                &command
            ])
            .status()
            .unwrap()
            .success()
    );
    tmux.wait_for("Ctrl-D to quit.").await;
    tmux.send(&["echo first", "Enter"]);
    tmux.wait_for("Run it?").await;
    tmux.send(&["y"]);
    tmux.wait_for("one: Echo: first").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    tmux.send(&["echo second", "Enter"]);
    // Asked again (approved once only), now saved.
    let start = Instant::now();
    while tmux.capture().matches("Run it?").count() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{}",
            tmux.capture()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tmux.send(&["S"]);
    tmux.wait_for("two: Echo: second").await;
    let screen = tmux.capture();
    assert!(screen.contains("saved: `mine` is trusted in"), "{screen}");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(file["mcpServers"]["mine"]["trust"], true);
    assert_eq!(file["keep"], 1);
    tmux.send(&["C-d"]);
}

/// A chat session in tmux (160×50) running `switchboard chat` with `settings` as the
/// user's settings file; dropped, it kills its tmux server.
struct Session {
    tmux: Tmux,
    _home: tempfile::TempDir,
    _project: tempfile::TempDir,
}

impl Session {
    fn start(name: &str, fake: &FakeGemini, settings: serde_json::Value) -> Self {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
        let tmux = Tmux {
            socket: format!("sb-{name}-{}", std::process::id()),
        };
        let command = format!(
            "cd {} && env SWITCHBOARD_HOME={} GEMINI_API_KEY={} GEMINI_BASE_URL={} {} chat",
            project.path().display(),
            home.path().display(),
            fake.api_key(),
            fake.base_url,
            env!("CARGO_BIN_EXE_switchboard")
        );
        let args = ["new-session", "-d", "-s", "s", "-x", "160", "-y", "50"];
        assert!(
            tmux.cmd()
                .args(args)
                .arg(&command)
                .status()
                .unwrap()
                .success()
        );
        Self {
            tmux,
            _home: home,
            _project: project,
        }
    }

    fn running(&self) -> bool {
        self.tmux
            .cmd()
            .args(["has-session", "-t", "s"])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

/// The `hang_tool` peer (tools `hang` and `echo`) with every message it receives
/// appended to `received` and the cancellations it hears to `cancelled`.
fn recorded_hang_peer(
    received: &std::path::Path,
    cancelled: &std::path::Path,
) -> serde_json::Value {
    let (python, args) = switchboard_testkit::bad_peer("hang_tool");
    json!({
        "command": "sh",
        "args": ["-c", format!("tee -a {} | exec {python} {}", received.display(), args[0])],
        "env": {"SWITCHBOARD_CANCEL_LOG": cancelled.display().to_string()},
    })
}

/// Waits until `f` holds, for at most `limit`.
async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f()
}

/// Counts are pluralised, a server that connects late is announced without a visible
/// `\r`, one key answers the confirmation, and Ctrl-C at the confirmation ends the turn
/// at once (the call never made, no further call asked about); the prompt returns, and
/// Ctrl-C twice at it quits.
#[tokio::test(flavor = "multi_thread")]
async fn one_key_confirms_and_ctrl_c_at_the_confirmation_ends_the_turn() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_hang_echo", json!({"message": "hi"})),
        FakeTurn::dynamic(|req| {
            FakeTurn::text(format!(
                "echoed: {}",
                inner(
                    last_function_responses(req)[0]["response"]["output"]
                        .as_str()
                        .unwrap_or("?")
                )
            ))
        }),
        FakeTurn::calls([
            ("mcp_hang_hang", json!({})),
            ("mcp_hang_echo", json!({"message": "never"})),
        ]),
        FakeTurn::text("this answer must not be asked for"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let received = dir.path().join("received.jsonl");
    let cancelled = dir.path().join("cancelled.log");
    let (python, one_args) = switchboard_testkit::bad_peer("hang_tool");
    let late = format!(
        "sleep 2; exec {} demo-server",
        env!("CARGO_BIN_EXE_switchboard")
    );
    let session = Session::start(
        "keys",
        &fake,
        json!({"mcpServers": {
            "hang": recorded_hang_peer(&received, &cancelled),
            "one": {"command": python, "args": one_args, "includeTools": ["echo"]},
            "late": {"command": "sh", "args": ["-c", late]},
        }}),
    );
    let tmux = &session.tmux;
    let banner = tmux.wait_for("Ctrl-D to quit.").await;
    assert!(banner.contains("hang (2 tools)"), "{banner}");
    assert!(banner.contains("one (1 tool)"), "{banner}");
    assert!(banner.contains("still connecting: late"), "{banner}");
    let screen = tmux.wait_for("[MCP server `late` connected").await;
    assert!(
        !screen.contains("\\r"),
        "a visible \\r on the screen:\n{screen}"
    );

    // One key, no Enter, answers the confirmation; the choice is echoed.
    tmux.send(&["echo hi", "Enter"]);
    tmux.wait_for("Run it?").await;
    tmux.send(&["y"]);
    let screen = tmux.wait_for("echoed: hi").await;
    assert!(
        screen.contains("cancel: y"),
        "the choice is not echoed:\n{screen}"
    );

    // Ctrl-C at the confirmation of the first of two calls: the turn ends at once.
    tmux.send(&["hang twice", "Enter"]);
    let asked = |s: &str| s.matches("Run it?").count();
    assert!(eventually(Duration::from_secs(20), || asked(&tmux.capture()) == 2).await);
    let requests_before = fake.requests().len();
    let pressed = Instant::now();
    tmux.send(&["C-c"]);
    let screen = tmux.wait_for("the turn was cancelled").await;
    assert!(
        pressed.elapsed() < Duration::from_secs(3),
        "the turn took {:?} to end",
        pressed.elapsed()
    );
    // The prompt is back, and the second call was never asked about.
    assert!(
        eventually(Duration::from_secs(5), || tmux
            .capture()
            .trim_end()
            .ends_with('›'))
        .await,
        "no prompt after the cancelled turn:\n{}",
        tmux.capture()
    );
    assert_eq!(asked(&tmux.capture()), 2, "{screen}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        fake.requests().len(),
        requests_before,
        "the model was asked again"
    );
    let calls = std::fs::read_to_string(&received).unwrap_or_default();
    assert!(calls.contains("\"echo\""), "{calls}");
    assert!(
        !calls.contains("\"hang\""),
        "the declined call was made:\n{calls}"
    );

    // Ctrl-C twice at the empty prompt quits.
    tmux.send(&["C-c"]);
    tmux.wait_for("Ctrl-C again to quit").await;
    tmux.send(&["C-c"]);
    assert!(
        eventually(Duration::from_secs(10), || !session.running()).await,
        "chat did not quit on a second Ctrl-C:\n{}",
        tmux.capture()
    );
}

/// Ctrl-C while a call is in flight ends the turn at once, the server hears
/// `notifications/cancelled`, and the prompt returns.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_during_a_call_cancels_it_on_the_server() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_hang_hang", json!({})),
        FakeTurn::text("this answer must not be asked for"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let received = dir.path().join("received.jsonl");
    let cancelled = dir.path().join("cancelled.log");
    let mut hang = recorded_hang_peer(&received, &cancelled);
    hang["trust"] = json!(true);
    let session = Session::start("inflight", &fake, json!({"mcpServers": {"hang": hang}}));
    let tmux = &session.tmux;
    tmux.wait_for("Ctrl-D to quit.").await;
    tmux.send(&["hang", "Enter"]);
    tmux.wait_for("→ hang.hang").await;
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(
            &received
        )
        .unwrap_or_default()
        .contains("\"hang\""))
        .await
    );
    let pressed = Instant::now();
    tmux.send(&["C-c"]);
    tmux.wait_for("the turn was cancelled").await;
    assert!(
        pressed.elapsed() < Duration::from_secs(3),
        "{:?}",
        pressed.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(
            &cancelled
        )
        .unwrap_or_default()
        .starts_with("cancelled "))
        .await,
        "the server never heard notifications/cancelled"
    );
    assert!(
        eventually(Duration::from_secs(5), || tmux
            .capture()
            .trim_end()
            .ends_with('›'))
        .await,
        "no prompt after the cancelled turn:\n{}",
        tmux.capture()
    );
    assert_eq!(fake.requests().len(), 1, "the model was asked again");
    assert!(session.running());
}
