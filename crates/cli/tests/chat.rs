//! `switchboard chat -p` end to end: the real binary, the bundled demo MCP server (a
//! real rmcp server over stdio) and a local fake of the Gemini REST API that follows the
//! wire format and rejects what the real API rejects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use switchboard_model_fakes::gemini::{FakeGemini, FakeTurn, last_function_responses};

struct Run {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Run {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    fn settings(&self, v: Value) {
        std::fs::write(self.home.path().join("settings.json"), v.to_string()).unwrap();
    }

    async fn chat(&self, fake: &FakeGemini, args: &[&str]) -> Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("chat")
            .args(args)
            .env("SWITCHBOARD_HOME", self.home.path())
            .env("GEMINI_API_KEY", fake.api_key())
            .env("GEMINI_BASE_URL", &fake.base_url)
            .current_dir(self.project.path())
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap()
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_switchboard")
}

fn response_text(fr: &Value) -> String {
    fr.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_shot_text_answer() {
    let fake = FakeGemini::start(vec![FakeTurn::text("Hello from the model.")]).await;
    let run = Run::new();
    let o = run.chat(&fake, &["-p", "say hello"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), "Hello from the model.");
    let req = &fake.requests()[0];
    assert_eq!(req["contents"][0]["parts"][0]["text"], "say hello");
    // The demo server's tools were declared with valid names and schemas.
    let names: Vec<String> = req["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"mcp_demo_echo".to_string()), "{names:?}");
    // The server's instructions reach the system prompt.
    assert!(
        req["systemInstruction"]
            .to_string()
            .contains("switchboard-demo")
            || req["systemInstruction"].to_string().contains("demo")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_calls_in_one_turn_reach_the_real_server() {
    let fake = FakeGemini::start(vec![
        FakeTurn::calls([
            ("mcp_demo_echo", json!({"message": "one"})),
            ("mcp_demo_add", json!({"a": 2, "b": 3})),
        ]),
        FakeTurn::dynamic(|req| {
            let frs = last_function_responses(req);
            FakeTurn::text(format!(
                "saw {} responses: {}",
                frs.len(),
                Value::Array(frs.clone())
            ))
        }),
    ])
    .await;
    let run = Run::new();
    let o = run.chat(&fake, &["-p", "use two tools"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let frs = last_function_responses(&reqs[1]);
    assert_eq!(frs.len(), 2);
    assert_eq!(frs[0]["name"], "mcp_demo_echo");
    assert!(response_text(&frs[0]).contains("Echo: one"), "{}", frs[0]);
    assert_eq!(frs[1]["name"], "mcp_demo_add");
    assert!(response_text(&frs[1]).contains('5'), "{}", frs[1]);
    // The model turn went back unchanged (the fake rejects lost thought signatures).
    assert!(out(&o).contains("saw 2 responses"));
    assert!(err(&o).contains("demo.echo"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_argument_goes_back_to_the_model_which_fixes_it() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_demo_add", json!({"a": "two", "b": 3})),
        FakeTurn::dynamic(|req| {
            let frs = last_function_responses(req);
            if frs[0]["response"].get("error").is_some() {
                FakeTurn::call("mcp_demo_add", json!({"a": 2, "b": 3}))
            } else {
                FakeTurn::text("unexpected success")
            }
        }),
        FakeTurn::dynamic(|req| {
            let frs = last_function_responses(req);
            FakeTurn::text(format!("fixed: {}", frs[0]["response"]))
        }),
    ])
    .await;
    let run = Run::new();
    let o = run.chat(&fake, &["-p", "add"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let reqs = fake.requests();
    let first = last_function_responses(&reqs[1]);
    let e = first[0]["response"]["error"].to_string();
    assert!(e.contains("input schema"), "{e}");
    assert!(out(&o).contains("fixed:"));
    assert!(out(&o).contains('5'));
}

#[tokio::test(flavor = "multi_thread")]
async fn images_go_inside_the_function_response_on_gemini_3() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_demo_tiny_image", json!({})),
        FakeTurn::text("a tiny image"),
    ])
    .await;
    let run = Run::new();
    let o = run
        .chat(
            &fake,
            &["-p", "show an image", "--model", "gemini-3-flash-preview"],
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let reqs = fake.requests();
    let frs = last_function_responses(&reqs[1]);
    assert_eq!(frs[0]["parts"][0]["inlineData"]["mimeType"], "image/png");

    // Older models: a sibling inlineData part instead.
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_demo_tiny_image", json!({})),
        FakeTurn::text("a tiny image"),
    ])
    .await;
    let o = run
        .chat(
            &fake,
            &["-p", "show an image", "--model", "gemini-2.5-flash"],
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let reqs = fake.requests();
    let last = reqs[1]["contents"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["inlineData"]["mimeType"] == "image/png"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prompts_are_slash_commands_and_at_references_attach_resources() {
    let fake = FakeGemini::start(vec![FakeTurn::text("ok"), FakeTurn::text("ok")]).await;
    let run = Run::new();
    let o = run.chat(&fake, &["-p", "/greet Ada"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let o = run
        .chat(&fake, &["-p", "summarize @demo:demo://readme please"])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let reqs = fake.requests();
    assert!(
        reqs[0]["contents"][0].to_string().contains("Ada"),
        "{}",
        reqs[0]["contents"][0]
    );
    let user = reqs[1]["contents"][0].to_string();
    assert!(user.contains("Content of @demo:demo://readme"), "{user}");

    let o = run.chat(&fake, &["-p", "/greet"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("Missing required argument(s): --name"),
        "{}",
        err(&o)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_untrusted_server_without_a_terminal_is_refused_and_the_model_is_told() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_mine_echo", json!({"message": "x"})),
        FakeTurn::dynamic(|req| {
            let frs = last_function_responses(req);
            FakeTurn::text(format!("result: {}", frs[0]["response"]))
        }),
    ])
    .await;
    let run = Run::new();
    run.settings(json!({"mcpServers": {"mine": {"command": exe(), "args": ["demo-server"]}}}));
    let o = run.chat(&fake, &["-p", "echo x"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("declined tool call mine.echo"),
        "{}",
        err(&o)
    );
    assert!(out(&o).contains("declined"), "{}", out(&o));

    // --yolo runs it.
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_mine_echo", json!({"message": "x"})),
        FakeTurn::dynamic(|req| {
            FakeTurn::text(format!(
                "result: {}",
                last_function_responses(req)[0]["response"]
            ))
        }),
    ])
    .await;
    let o = run.chat(&fake, &["-p", "echo x", "--yolo"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("Echo: x"), "{}", out(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn gemma_gets_no_tools_and_errors_exit_non_zero() {
    let fake = FakeGemini::start(vec![
        FakeTurn::text("plain"),
        FakeTurn::error(400, "API key not valid"),
    ])
    .await;
    let run = Run::new();
    let o = run
        .chat(&fake, &["-p", "hi", "--model", "gemma-3-27b-it"])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(err(&o).contains("no function calling"));
    assert!(fake.requests()[0].get("tools").is_none());
    let o = run.chat(&fake, &["-p", "hi"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("API key not valid"), "{}", err(&o));
}

#[test]
fn a_missing_api_key_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(exe())
        .args(["chat", "-p", "hi"])
        .env("SWITCHBOARD_HOME", home.path())
        .env_remove("GEMINI_API_KEY")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("GEMINI_API_KEY"), "{}", err(&o));
    let _ = Path::new("");
}

#[tokio::test(flavor = "multi_thread")]
async fn server_sampling_is_answered_by_the_model_for_trusted_servers() {
    let (cmd, args) = switchboard_testkit::everything_stdio_command();
    let fake = FakeGemini::start(vec![
        FakeTurn::call(
            "mcp_everything_trigger-sampling-request",
            json!({"prompt": "Name a colour", "maxTokens": 20}),
        ),
        // The server's sampling/createMessage reaches the model (a plain request, no tools).
        FakeTurn::dynamic(|req| {
            assert!(
                req.get("tools").is_none(),
                "sampling requests carry no tools"
            );
            FakeTurn::text("Teal.")
        }),
        FakeTurn::dynamic(|req| {
            let frs = last_function_responses(req);
            FakeTurn::text(format!("tool said: {}", frs[0]["response"]))
        }),
    ])
    .await;
    let run = Run::new();
    run.settings(
        json!({"mcpServers": {"everything": {"command": cmd, "args": args, "trust": true}}}),
    );
    let o = run.chat(&fake, &["-p", "sample something"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("Teal."), "{}", out(&o));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs[1]["contents"].to_string().contains("Name a colour"),
        "{}",
        reqs[1]
    );

    // An untrusted server under --yolo: the tool call and its sampling request both run.
    let fake = FakeGemini::start(vec![
        FakeTurn::call(
            "mcp_everything_trigger-sampling-request",
            json!({"prompt": "Name a fruit", "maxTokens": 20}),
        ),
        FakeTurn::text("Mango."),
        FakeTurn::dynamic(|req| {
            FakeTurn::text(format!(
                "tool said: {}",
                last_function_responses(req)[0]["response"]
            ))
        }),
    ])
    .await;
    run.settings(json!({"mcpServers": {"everything": {"command": cmd, "args": args}}}));
    let o = run.chat(&fake, &["-p", "sample something", "--yolo"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("Mango."), "{}", out(&o));
}
