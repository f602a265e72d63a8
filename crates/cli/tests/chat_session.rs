//! A real terminal session of `switchboard chat`, driven through tmux (a pty, line
//! editing, streamed output, a tool call, `/mcp`, Ctrl-D). The transcript is kept in
//! `docs/chat-session.md`; this test fails when the program's behaviour and the doc
//! drift apart. Regenerate the doc with `SWITCHBOARD_UPDATE_DOCS=1`.
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
    tmux.send(&["y", "Enter"]);
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
    tmux.send(&["S", "Enter"]);
    tmux.wait_for("two: Echo: second").await;
    let screen = tmux.capture();
    assert!(screen.contains("saved: `mine` is trusted in"), "{screen}");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(file["mcpServers"]["mine"]["trust"], true);
    assert_eq!(file["keep"], 1);
    tmux.send(&["C-d"]);
}
