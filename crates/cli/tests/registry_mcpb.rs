//! `switchboard mcp add NAME --from-registry ID` of an mcpb package, with the real binary
//! against the local registry (switchboard-testkit), which serves a bundle built here: a
//! zip with a `manifest.json` (the MCPB format: `server.type`, `mcp_config` with
//! `${__dirname}` and `${user_config.KEY}`) and a small stdio MCP server for Node.
//! The bundle's SHA-256 is computed here and put in the `server.json`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::io::{Cursor, Write};

use serde_json::json;
use sha2::{Digest, Sha256};
use switchboard_testkit::{RegistryServer, registry_fixture};
use zip::write::SimpleFileOptions;

use crate::common;
use common::{Env, stderr, stdout};

/// A stdio MCP server (newline-delimited JSON-RPC) that needs nothing but Node.
const SERVER_JS: &str = r#"
const readline = require("readline");
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.id === undefined) return;
  const ok = (result) => send({ jsonrpc: "2.0", id: msg.id, result });
  if (msg.method === "initialize") {
    ok({ protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} },
         serverInfo: { name: "bundled", version: "1.0.0" } });
  } else if (msg.method === "tools/list") {
    ok({ tools: [{ name: "greet", description: "Greets someone",
      inputSchema: { type: "object", properties: { who: { type: "string" } } } }] });
  } else if (msg.method === "tools/call") {
    const where = require("path").basename(require("path").dirname(__dirname));
    ok({ content: [{ type: "text",
      text: `${process.env.GREETING} ${msg.params.arguments.who} from ${where}` }] });
  } else if (msg.method === "ping") {
    ok({});
  } else {
    send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "unknown method" } });
  }
});
"#;

const MANIFEST: &str = r#"{
  "manifest_version": "0.3",
  "name": "hello-bundle",
  "version": "1.0.0",
  "description": "Greets",
  "author": {"name": "Switchboard tests"},
  "server": {
    "type": "node",
    "entry_point": "server/index.js",
    "mcp_config": {
      "command": "node",
      "args": ["${__dirname}/server/index.js"],
      "env": {"GREETING": "${user_config.greeting}"}
    }
  },
  "user_config": {
    "greeting": {"type": "string", "title": "Greeting", "description": "How to greet", "required": true}
  }
}"#;

fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in files {
        w.start_file(*name, opts).unwrap();
        w.write_all(body).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// A registry listing `io.example/hello-bundle` as an mcpb package served at
/// `/bundles/hello.mcpb` with `bytes`, and `sha` as its `fileSha256` (the real one
/// when `None`).
fn registry_with(bytes: Vec<u8>, sha: Option<&str>) -> RegistryServer {
    let sha = sha
        .map(str::to_string)
        .unwrap_or_else(|| hex::encode(Sha256::digest(&bytes)));
    let mut server = registry_fixture("text-editor-mcpb.json");
    server["name"] = json!("io.example/hello-bundle");
    server["packages"][0]["fileSha256"] = json!(sha);
    server["packages"][0]["identifier"] = json!("/bundles/hello.mcpb");
    RegistryServer::with_bundles(
        vec![(server, "active".into())],
        vec![("hello.mcpb".into(), bytes)],
    )
}

fn add(env: &Env, reg: &RegistryServer, name: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "mcp",
        "add",
        name,
        "--from-registry",
        "io.example/hello-bundle",
        "--registry",
        &reg.url,
        "--scope",
        "user",
    ];
    args.extend_from_slice(extra);
    env.run(&args)
}

fn good_bundle() -> Vec<u8> {
    zip_of(&[
        ("manifest.json", MANIFEST.as_bytes()),
        ("server/index.js", SERVER_JS.as_bytes()),
    ])
}

/// Nothing under `$SWITCHBOARD_HOME` but what was there: no settings, no bundle.
fn nothing_written(env: &Env) {
    assert!(!env.sb.path().join("settings.json").exists());
    let bundles = env.sb.path().join("bundles");
    let left: Vec<_> = std::fs::read_dir(&bundles)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    assert!(!env.sb.path().join("evil").exists());
}

#[test]
fn a_bundle_is_installed_listed_and_called() {
    let bytes = good_bundle();
    let sha = hex::encode(Sha256::digest(&bytes));
    let reg = registry_with(bytes, None);
    let env = Env::new();
    let out = add(&env, &reg, "hello", &["--env", "greeting=hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = env
        .sb
        .path()
        .join("bundles")
        .join(format!("hello-{}", &sha[..12]));
    assert!(dir.join("server/index.js").is_file());
    let entry = env.settings()["mcpServers"]["hello"].clone();
    assert_eq!(entry["command"], "node", "{entry}");
    assert_eq!(
        entry["args"],
        json!([format!("{}/server/index.js", dir.display())])
    );
    assert_eq!(entry["env"], json!({"GREETING": "hi"}));

    let list = env.json(&["mcp", "list", "--json"]);
    let hello = list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "hello")
        .cloned()
        .unwrap();
    assert_eq!(hello["status"], "connected", "{hello}");

    let out = env.run(&["mcp", "call", "hello", "greet", "who=you"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // The server ran from the unpacked bundle (`${__dirname}` filled in).
    assert!(
        text.contains(&format!("hi you from hello-{}", &sha[..12])),
        "{text}"
    );

    // A second server running from the same bundle keeps it when the first goes; the
    // last one's removal deletes the unpacked files.
    let mut settings = env.settings();
    settings["mcpServers"]["hello2"] = entry.clone();
    std::fs::write(env.user_settings(), settings.to_string()).unwrap();
    let out = env.run(&["mcp", "remove", "hello", "--scope", "user"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Kept the bundle"), "{}", stdout(&out));
    assert!(dir.join("server/index.js").is_file());
    let out = env.run(&["mcp", "remove", "hello2", "--scope", "user"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Deleted the bundle's files"),
        "{}",
        stdout(&out)
    );
    assert!(!dir.exists());
    assert!(
        env.sb.path().join("bundles").is_dir(),
        "only the one bundle goes"
    );
}

/// A settings entry whose path only pretends to be inside a bundle (`..`) deletes
/// nothing when it is removed.
#[test]
fn removing_an_entry_with_a_path_out_of_bundles_deletes_nothing() {
    let env = Env::new();
    let victim = env.sb.path().join("keep-me");
    std::fs::create_dir_all(&victim).unwrap();
    let sneaky = env
        .sb
        .path()
        .join("bundles")
        .join("..")
        .join("keep-me")
        .join("x.js");
    std::fs::write(
        env.user_settings(),
        json!({"mcpServers": {"sneaky": {"command": "node", "args": [sneaky]}}}).to_string(),
    )
    .unwrap();
    let out = env.run(&["mcp", "remove", "sneaky", "--scope", "user"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains("bundle"), "{}", stdout(&out));
    assert!(victim.is_dir());
}

#[test]
fn a_required_user_config_value_is_named_when_missing() {
    let reg = registry_with(good_bundle(), None);
    let env = Env::new();
    let out = add(&env, &reg, "hello", &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("greeting (Greeting)") && err.contains("--env"),
        "{err}"
    );
    assert!(!env.sb.path().join("settings.json").exists());
}

#[test]
fn a_wrong_sha256_is_refused_with_nothing_written() {
    let reg = registry_with(good_bundle(), Some(&"ab".repeat(32)));
    let env = Env::new();
    let out = add(&env, &reg, "hello", &["--env", "greeting=hi"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("not the registry's abab"), "{err}");
    nothing_written(&env);
}

#[test]
fn unsafe_bundles_are_refused_with_nothing_written() {
    let mut symlink = zip::ZipWriter::new(Cursor::new(Vec::new()));
    symlink
        .start_file("manifest.json", SimpleFileOptions::default())
        .unwrap();
    symlink.write_all(MANIFEST.as_bytes()).unwrap();
    symlink
        .add_symlink(
            "server/index.js",
            "/etc/passwd",
            SimpleFileOptions::default(),
        )
        .unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            zip_of(&[("manifest.json", MANIFEST.as_bytes()), ("../evil", b"x")]),
            "climbs out of the bundle",
        ),
        (
            zip_of(&[("manifest.json", MANIFEST.as_bytes()), ("/tmp/evil", b"x")]),
            "is an absolute path",
        ),
        (symlink.finish().unwrap().into_inner(), "is a symbolic link"),
    ];
    for (bytes, why) in cases {
        let reg = registry_with(bytes, None);
        let env = Env::new();
        let out = add(&env, &reg, "hello", &["--env", "greeting=hi"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(why), "{why}: {err}");
        nothing_written(&env);
    }
}

#[test]
fn a_bundle_larger_than_the_download_cap_is_refused() {
    // A zip is read from its end, so padding in front of a valid archive keeps it
    // valid; the download stops at the cap before any of it is used.
    let mut bytes = vec![0u8; switchboard_registry::MAX_BUNDLE + 1];
    bytes.extend(good_bundle());
    let reg = registry_with(bytes, None);
    let env = Env::new();
    let out = add(&env, &reg, "hello", &["--env", "greeting=hi"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("larger than 64 MiB"), "{err}");
    nothing_written(&env);
}

/// Finding 2 of #26: a `user_config` default of `${SECRET_GREETING}` was written as
/// given, so the server started from the installed entry received the secret through
/// `${user_config.greeting}`. The bundle is built here; the real binary installs and
/// starts it with the secret in its environment, and the server (which reports the
/// value it got) receives the text, not the secret.
#[test]
fn a_bundle_default_never_reads_your_environment() {
    const SECRET: &str = "leaked-secret-4711";
    let manifest = MANIFEST.replace(
        r#""greeting": {"type": "string", "title": "Greeting", "description": "How to greet", "required": true}"#,
        r#""greeting": {"type": "string", "title": "Greeting", "default": "${SECRET_GREETING}"}"#,
    );
    assert_ne!(manifest, MANIFEST);
    let bytes = zip_of(&[
        ("manifest.json", manifest.as_bytes()),
        ("server/index.js", SERVER_JS.as_bytes()),
    ]);
    let reg = registry_with(bytes, None);
    let env = Env::new();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(args)
            .env("HOME", env.home.path())
            .env("SWITCHBOARD_HOME", env.sb.path())
            .env("SECRET_GREETING", SECRET)
            .env_remove("SWITCHBOARD_LOG")
            .current_dir(env.project.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[
        "mcp",
        "add",
        "hello",
        "--from-registry",
        "io.example/hello-bundle",
        "--registry",
        &reg.url,
        "--scope",
        "user",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let entry = env.settings()["mcpServers"]["hello"].clone();
    assert_eq!(entry["env"], json!({"GREETING": "$${SECRET_GREETING}"}));
    let out = run(&["mcp", "call", "hello", "greet", "who=you"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        !text.contains(SECRET),
        "the server received the secret: {text}"
    );
    assert!(text.contains("${SECRET_GREETING} you from"), "{text}");
}
