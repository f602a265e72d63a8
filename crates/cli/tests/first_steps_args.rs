//! First steps with names and arguments, on the real binary against the bundled demo
//! server (issue 30): a mistyped server, tool or prompt name gets "did you mean"; a bare
//! word where `key=value` is expected suggests `message=…` from the tool's schema;
//! required arguments are checked before the call and unknown keys warned about; `mcp
//! add NAME -- CMD ARGS…` (Claude Code's form) is accepted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{Env, stderr, stdout};

const EXE: &str = env!("CARGO_BIN_EXE_switchboard");

/// Runs `args`, insists it failed, and returns its stderr.
fn fails(env: &Env, args: &[&str]) -> String {
    let out = env.run(args);
    assert!(!out.status.success(), "succeeded: {}", stdout(&out));
    stderr(&out)
}

#[test]
fn mistyped_names_get_did_you_mean() {
    let env = Env::new();
    let err = fails(&env, &["mcp", "call", "dmeo", "echo", "message=hi"]);
    assert!(err.contains("did you mean `demo`?"), "{err}");
    let err = fails(&env, &["mcp", "call", "demo", "ecoh", "message=hi"]);
    assert!(err.contains("did you mean `echo`?"), "{err}");
    let err = fails(&env, &["mcp", "prompt", "demo", "gret", "name=Ada"]);
    assert!(err.contains("did you mean `greet`?"), "{err}");
    let err = fails(&env, &["mcp", "read", "dmeo", "demo://readme"]);
    assert!(err.contains("did you mean `demo`?"), "{err}");

    let out = env.run(&["mcp", "add", "mine", EXE, "--", "demo-server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = fails(&env, &["mcp", "get", "mien"]);
    assert!(err.contains("did you mean `mine`?"), "{err}");
    for verb in ["remove", "enable", "disable"] {
        let err = fails(&env, &["mcp", verb, "mien"]);
        assert!(err.contains("did you mean `mine`?"), "{verb}: {err}");
    }
}

#[test]
fn a_bare_word_suggests_the_first_required_string_property() {
    let env = Env::new();
    let err = fails(&env, &["mcp", "call", "demo", "echo", "hello"]);
    assert!(err.contains("did you mean `message=hello`?"), "{err}");
}

#[test]
fn required_arguments_are_checked_before_the_call() {
    let env = Env::new();
    let err = fails(&env, &["mcp", "call", "demo", "echo"]);
    assert!(
        err.contains("missing required argument `message` (string): add `message=…`"),
        "{err}"
    );
    let err = fails(&env, &["mcp", "call", "demo", "add", "a=1"]);
    assert!(
        err.contains("missing required argument `b` (number)"),
        "{err}"
    );
}

#[test]
fn unknown_keys_are_warned_about_with_the_known_keys() {
    let env = Env::new();
    let out = env.run(&["mcp", "call", "demo", "echo", "message=hi", "mesage=x"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("hi"), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("warning:"), "{err}");
    assert!(err.contains("`mesage`"), "{err}");
    assert!(err.contains("known keys: message"), "{err}");
}

#[test]
fn add_accepts_claude_codes_dash_dash_form() {
    let env = Env::new();
    let out = env.run(&["mcp", "add", "mine", "--", EXE, "demo-server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = env.settings();
    assert_eq!(s["mcpServers"]["mine"]["command"], EXE, "{s}");
    assert_eq!(
        s["mcpServers"]["mine"]["args"],
        serde_json::json!(["demo-server"]),
        "{s}"
    );
    let out = env.run(&["mcp", "call", "mine", "echo", "message=hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("hi"), "{}", stdout(&out));
}

#[test]
fn add_usage_shows_both_command_forms() {
    let env = Env::new();
    let out = env.run(&["mcp", "add", "--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = stdout(&out);
    assert!(
        help.contains("<NAME> <COMMAND_OR_URL> [-- <ARGS>...]"),
        "{help}"
    );
    assert!(help.contains("<NAME> -- <COMMAND> [ARGS]..."), "{help}");
    // A missing command says both forms too.
    let err = fails(&env, &["mcp", "add", "x"]);
    assert!(err.contains("<NAME> -- <COMMAND> [ARGS]..."), "{err}");
}
