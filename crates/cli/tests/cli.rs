//! The `switchboard` binary as a user runs it: fresh machine (bundled demo server),
//! settings edits, folder trust, ad-hoc targets, broken settings, exit codes.
//! Human output is snapshotted with `insta`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

struct Env {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(args)
            .env("SWITCHBOARD_HOME", self.home.path())
            .env_remove("SWITCHBOARD_LOG")
            .current_dir(self.project.path())
            .output()
            .unwrap()
    }

    fn user_settings(&self) -> PathBuf {
        self.home.path().join("settings.json")
    }

    fn project_settings(&self) -> PathBuf {
        self.project
            .path()
            .join(".switchboard")
            .join("settings.json")
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn fresh_machine_lists_the_bundled_demo_server() {
    let env = Env::new();
    let out = env.run(&["mcp", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("bundled demo server `demo`"));
    insta::assert_snapshot!("fresh_list", stdout(&out));
}

#[test]
fn list_json_has_the_documented_shape() {
    let env = Env::new();
    let out = env.run(&["mcp", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let demo = &v["servers"][0];
    assert_eq!(demo["name"], "demo");
    assert_eq!(demo["status"], "connected");
    assert_eq!(demo["transport"], "stdio");
    assert!(demo["auth"].is_null());
    assert!(demo["error"].is_null());
    let tools: Vec<&str> = demo["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "add",
            "clock",
            "echo",
            "fail",
            "get_resource_link",
            "slow",
            "tiny_image"
        ]
    );
    assert!(demo["tools"][0]["description"].is_string());
    let greet = demo["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "greet")
        .unwrap();
    assert_eq!(greet["arguments"][0]["name"], "name");
    assert_eq!(greet["arguments"][0]["required"], true);
    assert_eq!(demo["resources"][0]["uri"], "demo://readme");
    assert!(demo["resources"][0]["name"].is_string());
}

#[test]
fn call_read_and_prompt_print_readably() {
    let env = Env::new();
    let out = env.run(&["mcp", "call", "demo", "echo", "message=hello there"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Echo: hello there\n");

    let out = env.run(&["mcp", "call", "demo", "add", "a=2", "b=3.5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("call_add", stdout(&out));

    let out = env.run(&[
        "mcp",
        "call",
        "demo",
        "add",
        "--args",
        r#"{"a": 1, "b": 2}"#,
        "--json",
    ]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["structuredContent"]["sum"], 3.0);

    let out = env.run(&["mcp", "call", "demo", "tiny_image"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let saved = text
        .split("saved to ")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    let bytes = std::fs::read(saved).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    std::fs::remove_file(saved).unwrap();

    let out = env.run(&["mcp", "read", "demo", "demo://greeting/Ada"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("read_greeting", stdout(&out));

    let out = env.run(&["mcp", "prompt", "demo", "greet", "name=Ada"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("prompt_greet", stdout(&out));

    let out = env.run(&["mcp", "call", "demo", "get_resource_link"]);
    assert!(stdout(&out).contains("[link: "));
    assert!(stdout(&out).contains("demo://readme]"));
}

#[test]
fn failures_exit_one_with_a_clear_message() {
    let env = Env::new();
    let out = env.run(&["mcp", "call", "demo", "fail", "message=boom"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the tool reported an error"));
    assert!(stderr(&out).contains("boom"));

    let out = env.run(&["mcp", "call", "demo", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("has no tool `nope`; its tools: add, clock"));

    let out = env.run(&["mcp", "call", "demo", "add", "a=x", "b=1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("argument `a` must be a number, got `x`"));

    let out = env.run(&["mcp", "call", "demo", "echo", "--args", "[1]"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--args must be a JSON object"));

    let out = env.run(&["mcp", "call", "nosuch", "echo"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no server named `nosuch`; configured: demo"));
}

#[test]
fn adhoc_stdio_target_works_without_settings() {
    let env = Env::new();
    let cmdline = format!("{} demo-server", env!("CARGO_BIN_EXE_switchboard"));
    let out = env.run(&["mcp", "call", "--stdio", &cmdline, "echo", "message=adhoc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Echo: adhoc\n");
    let out = env.run(&["mcp", "call", "http://127.0.0.1:1/mcp", "echo"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot reach http://127.0.0.1:1/mcp"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn existing_file_with_no_servers_means_no_servers() {
    let env = Env::new();
    write(&env.user_settings(), r#"{"theme": "dark"}"#);
    let out = env.run(&["mcp", "list"]);
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("No MCP servers configured."));
    let out = env.run(&["mcp", "list", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        serde_json::json!({"servers": [], "ignored": []})
    );
}

#[test]
fn add_get_disable_enable_remove_keep_the_rest_of_the_file() {
    let env = Env::new();
    write(
        &env.user_settings(),
        r#"{"theme": "dark", "mcpServers": {"other": {"httpUrl": "http://127.0.0.1:9/mcp", "x-extra": 1}}}"#,
    );
    let exe = env!("CARGO_BIN_EXE_switchboard");
    let out = env.run(&[
        "mcp",
        "add",
        "--scope",
        "user",
        "demo2",
        exe,
        "--env",
        "API_TOKEN=supersecretvalue",
        "--timeout",
        "5000",
        "--",
        "demo-server",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&[
        "mcp",
        "add",
        "--scope",
        "user",
        "remote",
        "https://example.invalid/mcp",
        "--header",
        "Authorization: Bearer abcdefghijkl",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(env.user_settings()).unwrap()).unwrap();
    assert_eq!(file["theme"], "dark");
    assert_eq!(file["mcpServers"]["other"]["x-extra"], 1);
    assert_eq!(file["mcpServers"]["demo2"]["command"], exe);
    assert_eq!(
        file["mcpServers"]["demo2"]["args"],
        serde_json::json!(["demo-server"])
    );
    assert_eq!(file["mcpServers"]["demo2"]["timeout"], 5000);
    assert_eq!(
        file["mcpServers"]["remote"]["httpUrl"],
        "https://example.invalid/mcp"
    );

    let out = env.run(&["mcp", "get", "remote"]);
    assert!(out.status.success());
    assert!(
        !stdout(&out).contains("abcdefghijkl"),
        "secret leaked: {}",
        stdout(&out)
    );
    let out = env.run(&["mcp", "get", "demo2", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_ne!(v["env"]["API_TOKEN"], "supersecretvalue");
    assert!(
        v["environmentPassed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "API_TOKEN")
    );
    assert_eq!(v["timeoutMs"], 5000);

    let out = env.run(&["mcp", "call", "demo2", "echo", "message=x"]);
    assert!(out.status.success(), "{}", stderr(&out));

    assert!(
        env.run(&["mcp", "disable", "demo2", "--scope", "user"])
            .status
            .success()
    );
    let out = env.run(&["mcp", "list", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let d = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "demo2")
        .unwrap()
        .clone();
    assert_eq!(d["status"], "disabled");
    let out = env.run(&["mcp", "call", "demo2", "echo", "message=x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is disabled"));
    assert!(
        env.run(&["mcp", "enable", "demo2", "--scope", "user"])
            .status
            .success()
    );
    assert!(
        env.run(&["mcp", "call", "demo2", "echo", "message=x"])
            .status
            .success()
    );

    assert!(
        env.run(&["mcp", "remove", "demo2", "--scope", "user"])
            .status
            .success()
    );
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(env.user_settings()).unwrap()).unwrap();
    assert!(file["mcpServers"].get("demo2").is_none());
    assert_eq!(file["mcpServers"]["other"]["x-extra"], 1);
    let out = env.run(&["mcp", "remove", "demo2", "--scope", "user"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn project_settings_need_a_trusted_folder() {
    let env = Env::new();
    let exe = env!("CARGO_BIN_EXE_switchboard");
    write(
        &env.project_settings(),
        &serde_json::json!({"mcpServers": {"proj": {"command": exe, "args": ["demo-server"]}}})
            .to_string(),
    );
    let out = env.run(&["mcp", "list", "--json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v["servers"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["ignoredProjectSettings"]["servers"][0], "proj");
    assert!(
        stderr(&out).contains("switchboard trust"),
        "{}",
        stderr(&out)
    );

    let out = env.run(&["trust"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["mcp", "list", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["servers"][0]["status"], "connected");
    assert!(v.get("ignoredProjectSettings").is_none(), "{v}");
    let out = env.run(&["trust", "--list"]);
    assert!(
        stdout(&out).contains(
            &std::fs::canonicalize(env.project.path())
                .unwrap()
                .display()
                .to_string()
        )
    );
}

#[test]
fn a_broken_entry_takes_down_only_itself() {
    let env = Env::new();
    let exe = env!("CARGO_BIN_EXE_switchboard");
    write(
        &env.user_settings(),
        &serde_json::json!({"mcpServers": {
            "good": {"command": exe, "args": ["demo-server"]},
            "both": {"command": "x", "url": "http://127.0.0.1:9/"},
            "unset": {"command": exe, "args": ["${SWITCHBOARD_TEST_SURELY_UNSET}"]},
            "missing": {"command": "switchboard-no-such-command"},
            "typo": {"command": exe, "args": ["demo-server"], "timout": 5}
        }})
        .to_string(),
    );
    let out = env.run(&["mcp", "list", "--json"]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("did you mean `timeout`?"),
        "{}",
        stderr(&out)
    );
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let by = |n: &str| {
        v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by("good")["status"], "connected");
    assert_eq!(by("typo")["status"], "connected");
    assert_eq!(by("both")["status"], "disconnected");
    assert!(
        by("both")["error"]
            .as_str()
            .unwrap()
            .contains("remove `url`")
    );
    assert!(
        by("unset")["error"]
            .as_str()
            .unwrap()
            .contains("SWITCHBOARD_TEST_SURELY_UNSET")
    );
    assert!(
        by("missing")["error"]
            .as_str()
            .unwrap()
            .contains("was not found")
    );
    insta::assert_snapshot!("broken_entries_human", {
        let human = stdout(&env.run(&["mcp", "list"]));
        human
            .replace(exe, "<switchboard>")
            .replace(&env.user_settings().display().to_string(), "<settings>")
    });
}

#[test]
fn invalid_json_names_file_line_and_column() {
    let env = Env::new();
    write(
        &env.user_settings(),
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",,}\n  }\n}\n",
    );
    let out = env.run(&["mcp", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&env.user_settings().display().to_string()),
        "{err}"
    );
    assert!(err.contains("line 3"), "{err}");
}
