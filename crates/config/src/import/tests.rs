use super::*;
use serde_json::json;

fn parse(host: ImportHost, name: &str, text: &str) -> ImportedFile {
    parse_import(
        host,
        Path::new(name),
        text,
        Path::new("/nonexistent-project"),
    )
    .unwrap()
}

#[test]
fn format_is_detected_from_shape_and_name() {
    let d = |name: &str, text: &str| ImportHost::detect(Path::new(name), text);
    assert_eq!(d("x/config.toml", ""), ImportHost::Codex);
    assert_eq!(d("a.json", r#"{"servers": {}}"#), ImportHost::VsCode);
    assert_eq!(
        d("settings.json", r#"{"mcp": {"servers": {}}}"#),
        ImportHost::VsCode
    );
    assert_eq!(d("a.json", r#"{"projects": {}}"#), ImportHost::ClaudeCode);
    assert_eq!(
        d("claude_desktop_config.json", "{}"),
        ImportHost::ClaudeDesktop
    );
    assert_eq!(d("mcp_config.json", "{}"), ImportHost::Windsurf);
    assert_eq!(
        d("settings.json", r#"{"mcpServers": {}}"#),
        ImportHost::Gemini
    );
    assert_eq!(
        d("exported.json", r#"{"mcpServers": {}}"#),
        ImportHost::ClaudeCode
    );
    for h in ImportHost::ALL {
        assert_eq!(ImportHost::from_id(h.id()), Some(h));
    }
}

#[test]
fn broken_entries_are_skipped_with_the_field_named_and_the_rest_imported() {
    let f = parse(
        ImportHost::Cursor,
        "mcp.json",
        r#"{"mcpServers": {
            "both": {"command": "x", "url": "https://x"},
            "none": {"env": {}},
            "badtype": {"url": "https://x", "type": "websocket"},
            "notstring": {"command": "x", "env": {"A": [1]}},
            "ftp": {"url": "ftp://x"},
            "a/b": {"command": "x"},
            "esc\u001b[2J": {"command": "x"},
            "good": {"command": "x", "env": {"N": 3}}
        }}"#,
    );
    let reasons: Vec<&str> = f.skipped.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(f.skipped.len(), 7, "{reasons:?}");
    assert!(reasons[0].contains("both a command and a URL"));
    assert!(reasons[1].contains("neither a command nor a URL"));
    assert!(reasons[2].contains("mcpServers.badtype.type"));
    assert!(reasons[3].contains("mcpServers.notstring.env.A"));
    assert!(reasons[4].contains("not an http(s):// URL"));
    assert!(reasons[5].contains("`a/b` is not a usable server name"));
    assert!(
        reasons[6].contains("`esc\\u{1b}[2J` is not a usable"),
        "{}",
        reasons[6]
    );
    assert_eq!(
        f.servers[0].entry,
        json!({"command": "x", "env": {"N": "3"}})
            .as_object()
            .cloned()
            .unwrap()
    );
}

#[test]
fn a_remote_entry_names_the_stdio_fields_it_drops() {
    let f = parse(
        ImportHost::ClaudeCode,
        ".mcp.json",
        r#"{"mcpServers": {"r": {"type": "sse", "url": "https://x/sse", "args": ["a"], "oauth": {"x": 1}}}}"#,
    );
    let w = &f.servers[0].warnings;
    assert!(w[0].contains("`oauth`, `args` have no equivalent"), "{w:?}");
}

#[test]
fn gemini_unknown_fields_are_named_and_bad_fields_skip_the_server() {
    let f = parse(
        ImportHost::Gemini,
        "settings.json",
        r#"{"mcpServers": {
            "a": {"command": "x", "extensionName": "e", "timeout": 5},
            "b": {"command": "x", "timeout": "10s"},
            "c": {"description": "nothing to start"}
        }}"#,
    );
    assert_eq!(f.servers.len(), 1);
    assert_eq!(
        f.servers[0].entry,
        json!({"command": "x", "timeout": 5})
            .as_object()
            .cloned()
            .unwrap()
    );
    assert!(f.servers[0].warnings[0].contains("`extensionName`"));
    assert!(
        f.skipped[0].reason.contains("mcpServers.b.timeout"),
        "{:?}",
        f.skipped
    );
    assert!(f.skipped[1].reason.contains("nothing to start"));
}

#[test]
fn codex_values_are_checked_and_unknown_keys_named() {
    let f = parse(
        ImportHost::Codex,
        "config.toml",
        r#"
[mcp_servers.a]
command = "x$y"
startup_timeout_ms = 1500
oauth_resource = "r"

[mcp_servers.b]
url = "https://x"
bearer_token_env_var = "not a name"

[mcp_servers.c]
command = "x"
tool_timeout_sec = -1
"#,
    );
    assert_eq!(
        f.servers[0].entry,
        json!({"command": "x$$y", "startupTimeout": 1500})
            .as_object()
            .cloned()
            .unwrap()
    );
    assert!(f.servers[0].warnings[0].contains("`oauth_resource`"));
    assert!(f.skipped[0].reason.contains("bearer_token_env_var"));
    assert!(f.skipped[1].reason.contains("tool_timeout_sec"));
    let e = parse_import(ImportHost::Codex, Path::new("c.toml"), "[x", Path::new("/")).unwrap_err();
    assert!(e.to_string().contains("invalid TOML"), "{e}");
    let e = parse_import(
        ImportHost::Codex,
        Path::new("c.toml"),
        "mcp_servers = 1",
        Path::new("/"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("expected a table"), "{e}");
}

#[test]
fn a_whole_file_of_the_wrong_shape_is_an_error() {
    let e = parse_import(
        ImportHost::Cursor,
        Path::new("m.json"),
        "[]",
        Path::new("/"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("expected a JSON object"), "{e}");
    let e = parse_import(
        ImportHost::Cursor,
        Path::new("m.json"),
        r#"{"mcpServers": []}"#,
        Path::new("/"),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("mcpServers: expected an object of servers"),
        "{e}"
    );
    let e = parse_import(
        ImportHost::Cursor,
        Path::new("m.json"),
        "{ nope",
        Path::new("/"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("invalid JSON"), "{e}");
    // A host file with no servers is fine.
    assert!(
        parse(
            ImportHost::ClaudeCode,
            ".claude.json",
            r#"{"numStartups": 1}"#
        )
        .servers
        .is_empty()
    );
}

#[test]
fn workspace_folder_is_the_folder_holding_dot_vscode() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(".vscode").join("mcp.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"servers": {"s": {"command": "node", "args": ["${workspaceFolder}/server.js"]}}}"#,
    )
    .unwrap();
    let f = read_import(ImportHost::VsCode, &path, tmp.path()).unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    assert_eq!(
        f.servers[0].entry["args"][0],
        json!(format!("{}/server.js", dir.display()))
    );
    // In a user profile file there is no workspace: kept literally, with a warning.
    let f = parse(
        ImportHost::VsCode,
        "/home/u/.config/Code/User/mcp.json",
        r#"{"servers": {"s": {"command": "node", "args": ["${workspaceFolder}/server.js"]}}}"#,
    );
    assert_eq!(
        f.servers[0].entry["args"][0],
        "$${workspaceFolder}/server.js"
    );
    assert!(f.servers[0].warnings[0].contains("`${workspaceFolder}` has no equivalent"));
}

#[test]
fn usual_paths_cover_linux_and_macos() {
    let home = Path::new("/h");
    let proj = Path::new("/p");
    let paths = |h| -> Vec<String> {
        import_sources(h, home, proj, None)
            .into_iter()
            .map(|s| s.path.display().to_string())
            .collect()
    };
    assert_eq!(
        paths(ImportHost::ClaudeDesktop),
        [
            "/h/.config/Claude/claude_desktop_config.json",
            "/h/Library/Application Support/Claude/claude_desktop_config.json"
        ]
    );
    assert_eq!(
        paths(ImportHost::ClaudeCode),
        ["/h/.claude.json", "/p/.mcp.json"]
    );
    assert_eq!(
        paths(ImportHost::Windsurf),
        ["/h/.codeium/windsurf/mcp_config.json"]
    );
    let codex = import_sources(ImportHost::Codex, home, proj, Some(Path::new("/c")));
    assert_eq!(codex[0].path, Path::new("/c/config.toml"));
}

#[test]
fn a_file_is_judged_by_where_it_is_not_how_it_is_named() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let (home, project, other) = (root.join("home"), root.join("proj"), root.join("other"));
    let put = |p: &Path| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "{}").unwrap();
    };
    put(&project.join(".mcp.json"));
    put(&project.join("sub/servers.json"));
    put(&other.join(".vscode/mcp.json"));
    put(&home.join(".cursor/mcp.json"));
    put(&home.join("exported.json"));
    std::os::unix::fs::symlink(project.join(".mcp.json"), home.join("link.json")).unwrap();
    let owner = |p: &str, cwd: &Path| import_file_owner(Path::new(p), &home, cwd, None).unwrap();
    let in_project = ImportFileOwner::InProject(project.clone());
    for p in [
        ".mcp.json",
        "./.mcp.json",
        "sub/../.mcp.json",
        "sub/servers.json",
    ] {
        assert_eq!(owner(p, &project), in_project, "{p}");
    }
    let abs = project.join(".mcp.json").display().to_string();
    assert_eq!(owner(&abs, &project), in_project);
    // A symlink outside the folder to a file inside it: where it really is counts.
    let link = home.join("link.json").display().to_string();
    assert_eq!(owner(&link, &project), in_project);
    // Another folder's own file.
    let theirs = other.join(".vscode/mcp.json").display().to_string();
    assert_eq!(
        owner(&theirs, &project),
        ImportFileOwner::FolderFile(PathBuf::from(".vscode/mcp.json"))
    );
    // The user's own files, even with the home directory as the project folder.
    let mine = home.join(".cursor/mcp.json").display().to_string();
    assert_eq!(owner(&mine, &project), ImportFileOwner::User);
    assert_eq!(owner(".cursor/mcp.json", &home), ImportFileOwner::User);
    let exported = home.join("exported.json").display().to_string();
    assert_eq!(owner(&exported, &project), ImportFileOwner::User);
    assert!(import_file_owner(Path::new("nowhere.json"), &home, &project, None).is_err());
}
