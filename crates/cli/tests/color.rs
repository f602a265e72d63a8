//! `--color auto|always|never` and `NO_COLOR`, with the real binary: clap's help and
//! errors and the `-v` log lines are coloured only when asked for (or on a terminal
//! with `NO_COLOR` unset or empty), and `--json` documents never are.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

const ESC: &str = "\u{1b}[";

struct Env {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Env {
    /// A fresh machine: `mcp list` starts the bundled demo server, and `-vv` logs it.
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, args: &[&str], no_color: Option<&str>) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        c.args(args)
            .env("SWITCHBOARD_HOME", self.home.path())
            .env_remove("SWITCHBOARD_LOG")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .current_dir(self.project.path());
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        c.output().unwrap()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Everything the command wrote, stdout then stderr.
fn all(o: &Output) -> String {
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

const LIST_VV: &[&str] = &["-vv", "mcp", "list"];

fn with_color(when: &str, args: &[&str]) -> Vec<String> {
    let mut v = vec!["--color".to_string(), when.to_string()];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

fn run_with(env: &Env, when: &str, args: &[&str], no_color: Option<&str>) -> Output {
    let a = with_color(when, args);
    env.run(&a.iter().map(String::as_str).collect::<Vec<_>>(), no_color)
}

#[test]
fn always_colours_help_errors_and_logs_even_into_a_pipe() {
    let env = Env::new();
    let help = run_with(&env, "always", &["--help"], None);
    assert!(help.status.success());
    assert!(text(&help.stdout).contains(ESC), "help: {}", all(&help));
    let usage_error = run_with(&env, "always", &["no-such-command"], None);
    assert!(!usage_error.status.success());
    assert!(
        text(&usage_error.stderr).contains(ESC),
        "{}",
        all(&usage_error)
    );
    let logs = run_with(&env, "always", LIST_VV, None);
    assert!(logs.status.success(), "{}", all(&logs));
    assert!(text(&logs.stderr).contains(ESC), "logs: {}", all(&logs));
    // `always` wins over NO_COLOR, and the `=` form works.
    let forced = env.run(&["--color=always", "-vv", "mcp", "list"], Some("1"));
    assert!(text(&forced.stderr).contains(ESC), "{}", all(&forced));
}

#[test]
fn never_colours_nothing() {
    let env = Env::new();
    for args in [&["--help"][..], &["no-such-command"], LIST_VV] {
        let o = run_with(&env, "never", args, None);
        assert_eq!(
            o.status.success(),
            args[0] != "no-such-command",
            "{args:?}: {}",
            all(&o)
        );
        assert!(!all(&o).contains('\u{1b}'), "{args:?}: {}", all(&o));
    }
}

#[test]
fn no_color_and_a_pipe_mean_no_colour_by_default() {
    let env = Env::new();
    for args in [&["--help"][..], &["no-such-command"], LIST_VV] {
        // Piped, no flag: no colour.
        let o = env.run(args, None);
        assert!(!all(&o).contains('\u{1b}'), "piped {args:?}: {}", all(&o));
        // `--color auto` with NO_COLOR set: none either.
        let o = run_with(&env, "auto", args, Some("1"));
        assert_eq!(
            o.status.success(),
            args[0] != "no-such-command",
            "{args:?}: {}",
            all(&o)
        );
        assert!(
            !all(&o).contains('\u{1b}'),
            "NO_COLOR {args:?}: {}",
            all(&o)
        );
    }
}

#[test]
fn json_is_never_coloured() {
    let env = Env::new();
    let o = run_with(&env, "always", &["-vv", "mcp", "list", "--json"], None);
    assert!(o.status.success(), "{}", all(&o));
    assert!(!text(&o.stdout).contains('\u{1b}'), "{}", text(&o.stdout));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["servers"][0]["name"], "demo");
}

/// `auto` on a terminal: colour unless NO_COLOR is non-empty (run under `script`, a
/// pseudo-terminal, when the machine has it).
#[test]
fn auto_colours_a_terminal_unless_no_color_is_set() {
    let has_script = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_switchboard");
    let on_tty = |no_color: Option<&str>, flags: &str| {
        let mut c = Command::new("script");
        c.args(["-qec", &format!("'{bin}' {flags} --help"), "/dev/null"])
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env("TERM", "xterm-256color");
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", all(&o));
        text(&o.stdout)
    };
    assert!(on_tty(None, "").contains(ESC));
    assert!(
        on_tty(Some(""), "").contains(ESC),
        "empty NO_COLOR does not disable"
    );
    assert!(!on_tty(Some("1"), "").contains('\u{1b}'));
    assert!(!on_tty(None, "--color never").contains('\u{1b}'));
}
