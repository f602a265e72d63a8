//! `switchboard chat --provider openai` end to end: the real binary, the bundled demo MCP
//! server (a real rmcp server over stdio) and a local fake OpenAI-compatible
//! chat-completions server that follows the wire format (JSON and SSE chunks, `[DONE]`)
//! and rejects what real servers reject (unanswered tool calls, unknown tool call ids,
//! bad function names, non-object parameter schemas, unknown roles).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

use serde_json::json;
use switchboard_model_fakes::gemini::FakeTurn;
use switchboard_model_fakes::openai::{
    FakeOpenAi, FakeOpenAiOptions, declared_tool_names, last_tool_messages,
};

const MODEL: &str = "local-model";

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

    /// `switchboard chat --provider openai --base-url <fake> <args>`, with no key in the
    /// environment (local servers need none).
    async fn chat(&self, fake: &FakeOpenAi, args: &[&str]) -> Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("chat")
            .args(["--provider", "openai", "--base-url", &fake.base_url])
            .args(args)
            .env("SWITCHBOARD_HOME", self.home.path())
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("GEMINI_API_KEY")
            .env_remove("GEMINI_BASE_URL")
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

#[tokio::test(flavor = "multi_thread")]
async fn a_text_answer_with_the_demo_tools_declared() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("Hello from a local model.")]).await;
    let run = Run::new();
    let o = run
        .chat(&fake, &["-p", "say hello", "--model", MODEL])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), "Hello from a local model.");
    let rec = &fake.recorded()[0];
    assert_eq!(rec.model, MODEL);
    assert!(rec.stream, "answers are streamed by default");
    assert_eq!(rec.api_key, None);
    let messages = rec.body["messages"].as_array().unwrap();
    // The demo server's instructions reach the system message, the prompt the user one.
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"].as_str().unwrap().contains("demo"),
        "{}",
        messages[0]
    );
    assert_eq!(
        messages.last().unwrap(),
        &json!({"role": "user", "content": "say hello"})
    );
    let names = declared_tool_names(&rec.body);
    assert!(names.contains(&"mcp_demo_echo".to_string()), "{names:?}");
    for tool in rec.body["tools"].as_array().unwrap() {
        assert_eq!(tool["type"], "function");
        assert_eq!(tool["function"]["parameters"]["type"], "object", "{tool}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_round_trip_through_the_demo_server() {
    let fake = FakeOpenAi::start(vec![
        FakeTurn::call("mcp_demo_echo", json!({"message": "from a local model"})),
        FakeTurn::dynamic(|req| {
            let tools = last_tool_messages(req);
            FakeTurn::text(format!(
                "The tool said: {}",
                tools[0]["content"].as_str().unwrap_or("?")
            ))
        }),
    ])
    .await;
    let run = Run::new();
    let o = run
        .chat(&fake, &["-p", "echo something", "--model", MODEL])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains("The tool said: {\"output\":\"<untrusted-data-"),
        "{}",
        out(&o)
    );
    assert!(err(&o).contains("demo.echo"), "{}", err(&o));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let messages = reqs[1]["messages"].as_array().unwrap();
    let n = messages.len();
    // The assistant turn went back with the server's call id; the tool message answers it.
    assert_eq!(messages[n - 2]["role"], "assistant");
    assert_eq!(messages[n - 2]["tool_calls"][0]["id"], "call_fake1x1");
    assert_eq!(
        messages[n - 2]["tool_calls"][0]["function"]["arguments"],
        "{\"message\":\"from a local model\"}"
    );
    assert_eq!(messages[n - 1]["role"], "tool");
    assert_eq!(messages[n - 1]["tool_call_id"], "call_fake1x1");
    // The result is the server's text inside this conversation's untrusted-data tags.
    let content: serde_json::Value =
        serde_json::from_str(messages[n - 1]["content"].as_str().unwrap()).unwrap();
    let output = content["output"].as_str().unwrap();
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 3, "{output}");
    assert!(
        lines[0].starts_with("<untrusted-data-")
            && lines[0].ends_with(" source=\"server `demo`, tool `echo`\" kind=\"tool_result\">"),
        "{output}"
    );
    assert_eq!(lines[1], "Echo: from a local model");
    assert_eq!(
        lines[2],
        format!("</{}>", &lines[0][1..lines[0].find(' ').unwrap()])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_calls_an_image_result_and_no_streaming() {
    let fake = FakeOpenAi::start(vec![
        FakeTurn::calls([
            ("mcp_demo_add", json!({"a": 2, "b": 3})),
            ("mcp_demo_tiny_image", json!({})),
        ]),
        FakeTurn::dynamic(|req| {
            FakeTurn::text(format!(
                "saw {} tool results",
                last_tool_messages(req).len()
            ))
        }),
    ])
    .await;
    let run = Run::new();
    let o = run
        .chat(
            &fake,
            &["-p", "add and draw", "--model", MODEL, "--no-stream"],
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), "saw 2 tool results");
    let rec = fake.recorded();
    assert!(!rec[0].stream);
    let messages = rec[1].body["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 3]["role"], "tool");
    assert!(
        messages[n - 3]["content"].as_str().unwrap().contains('5'),
        "{}",
        messages[n - 3]
    );
    assert_eq!(messages[n - 2]["role"], "tool");
    // The image goes after the tool messages, as a user message with a data URI.
    let last = &messages[n - 1];
    assert_eq!(last["role"], "user");
    let image = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "image_url")
        .unwrap();
    assert!(
        image["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,"),
        "{image}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_is_sent_when_set_and_errors_exit_non_zero() {
    let fake = FakeOpenAi::start_with(
        FakeOpenAiOptions {
            api_key: Some("sk-test-key".into()),
            ..FakeOpenAiOptions::default()
        },
        vec![FakeTurn::text("authorized")],
    )
    .await;
    let run = Run::new();
    // Without the key: the server's 401, a hint, exit 1.
    let o = run.chat(&fake, &["-p", "hi", "--model", MODEL]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("OpenAI-compatible API error 401"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("OPENAI_API_KEY"), "{}", err(&o));
    // With it.
    let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["chat", "--provider", "openai", "-p", "hi", "--model", MODEL])
        .env("SWITCHBOARD_HOME", run.home.path())
        .env("OPENAI_API_KEY", "sk-test-key")
        .env("OPENAI_BASE_URL", &fake.base_url)
        .current_dir(run.project.path())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), "authorized");
    assert_eq!(
        fake.recorded().last().unwrap().api_key.as_deref(),
        Some("sk-test-key")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_needs_a_model() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("unused")]).await;
    let run = Run::new();
    let o = run.chat(&fake, &["-p", "hi"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("--provider openai needs a model"),
        "{}",
        err(&o)
    );
    assert!(fake.requests().is_empty());

    // `model` in the settings is enough.
    std::fs::write(
        run.home.path().join("settings.json"),
        json!({"model": "from-settings"}).to_string(),
    )
    .unwrap();
    let o = run.chat(&fake, &["-p", "hi"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(fake.recorded()[0].model, "from-settings");
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_openai_in_the_settings_needs_no_flag_and_the_flag_wins() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("from settings")]).await;
    let run = Run::new();
    std::fs::write(
        run.home.path().join("settings.json"),
        json!({"provider": "openai", "model": MODEL, "mcpServers": {}}).to_string(),
    )
    .unwrap();
    let chat = |args: &[&str]| {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
        c.arg("chat")
            .args(args)
            .env("SWITCHBOARD_HOME", run.home.path())
            .env_remove("OPENAI_API_KEY")
            .env("OPENAI_BASE_URL", &fake.base_url)
            .env_remove("GEMINI_API_KEY")
            .env_remove("GEMINI_BASE_URL")
            .current_dir(run.project.path())
            .stdin(std::process::Stdio::null());
        c
    };
    let o = chat(&["-p", "hi"]).output().await.unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), "from settings");
    assert_eq!(fake.recorded()[0].model, MODEL);

    // `--provider gemini` overrides the settings: no Gemini key, so it fails naming
    // Gemini, and nothing reaches the OpenAI-compatible server.
    let o = chat(&["-p", "hi", "--provider", "gemini"])
        .output()
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("GEMINI_API_KEY"), "{}", err(&o));
    assert_eq!(fake.requests().len(), 1);

    // An unknown provider in the settings is named, with the choices.
    std::fs::write(
        run.home.path().join("settings.json"),
        json!({"provider": "anthropic", "model": MODEL, "mcpServers": {}}).to_string(),
    )
    .unwrap();
    let o = chat(&["-p", "hi"]).output().await.unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("`anthropic`"), "{}", err(&o));
    assert!(err(&o).contains("`openai`"), "{}", err(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_openai_base_url_is_named_as_openai_not_gemini() {
    let run = Run::new();
    let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "chat",
            "--provider",
            "openai",
            "--base-url",
            "ftp://127.0.0.1/v1",
        ])
        .args(["-p", "hi", "--model", MODEL])
        .env("SWITCHBOARD_HOME", run.home.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .current_dir(run.project.path())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("invalid OpenAI-compatible base URL"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("Gemini"), "{}", err(&o));
}
