//! `switchboard completions`: the scripts each shell sources, and the dynamic
//! completion the binary answers the way a shell asks for it (clap_complete's
//! `COMPLETE=<shell>` protocol): server names from the settings, without starting any
//! server, and workflow files for `run`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
const SUBCOMMANDS: [&str; 5] = ["mcp", "chat", "run", "serve", "db"];

struct Env {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Env {
    /// Settings with two servers; `alpha`'s command would leave `started` behind if it
    /// were ever run.
    fn new() -> Self {
        let env = Self {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        };
        let marker = env.home.path().join("started");
        let settings = serde_json::json!({
            "mcpServers": {
                "alpha": {"command": "sh", "args": ["-c", format!("touch '{}'", marker.display())]},
                "beta-remote": {"url": "http://127.0.0.1:9/mcp"},
            }
        });
        std::fs::write(env.home.path().join("settings.json"), settings.to_string()).unwrap();
        env
    }

    fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("SWITCHBOARD_HOME", self.home.path())
            .env_remove("COMPLETE")
            .env_remove("_CLAP_COMPLETE_INDEX")
            .current_dir(self.project.path());
        c
    }

    /// What the shell's completion function gets for `words`, the last one being
    /// completed (bash's protocol: the words after `--`, the cursor in
    /// `_CLAP_COMPLETE_INDEX`, candidates separated by `_CLAP_IFS`).
    fn complete_bash(&self, words: &[&str]) -> Vec<String> {
        let out = self
            .command()
            .env("COMPLETE", "bash")
            .env("_CLAP_COMPLETE_INDEX", (words.len() - 1).to_string())
            .env("_CLAP_COMPLETE_COMP_TYPE", "9")
            .env("_CLAP_COMPLETE_SPACE", "true")
            .env("_CLAP_IFS", "\n")
            .arg("--")
            .args(words)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stderr),
            "",
            "completion must print nothing on stderr"
        );
        text(&out.stdout).lines().map(str::to_owned).collect()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn script(env: &Env, args: &[&str]) -> String {
    let out: Output = env
        .command()
        .arg("completions")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn has_bash() -> bool {
    Command::new("bash")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn static_scripts_name_every_subcommand() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let s = script(&env, &[shell, "--static"]);
        assert!(!s.trim().is_empty(), "{shell}: empty script");
        for sub in SUBCOMMANDS {
            assert!(
                s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .any(|w| w == sub),
                "{shell} script does not name `{sub}`"
            );
        }
        assert!(s.contains("switchboard"), "{shell}");
    }
}

#[test]
fn dynamic_scripts_call_the_binary_back() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let s = script(&env, &[shell]);
        assert!(!s.trim().is_empty(), "{shell}: empty script");
        assert!(s.contains("COMPLETE"), "{shell}: {s}");
        assert!(
            s.contains(BIN),
            "{shell} script does not run this binary: {s}"
        );
    }
}

#[test]
fn bash_registers_both_scripts() {
    if !has_bash() {
        return;
    }
    let env = Env::new();
    for args in [&["bash"][..], &["bash", "--static"][..]] {
        let file = env.project.path().join("switchboard.bash");
        std::fs::write(&file, script(&env, args)).unwrap();
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}' && complete -p switchboard",
                file.display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let registered = text(&out.stdout);
        assert!(
            registered.starts_with("complete ") && registered.trim_end().ends_with(" switchboard"),
            "{args:?}: {registered}"
        );
    }
}

#[test]
fn server_names_come_from_the_settings_without_starting_servers() {
    let env = Env::new();
    for words in [
        &["switchboard", "mcp", "get", ""][..],
        &["switchboard", "mcp", "enable", ""],
        &["switchboard", "mcp", "logout", ""],
        &["switchboard", "mcp", "login", ""],
        &["switchboard", "mcp", "call", ""],
        &["switchboard", "-v", "mcp", "call", "--timeout", "5", ""],
        &["switchboard", "mcp", "read", ""],
        &["switchboard", "mcp", "prompt", ""],
    ] {
        let got = env.complete_bash(words);
        assert!(
            got.contains(&"alpha".into()) && got.contains(&"beta-remote".into()),
            "{words:?}: {got:?}"
        );
    }
    // A prefix narrows the names; the tool after the server is not a server name.
    let got = env.complete_bash(&["switchboard", "mcp", "call", "be"]);
    assert_eq!(got, ["beta-remote"]);
    let got = env.complete_bash(&["switchboard", "mcp", "call", "alpha", ""]);
    assert!(
        !got.iter().any(|c| c == "alpha" || c == "beta-remote"),
        "{got:?}"
    );
    assert!(
        !env.home.path().join("started").exists(),
        "completion started a server"
    );
}

#[test]
fn server_names_follow_config() {
    let env = Env::new();
    let other = env.project.path().join("other.json");
    std::fs::write(&other, r#"{"mcpServers": {"gamma": {"command": "true"}}}"#).unwrap();
    let got = env.complete_bash(&[
        "switchboard",
        "--config",
        other.to_str().unwrap(),
        "mcp",
        "get",
        "",
    ]);
    assert!(got.contains(&"gamma".into()), "{got:?}");
    assert!(!got.contains(&"alpha".into()), "{got:?}");
}

#[test]
fn run_completes_workflow_files() {
    let env = Env::new();
    let p = env.project.path();
    for f in ["flow.yaml", "notes.md", "data.txt"] {
        std::fs::write(p.join(f), "").unwrap();
    }
    std::fs::create_dir(p.join("flows")).unwrap();
    let got = env.complete_bash(&["switchboard", "run", ""]);
    for want in ["flow.yaml", "notes.md", "flows/"] {
        assert!(got.contains(&want.into()), "{want}: {got:?}");
    }
    assert!(!got.contains(&"data.txt".into()), "{got:?}");
}

#[test]
fn the_sourced_bash_script_completes_server_names() {
    if !has_bash() {
        return;
    }
    let env = Env::new();
    let file: &Path = &env.project.path().join("switchboard.bash");
    std::fs::write(file, script(&env, &["bash"])).unwrap();
    let out = Command::new("bash")
        .env("SWITCHBOARD_HOME", env.home.path())
        .current_dir(env.project.path())
        .arg("-c")
        .arg(format!(
            "source '{}'; COMP_WORDS=(switchboard mcp get ''); COMP_CWORD=3; COMP_TYPE=9; \
             _clap_complete_switchboard switchboard '' get; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display()
        ))
        .output()
        .unwrap();
    let got = text(&out.stdout);
    assert!(
        got.lines().any(|l| l == "alpha") && got.lines().any(|l| l == "beta-remote"),
        "{got:?} {}",
        text(&out.stderr)
    );
}

#[test]
fn a_stray_complete_variable_does_not_hijack_a_command() {
    let env = Env::new();
    for value in ["1", "true"] {
        let out = env
            .command()
            .env("COMPLETE", value)
            .args(["mcp", "get", "alpha", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "COMPLETE={value}: {}",
            text(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["name"], "alpha", "{doc}");
    }
}

/// `mcp call SERVER <Tab>` offers the tool names `mcp list` saw for that server, and
/// only while the settings still point the server where they did; completion itself
/// never starts it.
#[test]
fn call_completes_tool_names_that_mcp_list_saw() {
    let env = Env::new();
    let settings = env.home.path().join("settings.json");
    let demo = |args: &[&str]| {
        serde_json::json!({"mcpServers": {"demo": {"command": BIN, "args": args}}}).to_string()
    };
    std::fs::write(&settings, demo(&["demo-server"])).unwrap();
    // The values offered (clap adds the command's flags when there are none).
    let call = |words: &[&str]| {
        let mut all = vec!["switchboard", "mcp", "call"];
        all.extend_from_slice(words);
        env.complete_bash(&all)
            .into_iter()
            .filter(|c| !c.starts_with('-'))
            .collect::<Vec<_>>()
    };
    // Nothing seen yet: no names, and nothing was started to find them.
    assert!(call(&["demo", ""]).is_empty());
    assert!(!env.home.path().join("tool-names.json").exists());
    assert_eq!(call(&[""]), ["demo"], "the first word is still a server");

    let out = env
        .command()
        .args(["mcp", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tools = call(&["demo", ""]);
    for t in ["echo", "add"] {
        assert!(tools.iter().any(|n| n == t), "{t} in {tools:?}");
    }
    assert_eq!(call(&["demo", "ec"]), ["echo"]);
    assert!(call(&["demo", "echo", ""]).is_empty(), "then arguments");
    assert!(
        call(&["--stdio", "x", ""]).is_empty(),
        "an ad-hoc server has no cache"
    );
    assert!(call(&["nope", ""]).is_empty());

    // Pointed elsewhere: the names seen for the old target are not offered.
    std::fs::write(&settings, demo(&["demo-server", "--other"])).unwrap();
    assert!(call(&["demo", ""]).is_empty());
}
