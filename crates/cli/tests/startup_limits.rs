//! A server's `timeout` bounds its start-up too (the limit for every request,
//! `initialize` included, as in Gemini CLI), and `mcp list`, which a person waits on,
//! gives a server at most 10 s unless its settings set `startupTimeout`, then names the
//! servers it gave up on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

use serde_json::{Value, json};

fn list(servers: Value, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        serde_json::to_vec_pretty(&json!({ "mcpServers": servers })).unwrap(),
    )
    .unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["mcp", "list"])
        .args(args)
        .env("SWITCHBOARD_HOME", home.path())
        .env_remove("SWITCHBOARD_LOG")
        .current_dir(home.path())
        .output()
        .unwrap()
}

fn hang(extra: Value) -> Value {
    let (command, args) = switchboard_testkit::bad_peer("hang_init");
    let mut entry = json!({ "command": command, "args": args });
    for (k, v) in extra.as_object().unwrap() {
        entry[k] = v.clone();
    }
    entry
}

fn gave_up_ms(doc: &Value, name: &str) -> Option<u64> {
    doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no server {name} in {doc}"))["gaveUpAfterMs"]
        .as_u64()
}

#[test]
fn start_up_waits_for_the_smaller_of_timeout_and_startup_timeout_and_list_caps_it() {
    let out = list(
        json!({
            // `timeout` (3 s) is smaller than the default start-up timeout (30 s).
            "short": hang(json!({"timeout": 3000})),
            // Nothing set: `mcp list` caps the default 30 s at 10 s.
            "plain": hang(json!({})),
            // Set explicitly: respected even by `mcp list`.
            "patient": hang(json!({"startupTimeout": 12000})),
        }),
        &["--json"],
    );
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(gave_up_ms(&doc, "short"), Some(3000), "{doc}");
    assert_eq!(gave_up_ms(&doc, "plain"), Some(10_000), "{doc}");
    assert_eq!(gave_up_ms(&doc, "patient"), Some(12_000), "{doc}");
}

#[test]
fn list_names_the_servers_it_gave_up_on() {
    let out = list(json!({"stuck": hang(json!({"timeout": 1500}))}), &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Gave up waiting for stuck (after 1.5 s)") && text.contains("startupTimeout"),
        "{text}"
    );
}
