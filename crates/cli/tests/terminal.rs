//! Text from servers reaches the terminal with its control characters made visible: a
//! hostile server's name, tool descriptions, results and errors carry an OSC 52
//! clipboard write, a screen clear, a carriage return, backspaces and a bidi override,
//! and none of them reach stdout or stderr raw. `--json` keeps the exact strings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

use serde_json::{Value, json};

const RAW: [char; 6] = ['\u{1b}', '\u{7}', '\r', '\u{8}', '\u{202e}', '\u{9b}'];

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let (command, args) = switchboard_testkit::bad_peer("hostile_text");
        let settings = json!({"mcpServers": {"hostile": {"command": command, "args": args}}});
        std::fs::write(
            home.path().join("settings.json"),
            serde_json::to_vec_pretty(&settings).unwrap(),
        )
        .unwrap();
        Self { home }
    }

    fn run(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(args)
            .env("SWITCHBOARD_HOME", self.home.path())
            .env_remove("SWITCHBOARD_LOG")
            .current_dir(self.home.path())
            .output()
            .unwrap()
    }
}

fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for c in RAW {
        assert!(
            !text.contains(c),
            "{what} carries a raw {:?}:\n{}",
            c,
            text.escape_debug()
        );
    }
}

#[test]
fn server_text_is_made_visible_in_human_output() {
    let env = Env::new();
    let list = env.run(&["mcp", "list"]);
    assert!(list.status.success(), "{list:?}");
    assert_clean("mcp list stdout", &list.stdout);
    assert_clean("mcp list stderr", &list.stderr);
    let out = String::from_utf8_lossy(&list.stdout);
    // Visible, not dropped: the user sees that the server sent escapes.
    assert!(out.contains("\\u{1b}]52;c;"), "{out}");
    assert!(out.contains("\\u{202e}txt.exe"), "{out}");

    let call = env.run(&["mcp", "call", "hostile", "show"]);
    assert!(call.status.success(), "{call:?}");
    assert_clean("mcp call stdout", &call.stdout);
    assert_clean("mcp call stderr", &call.stderr);
    assert!(String::from_utf8_lossy(&call.stdout).contains("result \\u{1b}]52"));

    let fail = env.run(&["mcp", "call", "hostile", "fail"]);
    assert!(!fail.status.success(), "{fail:?}");
    assert_clean("error stdout", &fail.stdout);
    assert_clean("error stderr", &fail.stderr);
    assert!(
        String::from_utf8_lossy(&fail.stderr).contains("broken \\u{1b}]52"),
        "{}",
        String::from_utf8_lossy(&fail.stderr)
    );
}

#[test]
fn json_output_keeps_the_exact_strings() {
    let env = Env::new();
    let call = env.run(&["mcp", "call", "hostile", "show", "--json"]);
    assert!(call.status.success(), "{call:?}");
    // JSON escapes the C0 controls itself; the exact string survives a round trip.
    let v: Value = serde_json::from_slice(&call.stdout).unwrap();
    let text = v["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("result \u{1b}]52;c;"), "{text:?}");
    assert!(
        text.contains("\rFAKE OK\u{8}\u{8} \u{202e}txt.exe"),
        "{text:?}"
    );
    let raw = String::from_utf8_lossy(&call.stdout);
    assert!(!raw.contains('\u{1b}') && !raw.contains('\r'), "{raw}");
}
