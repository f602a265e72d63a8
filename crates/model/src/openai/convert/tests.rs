//! Unit tests of the OpenAI-compatible provider: the request translation (Gemini →
//! chat-completions), the answer translation (chat-completions → Gemini, whole and
//! streamed), error bodies, base URLs and options.

use super::*;
use crate::openai::*;
use crate::types::{
    Blob, FunctionCallingConfig, FunctionResponse, FunctionResponsePart, GenerationConfig, Tool,
    ToolConfig,
};
use std::time::Duration;

fn call(id: Option<&str>, name: &str, args: Value) -> Part {
    Part::function_call(FunctionCall {
        id: id.map(str::to_owned),
        name: name.into(),
        args: args.as_object().cloned(),
        extra: Map::new(),
    })
}

fn response(id: Option<&str>, name: &str, output: Value) -> Part {
    Part::function_response(FunctionResponse::output(
        id.map(str::to_owned),
        name,
        output,
    ))
}

fn decl(name: &str, schema: Option<Value>) -> FunctionDeclaration {
    FunctionDeclaration {
        name: name.into(),
        description: Some(format!("the {name} tool")),
        parameters_json_schema: schema,
        ..FunctionDeclaration::default()
    }
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().clone()
}

#[test]
fn a_whole_conversation_translates_message_by_message() {
    let request = GenerateRequest {
        system_instruction: Some(Content::system("Be brief.")),
        contents: vec![
            Content::user_text("echo hi and add 2 and 3"),
            Content::model(vec![
                Part {
                    text: Some("thinking…".into()),
                    thought: Some(true),
                    ..Part::default()
                },
                Part::text("Calling two tools."),
                call(Some("call_A"), "mcp_demo_echo", json!({"message": "hi"})),
                call(None, "mcp_demo_add", json!({"a": 2, "b": 3})),
            ]),
            Content::user(vec![
                response(Some("call_A"), "mcp_demo_echo", json!("Echo: hi")),
                response(None, "mcp_demo_add", json!("5")),
                Part::inline_data("image/png", "iVBORw0KGgo="),
            ]),
            Content::model(vec![Part::text("Done: Echo: hi, 5.")]),
            Content::user(vec![
                Part::text("what is in this picture?"),
                Part::inline_data("image/jpeg", "/9j/4AAQ"),
            ]),
        ],
        ..GenerateRequest::default()
    };
    let body = to_chat_request("llama3.2", &request, false);
    assert_eq!(body["model"], "llama3.2");
    assert!(body.get("stream").is_none());
    assert!(body.get("tools").is_none());
    let m = messages(&body);
    let generated = stable_call_id(1, 1, "mcp_demo_add");
    assert_eq!(generated.len(), 9);
    assert!(generated.chars().all(|c| c.is_ascii_alphanumeric()));
    let want = vec![
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "echo hi and add 2 and 3"}),
        json!({"role": "assistant", "content": "Calling two tools.", "tool_calls": [
            {"id": "call_A", "type": "function",
             "function": {"name": "mcp_demo_echo", "arguments": "{\"message\":\"hi\"}"}},
            {"id": generated, "type": "function",
             "function": {"name": "mcp_demo_add", "arguments": "{\"a\":2,\"b\":3}"}},
        ]}),
        json!({"role": "tool", "tool_call_id": "call_A", "content": "{\"output\":\"Echo: hi\"}"}),
        json!({"role": "tool", "tool_call_id": generated, "content": "{\"output\":\"5\"}"}),
        json!({"role": "user", "content": [
            {"type": "text", "text": "Content returned by the tool calls above:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ]}),
        json!({"role": "assistant", "content": "Done: Echo: hi, 5."}),
        json!({"role": "user", "content": [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
        ]}),
    ];
    assert_eq!(m, want);
    // The same history always gives the same ids.
    assert_eq!(to_chat_request("llama3.2", &request, false), body);
    assert_eq!(to_chat_request("llama3.2", &request, true)["stream"], true);
}

#[test]
fn responses_without_ids_answer_calls_by_name_then_position() {
    let request = GenerateRequest::new(vec![
        Content::user_text("go"),
        Content::model(vec![
            call(None, "a", json!({})),
            call(None, "b", json!({})),
            call(None, "a", json!({"n": 2})),
        ]),
        // Answered out of order, without ids.
        Content::user(vec![
            response(None, "b", json!(1)),
            response(None, "a", json!(2)),
            response(None, "a", json!(3)),
        ]),
    ]);
    let m = messages(&to_chat_request("m", &request, false));
    let ids: Vec<&str> = m[1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_ne!(ids[0], ids[2]);
    assert_eq!(m[2]["tool_call_id"], ids[1]);
    assert_eq!(m[3]["tool_call_id"], ids[0]);
    assert_eq!(m[4]["tool_call_id"], ids[2]);
    assert_eq!(m.len(), 5);
}

#[test]
fn images_inside_function_responses_follow_the_tool_messages() {
    let mut fr = FunctionResponse::output(Some("c1".into()), "img", json!("an image"));
    fr.parts = Some(vec![FunctionResponsePart {
        inline_data: Some(Blob::new("image/png", "AAAA")),
        extra: Map::new(),
    }]);
    let request = GenerateRequest::new(vec![
        Content::user_text("show"),
        Content::model(vec![call(Some("c1"), "img", json!({}))]),
        Content::user(vec![Part::function_response(fr)]),
    ]);
    let m = messages(&to_chat_request("m", &request, false));
    assert_eq!(m[2]["role"], "tool");
    assert_eq!(m[3]["role"], "user");
    assert_eq!(
        m[3]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
}

#[test]
fn audio_and_other_attachments() {
    let request = GenerateRequest::new(vec![Content::user(vec![
        Part::text("listen"),
        Part::inline_data("audio/wav", "UklGRg=="),
        Part::inline_data("audio/mpeg", "SUQz"),
        Part::inline_data("application/pdf", "JVBERi0="),
    ])]);
    let m = messages(&to_chat_request("m", &request, false));
    let content = m[0]["content"].as_array().unwrap();
    assert_eq!(
        content[1],
        json!({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}})
    );
    assert_eq!(content[2]["input_audio"]["format"], "mp3");
    assert_eq!(content[3]["type"], "text");
    assert!(
        content[3]["text"]
            .as_str()
            .unwrap()
            .contains("application/pdf")
    );
}

#[test]
fn thoughts_are_dropped_and_empty_turns_stay_valid() {
    let request = GenerateRequest::new(vec![
        Content::user_text("hi"),
        Content::model(vec![Part {
            text: Some("only a thought".into()),
            thought: Some(true),
            ..Part::default()
        }]),
        Content::user(Vec::new()),
        Content::user_text("again"),
        Content::model(vec![call(Some("x"), "f", json!({}))]),
        Content::user(vec![response(Some("x"), "f", json!("ok"))]),
    ]);
    let m = messages(&to_chat_request("m", &request, false));
    assert_eq!(m[1], json!({"role": "assistant", "content": ""}));
    // The empty user content is left out.
    assert_eq!(m[2], json!({"role": "user", "content": "again"}));
    // A call-only turn has `content: null`.
    assert_eq!(m[3]["content"], Value::Null);
    assert_eq!(m[3]["tool_calls"][0]["function"]["arguments"], "{}");
    // Tool results without attachments get no extra user message.
    assert_eq!(m.len(), 5);
}

#[test]
fn declarations_become_function_tools() {
    let openapi = FunctionDeclaration {
        name: "legacy".into(),
        description: None,
        parameters: Some(json!({
            "type": "OBJECT",
            "properties": {
                "q": {"type": "STRING", "nullable": true, "description": "query"},
                "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
            },
            "required": ["q"],
            "propertyOrdering": ["q", "tags"],
        })),
        ..FunctionDeclaration::default()
    };
    let mut request = GenerateRequest::new(vec![Content::user_text("x")]);
    request.tools = Some(vec![
        Tool::functions(vec![
            decl(
                "mcp_demo_echo",
                Some(
                    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                ),
            ),
            decl("no_params", None),
            decl(
                "untyped",
                Some(json!({"properties": {"a": {"type": "integer"}}})),
            ),
        ]),
        Tool::google_search(),
        Tool::functions(vec![openapi]),
    ]);
    let body = to_chat_request("m", &request, false);
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(
        tools.len(),
        4,
        "googleSearch has no equivalent and is left out"
    );
    assert_eq!(
        tools[0],
        json!({"type": "function", "function": {
            "name": "mcp_demo_echo",
            "description": "the mcp_demo_echo tool",
            "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        }})
    );
    assert_eq!(
        tools[1]["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(tools[2]["function"]["parameters"]["type"], "object");
    assert_eq!(
        tools[3]["function"],
        json!({"name": "legacy", "parameters": {
            "type": "object",
            "properties": {
                "q": {"type": ["string", "null"], "description": "query"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["q"],
        }})
    );
    assert!(body.get("tool_choice").is_none());
}

#[test]
fn tool_config_and_generation_config() {
    let mut request = GenerateRequest::new(vec![Content::user_text("x")]);
    request.tools = Some(vec![Tool::functions(vec![
        decl("f", None),
        decl("g", None),
    ])]);
    let choice = |mode, names: Option<Vec<&str>>| {
        let mut r = request.clone();
        r.tool_config = Some(ToolConfig {
            function_calling_config: Some(FunctionCallingConfig {
                mode: Some(mode),
                allowed_function_names: names.map(|n| n.into_iter().map(str::to_owned).collect()),
            }),
            extra: Map::new(),
        });
        to_chat_request("m", &r, false)["tool_choice"].clone()
    };
    assert_eq!(choice(FunctionCallingMode::Auto, None), json!("auto"));
    assert_eq!(choice(FunctionCallingMode::None, None), json!("none"));
    assert_eq!(choice(FunctionCallingMode::Any, None), json!("required"));
    assert_eq!(
        choice(FunctionCallingMode::Any, Some(vec!["g"])),
        json!({"type": "function", "function": {"name": "g"}})
    );
    assert_eq!(
        choice(FunctionCallingMode::Any, Some(vec!["f", "g"])),
        json!("required")
    );
    request.generation_config = Some(GenerationConfig {
        temperature: Some(0.5),
        top_p: Some(0.9),
        top_k: Some(40),
        max_output_tokens: Some(256),
        stop_sequences: Some(vec!["END".into()]),
        ..GenerationConfig::default()
    });
    let body = to_chat_request("m", &request, false);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["top_p"], 0.9);
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["stop"], json!(["END"]));
    assert!(body.get("top_k").is_none());
}

#[test]
fn a_completion_becomes_a_model_turn() {
    let body = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "qwen3",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "reasoning_content": "Let me call echo.",
                "content": "Sure.",
                "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "mcp_demo_echo", "arguments": "{\"message\":\"hi\"}"}},
                    {"type": "function", "function": {"name": "mcp_demo_add", "arguments": {"a": 1}}},
                    {"id": "call_3", "type": "function", "function": {"name": "noargs", "arguments": ""}},
                ],
            },
            "finish_reason": "tool_calls",
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    });
    let r = from_chat_completion(&body).unwrap();
    assert_eq!(r.finish_reason(), Some("STOP"));
    assert_eq!(r.text(), "Sure.");
    assert_eq!(r.response_id.as_deref(), Some("chatcmpl-1"));
    assert_eq!(r.model_version.as_deref(), Some("qwen3"));
    let usage = r.usage_metadata.clone().unwrap();
    assert_eq!(
        (
            usage.prompt_token_count,
            usage.candidates_token_count,
            usage.total_token_count
        ),
        (Some(10), Some(5), Some(15))
    );
    let content = r.content().unwrap();
    assert_eq!(content.role.as_deref(), Some("model"));
    assert_eq!(content.parts[0].thought, Some(true));
    let calls = r.function_calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].id.as_deref(), Some("call_1"));
    assert_eq!(calls[0].args_value(), json!({"message": "hi"}));
    let generated = calls[1].id.clone().unwrap();
    assert_eq!(generated.len(), 9);
    assert_eq!(calls[1].args_value(), json!({"a": 1}));
    assert_eq!(calls[2].args_value(), json!({}));

    // Appended to the history, the turn goes back with the same ids and arguments.
    let request = GenerateRequest::new(vec![
        Content::user_text("x"),
        content.clone(),
        Content::user(vec![
            response(Some("call_1"), "mcp_demo_echo", json!("Echo: hi")),
            response(Some(&generated), "mcp_demo_add", json!(1)),
            response(Some("call_3"), "noargs", json!(null)),
        ]),
    ]);
    let m = messages(&to_chat_request("m", &request, false));
    assert_eq!(m[1]["content"], "Sure.");
    assert_eq!(m[1]["tool_calls"][1]["id"], generated.as_str());
    assert_eq!(m[1]["tool_calls"][1]["function"]["arguments"], "{\"a\":1}");
    assert_eq!(m[3]["tool_call_id"], generated.as_str());
}

#[test]
fn finish_reasons_refusals_and_bad_answers() {
    assert_eq!(map_finish_reason("stop"), "STOP");
    assert_eq!(map_finish_reason("tool_calls"), "STOP");
    assert_eq!(map_finish_reason("length"), "MAX_TOKENS");
    assert_eq!(map_finish_reason("content_filter"), "SAFETY");
    assert_eq!(map_finish_reason("weird"), "WEIRD");

    let refusal = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}, "finish_reason": "stop"}]});
    assert_eq!(
        from_chat_completion(&refusal).unwrap().text(),
        "I can't help with that."
    );
    let legacy = json!({"choices": [{"message": {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{\"x\":1}"}}, "finish_reason": "function_call"}]});
    let r = from_chat_completion(&legacy).unwrap();
    assert_eq!(r.function_calls()[0].args_value(), json!({"x": 1}));

    let no_choices = from_chat_completion(&json!({"choices": []})).unwrap_err();
    assert!(
        matches!(no_choices, ModelError::Decode { .. }),
        "{no_choices}"
    );
    let bad_args = json!({"choices": [{"message": {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"x\":"}}]}}]});
    let e = from_chat_completion(&bad_args).unwrap_err();
    assert!(e.to_string().contains("`f`"), "{e}");
    let array_args = json!({"choices": [{"message": {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}}]});
    assert!(from_chat_completion(&array_args).is_err());
    let in_body = json!({"error": {"message": "boom", "type": "server_error", "code": 503}});
    let e = from_chat_completion(&in_body).unwrap_err();
    assert_eq!(e.status(), Some(503));
}

#[test]
fn stream_chunks_fold_into_text_increments_and_whole_calls() {
    let mut acc = ChunkAssembler::new();
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    assert!(
        acc.push(&chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null
        ))
        .unwrap()
        .is_none()
    );
    let t = acc
        .push(&chunk(json!({"content": "Hel"}), Value::Null))
        .unwrap()
        .unwrap();
    assert_eq!(t.text(), "Hel");
    let t = acc
        .push(&chunk(json!({"reasoning_content": "hmm"}), Value::Null))
        .unwrap()
        .unwrap();
    assert_eq!(t.text(), "", "reasoning is a thought part");
    assert_eq!(t.content().unwrap().parts[0].thought, Some(true));
    // Two calls, their argument fragments interleaved.
    for delta in [
        json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "echo", "arguments": ""}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"mess"}}]}),
        json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "add", "arguments": "{\"a\""}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "age\":\"h"}}]}),
        json!({"tool_calls": [{"index": 1, "function": {"arguments": ":2}"}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "i\"}"}}]}),
    ] {
        assert!(acc.push(&chunk(delta, Value::Null)).unwrap().is_none());
    }
    assert!(!acc.finished());
    acc.push(&chunk(json!({}), json!("tool_calls"))).unwrap();
    acc.push(&json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}))
        .unwrap();
    assert!(acc.finished());
    let last = acc.finish().unwrap();
    assert_eq!(last.finish_reason(), Some("STOP"));
    assert_eq!(
        last.usage_metadata.as_ref().unwrap().total_token_count,
        Some(5)
    );
    let calls = last.function_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id.as_deref(), Some("call_a"));
    assert_eq!(calls[0].name, "echo");
    assert_eq!(calls[0].args_value(), json!({"message": "hi"}));
    assert_eq!(calls[1].id.as_deref(), Some("call_b"));
    assert_eq!(calls[1].args_value(), json!({"a": 2}));
}

#[test]
fn stream_fragments_without_index_and_errors() {
    let mut acc = ChunkAssembler::new();
    for delta in [
        json!({"tool_calls": [{"id": "x1", "function": {"name": "f", "arguments": "{\"a\":"}}]}),
        json!({"tool_calls": [{"function": {"arguments": "1}"}}]}),
        json!({"tool_calls": [{"id": "x2", "function": {"name": "g", "arguments": "{}"}}]}),
    ] {
        acc.push(&json!({"choices": [{"delta": delta}]})).unwrap();
    }
    let last = acc.finish().unwrap();
    let calls = last.function_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].args_value(), json!({"a": 1}));
    assert_eq!(calls[1].name, "g");

    let mut acc = ChunkAssembler::new();
    let e = acc
        .push(
            &json!({"error": {"message": "model overloaded", "type": "server_error", "code": 503}}),
        )
        .unwrap_err();
    assert_eq!(e.status(), Some(503));
    assert!(e.is_retryable());

    let mut acc = ChunkAssembler::new();
    acc.push(&json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}))
        .unwrap();
    assert!(acc.finish().is_err(), "a call without a name");
}

#[test]
fn error_bodies_of_every_dialect() {
    let openai = parse_error(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-***.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
        None,
    );
    match &openai {
        ModelError::Api {
            api,
            status,
            code,
            status_text,
            message,
            reason,
            ..
        } => {
            assert_eq!(*api, ApiKind::OpenAi);
            assert_eq!((*status, *code), (401, 401));
            assert_eq!(status_text, "invalid_request_error");
            assert_eq!(message, "Incorrect API key provided: sk-***.");
            assert_eq!(reason.as_deref(), Some("invalid_api_key"));
        }
        other => panic!("{other:?}"),
    }
    let text = openai.to_string();
    assert!(
        text.starts_with("OpenAI-compatible API error 401"),
        "{text}"
    );
    assert!(text.contains("OPENAI_API_KEY"), "{text}");
    assert!(!text.contains("Gemini"), "{text}");
    assert!(!openai.is_retryable());

    let llama = parse_error(
        400,
        r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#,
        None,
    );
    assert!(llama.to_string().contains("context size"));
    let vllm = parse_error(
        404,
        r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
        None,
    );
    assert!(vllm.to_string().contains("does not exist"));
    assert!(vllm.hint().unwrap().contains("--model"));
    let ollama = parse_error(404, r#"{"error":"model 'llama9' not found"}"#, None);
    assert!(ollama.to_string().contains("model 'llama9' not found"));
    let fastapi = parse_error(422, r#"{"detail":"bad field"}"#, None);
    assert!(fastapi.to_string().contains("bad field"));
    let html = parse_error(
        502,
        "<html>bad gateway</html>",
        Some(Duration::from_secs(1)),
    );
    assert!(html.to_string().contains("<html>bad gateway</html>"));
    assert!(html.is_retryable());
    let quota = parse_error(
        429,
        r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
        None,
    );
    assert!(!quota.is_retryable(), "an exhausted quota is not retried");
    let limited = parse_error(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        None,
    );
    assert!(limited.is_retryable());
}

#[test]
fn base_urls() {
    let ok = |raw: &str| normalize_base_url(raw).unwrap();
    assert_eq!(ok("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
    assert_eq!(
        ok(" http://127.0.0.1:8080/v1/ "),
        "http://127.0.0.1:8080/v1"
    );
    assert_eq!(
        ok("http://localhost:11434/v1/chat/completions"),
        "http://localhost:11434/v1"
    );
    assert_eq!(ok(DEFAULT_BASE_URL), DEFAULT_BASE_URL);
    assert!(normalize_base_url("localhost:8080").is_err());
    assert!(normalize_base_url("ftp://x/v1").is_err());
    assert!(normalize_base_url("http://x/v1?key=1").is_err());
    let client = OpenAiClient::new(OpenAiOptions {
        base_url: "http://127.0.0.1:8080/v1/".into(),
        ..OpenAiOptions::default()
    })
    .unwrap();
    assert_eq!(
        client.endpoint(),
        "http://127.0.0.1:8080/v1/chat/completions"
    );
}

#[test]
fn options_from_env_need_no_key_and_hide_it() {
    let none = OpenAiOptions::from_vars(|_| None);
    assert_eq!(none.base_url, DEFAULT_BASE_URL);
    assert!(none.api_key.is_none());
    assert!(OpenAiClient::new(none).is_ok());
    let vars = |name: &str| match name {
        API_KEY_ENV => Some(" sk-secret-123 ".to_owned()),
        BASE_URL_ENV => Some("http://localhost:11434/v1".to_owned()),
        _ => None,
    };
    let opts = OpenAiOptions::from_vars(vars);
    assert_eq!(opts.api_key.as_deref(), Some("sk-secret-123"));
    assert!(!format!("{opts:?}").contains("secret"));
    let client = OpenAiClient::new(opts).unwrap();
    assert_eq!(client.base_url(), "http://localhost:11434/v1");
    assert!(!format!("{client:?}").contains("secret"));
}
