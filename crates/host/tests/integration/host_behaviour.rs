//! Host behaviour against real peers: settings-driven include/exclude filters, servers
//! that offer nothing, `list_changed` re-listing, and answering server requests
//! (elicitation, roots) through `ClientHooks`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Roots are deprecated by SEP-2577, but servers on 2025-11-25 and older still ask for them.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use switchboard_config::{LoadOptions, load};
use switchboard_host::{HostEvent, HostOptions, ServerStatus, specs_from_settings};
use switchboard_mcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, Root};
use switchboard_mcp::{CallOptions, ClientHooks};
use switchboard_testkit::{bad_peer, everything_stdio_command, python_stdio_command};

use crate::common::{
    all_text, assert_group_gone, assert_no_process_left, connected, eventually, json_of,
    marked_stdio, obj, spec, started_host, stdio_target, unique_marker,
};

/// Writes `settings` to a temporary file and loads it the way `--config FILE` does.
fn load_settings(settings: &Value) -> (tempfile::TempDir, switchboard_config::Settings) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.json");
    std::fs::write(&file, serde_json::to_string_pretty(settings).unwrap()).unwrap();
    let opts = LoadOptions {
        home: dir.path().join("home"),
        project_dir: dir.path().to_path_buf(),
        config_file: Some(file),
    };
    let loaded = load(&opts, &|name| std::env::var(name).ok()).expect("settings load");
    (dir, loaded)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_and_exclude_filters_from_settings() {
    let (program, args) = python_stdio_command();
    let (_dir, settings) = load_settings(&json!({
        "mcpServers": {
            "py": {
                "command": program,
                "args": args,
                "includeTools": ["echo", "add", "image"],
                "excludeTools": ["image"],
                "timeout": 20000,
                "startupTimeout": 20000
            },
            // Both `command` and `url`: this entry is broken, the others are not.
            "broken": {"command": "true", "url": "http://127.0.0.1:9/mcp"}
        }
    }));
    let specs = specs_from_settings(&settings);
    assert_eq!(specs.len(), 2);
    let py_spec = specs.iter().find(|s| s.name == "py").unwrap();
    assert_eq!(py_spec.timeout, Duration::from_secs(20));
    assert_eq!(py_spec.startup_timeout, Duration::from_secs(20));
    assert!(
        py_spec.config.is_some(),
        "the validated entry travels along"
    );

    let host = started_host(specs, HostOptions::default()).await;
    let snap = connected(&host, "py");
    let mut tools: Vec<String> = snap.tools.iter().map(|t| t.name.to_string()).collect();
    tools.sort();
    assert_eq!(tools, ["add", "echo"], "includeTools minus excludeTools");
    for hidden in ["image", "resource_link", "hang", "crash", "slow_progress"] {
        assert!(
            snap.filtered_out.iter().any(|t| t == hidden),
            "{hidden} should be reported as filtered out: {:?}",
            snap.filtered_out
        );
    }
    // Prompts and resources are not filtered by tool filters.
    assert!(snap.prompts.iter().any(|p| p.name == "review"));
    assert!(snap.resources.iter().any(|r| r.uri == "py://info"));

    let broken = host.server("broken").unwrap();
    assert_eq!(broken.status, ServerStatus::Disconnected);
    let reason = broken.error.unwrap_or_default();
    assert!(
        reason.contains("command") && reason.contains("url"),
        "the reason names the conflicting fields: {reason}"
    );

    let pid = host.connection("py").unwrap().pid().unwrap();
    host.shutdown().await;
    assert_group_gone(pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_offering_nothing_is_closed_with_reason() {
    let marker = unique_marker("no-tools");
    let host = started_host(
        vec![
            spec(
                "empty",
                marked_stdio(bad_peer("no_tools"), &marker),
                Duration::from_secs(15),
            ),
            spec(
                "useful",
                marked_stdio(bad_peer("hang_tool"), &marker),
                Duration::from_secs(15),
            ),
        ],
        HostOptions::default(),
    )
    .await;
    let empty = host.server("empty").unwrap();
    assert_eq!(empty.status, ServerStatus::Disconnected);
    assert_eq!(
        empty.error.as_deref(),
        Some("the server offers no tools, prompts or resources, so it was closed")
    );
    assert!(host.connection("empty").is_none());
    connected(&host, "useful");
    host.shutdown().await;
    assert_no_process_left(&marker).await;
}

/// server-everything registers a session resource when `gzip-file-as-resource` runs and
/// sends `notifications/resources/list_changed`; the host re-lists on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_triggers_relist() {
    let host = started_host(
        vec![spec(
            "everything",
            stdio_target(everything_stdio_command(), &[]),
            Duration::from_secs(30),
        )],
        HostOptions::default(),
    )
    .await;
    let uri = "demo://resource/session/note.txt.gz";
    let before = connected(&host, "everything");
    assert!(!before.resources.iter().any(|r| r.uri == uri));

    let mut events = host.subscribe();
    let conn = host.connection("everything").unwrap();
    let result = conn
        .call_tool(
            "gzip-file-as-resource",
            Some(obj(json!({
                "name": "note.txt.gz",
                // A data: URL, so that nothing is fetched from the network.
                "data": "data:text/plain;base64,aGVsbG8gc3dpdGNoYm9hcmQ=",
                "outputType": "resourceLink"
            }))),
            &CallOptions::default(),
        )
        .await
        .expect("gzip-file-as-resource");
    let result = json_of(&result);
    assert_eq!(result["content"][0]["uri"], json!(uri), "{result}");

    let updated = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Ok(HostEvent::ListsUpdated { server }) if server == "everything" => {
                    if host
                        .server("everything")
                        .unwrap()
                        .resources
                        .iter()
                        .any(|r| r.uri == uri)
                    {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => panic!("events: {e}"),
            }
        }
    })
    .await;
    assert!(
        updated.is_ok(),
        "no re-list showed {uri}: {:?}",
        host.server("everything")
            .unwrap()
            .resources
            .iter()
            .map(|r| r.uri.clone())
            .collect::<Vec<_>>()
    );
    // Everything else survived the re-list.
    let after = connected(&host, "everything");
    assert_eq!(after.tools.len(), before.tools.len());
    assert_eq!(after.prompts.len(), before.prompts.len());

    let pid = conn.pid().unwrap();
    drop(conn);
    host.shutdown().await;
    assert_group_gone(pid).await;
}

const ROOT_URI: &str = "file:///tmp/switchboard-test-root";

/// Accepts every elicitation with fixed content, offers one root, remembers requests.
#[derive(Default)]
struct TestHooks {
    elicitations: Mutex<Vec<(String, Value)>>,
}

impl ClientHooks for TestHooks {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        self.elicitations
            .lock()
            .unwrap()
            .push((server.to_string(), json_of(&request)));
        Box::pin(async {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({
                "name": "Ada Lovelace",
                "check": true,
                "email": "ada@example.com",
                "integer": 7
            }))
        })
    }

    fn roots(&self) -> Vec<Root> {
        let mut root = Root::new(ROOT_URI);
        root.name = Some("test root".into());
        vec![root]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_and_roots_are_answered_by_hooks() {
    let hooks = Arc::new(TestHooks::default());
    let opts = HostOptions {
        hooks: hooks.clone(),
        ..HostOptions::default()
    };
    let host = started_host(
        vec![spec(
            "everything",
            stdio_target(everything_stdio_command(), &[]),
            Duration::from_secs(30),
        )],
        opts,
    )
    .await;
    connected(&host, "everything");
    // Both tools are only offered to clients declaring the capabilities; they are
    // registered after `initialize` (with a tools/list_changed), so wait for them.
    let offered = eventually(Duration::from_secs(10), || {
        let tools = host.server("everything").unwrap().tools;
        ["trigger-elicitation-request", "get-roots-list"]
            .iter()
            .all(|want| tools.iter().any(|t| t.name == *want))
    })
    .await;
    assert!(offered, "capability-gated tools are listed");
    let conn = host.connection("everything").unwrap();

    let result = conn
        .call_tool("trigger-elicitation-request", None, &CallOptions::default())
        .await
        .expect("trigger-elicitation-request");
    let text = all_text(&json_of(&result));
    assert!(
        text.contains("User provided the requested information"),
        "{text}"
    );
    assert!(text.contains("- Name: Ada Lovelace"), "{text}");
    assert!(text.contains("- Agreed to terms: true"), "{text}");
    assert!(text.contains("- Favorite Integer: 7"), "{text}");
    {
        let seen = hooks.elicitations.lock().unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].0, "everything", "the hook hears which server asks");
        assert!(
            seen[0].1["requestedSchema"]["properties"]["name"].is_object(),
            "{}",
            seen[0].1
        );
    }

    let roots = conn
        .call_tool("get-roots-list", None, &CallOptions::default())
        .await
        .expect("get-roots-list");
    let text = all_text(&json_of(&roots));
    assert!(text.contains(ROOT_URI), "{text}");
    assert!(text.contains("test root"), "{text}");

    let pid = conn.pid().unwrap();
    drop(conn);
    host.shutdown().await;
    assert_group_gone(pid).await;
}
