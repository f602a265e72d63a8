//! Nodes that need no MCP server: `http` (against a local server, through the URL
//! guard), `json`, `sleep`, sub-workflows, loop bounds, Markdown workflows.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use serde_json::json;
use switchboard_net::UrlPolicy;
use switchboard_workflow::{MAX_WHILE_ITERATIONS, ValidateOptions, Variables, Workflow, validate};

use crate::common::{Harness, guard, text};

async fn local_server() -> String {
    let app = Router::new()
        .route(
            "/items",
            get(|| async {
                axum::Json(json!({"items": [{"name": "alpha"}, {"name": "beta"}], "count": 2}))
            }),
        )
        .route(
            "/echo",
            post(|headers: HeaderMap, body: Bytes| async move {
                let ct = headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let auth = headers
                    .get("x-token")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                axum::Json(json!({
                    "contentType": ct,
                    "token": auth,
                    "body": String::from_utf8_lossy(&body),
                }))
            }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "no such thing") }),
        )
        .route(
            "/pic",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/png")],
                    vec![0x89u8, b'P', b'N', b'G'],
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread")]
async fn http_nodes_get_post_and_parse() {
    let base = local_server().await;
    let mut h = Harness::new(vec![]);
    let yaml = r#"
nodes:
  - id: list
    type: http
    url: "{{base}}/items"
    saveTo: items
    saveStatus: status
  - id: parse
    type: json
    source: items
    saveTo: parsed
  - id: i
    type: variable
    name: idx
    value: 1
  - id: second
    type: variable
    name: second
    value: "{{parsed.items[idx].name}} of {{items.count}}"
  - id: send
    type: http
    url: "{{base}}/echo"
    method: POST
    headers: '{"X-Token": "t-{{idx}}"}'
    body: '{"pick": "{{second:json}}"}'
    saveTo: echoed
  - id: text
    type: http
    url: "{{base}}/echo"
    method: POST
    contentType: text
    headers: "X-Token: plain"
    body: "hello {{idx}}"
    saveTo: echoedText
  - id: form
    type: http
    url: "{{base}}/echo"
    method: POST
    contentType: form-data
    body: '{"field": "v{{idx}}", "file:notes.txt": "file body"}'
    saveTo: echoedForm
  - id: pic
    type: http
    url: "{{base}}/pic"
    saveTo: picture
"#;
    let o = h.run(yaml, &[("base", &base)]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "status"), "200");
    assert_eq!(text(&o, "second"), "beta of 2");
    let echoed: serde_json::Value = serde_json::from_str(&text(&o, "echoed")).unwrap();
    assert_eq!(echoed["contentType"], "application/json");
    assert_eq!(echoed["token"], "t-1");
    assert_eq!(echoed["body"], r#"{"pick": "beta of 2"}"#);
    let t: serde_json::Value = serde_json::from_str(&text(&o, "echoedText")).unwrap();
    assert_eq!(t["contentType"], "text/plain");
    assert_eq!(t["token"], "plain");
    assert_eq!(t["body"], "hello 1");
    let f: serde_json::Value = serde_json::from_str(&text(&o, "echoedForm")).unwrap();
    assert!(
        f["contentType"]
            .as_str()
            .unwrap()
            .starts_with("multipart/form-data; boundary=")
    );
    let body = f["body"].as_str().unwrap();
    assert!(body.contains("name=\"field\"\r\n\r\nv1\r\n"), "{body}");
    assert!(
        body.contains("filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\nfile body"),
        "{body}"
    );
    let pic: serde_json::Value = serde_json::from_str(&text(&o, "picture")).unwrap();
    assert_eq!(pic["contentType"], "binary");
    assert_eq!(pic["mimeType"], "image/png");
    assert_eq!(pic["basename"], "download.png");
    assert_eq!(pic["data"], "iVBORw==");
}

#[tokio::test(flavor = "multi_thread")]
async fn http_errors_fail_unless_throw_on_error_is_false() {
    let base = local_server().await;
    let mut h = Harness::new(vec![]);
    let o = h
        .run(
            "nodes:\n  - id: get\n    type: http\n    url: \"{{base}}/missing\"\n    saveTo: body\n",
            &[("base", &base)],
        )
        .await;
    let f = o.failure.expect("404 fails by default");
    assert_eq!(f.node, "get");
    assert!(f.message.contains("HTTP 404"), "{f:?}");
    assert!(f.message.contains("no such thing"), "{f:?}");

    let o = h
        .run(
            r#"
nodes:
  - id: get
    type: http
    url: "{{base}}/missing"
    throwOnError: "false"
    saveTo: body
    saveStatus: status
  - id: check
    type: if
    condition: "{{status}} >= 400"
    trueNext: handle
    falseNext: fine
  - id: handle
    type: variable
    name: result
    value: "failed with {{status}}: {{body}}"
    next: end
  - id: fine
    type: variable
    name: result
    value: ok
"#,
            &[("base", &base)],
        )
        .await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "result"), "failed with 404: no such thing");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_url_guard_applies_to_http_nodes() {
    let base = local_server().await;
    let mut h = Harness::with(vec![], |o| o.guard = Some(guard(UrlPolicy::Strict)));
    let o = h
        .run(
            "nodes:\n  - id: get\n    type: http\n    url: \"{{base}}/items\"\n",
            &[("base", &base)],
        )
        .await;
    let f = o.failure.expect("strict blocks loopback");
    assert!(f.message.contains("HTTP request failed"), "{f:?}");
    assert!(
        f.message.contains("127.0.0.1") || f.message.contains("loopback"),
        "{f:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sub_workflows_take_input_and_give_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("lib")).unwrap();
    std::fs::write(
        dir.path().join("lib/greet.yaml"),
        r#"
name: greet
nodes:
  - id: make
    type: variable
    name: greeting
    value: "Hello, {{name}}!"
  - id: count
    type: set
    name: n
    value: "{{times}} * 2"
"#,
    )
    .unwrap();
    let parent = dir.path().join("main.yaml");
    std::fs::write(
        &parent,
        r#"
name: main
nodes:
  - id: call
    type: workflow
    path: lib/greet.yaml
    input: '{"name": "{{who}}", "times": 21}'
    output: '{"message": "greeting", "twice": "n"}'
  - id: use
    type: variable
    name: final
    value: "{{message}} ({{twice}})"
  - id: all
    type: workflow
    path: lib/greet.yaml
    input: '{"name": "again", "times": 1}'
    prefix: "sub_"
"#,
    )
    .unwrap();
    let wf = Workflow::load(&parent).unwrap();
    let mut h = Harness::new(vec![]);
    let o = h.run_wf(&wf, &[("who", "Ada")]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "final"), "Hello, Ada! (42)");
    assert_eq!(text(&o, "sub_greeting"), "Hello, again!");
    assert!(o.steps.iter().any(|s| s.node == "call/make"));

    // A failing child node is named with its parent.
    std::fs::write(
        dir.path().join("lib/bad.yaml"),
        "nodes:\n  - id: boom\n    type: set\n    name: x\n    value: \"1 / 0\"\n",
    )
    .unwrap();
    std::fs::write(
        &parent,
        "nodes:\n  - id: call\n    type: workflow\n    path: lib/bad.yaml\n",
    )
    .unwrap();
    let wf = Workflow::load(&parent).unwrap();
    let o = h.run_wf(&wf, &[]).await;
    let f = o.failure.expect("child fails");
    assert_eq!(f.node, "call/boom");
    assert!(f.message.contains("division by zero"), "{f:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_while_loop_is_bounded() {
    let mut h = Harness::new(vec![]);
    let o = h
        .run(
            r#"
nodes:
  - id: n
    type: variable
    name: n
    value: 0
  - id: forever
    type: while
    condition: "1 == 1"
    trueNext: inc
    falseNext: end
  - id: inc
    type: set
    name: n
    value: "{{n}} + 1"
    next: forever
"#,
            &[],
        )
        .await;
    let f = o.failure.clone().expect("stopped");
    assert_eq!(f.node, "forever");
    assert!(f.message.contains("more than 1000 times"), "{f:?}");
    assert_eq!(text(&o, "n"), MAX_WHILE_ITERATIONS.to_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn sleep_json_and_a_markdown_workflow() {
    let md = r#"# Tidy up

Some prose about the workflow.

```workflow
name: from-markdown
nodes:
  - id: raw
    type: variable
    name: raw
    value: "The model said:\n```json\n{\"answer\": [1, 2, 3]}\n```"
  - id: parse
    type: json
    source: raw
    saveTo: data
  - id: nap
    type: sleep
    duration: "{{data.answer[0]}}0"
  - id: has
    type: if
    condition: "{{data.answer}} contains 2"
    trueNext: yes
  - id: no
    type: variable
    name: found
    value: "no"
    next: end
  - id: yes
    type: variable
    name: found
    value: "yes, {{data.answer.length}} items"
```
"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flow.md");
    std::fs::write(&path, md).unwrap();
    let wf = Workflow::load(&path).unwrap();
    assert_eq!(wf.name.as_deref(), Some("from-markdown"));
    assert_eq!(wf.nodes[0].line, 8);
    let mut h = Harness::new(vec![]);
    let o = h.run_wf(&wf, &[]).await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "data"), r#"{"answer":[1,2,3]}"#);
    assert_eq!(text(&o, "found"), "yes, 3 items");
    let nap = o.steps.iter().find(|s| s.node == "nap").unwrap();
    assert_eq!(nap.summary, "slept 10 ms");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_stops_a_sleeping_run() {
    let cancel = tokio_util::sync::CancellationToken::new();
    let c2 = cancel.clone();
    let mut h = Harness::with(vec![], move |o| o.cancel = c2);
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let o = h
        .run(
            "nodes:\n  - id: nap\n    type: sleep\n    duration: 60000\n",
            &[],
        )
        .await;
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(o.failure.unwrap().message.contains("cancelled"));
}

#[test]
fn inputs_count_as_set_for_validation() {
    let wf = Workflow::from_yaml(
        "nodes:\n  - id: a\n    type: variable\n    name: out\n    value: \"{{given}}\"\n",
    )
    .unwrap();
    assert_eq!(validate(&wf, &ValidateOptions::default()).len(), 1);
    let mut vars = Variables::new();
    vars.set_assignment("given=1").unwrap();
    let opts = ValidateOptions {
        inputs: vars.names().map(str::to_string).collect(),
        servers: None,
    };
    assert!(validate(&wf, &opts).is_empty());
}
