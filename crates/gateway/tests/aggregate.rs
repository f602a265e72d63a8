//! The gateway in-process, with an rmcp client on a duplex pipe and real upstreams:
//! in-process demo servers over Streamable HTTP, server-everything over stdio.
//! Settings go through `switchboard-config` like the CLI's, so `includeTools` and
//! friends are the real ones.
#![allow(clippy::unwrap_used, clippy::expect_used, deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientInfo, GetPromptRequestParams, LoggingMessageNotificationParam,
    ReadResourceRequestParams,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use switchboard_config::{LoadOptions, load};
use switchboard_demo_server::DemoOptions;
use switchboard_gateway::{Gateway, GatewayHooks, GatewayOptions};
use switchboard_host::{Host, HostOptions, specs_from_settings};
use switchboard_testkit::{everything_stdio_command, free_port, python_stdio_command};
use tokio::sync::Notify;

/// A demo server over Streamable HTTP in this process; stopped when the test ends.
async fn demo(delay: Duration) -> String {
    let port = free_port();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let opts = DemoOptions::default().with_startup_delay(delay);
    tokio::spawn(switchboard_demo_server::serve_http(listener, opts));
    format!("http://127.0.0.1:{port}/mcp")
}

#[derive(Clone, Default)]
struct Client {
    tools_changed: Arc<Notify>,
    logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    updated: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientInfo {
        ClientInfo::default()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
    }
}

struct Rig {
    gateway: Gateway,
    client: RunningService<RoleClient, Client>,
    handler: Client,
    _dir: tempfile::TempDir,
}

async fn rig(servers: Value, initial_wait: Duration) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.json");
    std::fs::write(&file, json!({"mcpServers": servers}).to_string()).unwrap();
    let settings = load(
        &LoadOptions {
            home: dir.path().join("home"),
            project_dir: dir.path().to_path_buf(),
            config_file: Some(file),
        },
        &|_| None,
    )
    .unwrap();
    let hooks = GatewayHooks::new();
    let host = Host::new(
        specs_from_settings(&settings),
        HostOptions {
            hooks: Arc::new(hooks.clone()),
            reconnect: true,
            ..Default::default()
        },
    );
    let gateway = Gateway::new(
        host,
        &hooks,
        GatewayOptions {
            initial_wait,
            ..Default::default()
        },
    );
    gateway.start();
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let session = gateway.session();
    tokio::spawn(async move {
        if let Ok(running) = session.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let handler = Client::default();
    let client = handler.clone().serve(client_io).await.unwrap();
    Rig {
        gateway,
        client,
        handler,
        _dir: dir,
    }
}

/// Waits (polling every 100 ms) until `done`, failing with `what` after `limit`.
async fn eventually(limit: Duration, what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

fn text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap()
}

/// Two copies of the demo server: every tool under its own `{server}__` name
/// (`includeTools` applied to `b`), the shared resource and template served qualified
/// and each read reaching its own server, an unqualified shared URI refused with the
/// choices, prompts and completions routed.
#[tokio::test(flavor = "multi_thread")]
async fn two_servers_with_the_same_names_are_kept_apart() {
    let (a, b) = (demo(Duration::ZERO).await, demo(Duration::ZERO).await);
    let rig = rig(
        json!({"a": {"httpUrl": a}, "b": {"httpUrl": b, "includeTools": ["echo", "add"]}}),
        Duration::from_secs(20),
    )
    .await;
    let c = &rig.client;
    let listed = c.list_all_tools().await.unwrap();
    // The MCP App tool points at its UI resource under the URI the gateway serves.
    let clock = listed.iter().find(|t| t.name == "a__clock").unwrap();
    let meta = serde_json::to_value(clock.meta.as_ref().unwrap()).unwrap();
    assert_eq!(
        meta["ui"]["resourceUri"],
        "switchboard-gateway://a/ui://switchboard-demo/clock.html"
    );
    assert!(clock.output_schema.is_some());
    let ui = c
        .read_resource(ReadResourceRequestParams::new(
            meta["ui"]["resourceUri"].as_str().unwrap(),
        ))
        .await
        .unwrap();
    assert!(text(&ui).contains("text/html;profile=mcp-app"));
    let tools = names(&listed);
    for t in ["a__echo", "a__slow", "b__echo", "b__add"] {
        assert!(tools.contains(&t.to_string()), "{t} missing: {tools:?}");
    }
    assert!(
        !tools.contains(&"b__slow".to_string()),
        "includeTools ignored"
    );

    let r = c
        .call_tool(
            CallToolRequestParams::new("b__echo")
                .with_arguments(json!({"message": "x"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(text(&r).contains("Echo: x"));
    let err = c
        .call_tool(CallToolRequestParams::new("b__slow"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown tool"), "{err}");

    let resources: Vec<String> = c
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert!(resources.contains(&"switchboard-gateway://a/demo://readme".to_string()));
    assert!(resources.contains(&"switchboard-gateway://b/demo://readme".to_string()));
    let read = c
        .read_resource(ReadResourceRequestParams::new(
            "switchboard-gateway://b/demo://greeting/Bob",
        ))
        .await
        .unwrap();
    assert!(text(&read).contains("Hello, Bob!"));
    let templates = c.list_all_resource_templates().await.unwrap();
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template == "switchboard-gateway://a/demo://greeting/{name}")
    );
    let err = c
        .read_resource(ReadResourceRequestParams::new("demo://readme"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("switchboard-gateway://a/demo://readme"),
        "{err}"
    );

    let prompt = c
        .get_prompt(
            GetPromptRequestParams::new("a__greet")
                .with_arguments(json!({"name": "Ada"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(text(&prompt).contains("Please greet Ada."));
    rig.gateway.shutdown().await;
}

/// A server that connects after the first list is announced with
/// `notifications/tools/list_changed`, and its tools are there on the next list.
#[tokio::test(flavor = "multi_thread")]
async fn a_late_server_is_announced_with_list_changed() {
    let fast = demo(Duration::ZERO).await;
    let slow = demo(Duration::from_millis(6000)).await;
    let rig = rig(
        json!({"fast": {"httpUrl": fast}, "late": {"httpUrl": slow}}),
        Duration::from_millis(2000),
    )
    .await;
    let first = names(&rig.client.list_all_tools().await.unwrap());
    assert!(first.contains(&"fast__echo".to_string()));
    assert!(!first.iter().any(|t| t.starts_with("late__")), "{first:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::time::timeout(left, rig.handler.tools_changed.notified())
            .await
            .expect("no tools/list_changed for the late server");
        let now = names(&rig.client.list_all_tools().await.unwrap());
        if now.contains(&"late__echo".to_string()) {
            break;
        }
    }
    // The status note follows the host's event; give it a moment.
    let mut noted = false;
    for _ in 0..50 {
        noted = rig.handler.logs.lock().unwrap().iter().any(|l| {
            l.data
                .as_str()
                .is_some_and(|d| d.contains("`late` connected"))
        });
        if noted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(noted, "no log notification said `late` connected");
    rig.gateway.shutdown().await;
}

/// A server that cannot be reached is absent, named with its status in the
/// instructions, and never holds up the others.
#[tokio::test(flavor = "multi_thread")]
async fn a_down_server_is_absent_and_named() {
    let up = demo(Duration::ZERO).await;
    // A key in the URL must not reach the client through the status text.
    let dead = format!(
        "http://127.0.0.1:{}/mcp?api_key=url-secret-123",
        free_port()
    );
    let rig = rig(
        json!({"up": {"httpUrl": up}, "down": {"httpUrl": dead}}),
        Duration::from_secs(20),
    )
    .await;
    let tools = names(&rig.client.list_all_tools().await.unwrap());
    assert!(tools.contains(&"up__echo".to_string()));
    assert!(!tools.iter().any(|t| t.starts_with("down__")));
    let instructions = rig.gateway.catalog().instructions();
    assert!(
        instructions.contains("`down`: disconnected"),
        "{instructions}"
    );
    assert!(instructions.contains("`up`: connected"), "{instructions}");
    assert!(!instructions.contains("url-secret-123"), "{instructions}");
    rig.gateway.shutdown().await;
}

/// server-everything asks for input during a call; this client did not declare
/// elicitation, so the gateway declines it and says why in a log notification.
#[tokio::test(flavor = "multi_thread")]
async fn elicitation_is_declined_for_a_client_without_the_capability() {
    let (cmd, args) = everything_stdio_command();
    let rig = rig(
        json!({"everything": {"command": cmd, "args": args}}),
        Duration::from_secs(30),
    )
    .await;
    let tools = names(&rig.client.list_all_tools().await.unwrap());
    assert!(
        tools.contains(&"everything__trigger-elicitation-request".to_string()),
        "{tools:?}"
    );
    let r = rig
        .client
        .call_tool(CallToolRequestParams::new(
            "everything__trigger-elicitation-request",
        ))
        .await
        .unwrap();
    assert!(text(&r).to_lowercase().contains("decline"), "{}", text(&r));
    let logs = rig.handler.logs.lock().unwrap().clone();
    assert!(
        logs.iter().any(|l| l
            .data
            .as_str()
            .is_some_and(|d| d.contains("did not declare the elicitation capability"))),
        "{logs:?}"
    );
    rig.gateway.shutdown().await;
}

/// `logging/setLevel` from the client is accepted and fanned out; an upstream's log
/// messages reach the client under the server's name as logger.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_log_messages_are_forwarded() {
    let (cmd, args) = everything_stdio_command();
    let rig = rig(
        json!({"everything": {"command": cmd, "args": args}}),
        Duration::from_secs(30),
    )
    .await;
    rig.client
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Debug,
        ))
        .await
        .unwrap();
    rig.client
        .call_tool(CallToolRequestParams::new(
            "everything__toggle-simulated-logging",
        ))
        .await
        .unwrap();
    eventually(
        Duration::from_secs(15),
        "a log message from `everything`",
        || {
            rig.handler
                .logs
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.logger.as_deref() == Some("everything"))
        },
    )
    .await;
    rig.gateway.shutdown().await;
}

/// A call that hangs on one server does not hold up calls to another; cancelling it
/// (dropping the request) leaves the gateway usable.
#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_call_does_not_block_other_servers() {
    let up = demo(Duration::ZERO).await;
    let (py, py_args) = python_stdio_command();
    let rig = rig(
        json!({"demo": {"httpUrl": up}, "py": {"command": py, "args": py_args}}),
        Duration::from_secs(30),
    )
    .await;
    let tools = names(&rig.client.list_all_tools().await.unwrap());
    assert!(tools.contains(&"py__hang".to_string()), "{tools:?}");
    let peer = rig.client.peer().clone();
    let hang =
        tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("py__hang")).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    for i in 0..5 {
        let r = rig
            .client
            .call_tool(
                CallToolRequestParams::new("demo__echo").with_arguments(
                    json!({"message": format!("m{i}")})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )
            .await
            .unwrap();
        assert!(text(&r).contains(&format!("Echo: m{i}")));
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!hang.is_finished(), "the hanging call returned");
    hang.abort();
    rig.gateway.shutdown().await;
}

/// A resource subscription outlives its server's restart: the server-everything process
/// is killed, the host reconnects, the gateway subscribes the new process again, and
/// its updates reach the client (without the renewed subscription the new process
/// would send none).
#[tokio::test(flavor = "multi_thread")]
async fn a_resource_subscription_survives_the_servers_restart() {
    let (cmd, args) = everything_stdio_command();
    let rig = rig(
        json!({"everything": {"command": cmd, "args": args}}),
        Duration::from_secs(30),
    )
    .await;
    rig.client.list_all_resources().await.unwrap();
    let uri = "demo://resource/dynamic/text/1";
    rig.client
        .subscribe(rmcp::model::SubscribeRequestParams::new(uri))
        .await
        .unwrap();
    let host = rig.gateway.host();
    let pid = host.connection("everything").unwrap().pid().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually(Duration::from_secs(30), "server-everything back", || {
        host.connection("everything")
            .is_some_and(|c| !c.is_closed() && c.pid().is_some_and(|p| p != pid))
    })
    .await;
    // Updates start at once and repeat every 5 s, so a subscription renewed a moment
    // after this call is still heard.
    rig.client
        .call_tool(CallToolRequestParams::new(
            "everything__toggle-subscriber-updates",
        ))
        .await
        .unwrap();
    eventually(
        Duration::from_secs(15),
        "an update from the restarted server",
        || rig.handler.updated.lock().unwrap().iter().any(|u| u == uri),
    )
    .await;
    rig.gateway.shutdown().await;
}
