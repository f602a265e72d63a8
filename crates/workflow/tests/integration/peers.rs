//! Workflows against the real peers: server-everything and the Python-SDK server over
//! stdio and Streamable HTTP, and the demo server over HTTP.

use std::time::{Duration, Instant};

use serde_json::Value;
use switchboard_testkit::{
    EverythingMode, PyMode, everything_stdio_command, python_stdio_command, spawn_everything,
    spawn_python,
};
use switchboard_workflow::{RunEvent, StepStatus};

use crate::common::{Harness, demo_http, http_spec, stdio_spec, text};

const PY_LOOP: &str = r#"
name: python-loop
nodes:
  - id: init
    type: variable
    name: total
    value: 0
  - id: i0
    type: variable
    name: i
    value: 0
  - id: loop
    type: while
    condition: "{{i}} < {{rounds}}"
    trueNext: add
    falseNext: branch
  - id: add
    type: mcp
    server: py
    tool: add
    args: '{"a": {{total}}, "b": 10}'
    saveTo: res
  - id: keep
    type: set
    name: total
    value: "{{res.sum}}"
  - id: inc
    type: set
    name: i
    value: "{{i}} + 1"
    next: loop
  - id: branch
    type: if
    condition: "{{total}} >= 30"
    trueNext: big
    falseNext: small
  - id: big
    type: variable
    name: verdict
    value: "big {{total}}"
    next: end
  - id: small
    type: variable
    name: verdict
    value: small
"#;

#[tokio::test(flavor = "multi_thread")]
async fn python_stdio_loop_and_branch_chain_tool_outputs() {
    let mut h = Harness::new(vec![stdio_spec("py", python_stdio_command())]);
    let o = h.run(PY_LOOP, &[("rounds", "3")]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "total"), "30");
    assert_eq!(text(&o, "i"), "3");
    assert_eq!(text(&o, "verdict"), "big 30");
    // The loop ran its body three times, then the branch took the true side.
    let adds = o.steps.iter().filter(|s| s.node == "add").count();
    assert_eq!(adds, 3);
    assert!(o.steps.iter().all(|s| s.status == StepStatus::Ok));
    assert!(!o.steps.iter().any(|s| s.node == "small"));
    // With fewer rounds the other branch is taken.
    let o = h.run(PY_LOOP, &[("rounds", "1")]).await;
    assert_eq!(text(&o, "verdict"), "small");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn everything_stdio_chains_echo_into_echo_and_sum_into_a_branch() {
    let mut h = Harness::new(vec![stdio_spec("everything", everything_stdio_command())]);
    let o = h
        .run(
            r#"
name: everything-chain
nodes:
  - id: first
    type: mcp
    server: everything
    tool: echo
    args: '{"message": "hello {{who:json}}"}'
    saveTo: one
  - id: second
    type: mcp
    server: everything
    tool: echo
    args: '{"message": "{{one:json}}"}'
    saveTo: two
  - id: sum
    type: mcp
    server: everything
    tool: get-sum
    args: '{"a": 2, "b": 3}'
    saveTo: sumText
  - id: check
    type: if
    condition: "{{sumText}} contains is 5"
    trueNext: yes
    falseNext: no
  - id: yes
    type: variable
    name: ok
    value: "sum ok"
    next: end
  - id: no
    type: variable
    name: ok
    value: "sum wrong"
"#,
            &[("who", "Ada \"the first\"")],
        )
        .await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "one"), "Echo: hello Ada \"the first\"");
    assert_eq!(text(&o, "two"), "Echo: Echo: hello Ada \"the first\"");
    assert_eq!(text(&o, "ok"), "sum ok");
    let events = h.events();
    assert!(events.iter().any(|e| matches!(e,
        RunEvent::NodeStarted { node, detail, .. } if node == "first" && detail == "everything.echo")));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn everything_over_http_by_url_uses_a_one_off_client() {
    let peer = spawn_everything(EverythingMode::StreamableHttp).await;
    let mut h = Harness::new(vec![]);
    let yaml = format!(
        r#"
name: by-url
nodes:
  - id: call
    type: mcp
    url: "{}"
    tool: get-sum
    args: '{{"a": 20, "b": 22}}'
    saveTo: answer
"#,
        peer.url
    );
    let o = h.run(&yaml, &[]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "answer"), "The sum of 20 and 22 is 42.");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_tool_stops_the_run_unless_continue_on_error() {
    let mut h = Harness::new(vec![stdio_spec("py", python_stdio_command())]);
    let stop = r#"
nodes:
  - id: bad
    type: mcp
    server: py
    tool: fail
    saveTo: out
  - id: after
    type: variable
    name: reached
    value: "yes"
"#;
    let o = h.run(stop, &[]).await;
    let f = o.failure.clone().expect("the run failed");
    assert_eq!(f.node, "bad");
    assert_eq!(f.kind, "mcp");
    assert!(f.message.contains("this tool always fails"), "{f:?}");
    assert!(o.variables.get("reached").is_none());
    assert_eq!(o.steps.last().unwrap().status, StepStatus::Failed);

    let go_on = stop.replace("saveTo: out", "saveTo: out\n    continueOnError: \"true\"");
    let o = h.run(&go_on, &[]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert!(text(&o, "out").contains("this tool always fails"));
    assert_eq!(text(&o, "reached"), "yes");
    assert_eq!(o.steps[0].status, StepStatus::ContinuedAfterError);

    // An unknown tool fails its node too, naming the tools there are.
    let o = h
        .run(
            "nodes:\n  - id: nope\n    type: mcp\n    server: py\n    tool: no_such_tool\n",
            &[],
        )
        .await;
    let f = o.failure.expect("unknown tool fails");
    assert!(f.message.contains("has no tool `no_such_tool`"), "{f:?}");
    assert!(f.message.contains("echo"), "{f:?}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_timeout_cancels_a_hanging_tool() {
    let peer = spawn_python(PyMode::StreamableHttp, &[]).await;
    let mut h = Harness::new(vec![stdio_spec("py", python_stdio_command())]);
    let started = Instant::now();
    let o = h
        .run(
            r#"
nodes:
  - id: wait
    type: mcp
    server: py
    tool: hang
    timeout: 500
"#,
            &[],
        )
        .await;
    let f = o.failure.expect("the hang timed out");
    assert_eq!(f.node, "wait");
    assert!(f.message.contains("timed out after 500 ms"), "{f:?}");
    assert!(started.elapsed() < Duration::from_secs(30));

    // Over HTTP by URL (a one-off client), with continueOnError the error text is saved.
    let yaml = format!(
        r#"
nodes:
  - id: wait
    type: mcp
    url: "{}"
    tool: hang
    timeout: 300
    continueOnError: "true"
    saveTo: err
  - id: next
    type: variable
    name: after
    value: done
"#,
        peer.url
    );
    let o = h.run(&yaml, &[]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert!(text(&o, "err").contains("timed out after 300 ms"));
    assert_eq!(text(&o, "after"), "done");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_clock_ui_is_saved_with_save_ui_to() {
    let url = demo_http().await;
    // Configured under a name; the node gives the URL with a trailing slash, so the
    // configured server's connection is used.
    let mut h = Harness::new(vec![http_spec("demo-http", &url)]);
    let yaml = format!(
        r#"
name: clock
nodes:
  - id: show-clock
    type: mcp
    url: "{url}/"
    tool: clock
    saveTo: time
    saveUiTo: ui
"#
    );
    let o = h.run(&yaml, &[]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert!(text(&o, "time").starts_with("The time is "));
    let ui: Value = serde_json::from_str(&text(&o, "ui")).unwrap();
    // As in GemiHub: the URL as the node gave it.
    assert_eq!(ui["serverUrl"], format!("{url}/"));
    assert_eq!(ui["resourceUri"], switchboard_demo_server::CLOCK_UI_URI);
    assert_eq!(ui["mimeType"], switchboard_demo_server::CLOCK_UI_MIME_TYPE);
    assert!(ui["content"].as_str().unwrap().contains("<html"), "{ui}");
    assert_eq!(ui["server"], "demo-http");
    assert_eq!(o.apps.len(), 1);
    assert_eq!(o.apps[0].node, "show-clock");
    assert_eq!(o.apps[0].server.as_deref(), Some("demo-http"));
    // The configured server was connected (and stays so for later nodes).
    assert!(h.runner.host().connection("demo-http").is_some());
    let events = h.events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RunEvent::App(a) if a.node == "show-clock"))
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_tool_progress_reaches_the_log_and_structured_results_chain() {
    let url = demo_http().await;
    let mut h = Harness::new(vec![]);
    let yaml = format!(
        r#"
nodes:
  - id: slow
    type: mcp
    url: "{url}"
    tool: slow
    args: '{{"seconds": 0.3, "steps": 3}}'
    saveTo: slowText
  - id: add
    type: mcp
    url: "{url}"
    tool: add
    args: '{{"a": 1.5, "b": 2}}'
    saveTo: sum
  - id: twice
    type: set
    name: doubled
    value: "{{{{sum}}}} * 2"
"#
    );
    let o = h.run(&yaml, &[]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "sum"), "3.5");
    assert_eq!(text(&o, "doubled"), "7");
    let events = h.events();
    let progress: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, RunEvent::Progress { node, .. } if node == "slow"))
        .collect();
    assert!(!progress.is_empty(), "{events:#?}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn elicitation_without_defaults_is_declined_and_logged() {
    let mut h = Harness::new(vec![stdio_spec("everything", everything_stdio_command())]);
    let o = h
        .run(
            r#"
nodes:
  - id: ask
    type: mcp
    server: everything
    tool: trigger-elicitation-request
    saveTo: answer
    continueOnError: "true"
"#,
            &[],
        )
        .await;
    assert!(o.is_ok(), "{:?}", o.failure);
    let events = h.events();
    assert!(
        events.iter().any(|e| matches!(e,
            RunEvent::Elicitation { server, accepted: false, .. } if server == "everything")),
        "{events:#?}"
    );
    assert!(
        text(&o, "answer").to_lowercase().contains("decline"),
        "{}",
        text(&o, "answer")
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_fails_its_node_with_the_reason() {
    let spec = stdio_spec("broken", ("/no/such/program".into(), vec![]));
    let mut h = Harness::new(vec![spec]);
    let o = h
        .run(
            "nodes:\n  - id: call\n    type: mcp\n    server: broken\n    tool: x\n",
            &[],
        )
        .await;
    let f = o.failure.expect("fails");
    assert_eq!(f.node, "call");
    assert!(
        f.message.contains("could not connect to server `broken`"),
        "{f:?}"
    );
    h.shutdown().await;
}
