//! The demo server binary over stdio, driven by rmcp's child-process client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use base64::Engine as _;
use common::{TestClient, call, first_text, to_json};
use rmcp::{
    RoleClient, ServiceExt,
    model::{
        ClientRequest, GetPromptRequestParams, ProgressNotificationParam,
        ReadResourceRequestParams, Request,
    },
    service::{PeerRequestOptions, RunningService},
    transport::TokioChildProcess,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    sync::mpsc::UnboundedReceiver,
};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard-demo-server");

type Client = RunningService<RoleClient, TestClient>;

async fn connect(args: &[&str]) -> (Client, UnboundedReceiver<ProgressNotificationParam>) {
    let mut command = tokio::process::Command::new(BIN);
    command.args(args).kill_on_drop(true);
    let transport = TokioChildProcess::new(command).expect("spawn demo server");
    let (handler, progress) = TestClient::new();
    let client = tokio::time::timeout(Duration::from_secs(20), handler.serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize");
    (client, progress)
}

#[tokio::test]
async fn initialize_reports_name_instructions_and_capabilities() {
    let (client, _progress) = connect(&[]).await;
    let info = to_json(&*client.peer_info().expect("server info"));
    assert_eq!(info["serverInfo"]["name"], json!("switchboard-demo"));
    assert_eq!(
        info["serverInfo"]["name"],
        json!(switchboard_demo_server::SERVER_NAME)
    );
    assert_eq!(info["protocolVersion"], json!("2025-11-25"));
    assert!(
        info["instructions"]
            .as_str()
            .is_some_and(|text| text.contains("demo"))
    );
    for capability in ["tools", "resources", "prompts"] {
        assert!(
            info["capabilities"][capability].is_object(),
            "missing capability {capability}: {info}"
        );
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn lists_tools_resources_templates_and_prompts() {
    let (client, _progress) = connect(&[]).await;

    let tools = to_json(&client.list_all_tools().await.expect("tools/list"));
    let tools = tools.as_array().expect("tool array");
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
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
    let tool = |name: &str| tools.iter().find(|t| t["name"] == json!(name)).unwrap();
    for name in ["echo", "add", "clock", "tiny_image", "get_resource_link"] {
        assert_eq!(
            tool(name)["annotations"]["readOnlyHint"],
            json!(true),
            "{name} should be read-only"
        );
    }
    assert_eq!(
        tool("add")["outputSchema"]["properties"]["sum"]["type"],
        json!("number")
    );
    assert_eq!(tool("echo")["inputSchema"]["required"], json!(["message"]));
    let slow = &tool("slow")["inputSchema"]["properties"];
    assert_eq!(slow["seconds"]["default"], json!(2.0));
    assert_eq!(slow["steps"]["default"], json!(5));
    assert_eq!(slow["steps"]["type"], json!("integer"));
    assert_eq!(
        tool("clock")["_meta"],
        json!({
            "ui": {
                "resourceUri": "ui://switchboard-demo/clock.html",
                "visibility": ["model", "app"]
            },
            "ui/resourceUri": "ui://switchboard-demo/clock.html"
        })
    );

    let resources = to_json(&client.list_all_resources().await.expect("resources/list"));
    let resources = resources.as_array().unwrap();
    assert_eq!(resources.len(), 2);
    assert_eq!(resources[0]["uri"], json!("demo://readme"));
    assert_eq!(resources[0]["mimeType"], json!("text/markdown"));
    assert_eq!(
        resources[1]["uri"],
        json!("ui://switchboard-demo/clock.html")
    );
    assert_eq!(resources[1]["mimeType"], json!("text/html;profile=mcp-app"));

    let templates = to_json(
        &client
            .list_all_resource_templates()
            .await
            .expect("resources/templates/list"),
    );
    assert_eq!(
        templates.as_array().unwrap().len(),
        1,
        "one template: {templates}"
    );
    assert_eq!(templates[0]["uriTemplate"], json!("demo://greeting/{name}"));

    let prompts = to_json(&client.list_all_prompts().await.expect("prompts/list"));
    let prompts = prompts.as_array().unwrap();
    let greet = prompts
        .iter()
        .find(|p| p["name"] == json!("greet"))
        .unwrap();
    assert_eq!(greet["arguments"][0]["name"], json!("name"));
    assert_eq!(greet["arguments"][0]["required"], json!(true));
    assert_eq!(greet["arguments"][1]["name"], json!("style"));
    assert_eq!(greet["arguments"][1]["required"], json!(false));
    assert!(
        prompts
            .iter()
            .any(|p| p["name"] == json!("summarize-readme"))
    );

    client.cancel().await.expect("close");
}

#[tokio::test]
async fn calls_every_quick_tool() {
    let (client, _progress) = connect(&[]).await;

    let echo = to_json(
        &client
            .call_tool(call("echo", json!({"message": "hello there"})))
            .await
            .unwrap(),
    );
    assert_eq!(first_text(&echo), "Echo: hello there");
    assert_ne!(echo["isError"], json!(true));

    let add = to_json(
        &client
            .call_tool(call("add", json!({"a": 2, "b": 3.5})))
            .await
            .unwrap(),
    );
    assert_eq!(first_text(&add), "5.5");
    assert_eq!(add["structuredContent"], json!({"sum": 5.5}));

    let image = to_json(
        &client
            .call_tool(call("tiny_image", json!({})))
            .await
            .unwrap(),
    );
    let blocks = image["content"].as_array().unwrap();
    let image_block = blocks.iter().find(|b| b["type"] == json!("image")).unwrap();
    assert_eq!(image_block["mimeType"], json!("image/png"));
    let png = base64::engine::general_purpose::STANDARD
        .decode(image_block["data"].as_str().unwrap())
        .expect("valid base64");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(png, switchboard_demo_server::TINY_PNG);
    assert!(blocks.iter().any(|b| b["type"] == json!("text")));

    let fail = to_json(
        &client
            .call_tool(call("fail", json!({"message": "it broke"})))
            .await
            .unwrap(),
    );
    assert_eq!(fail["isError"], json!(true));
    assert_eq!(first_text(&fail), "it broke");

    let link = to_json(
        &client
            .call_tool(call("get_resource_link", json!({})))
            .await
            .unwrap(),
    );
    let link_block = link["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == json!("resource_link"))
        .expect("a resource_link block")
        .clone();
    assert_eq!(link_block["uri"], json!("demo://readme"));
    assert_eq!(link_block["mimeType"], json!("text/markdown"));

    let clock = to_json(&client.call_tool(call("clock", json!({}))).await.unwrap());
    let time = clock["structuredContent"]["time"]
        .as_str()
        .expect("structured time")
        .to_owned();
    assert!(first_text(&clock).contains(&time));
    let bytes = time.as_bytes();
    assert_eq!(time.len(), 20, "RFC 3339 seconds precision: {time}");
    assert_eq!(
        (
            bytes[4], bytes[7], bytes[10], bytes[13], bytes[16], bytes[19]
        ),
        (b'-', b'-', b'T', b':', b':', b'Z'),
        "{time}"
    );
    assert!(time.starts_with("20"), "{time}");

    client.cancel().await.expect("close");
}

#[tokio::test]
async fn reads_resources_and_the_template() {
    let (client, _progress) = connect(&[]).await;

    let readme = to_json(
        &client
            .read_resource(ReadResourceRequestParams::new("demo://readme"))
            .await
            .unwrap(),
    );
    assert_eq!(readme["contents"][0]["mimeType"], json!("text/markdown"));
    assert!(
        readme["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Switchboard demo server")
    );

    let ui = to_json(
        &client
            .read_resource(ReadResourceRequestParams::new(
                "ui://switchboard-demo/clock.html",
            ))
            .await
            .unwrap(),
    );
    assert_eq!(
        ui["contents"][0]["uri"],
        json!("ui://switchboard-demo/clock.html")
    );
    assert_eq!(
        ui["contents"][0]["mimeType"],
        json!("text/html;profile=mcp-app")
    );
    let html = ui["contents"][0]["text"].as_str().unwrap();
    for needle in [
        "ui/initialize",
        "ui/notifications/initialized",
        "ui/notifications/tool-result",
        "ui/notifications/size-changed",
        "tools/call",
        "2026-01-26",
        "window.parent.postMessage",
    ] {
        assert!(html.contains(needle), "clock page lacks {needle}");
    }
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page must not load anything external"
    );

    let greeting = to_json(
        &client
            .read_resource(ReadResourceRequestParams::new("demo://greeting/Ada"))
            .await
            .unwrap(),
    );
    assert_eq!(greeting["contents"][0]["text"], json!("Hello, Ada!"));

    let missing = client
        .read_resource(ReadResourceRequestParams::new("demo://nothing"))
        .await;
    assert!(missing.is_err(), "unknown resources are an error");

    client.cancel().await.expect("close");
}

#[tokio::test]
async fn gets_both_prompts() {
    let (client, _progress) = connect(&[]).await;

    let mut args = serde_json::Map::new();
    args.insert("name".into(), json!("Grace"));
    args.insert("style".into(), json!("pirate"));
    let greet = to_json(
        &client
            .get_prompt(GetPromptRequestParams::new("greet").with_arguments(args))
            .await
            .unwrap(),
    );
    let messages = greet["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], json!("user"));
    let text = messages[0]["content"]["text"].as_str().unwrap();
    assert!(text.contains("Grace") && text.contains("pirate"), "{text}");

    let missing_name = client
        .get_prompt(GetPromptRequestParams::new("greet"))
        .await;
    assert!(missing_name.is_err(), "greet requires `name`");

    let summarize = to_json(
        &client
            .get_prompt(GetPromptRequestParams::new("summarize-readme"))
            .await
            .unwrap(),
    );
    let embedded = summarize["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["content"]["type"] == json!("resource"))
        .expect("a message embedding the readme")
        .clone();
    assert_eq!(embedded["role"], json!("user"));
    assert_eq!(
        embedded["content"]["resource"]["uri"],
        json!("demo://readme")
    );
    assert!(
        embedded["content"]["resource"]["text"]
            .as_str()
            .unwrap()
            .contains("Switchboard demo server")
    );

    client.cancel().await.expect("close");
}

#[tokio::test]
async fn slow_tool_sends_progress_for_each_step() {
    let (client, mut progress) = connect(&[]).await;
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(call(
                "slow",
                json!({"seconds": 0.5, "steps": 4}),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    let response = tokio::time::timeout(Duration::from_secs(10), handle.await_response())
        .await
        .expect("slow finishes")
        .unwrap();
    let response = to_json(&response);
    assert_ne!(response["isError"], json!(true), "{response}");

    let mut seen = Vec::new();
    while seen.len() < 4 {
        let note = tokio::time::timeout(Duration::from_secs(5), progress.recv())
            .await
            .expect("progress notification")
            .expect("channel open");
        seen.push(note);
    }
    for (i, note) in seen.iter().enumerate() {
        assert_eq!(note.progress_token, token);
        assert_eq!(note.progress, (i + 1) as f64);
        assert_eq!(note.total, Some(4.0));
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn slow_tool_stops_when_cancelled() {
    let (client, mut progress) = connect(&[]).await;
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(call(
                "slow",
                json!({"seconds": 8, "steps": 20}),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    // Wait for the first step (0.4 s in), then cancel.
    let first = tokio::time::timeout(Duration::from_secs(5), progress.recv())
        .await
        .expect("first progress notification")
        .expect("channel open");
    assert_eq!(first.progress, 1.0);
    handle
        .cancel(Some("test cancels".to_owned()))
        .await
        .expect("send cancellation");

    // Without honouring cancellation the tool would send ~5 more in 2 s.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut after = 0;
    while progress.try_recv().is_ok() {
        after += 1;
    }
    assert!(
        after <= 1,
        "{after} progress notifications after cancellation"
    );

    // The connection is still healthy.
    let echo = to_json(
        &client
            .call_tool(call("echo", json!({"message": "still here"})))
            .await
            .unwrap(),
    );
    assert_eq!(first_text(&echo), "Echo: still here");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn startup_delay_delays_initialize() {
    let started = Instant::now();
    let (client, _progress) = connect(&["stdio", "--startup-delay-ms", "900"]).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900),
        "initialize answered after {elapsed:?}"
    );
    client.cancel().await.expect("close");
}

/// Send raw lines to the binary, close stdin, and collect stdout lines and
/// the exit status.
async fn raw_session(lines: &[Value]) -> (Vec<Value>, std::process::ExitStatus) {
    let mut child = tokio::process::Command::new(BIN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    for line in lines {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    // Give the server time to answer before EOF.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(stdin);
    let mut reader = BufReader::new(stdout).lines();
    let mut out = Vec::new();
    let collect = async {
        while let Some(line) = reader.next_line().await.unwrap() {
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            assert_eq!(value["jsonrpc"], json!("2.0"), "{line}");
            out.push(value);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), collect)
        .await
        .expect("stdout closes after EOF");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("server exits after EOF")
        .unwrap();
    (out, status)
}

#[tokio::test]
async fn accepts_older_protocol_versions_and_exits_on_eof() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let (out, status) = raw_session(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}
            }}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"message": version}
            }}),
        ])
        .await;
        assert!(status.success(), "exit status {status} for {version}");
        let init = out
            .iter()
            .find(|m| m["id"] == json!(1))
            .expect("init reply");
        assert_eq!(init["result"]["protocolVersion"], json!(version));
        assert_eq!(
            init["result"]["serverInfo"]["name"],
            json!("switchboard-demo")
        );
        let echo = out
            .iter()
            .find(|m| m["id"] == json!(2))
            .expect("echo reply");
        assert_eq!(
            echo["result"]["content"][0]["text"],
            json!(format!("Echo: {version}"))
        );
    }
}

#[tokio::test]
async fn exits_cleanly_when_stdin_closes_before_initialize() {
    let (out, status) = raw_session(&[]).await;
    assert!(status.success(), "exit status {status}");
    assert!(out.is_empty());
}
