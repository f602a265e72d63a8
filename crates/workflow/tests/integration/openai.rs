//! `command` nodes against the fake OpenAI-compatible server: the runner builds its
//! model through the one factory (`ModelConfig`), so `provider: openai` works as in the
//! CLI's chat.

use serde_json::json;
use switchboard_model::ModelConfig;
use switchboard_model_fakes::gemini::FakeTurn;
use switchboard_model_fakes::openai::{FakeOpenAi, declared_tool_names, last_tool_messages};
use switchboard_workflow::RunEvent;

use crate::common::{Harness, demo_http, http_spec, text};

#[tokio::test(flavor = "multi_thread")]
async fn a_command_node_talks_to_an_openai_compatible_model_with_its_tools() {
    let fake = FakeOpenAi::start(vec![
        FakeTurn::call("mcp_demo_add", json!({"a": 20, "b": 22})),
        FakeTurn::text("The answer is 42."),
    ])
    .await;
    let url = demo_http().await;
    // `provider: openai` and `model` from the settings, as `switchboard run` passes them.
    let model = ModelConfig::openai(fake.options());
    let mut h = Harness::with(vec![http_spec("demo", &url)], move |o| {
        o.model = Some(model);
        o.default_model = Some("local-model".into());
    });
    let o = h
        .run(
            "nodes:\n  - id: ask\n    type: command\n    prompt: \"What is 20+22?\"\n    mcpServers: demo\n    saveTo: answer\n",
            &[],
        )
        .await;
    assert!(o.is_ok(), "{:?}", o.failure);
    assert_eq!(text(&o, "answer"), "The answer is 42.");
    let rec = fake.recorded();
    assert_eq!(rec.len(), 2);
    assert!(rec.iter().all(|r| r.model == "local-model"));
    assert!(declared_tool_names(&rec[0].body).contains(&"mcp_demo_add".to_string()));
    assert!(
        last_tool_messages(&rec[1].body)[0]
            .to_string()
            .contains("42"),
        "{:?}",
        last_tool_messages(&rec[1].body)
    );
    let events = h.events();
    assert!(
        events.iter().any(|e| matches!(e,
            RunEvent::NodeStarted { detail, .. } if detail == "OpenAI-compatible with demo")),
        "{events:#?}"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_command_node_without_a_model_names_the_provider() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("unused")]).await;
    let model = ModelConfig::openai(fake.options());
    let mut h = Harness::with(vec![], move |o| o.model = Some(model));
    let o = h
        .run(
            "nodes:\n  - id: ask\n    type: command\n    prompt: hi\n",
            &[],
        )
        .await;
    let f = o.failure.expect("fails");
    assert_eq!(f.node, "ask");
    assert!(f.message.contains("OpenAI-compatible provider"), "{f:?}");
    assert!(f.message.contains("`model` on the node"), "{f:?}");
    assert!(!f.message.contains("Gemini"), "{f:?}");
    assert!(fake.requests().is_empty());
}
