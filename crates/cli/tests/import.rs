//! `switchboard mcp import` with the real binary and fixture files written from each
//! host's public documentation (`tests/fixtures/import/`), placed at the host's usual
//! path under a temporary HOME.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common;
use common::{Env, stderr, stdout};

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name);
    std::fs::read_to_string(&p).unwrap()
}

/// Puts fixture `name` at `rel` under the test's HOME.
fn home_file(env: &Env, rel: &str, name: &str) -> PathBuf {
    let p = env.home.path().join(rel);
    write(&p, &fixture(name));
    p
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn imported<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["imported"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} not imported: {v:#}"))
}

fn warnings(v: &Value, name: &str) -> String {
    imported(v, name)["warnings"].to_string()
}

#[test]
fn claude_desktop_on_linux_escapes_literal_dollars_and_warns_on_literal_secrets() {
    let env = Env::new();
    home_file(
        &env,
        ".config/Claude/claude_desktop_config.json",
        "claude_desktop_config.json",
    );
    let v = env.json(&["mcp", "import", "--from", "claude-desktop", "--json"]);
    assert_eq!(v["written"], true);
    let s = env.settings();
    assert_eq!(
        s["mcpServers"]["filesystem"],
        json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", "/Users/me/Downloads"]})
    );
    // Claude Desktop expands nothing: a `$` stays a `$` once Switchboard expands it.
    assert_eq!(s["mcpServers"]["github"]["env"]["PRICE"], "5$$");
    assert_eq!(
        s["mcpServers"]["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "ghp_exampletoken1234"
    );
    assert!(s.get("globalShortcut").is_none());
    let w = warnings(&v, "github");
    assert!(
        w.contains("env.GITHUB_PERSONAL_ACCESS_TOKEN holds a secret"),
        "{w}"
    );
    // Shown masked, written exactly.
    assert_eq!(
        imported(&v, "github")["entry"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "gh****"
    );
    let get = env.run(&["mcp", "get", "github"]);
    assert!(get.status.success(), "{}", stderr(&get));
    assert!(
        stdout(&get).contains("\"PRICE\":\"5$\""),
        "{}",
        stdout(&get)
    );
}

#[test]
fn claude_desktop_on_macos_path_is_found() {
    let env = Env::new();
    home_file(
        &env,
        "Library/Application Support/Claude/claude_desktop_config.json",
        "claude_desktop_config.json",
    );
    let v = env.json(&[
        "mcp",
        "import",
        "--from",
        "claude-desktop",
        "--json",
        "--dry-run",
    ]);
    assert_eq!(v["imported"].as_array().unwrap().len(), 2);
}

#[test]
fn claude_code_imports_user_and_this_projects_entries_and_mcp_json_only_into_the_project() {
    let env = Env::new();
    let project = std::fs::canonicalize(env.project.path()).unwrap();
    write(
        &env.home.path().join(".claude.json"),
        &fixture("claude.json").replace("@PROJECT@", &project.display().to_string()),
    );
    write(
        &env.project.path().join(".mcp.json"),
        &fixture("dot-mcp.json"),
    );
    // User scope: the user's own ~/.claude.json (its entries and this folder's), never
    // the folder's own .mcp.json, which came with the folder.
    let v = env.json(&["mcp", "import", "--from", "claude-code", "--json"]);
    let s = &env.settings()["mcpServers"];
    assert_eq!(
        s["sentry"],
        json!({"httpUrl": "https://mcp.sentry.dev/mcp", "headers": {"Authorization": "Bearer ${SENTRY_TOKEN}"}})
    );
    assert_eq!(
        s["airtable"]["env"]["AIRTABLE_API_KEY"],
        "${AIRTABLE_API_KEY}"
    );
    assert_eq!(
        s["local-db"]["args"][3],
        "${DB_URL:-postgres://localhost/dev}"
    );
    assert!(s.get("api-server").is_none());
    assert!(s.get("linear").is_none());
    let notes = v["notes"].to_string();
    assert!(notes.contains("/home/someone/other-project (1)"), "{v:#}");
    assert!(
        notes.contains(".mcp.json is this folder's own file"),
        "{v:#}"
    );
    // References are never reported as written-out secrets.
    assert_eq!(warnings(&v, "sentry"), "[]");

    // Project scope: .mcp.json too, into the project file (which needs `trust`).
    let out = env.run(&[
        "mcp",
        "import",
        "--from",
        "claude-code",
        "--scope",
        "project",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("switchboard trust"),
        "{}",
        stdout(&out)
    );
    let p: Value = serde_json::from_str(
        &std::fs::read_to_string(env.project.path().join(".switchboard/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        p["mcpServers"]["api-server"],
        json!({"url": "${API_BASE_URL:-https://api.example.com}/sse", "type": "sse", "headers": {"X-API-Key": "${API_KEY}"}})
    );
    assert!(p["mcpServers"]["sentry"].is_object());
}

#[test]
fn vscode_inputs_become_variables_with_a_warning_naming_the_input() {
    let env = Env::new();
    write(
        &env.project.path().join(".vscode/mcp.json"),
        &fixture("vscode-mcp.json"),
    );
    let v = env.json(&[
        "mcp", "import", "--from", "vscode", "--scope", "project", "--json",
    ]);
    let p: Value = serde_json::from_str(
        &std::fs::read_to_string(env.project.path().join(".switchboard/settings.json")).unwrap(),
    )
    .unwrap();
    let s = &p["mcpServers"];
    assert_eq!(
        s["perplexity"]["env"]["PERPLEXITY_API_KEY"],
        "${PERPLEXITY_KEY}"
    );
    let w = warnings(&v, "perplexity");
    assert!(w.contains("${input:perplexity-key}"), "{w}");
    assert!(w.contains("Perplexity API Key"), "{w}");
    assert!(w.contains("set PERPLEXITY_KEY in the environment"), "{w}");
    assert!(w.contains("`envFile`"), "{w}");
    assert_eq!(
        s["github"],
        json!({"httpUrl": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}})
    );
    assert!(warnings(&v, "fetch").contains("`dev` has no equivalent"));
    assert!(s["fetch"].get("dev").is_none());
}

#[test]
fn a_folders_own_files_never_reach_the_user_settings_by_default() {
    let env = Env::new();
    write(
        &env.project.path().join(".vscode/mcp.json"),
        &fixture("vscode-mcp.json"),
    );
    write(
        &env.project.path().join(".mcp.json"),
        &fixture("dot-mcp.json"),
    );
    let out = env.run(&["mcp", "import"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(".vscode/mcp.json is this folder's own file"),
        "{text}"
    );
    assert!(
        text.contains("No other host's MCP settings found"),
        "{text}"
    );
    let out = env.run(&["mcp", "import", "--from", "vscode"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Nothing to import"),
        "{}",
        stdout(&out)
    );
    assert!(!env.user_settings().exists());
}

#[test]
fn vscode_user_profile_path_is_found() {
    let env = Env::new();
    home_file(&env, ".config/Code/User/mcp.json", "vscode-mcp.json");
    let v = env.json(&["mcp", "import", "--from", "vscode", "--json", "--dry-run"]);
    assert_eq!(v["imported"].as_array().unwrap().len(), 3);
}

#[test]
fn cursor_env_references_and_remote_url() {
    let env = Env::new();
    home_file(&env, ".cursor/mcp.json", "cursor-mcp.json");
    env.json(&["mcp", "import", "--from", "cursor", "--json"]);
    let s = &env.settings()["mcpServers"];
    assert_eq!(s["server-name"]["env"]["API_KEY"], "${MY_API_KEY}");
    assert_eq!(
        s["remote"],
        json!({"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${MY_SERVICE_TOKEN}"}})
    );
}

#[test]
fn codex_timeouts_bearer_token_env_vars_and_enabled() {
    let env = Env::new();
    home_file(&env, ".codex/config.toml", "codex-config.toml");
    let v = env.json(&["mcp", "import", "--from", "codex", "--json"]);
    let s = &env.settings()["mcpServers"];
    assert_eq!(
        s["context7"],
        json!({"command": "npx", "args": ["-y", "@upstash/context7-mcp"],
               "env": {"MY_ENV_VAR": "MY_ENV_VALUE", "HTTPS_PROXY": "${HTTPS_PROXY}"},
               "timeout": 60500, "startupTimeout": 20000})
    );
    assert_eq!(
        s["figma"],
        json!({"httpUrl": "https://mcp.figma.com/mcp",
               "headers": {"X-Figma-Region": "us-east-1", "Authorization": "Bearer ${FIGMA_OAUTH_TOKEN}"},
               "includeTools": ["get_file"]})
    );
    assert_eq!(s["old"], json!({"command": "old-server", "disabled": true}));
    assert_eq!(warnings(&v, "figma"), "[]");
}

#[test]
fn codex_home_is_honoured() {
    let env = Env::new();
    let codex = env.home.path().join("elsewhere");
    write(&codex.join("config.toml"), &fixture("codex-config.toml"));
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["mcp", "import", "--from", "codex", "--dry-run", "--json"])
        .env("HOME", env.home.path())
        .env("SWITCHBOARD_HOME", env.sb.path())
        .env("CODEX_HOME", &codex)
        .current_dir(env.project.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["imported"].as_array().unwrap().len(), 3);
}

#[test]
fn gemini_entries_are_kept_verbatim_with_their_references() {
    let env = Env::new();
    home_file(&env, ".gemini/settings.json", "gemini-settings.json");
    let v = env.json(&["mcp", "import", "--from", "gemini", "--json"]);
    assert!(
        warnings(&v, "httpServerWithAuth").contains("headers.Authorization holds a secret"),
        "{v:#}"
    );
    assert_eq!(warnings(&v, "pythonTools"), "[]");
    let s = &env.settings()["mcpServers"];
    let src: Value = serde_json::from_str(&fixture("gemini-settings.json")).unwrap();
    assert_eq!(s["pythonTools"], src["mcpServers"]["pythonTools"]);
    assert_eq!(
        s["pythonTools"]["env"]["DATABASE_URL"],
        "$DB_CONNECTION_STRING"
    );
    assert_eq!(
        s["httpServerWithAuth"],
        src["mcpServers"]["httpServerWithAuth"]
    );
}

#[test]
fn windsurf_server_url_and_disabled_tools() {
    let env = Env::new();
    home_file(
        &env,
        ".codeium/windsurf/mcp_config.json",
        "windsurf-mcp_config.json",
    );
    env.json(&["mcp", "import", "--from", "windsurf", "--json"]);
    let s = &env.settings()["mcpServers"];
    assert_eq!(
        s["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${GITHUB_TOKEN}"
    );
    assert_eq!(
        s["figma"],
        json!({"url": "https://example.com/sse", "headers": {"Authorization": "Bearer ${AUTH_TOKEN}"},
               "excludeTools": ["delete_file"]})
    );
}

#[test]
fn dry_run_shows_the_entries_and_writes_nothing() {
    let env = Env::new();
    home_file(&env, ".codex/config.toml", "codex-config.toml");
    // No settings file: none is created.
    let out = env.run(&["mcp", "import", "--from", "codex", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(r#"+ figma: {"httpUrl":"https://mcp.figma.com/mcp","headers":{"X-Figma-Region":"us-east-1","Authorization":"Bearer ${FIGMA_OAUTH_TOKEN}"},"includeTools":["get_file"]}"#),
        "{text}"
    );
    assert!(text.contains("Dry run: would add 3 servers"), "{text}");
    assert!(!env.user_settings().exists());
    // An existing file stays byte for byte.
    let before = "{\n  // mine\n  \"theme\": \"dark\"\n}\n";
    write(&env.user_settings(), before);
    let v = env.json(&["mcp", "import", "--from", "codex", "--dry-run", "--json"]);
    assert_eq!(v["written"], false);
    assert_eq!(v["imported"].as_array().unwrap().len(), 3);
    assert_eq!(
        std::fs::read_to_string(env.user_settings()).unwrap(),
        before
    );
}

#[test]
fn an_existing_name_is_a_conflict_and_is_never_overwritten() {
    let env = Env::new();
    home_file(&env, ".cursor/mcp.json", "cursor-mcp.json");
    write(
        &env.user_settings(),
        r#"{"theme": "dark", "mcpServers": {"remote": {"command": "mine"}}}"#,
    );
    let v = env.json(&["mcp", "import", "--from", "cursor", "--json"]);
    assert_eq!(v["conflicts"][0]["name"], "remote");
    let s = env.settings();
    assert_eq!(s["mcpServers"]["remote"], json!({"command": "mine"}));
    assert_eq!(s["theme"], "dark");
    assert!(s["mcpServers"]["server-name"].is_object());
    let out = env.run(&["mcp", "import", "--from", "cursor"]);
    let text = stdout(&out);
    assert!(text.contains("! remote: conflict"), "{text}");
    assert!(text.contains("! server-name: conflict"), "{text}");
    assert!(text.contains("Nothing to import"), "{text}");
}

#[test]
fn without_from_it_lists_and_imports_only_a_clear_choice() {
    let env = Env::new();
    let out = env.run(&["mcp", "import"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("No other host's MCP settings found"));

    home_file(&env, ".codex/config.toml", "codex-config.toml");
    home_file(&env, ".cursor/mcp.json", "cursor-mcp.json");
    let out = env.run(&["mcp", "import"]);
    let text = stdout(&out);
    assert!(
        text.contains("cursor") && text.contains("(2 servers)"),
        "{text}"
    );
    assert!(
        text.contains("codex") && text.contains("(3 servers)"),
        "{text}"
    );
    assert!(text.contains("Nothing imported"), "{text}");
    assert!(!env.user_settings().exists());

    std::fs::remove_file(env.home.path().join(".cursor/mcp.json")).unwrap();
    let out = env.run(&["mcp", "import"]);
    assert!(stdout(&out).contains("Only Codex has MCP servers here"));
    assert!(env.settings()["mcpServers"]["context7"].is_object());
}

#[test]
fn from_a_file_and_into_the_project_scope() {
    let env = Env::new();
    let file = env.home.path().join("exported.json");
    write(&file, &fixture("dot-mcp.json"));
    let out = env.run(&[
        "mcp",
        "import",
        "--from",
        file.to_str().unwrap(),
        "--scope",
        "project",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("switchboard trust"));
    let p = env.project.path().join(".switchboard/settings.json");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    assert_eq!(s["mcpServers"]["api-server"]["type"], "sse");
    let out = env.run(&["mcp", "import", "--from", "nowhere.json"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("neither a host"), "{}", stderr(&out));
}

#[test]
fn imported_claude_desktop_servers_appear_in_mcp_list() {
    let env = Env::new();
    let exe = env!("CARGO_BIN_EXE_switchboard");
    write(
        &env.home.path().join(".config/Claude/claude_desktop_config.json"),
        &json!({"mcpServers": {"demo-a": {"command": exe, "args": ["demo-server"]},
                                "demo-b": {"command": exe, "args": ["demo-server"], "env": {"X": "1"}}}})
        .to_string(),
    );
    let out = env.run(&["mcp", "import", "--from", "claude-desktop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = env.json(&["mcp", "list", "--json"]);
    let servers = v["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "{v:#}");
    for s in servers {
        assert_eq!(s["status"], "connected", "{s:#}");
        assert!(s["tools"].to_string().contains("echo"), "{s:#}");
    }
}

#[test]
fn the_same_name_in_two_files_of_one_import_is_a_conflict_too() {
    let env = Env::new();
    home_file(&env, ".cursor/mcp.json", "cursor-mcp.json");
    write(
        &env.project.path().join(".cursor/mcp.json"),
        r#"{"mcpServers": {"remote": {"url": "https://other.example/mcp"}}}"#,
    );
    let v = env.json(&[
        "mcp", "import", "--from", "cursor", "--scope", "project", "--json",
    ]);
    assert_eq!(v["conflicts"][0]["name"], "remote", "{v:#}");
    assert!(
        v["conflicts"][0]["existsIn"]
            .as_str()
            .unwrap()
            .ends_with(".cursor/mcp.json (imported just before)"),
        "{v:#}"
    );
    let p: Value = serde_json::from_str(
        &std::fs::read_to_string(env.project.path().join(".switchboard/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(p["mcpServers"]["remote"]["url"], "https://example.com/mcp");
}

/// The project settings file's servers (`Null` when there is no file).
fn project_servers(env: &Env) -> Value {
    let p = env.project.path().join(".switchboard/settings.json");
    match std::fs::read_to_string(p) {
        Ok(text) => serde_json::from_str::<Value>(&text).unwrap()["mcpServers"].clone(),
        Err(_) => Value::Null,
    }
}

/// A folder's own file named by its path goes only into the project scope, whatever
/// the path looks like: relative, absolute, through `..`, through a symlink from
/// outside the folder, any file under the folder, another folder's `.mcp.json`. An
/// explicit `--scope user` is refused and says why and what to do; with no `--scope`
/// it goes into the project's settings. The user's own files (under HOME, outside the
/// folder) still go into the user scope.
#[test]
fn a_folders_own_file_named_by_path_goes_only_into_the_project_scope() {
    let env = Env::new();
    let project = env.project.path();
    write(&project.join(".mcp.json"), &fixture("dot-mcp.json"));
    write(&project.join("sub/servers.json"), &fixture("dot-mcp.json"));
    let outside = env.home.path().join("linked.json");
    std::os::unix::fs::symlink(project.join(".mcp.json"), &outside).unwrap();
    let other = tempfile::tempdir().unwrap();
    write(
        &other.path().join(".cursor/mcp.json"),
        &fixture("dot-mcp.json"),
    );
    let abs = project.join(".mcp.json");
    let named = [
        "./.mcp.json".to_owned(),
        ".mcp.json".to_owned(),
        abs.display().to_string(),
        "./sub/../.mcp.json".to_owned(),
        "sub/servers.json".to_owned(),
        outside.display().to_string(),
        other.path().join(".cursor/mcp.json").display().to_string(),
    ];
    for from in &named {
        let out = env.run(&["mcp", "import", "--from", from, "--scope", "user"]);
        assert!(!out.status.success(), "{from}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains("folder's own file"), "{from}: {err}");
        assert!(err.contains("--scope project"), "{from}: {err}");
        assert!(err.contains("switchboard trust"), "{from}: {err}");
        assert!(
            !env.user_settings().exists(),
            "{from} reached the user settings"
        );
        // With no --scope: into the project's settings, never the user's.
        let out = env.run(&["mcp", "import", "--from", from, "--json"]);
        assert!(out.status.success(), "{from}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v["target"]
                .as_str()
                .unwrap()
                .ends_with(".switchboard/settings.json"),
            "{from}: {v:#}"
        );
        assert!(
            project_servers(&env)["api-server"].is_object(),
            "{from}: {v:#}"
        );
        assert!(
            !env.user_settings().exists(),
            "{from} reached the user settings"
        );
        std::fs::remove_file(project.join(".switchboard/settings.json")).unwrap();
    }
    // The user's own files stay importable into the user scope, by path too.
    let mine = home_file(&env, ".cursor/mcp.json", "cursor-mcp.json");
    let exported = env.home.path().join("exported.json");
    write(&exported, &fixture("dot-mcp.json"));
    for from in [&mine, &exported] {
        let out = env.run(&[
            "mcp",
            "import",
            "--from",
            from.to_str().unwrap(),
            "--scope",
            "user",
        ]);
        assert!(out.status.success(), "{}: {}", from.display(), stderr(&out));
    }
    let s = env.settings();
    assert!(s["mcpServers"]["remote"].is_object(), "{s:#}");
    assert!(s["mcpServers"]["api-server"].is_object(), "{s:#}");
    assert_eq!(project_servers(&env), Value::Null);
}
