//! Progress where a person waits, with the real binary: on a terminal `mcp list` shows a
//! line per server connecting and arriving, and `mcp call` shows a server's progress
//! notifications as a bar; with `--json`, or when stdout is not a terminal, nothing of
//! it is drawn. Terminals are pseudo-terminals from `script` (skipped when the machine
//! has no `script`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

struct Env {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Env {
    /// A fresh machine: the bundled demo server is the only server.
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    /// A machine with one server, `late`, that takes a second to start (the demo server
    /// behind a `sleep`).
    fn with_a_late_server() -> Self {
        let env = Self::new();
        let settings = serde_json::json!({
            "mcpServers": {
                "late": {
                    "command": "sh",
                    "args": ["-c", format!("sleep 1; exec '{BIN}' demo-server")],
                }
            }
        });
        std::fs::write(
            env.home.path().join("settings.json"),
            serde_json::to_string_pretty(&settings).unwrap(),
        )
        .unwrap();
        env
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SWITCHBOARD_HOME", self.home.path())
            .env_remove("SWITCHBOARD_LOG")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env("TERM", "xterm-256color")
            .current_dir(self.project.path());
        c
    }

    /// `switchboard ARGS` with stdout and stderr on pipes.
    fn piped(&self, args: &[&str]) -> Output {
        self.command(BIN).args(args).output().unwrap()
    }

    /// `shell` (a command line where `$SB` is the binary) on a pseudo-terminal; stdout
    /// and stderr both land in the returned text. `None` without `script`.
    fn on_tty(&self, shell: &str) -> Option<String> {
        let has_script = Command::new("script")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !has_script {
            return None;
        }
        let o = self
            .command("script")
            .args(["-qec", shell, "/dev/null"])
            .env("SB", BIN)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", all(&o));
        Some(text(&o.stdout))
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn all(o: &Output) -> String {
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

/// No escape sequence and no carriage return other than a terminal's `\r\n`.
fn assert_no_drawing(what: &str, out: &str) {
    assert!(!out.contains('\u{1b}'), "{what} has an escape: {out:?}");
    assert!(
        !out.replace("\r\n", "\n").contains('\r'),
        "{what} has a carriage return: {out:?}"
    );
}

#[test]
fn list_on_a_terminal_shows_each_server_connecting_then_arriving() {
    let env = Env::with_a_late_server();
    let Some(out) = env.on_tty("\"$SB\" mcp list") else {
        return;
    };
    assert!(out.contains("late — connecting…"), "{out:?}");
    assert!(out.contains("🟢 late — connected (1."), "{out:?}");
    // The live lines are cleared; the report follows unchanged.
    assert!(out.contains("MCP servers (1):"), "{out:?}");
    assert!(out.contains("🟢 late — connected (stdio, user)"), "{out:?}");
}

#[test]
fn call_on_a_terminal_shows_progress_as_a_bar() {
    let env = Env::new();
    let Some(out) = env.on_tty("\"$SB\" mcp call demo slow seconds=1.2 steps=4") else {
        return;
    };
    assert!(out.contains("step 2 of 4"), "{out:?}");
    assert!(out.contains(" 50% step 2 of 4"), "{out:?}");
    assert!(out.contains('█'), "{out:?}");
    assert!(!out.contains("progress 2/4"), "{out:?}");
    assert!(out.contains("Done: 4 steps"), "{out:?}");
}

#[test]
fn nothing_is_drawn_with_json_or_when_stdout_is_not_a_terminal() {
    let env = Env::new();
    let call = "\"$SB\" mcp call demo slow seconds=0.6 steps=3";
    // A pseudo-terminal, but --json.
    let Some(out) = env.on_tty("\"$SB\" mcp list --json") else {
        return;
    };
    assert_no_drawing("list --json", &out);
    assert!(out.contains("\"servers\""), "{out:?}");
    let out = env.on_tty(&format!("{call} --json")).unwrap();
    assert_no_drawing("call --json", &out);
    // stderr is a terminal, stdout a pipe.
    let out = env.on_tty(&format!("{call} | cat")).unwrap();
    assert_no_drawing("call | cat", &out);
    assert!(!out.contains("step 1 of 3"), "{out:?}");
    let out = env.on_tty("\"$SB\" mcp list | cat").unwrap();
    assert_no_drawing("list | cat", &out);
    assert!(!out.contains("Connecting"), "{out:?}");
    // Both on pipes: the output is exactly the report.
    for args in [
        &["mcp", "list"][..],
        &["mcp", "call", "demo", "slow", "seconds=0.6", "steps=3"][..],
    ] {
        let o = env.piped(args);
        assert!(o.status.success(), "{}", all(&o));
        assert_no_drawing("piped stdout", &text(&o.stdout));
        assert_no_drawing("piped stderr", &text(&o.stderr));
    }
}
