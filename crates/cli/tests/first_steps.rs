//! A new user's first steps with the real binary (issue 30): `mcp add` in an ordinary
//! (untrusted) folder writes where the server applies and says where; the servers of an
//! untrusted project file are listed as ignored, not as "none configured"; the bundled
//! demo server stays reachable as `demo` (and out of lists) once servers are
//! configured; an error's cause is printed once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

use crate::common;
use common::{Env, stderr, stdout};

const EXE: &str = env!("CARGO_BIN_EXE_switchboard");

fn project_settings(env: &Env) -> std::path::PathBuf {
    env.project
        .path()
        .join(".switchboard")
        .join("settings.json")
}

/// The names in `mcp list --json`'s `servers` array.
fn listed(v: &Value) -> Vec<String> {
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn add_in_an_untrusted_folder_writes_the_user_file_and_the_server_shows_up() {
    let env = Env::new();
    let out = env.run(&["mcp", "add", "mine", EXE, "--", "demo-server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("(user scope)"), "{said}");
    assert!(
        said.contains(&env.user_settings().display().to_string()),
        "{said}"
    );
    assert!(!project_settings(&env).exists(), "wrote the project file");
    assert_eq!(env.settings()["mcpServers"]["mine"]["command"], EXE);

    let v = env.json(&["mcp", "list", "--json"]);
    assert_eq!(listed(&v), ["mine"], "{v}");
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");
    assert_eq!(v["ignored"], serde_json::json!([]), "{v}");

    // Disable, enable and remove find the file that defines it without --scope.
    let out = env.run(&["mcp", "disable", "mine"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(env.settings()["mcpServers"]["mine"]["disabled"], true);
    let out = env.run(&["mcp", "enable", "mine"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["mcp", "remove", "mine"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(env.settings()["mcpServers"].get("mine").is_none());
    let out = env.run(&["mcp", "remove", "mine"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no server `mine`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn add_in_a_trusted_folder_writes_the_project_file() {
    let env = Env::new();
    assert!(env.run(&["trust"]).status.success());
    let out = env.run(&["mcp", "add", "proj", EXE, "--", "demo-server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("(project scope)"), "{}", stdout(&out));
    assert!(project_settings(&env).is_file());
    assert!(!env.user_settings().exists());
    let v = env.json(&["mcp", "list", "--json"]);
    assert_eq!(listed(&v), ["proj"], "{v}");
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");
}

#[test]
fn untrusted_project_servers_are_listed_as_ignored() {
    let env = Env::new();
    let out = env.run(&[
        "mcp",
        "add",
        "--scope",
        "project",
        "proj",
        EXE,
        "--",
        "demo-server",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("(project scope)"), "{said}");
    assert!(said.contains("not trusted"), "{said}");
    assert!(said.contains("`switchboard trust`"), "{said}");

    let out = env.run(&["mcp", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("proj — ignored: folder not trusted (`switchboard trust`)"),
        "{text}"
    );
    assert!(!text.contains("No MCP servers configured"), "{text}");

    let v = env.json(&["mcp", "list", "--json"]);
    assert!(v["servers"].as_array().unwrap().is_empty(), "{v}");
    let ignored = &v["ignored"][0];
    assert_eq!(ignored["name"], "proj", "{v}");
    assert_eq!(ignored["reason"], "folder not trusted", "{v}");
    assert!(
        ignored["fix"]
            .as_str()
            .unwrap()
            .starts_with("switchboard trust "),
        "{v}"
    );
    assert_eq!(
        ignored["file"].as_str().unwrap(),
        project_settings(&env).display().to_string()
    );

    // Beside servers that do apply, the ignored ones are still named.
    let out = env.run(&["mcp", "add", "mine", EXE, "--", "demo-server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&env.run(&["mcp", "list"]));
    assert!(text.contains("mine — connected"), "{text}");
    assert!(
        text.contains("proj — ignored: folder not trusted"),
        "{text}"
    );
}

#[test]
fn add_from_registry_uses_the_same_scope_rule() {
    let reg = switchboard_testkit::RegistryServer::start();
    let env = Env::new();
    let out = env.run(&[
        "mcp",
        "add",
        "weather",
        "--from-registry",
        "io.github.example/weather-mcp@0.5.0",
        "--registry",
        &reg.url,
        "--env",
        "WEATHER_API_KEY=k-123",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("(user scope)"), "{}", stdout(&out));
    assert!(!project_settings(&env).exists(), "wrote the project file");
    assert_eq!(env.settings()["mcpServers"]["weather"]["command"], "uvx");
}

#[test]
fn the_demo_stays_reachable_by_name_but_out_of_lists() {
    let env = Env::new();
    let out = env.run(&["mcp", "add", "mine", EXE, "--", "demo-server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = env.json(&["mcp", "list", "--json"]);
    assert_eq!(listed(&v), ["mine"], "the demo is listed: {v}");

    let out = env.run(&["mcp", "call", "demo", "echo", "message=hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Echo: hi\n");

    let tour = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/demo-tour.yaml");
    let out = env.run(&["run", tour, "--var", "name=Ada", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let vars: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(vars.is_object(), "{vars}");

    // A server the user named `demo` is theirs: the bundled one gives way (nothing
    // listens on this port, so the call fails naming the user's address).
    let addr = format!("127.0.0.1:{}", switchboard_testkit::free_port());
    let url = format!("http://{addr}/mcp");
    let out = env.run(&["mcp", "add", "demo", &url, "--timeout", "2000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["mcp", "call", "demo", "echo", "message=hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains(&addr), "{}", stderr(&out));
}

/// How many times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn an_error_cause_is_printed_once() {
    let env = Env::new();
    let missing = env.project.path().join("no-such-folder");
    let out = env.run(&["trust", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
    assert!(err.contains("no-such-folder"), "{err}");

    let url = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let out = env.run(&["mcp", "search", "x", "--registry", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("cannot reach the MCP Registry at"), "{err}");
    assert_eq!(count(&err, "error sending request"), 1, "{err}");
}
