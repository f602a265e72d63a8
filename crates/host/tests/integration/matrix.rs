//! The transport matrix: server-everything (stdio, SSE, Streamable HTTP) and the
//! Python-SDK peer (stdio, SSE, Streamable HTTP, JSON replies, stateless), each driven
//! through a `Host`: connect, discover, call text / image / structuredContent /
//! resource-link tools, read a resource, get a prompt with arguments, shut down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_host::{HostOptions, ServerSnapshot};
use switchboard_mcp::{CallOptions, Connection, Target, TransportKind};
use switchboard_testkit::{
    EverythingMode, PyMode, everything_stdio_command, python_stdio_command, spawn_everything,
    spawn_python,
};

use crate::common::{
    all_text, assert_group_gone, blocks, connect_opts, connected, json_of, obj, spec, started_host,
    stdio_target,
};

/// What one kind of peer offers, and how to exercise it.
struct Profile {
    server_name: &'static str,
    tools: &'static [&'static str],
    prompts: &'static [&'static str],
    /// A resource that must be listed and readable, and text its contents hold.
    resource: (&'static str, &'static str),
    /// A resource template that must be listed (`None`: not checked).
    template: Option<&'static str>,
    /// (tool, arguments) for each kind of result.
    echo: (&'static str, Value),
    image: (&'static str, Value),
    structured: (&'static str, Value, Value),
    link: (&'static str, Value),
    /// (prompt, arguments, text the prompt must contain)
    prompt: (&'static str, Value, &'static str),
}

fn everything() -> Profile {
    Profile {
        server_name: "mcp-servers/everything",
        tools: &[
            "echo",
            "get-tiny-image",
            "get-structured-content",
            "get-resource-links",
            "get-sum",
        ],
        prompts: &["simple-prompt", "args-prompt"],
        resource: (
            "demo://resource/static/document/instructions.md",
            "Everything",
        ),
        template: Some("demo://resource/dynamic/text/{resourceId}"),
        echo: ("echo", json!({"message": "hello matrix"})),
        image: ("get-tiny-image", json!({})),
        structured: (
            "get-structured-content",
            json!({"location": "Chicago"}),
            json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}),
        ),
        link: ("get-resource-links", json!({"count": 2})),
        prompt: (
            "args-prompt",
            json!({"city": "Portland", "state": "Oregon"}),
            "What's weather in Portland, Oregon?",
        ),
    }
}

fn python() -> Profile {
    Profile {
        server_name: "switchboard-py-peer",
        tools: &[
            "echo",
            "add",
            "image",
            "resource_link",
            "hang",
            "slow_progress",
        ],
        prompts: &["review"],
        resource: ("py://info", "switchboard python peer"),
        template: Some("py://item/{id}"),
        echo: ("echo", json!({"message": "hello matrix"})),
        image: ("image", json!({})),
        structured: ("add", json!({"a": 2, "b": 3.5}), json!({"sum": 5.5})),
        link: ("resource_link", json!({})),
        prompt: (
            "review",
            json!({"code": "print('hi')"}),
            "Please review this python code:\n\nprint('hi')",
        ),
    }
}

/// What discovery found, from a host snapshot or straight from a connection.
struct Found {
    tools: Vec<String>,
    prompts: Vec<String>,
    resources: Vec<String>,
    templates: Vec<String>,
    server_name: Option<String>,
    protocol_version: Option<String>,
}

impl Found {
    fn from_snapshot(snap: &ServerSnapshot) -> Self {
        assert!(snap.warnings.is_empty(), "warnings: {:?}", snap.warnings);
        Found {
            tools: snap.tools.iter().map(|t| t.name.to_string()).collect(),
            prompts: snap.prompts.iter().map(|x| x.name.clone()).collect(),
            resources: snap.resources.iter().map(|r| r.uri.clone()).collect(),
            templates: snap
                .resource_templates
                .iter()
                .map(|t| t.uri_template.clone())
                .collect(),
            server_name: snap.server_info.as_ref().map(|i| i.0.clone()),
            protocol_version: snap.protocol_version.clone(),
        }
    }

    async fn from_connection(conn: &Connection) -> Self {
        let opts = CallOptions::default();
        Found {
            tools: conn
                .list_tools(&opts)
                .await
                .expect("tools/list")
                .iter()
                .map(|t| t.name.to_string())
                .collect(),
            prompts: conn
                .list_prompts(&opts)
                .await
                .expect("prompts/list")
                .iter()
                .map(|x| x.name.clone())
                .collect(),
            resources: conn
                .list_resources(&opts)
                .await
                .expect("resources/list")
                .iter()
                .map(|r| r.uri.clone())
                .collect(),
            templates: conn
                .list_resource_templates(&opts)
                .await
                .expect("resources/templates/list")
                .iter()
                .map(|t| t.uri_template.clone())
                .collect(),
            server_name: conn.server_info().map(|i| i.0),
            protocol_version: conn.protocol_version().map(|v| v.to_string()),
        }
    }
}

/// Discovery found the known names.
fn check_lists(found: &Found, p: &Profile) {
    let has = |list: &[String], want: &str| list.iter().any(|x| x == want);
    for want in p.tools {
        assert!(
            has(&found.tools, want),
            "tool {want} missing from {:?}",
            found.tools
        );
    }
    for want in p.prompts {
        assert!(
            has(&found.prompts, want),
            "prompt {want} missing from {:?}",
            found.prompts
        );
    }
    assert!(
        has(&found.resources, p.resource.0),
        "resource {} missing from {:?}",
        p.resource.0,
        found.resources
    );
    if let Some(template) = p.template {
        assert!(
            has(&found.templates, template),
            "template {template} missing from {:?}",
            found.templates
        );
    }
    assert_eq!(found.server_name.as_deref(), Some(p.server_name));
    assert!(found.protocol_version.is_some());
}

async fn call(conn: &Connection, tool: &str, args: &Value) -> Value {
    let result = conn
        .call_tool(tool, Some(obj(args.clone())), &CallOptions::default())
        .await
        .unwrap_or_else(|e| panic!("calling {tool}: {e}"));
    let v = json_of(&result);
    assert_ne!(v["isError"], json!(true), "{tool} failed: {v}");
    v
}

/// Calls every kind of tool, reads a resource (and a linked one), gets a prompt.
async fn check_calls(conn: &Connection, p: &Profile) {
    let opts = CallOptions::default();

    let echo = call(conn, p.echo.0, &p.echo.1).await;
    assert!(
        all_text(&echo).contains("hello matrix"),
        "echo answered {echo}"
    );

    let image = call(conn, p.image.0, &p.image.1).await;
    let images = blocks(&image, "image");
    assert_eq!(images.len(), 1, "one image block expected: {image}");
    assert_eq!(images[0]["mimeType"], json!("image/png"));
    let data = images[0]["data"].as_str().expect("image data");
    // Base64 of a PNG starts with the encoded signature.
    assert!(data.starts_with("iVBORw0KGgo"), "not a PNG: {data:.40}");

    let (tool, args, expected) = &p.structured;
    let structured = call(conn, tool, args).await;
    assert_eq!(
        &structured["structuredContent"], expected,
        "structuredContent of {tool}: {structured}"
    );

    let links = call(conn, p.link.0, &p.link.1).await;
    let links = blocks(&links, "resource_link")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert!(!links.is_empty(), "no resource_link blocks");
    for link in &links {
        assert!(
            link["uri"].as_str().is_some_and(|u| !u.is_empty()),
            "{link}"
        );
        assert!(link["name"].as_str().is_some(), "{link}");
    }

    let (uri, text) = p.resource;
    let read = json_of(
        &conn
            .read_resource(uri, &opts)
            .await
            .expect("resources/read"),
    );
    assert_eq!(read["contents"][0]["uri"], json!(uri), "{read}");
    assert!(all_text(&read).contains(text), "{uri} read as {read}");

    // The resource a link points at can be read too.
    let linked = links[0]["uri"].as_str().unwrap();
    let read = json_of(
        &conn
            .read_resource(linked, &opts)
            .await
            .unwrap_or_else(|e| panic!("reading linked {linked}: {e}")),
    );
    assert!(
        read["contents"].as_array().is_some_and(|c| !c.is_empty()),
        "{read}"
    );

    let (name, args, text) = &p.prompt;
    let prompt = json_of(
        &conn
            .get_prompt(name, obj(args.clone()), &opts)
            .await
            .unwrap_or_else(|e| panic!("prompts/get {name}: {e}")),
    );
    assert!(all_text(&prompt).contains(text), "{name} gave {prompt}");
    assert_eq!(prompt["messages"][0]["role"], json!("user"), "{prompt}");
}

/// Everything a matrix case proves, for one peer behind one target.
async fn exercise(target: Target, p: &Profile, expect: TransportKind) {
    let host = started_host(
        vec![spec("peer", target, Duration::from_secs(30))],
        HostOptions::default(),
    )
    .await;
    let snap = connected(&host, "peer");
    check_lists(&Found::from_snapshot(&snap), p);
    let conn = host.connection("peer").expect("a live connection");
    assert_eq!(conn.transport_kind(), expect, "transport actually used");
    assert_eq!(snap.connected_via.as_deref(), Some(expect.as_str()));
    check_calls(&conn, p).await;

    let pid = conn.pid();
    assert_eq!(pid.is_some(), expect == TransportKind::Stdio);
    drop(conn);
    host.shutdown().await;
    assert!(host.connection("peer").is_none(), "shut down");
    if let Some(pid) = pid {
        assert_group_gone(pid).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio() {
    exercise(
        stdio_target(everything_stdio_command(), &[]),
        &everything(),
        TransportKind::Stdio,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_legacy_sse() {
    let peer = spawn_everything(EverythingMode::Sse).await;
    let target = Target::Sse {
        url: peer.url.clone(),
        headers: vec![],
    };
    exercise(target, &everything(), TransportKind::Sse).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http_auto() {
    let peer = spawn_everything(EverythingMode::StreamableHttp).await;
    let target = Target::Auto {
        url: peer.url.clone(),
        headers: vec![],
    };
    exercise(target, &everything(), TransportKind::StreamableHttp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_over_stdio() {
    exercise(
        stdio_target(python_stdio_command(), &[]),
        &python(),
        TransportKind::Stdio,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_over_legacy_sse_auto_fallback() {
    let peer = spawn_python(PyMode::Sse, &[]).await;
    // No declared type: Streamable HTTP is tried first and SSE is what works.
    let target = Target::Auto {
        url: peer.url.clone(),
        headers: vec![],
    };
    exercise(target, &python(), TransportKind::Sse).await;
}

/// The Python SDK offers the stateless 2026-07-28 revision on every Streamable HTTP
/// endpoint, so without a hint that is what we speak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_over_streamable_http() {
    let peer = spawn_python(PyMode::StreamableHttp, &[]).await;
    let target = Target::Http {
        url: peer.url.clone(),
        headers: vec![],
    };
    exercise(target, &python(), TransportKind::StatelessHttp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_over_streamable_http_json_replies_auto() {
    let peer = spawn_python(PyMode::Json, &[]).await;
    let target = Target::Auto {
        url: peer.url.clone(),
        headers: vec![],
    };
    exercise(target, &python(), TransportKind::StatelessHttp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_over_stateless_http() {
    let peer = spawn_python(PyMode::Stateless, &[]).await;
    let target = Target::Http {
        url: peer.url.clone(),
        headers: vec![],
    };
    exercise(target, &python(), TransportKind::StatelessHttp).await;
}

/// The `initialize` handshake with a session (`Mcp-Session-Id`), as with a server that
/// predates the stateless revision: forced with the transport hint. `mode` picks SSE or
/// JSON replies.
async fn exercise_python_session(mode: PyMode) {
    let peer = spawn_python(mode, &[]).await;
    let target = Target::Http {
        url: peer.url.clone(),
        headers: vec![],
    };
    let mut opts = connect_opts("py-session", target, Duration::from_secs(30));
    opts.transport_hint = Some(TransportKind::StreamableHttp);
    let conn = Connection::connect(opts).await.expect("connect");
    assert_eq!(conn.transport_kind(), TransportKind::StreamableHttp);
    let p = python();
    check_lists(&Found::from_connection(&conn).await, &p);
    check_calls(&conn, &p).await;
    conn.close(Duration::from_millis(500)).await;
    assert!(conn.is_closed(), "closed after close()");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_over_streamable_http_session_sse_replies() {
    exercise_python_session(PyMode::StreamableHttp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_over_streamable_http_session_json_replies() {
    exercise_python_session(PyMode::Json).await;
}
