//! The OpenAI-compatible client against the fake chat-completions server (feature
//! `fake`): whole and streamed answers (text increments, tool-call arguments in
//! fragments), tool round trips the server accepts, error bodies, retries, and every
//! request the fake rejects the way real servers do.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use switchboard_model::{ApiKind, ModelError};
use switchboard_model::{
    Content, FunctionDeclaration, FunctionResponse, GenerateRequest, GenerateResponse, Part,
    StreamAccumulator, Tool,
};
use switchboard_model::{ModelClient, RetryNotice};
use switchboard_model::{OpenAiClient, OpenAiOptions};
use switchboard_model_fakes::gemini::FakeTurn;
use switchboard_model_fakes::openai::{
    FakeOpenAi, FakeOpenAiOptions, declared_tool_names, last_tool_messages, last_user_text,
};

const MODEL: &str = "qwen2.5:7b-instruct";

fn ask(text: &str) -> GenerateRequest {
    GenerateRequest::new(vec![Content::user_text(text)])
}

fn decl(name: &str) -> FunctionDeclaration {
    FunctionDeclaration {
        name: name.into(),
        description: Some(format!("the {name} tool")),
        parameters_json_schema: Some(json!({
            "type": "object",
            "properties": {"q": {"type": "string", "description": "query"}},
            "required": ["q"]
        })),
        ..FunctionDeclaration::default()
    }
}

fn with_tools(mut req: GenerateRequest, names: &[&str]) -> GenerateRequest {
    req.tools = Some(vec![Tool::functions(
        names.iter().map(|n| decl(n)).collect(),
    )]);
    req
}

async fn collect(client: &OpenAiClient, req: &GenerateRequest) -> Vec<GenerateResponse> {
    let mut stream = client.stream(MODEL, req).await.unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.push(chunk.unwrap());
    }
    out
}

fn api_parts(err: &ModelError) -> (u16, String, String) {
    match err {
        ModelError::Api {
            api,
            status,
            message,
            reason,
            ..
        } => {
            assert_eq!(*api, ApiKind::OpenAi);
            (*status, reason.clone().unwrap_or_default(), message.clone())
        }
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends `body` straight to the fake and returns its status and error message.
async fn post_raw(fake: &FakeOpenAi, body: Value) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{}/chat/completions", fake.base_url))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    (
        status,
        v["error"]["message"].as_str().unwrap_or("").to_owned(),
    )
}

async fn expect_rejected(fake: &FakeOpenAi, body: Value, needle: &str) {
    let before = fake.remaining();
    let (status, message) = post_raw(fake, body).await;
    assert_eq!(status, 400, "{message}");
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    assert_eq!(
        fake.remaining(),
        before,
        "a rejected request consumes no turn"
    );
}

#[tokio::test]
async fn generate_text_and_the_request_on_the_wire() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("Hello there.")]).await;
    let client = fake.client().unwrap();
    let mut req = with_tools(ask("hi"), &["mcp_demo_echo"]);
    req.system_instruction = Some(Content::system("Be brief."));
    let r = client.generate(MODEL, &req).await.unwrap();
    assert_eq!(r.text(), "Hello there.");
    assert_eq!(r.finish_reason(), Some("STOP"));
    assert_eq!(r.response_id.as_deref(), Some("chatcmpl-fake-1"));
    let rec = &fake.recorded()[0];
    assert_eq!(rec.path, "/v1/chat/completions");
    assert_eq!(rec.model, MODEL);
    assert!(!rec.stream);
    assert_eq!(rec.api_key, None, "no key configured, none sent");
    assert_eq!(
        rec.body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ])
    );
    assert_eq!(declared_tool_names(&rec.body), vec!["mcp_demo_echo"]);
    assert_eq!(rec.body["tools"][0]["type"], "function");
    assert_eq!(last_user_text(&rec.body), "hi");
}

#[tokio::test]
async fn a_tool_round_trip_the_server_accepts() {
    let fake = FakeOpenAi::start(vec![
        FakeTurn::calls([
            ("lookup", json!({"q": "rust"})),
            ("lookup", json!({"q": "mcp"})),
        ]),
        FakeTurn::dynamic(|req| {
            let tools = last_tool_messages(req);
            FakeTurn::text(format!(
                "got {} results: {}",
                tools.len(),
                Value::Array(tools.clone())
            ))
        }),
    ])
    .await;
    let client = fake.client().unwrap();
    let first = with_tools(ask("look up two things"), &["lookup"]);
    let r = client.generate(MODEL, &first).await.unwrap();
    let calls = r.function_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id.as_deref(), Some("call_fake1x1"));
    assert_eq!(calls[1].args_value(), json!({"q": "mcp"}));

    // The chat loop appends the model turn and one user turn of responses.
    let mut next = first.clone();
    next.contents.push(r.content().unwrap().clone());
    next.contents.push(Content::user(
        calls
            .iter()
            .map(|c| {
                Part::function_response(FunctionResponse::output(
                    c.id.clone(),
                    c.name.clone(),
                    json!(format!(
                        "result for {}",
                        c.args_value()["q"].as_str().unwrap()
                    )),
                ))
            })
            .collect(),
    ));
    let r = client.generate(MODEL, &next).await.unwrap();
    assert!(r.text().starts_with("got 2 results"), "{}", r.text());
    let sent = &fake.requests()[1];
    let tools = last_tool_messages(sent);
    assert_eq!(tools[0]["tool_call_id"], "call_fake1x1");
    assert_eq!(tools[1]["tool_call_id"], "call_fake1x2");
    assert_eq!(tools[1]["content"], "{\"output\":\"result for mcp\"}");
    let assistant = &sent["messages"][1];
    assert_eq!(assistant["content"], Value::Null);
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"q\":\"rust\"}"
    );
}

#[tokio::test]
async fn stream_text_arrives_in_increments() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text(
        "The quick brown fox jumps over the lazy dog.",
    )])
    .await;
    let client = fake.client().unwrap();
    let chunks = collect(&client, &ask("story")).await;
    assert!(fake.recorded()[0].stream);
    assert_eq!(fake.requests()[0]["stream"], true);
    let texts: Vec<String> = chunks
        .iter()
        .map(GenerateResponse::text)
        .filter(|t| !t.is_empty())
        .collect();
    assert!(texts.len() >= 3, "{texts:?}");
    let mut acc = StreamAccumulator::new();
    for c in &chunks {
        acc.push(c);
    }
    let whole = acc.response();
    assert_eq!(whole.text(), "The quick brown fox jumps over the lazy dog.");
    assert_eq!(whole.finish_reason(), Some("STOP"));
    assert_eq!(acc.content().parts.len(), 1, "text increments merge");
}

#[tokio::test]
async fn stream_tool_calls_with_fragmented_arguments() {
    let fake = FakeOpenAi::start(vec![FakeTurn::calls([
        (
            "mcp_demo_echo",
            json!({"message": "a long message, split into many fragments"}),
        ),
        ("mcp_demo_add", json!({"a": 2, "b": 3})),
    ])])
    .await;
    let client = fake.client().unwrap();
    let req = with_tools(ask("two calls"), &["mcp_demo_echo", "mcp_demo_add"]);
    let chunks = collect(&client, &req).await;
    // Only the last chunk carries calls, and all of them, complete.
    for c in &chunks[..chunks.len() - 1] {
        assert!(c.function_calls().is_empty());
    }
    let last = chunks.last().unwrap();
    let calls = last.function_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id.as_deref(), Some("call_fake1x1"));
    assert_eq!(
        calls[0].args_value(),
        json!({"message": "a long message, split into many fragments"})
    );
    assert_eq!(calls[1].name, "mcp_demo_add");
    assert_eq!(calls[1].args_value(), json!({"a": 2, "b": 3}));
    assert_eq!(last.finish_reason(), Some("STOP"));
}

#[tokio::test]
async fn stream_framing_split_anywhere_errors_and_truncation() {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "x", "object": "chat.completion.chunk", "model": MODEL,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let body = format!(
        "data: {}\r\n\r\n: keep-alive\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(json!({"content": "Hé"}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"q\":\"é\"}"}}]}),
            Value::Null
        ),
        chunk(json!({}), json!("tool_calls")),
    );
    // Cut into writes of about 7 bytes (at char boundaries: RawSse takes strings), so
    // event boundaries and `\r\n` pairs fall anywhere.
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let mut end = (start + 7).min(body.len());
        while !body.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(body[start..end].to_owned());
        start = end;
    }
    let fake = FakeOpenAi::start(vec![FakeTurn::RawSse(pieces)]).await;
    let client = fake.client().unwrap();
    let chunks = collect(&client, &ask("x")).await;
    let mut acc = StreamAccumulator::new();
    chunks.iter().for_each(|c| acc.push(c));
    let whole = acc.response();
    assert_eq!(whole.text(), "Hé");
    assert_eq!(whole.function_calls()[0].args_value(), json!({"q": "é"}));

    // An error event in the stream ends it with that error.
    let fake = FakeOpenAi::start(vec![FakeTurn::RawSse(vec![
        format!("data: {}\n\n", chunk(json!({"content": "par"}), Value::Null)),
        "data: {\"error\":{\"message\":\"the model crashed\",\"type\":\"server_error\",\"code\":500}}\n\n".into(),
    ])])
    .await;
    let client = fake.client().unwrap();
    let mut stream = client.stream(MODEL, &ask("x")).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap().text(), "par");
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(err.to_string().contains("the model crashed"), "{err}");
    assert!(stream.next().await.is_none());

    // A body that stops before a finish reason or [DONE] is an error, not an answer.
    let fake = FakeOpenAi::start(vec![FakeTurn::RawSse(vec![format!(
        "data: {}\n\n",
        chunk(json!({"content": "cut"}), Value::Null)
    )])])
    .await;
    let client = fake.client().unwrap();
    let mut stream = client.stream(MODEL, &ask("x")).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap().text(), "cut");
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(matches!(err, ModelError::Stream { .. }), "{err:?}");

    // With a finish reason but no [DONE] (some servers), the answer is complete.
    let fake = FakeOpenAi::start(vec![FakeTurn::RawSse(vec![format!(
        "data: {}\n\ndata: {}\n\n",
        chunk(json!({"content": "ok"}), Value::Null),
        chunk(json!({}), json!("stop"))
    )])])
    .await;
    let client = fake.client().unwrap();
    let chunks = collect(&client, &ask("x")).await;
    assert_eq!(chunks.last().unwrap().finish_reason(), Some("STOP"));
}

#[tokio::test]
async fn the_client_works_through_the_model_client_trait() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("one"), FakeTurn::text("two words")]).await;
    let client: Arc<dyn ModelClient> = Arc::new(fake.client().unwrap());
    assert_eq!(
        client.generate(MODEL, &ask("x")).await.unwrap().text(),
        "one"
    );
    let mut stream = client.stream(MODEL, &ask("x")).await.unwrap();
    let mut text = String::new();
    while let Some(c) = stream.next().await {
        text.push_str(&c.unwrap().text());
    }
    assert_eq!(text, "two words");
}

#[tokio::test]
async fn api_errors_carry_the_server_message() {
    let fake = FakeOpenAi::start(vec![
        FakeTurn::error(400, "This model's maximum context length is 8192 tokens."),
        FakeTurn::error(400, "again, streamed"),
    ])
    .await;
    let client = fake.client().unwrap();
    let err = client.generate(MODEL, &ask("x")).await.unwrap_err();
    let (status, _, message) = api_parts(&err);
    assert_eq!(status, 400);
    assert_eq!(
        message,
        "This model's maximum context length is 8192 tokens."
    );
    assert!(!err.is_retryable());
    assert!(
        err.to_string()
            .starts_with("OpenAI-compatible API error 400 invalid_request_error")
    );
    let err = client.stream(MODEL, &ask("x")).await.err().unwrap();
    assert_eq!(api_parts(&err).2, "again, streamed");
    assert_eq!(fake.requests().len(), 2, "400 is not retried");
}

#[tokio::test]
async fn keys_and_models_are_checked_when_the_server_wants() {
    let options = FakeOpenAiOptions {
        api_key: Some("sk-local-1234".into()),
        models: Some(vec![MODEL.into()]),
        ..FakeOpenAiOptions::default()
    };
    let fake = FakeOpenAi::start_with(options, vec![FakeTurn::text("ok")]).await;
    // No key.
    let client = OpenAiClient::new(OpenAiOptions {
        api_key: None,
        ..fake.options()
    })
    .unwrap();
    let err = client.generate(MODEL, &ask("x")).await.unwrap_err();
    assert_eq!(err.status(), Some(401));
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
    // A wrong key.
    let client = OpenAiClient::new(OpenAiOptions {
        api_key: Some("sk-wrong-9999".into()),
        ..fake.options()
    })
    .unwrap();
    let err = client.generate(MODEL, &ask("x")).await.unwrap_err();
    assert_eq!(api_parts(&err).1, "invalid_api_key");
    assert!(err.to_string().contains("****9999"), "{err}");
    // A model the server does not have.
    let client = fake.client().unwrap();
    let err = client.generate("gpt-9", &ask("x")).await.unwrap_err();
    assert_eq!(api_parts(&err).0, 404);
    assert!(err.hint().unwrap().contains("--model"));
    // The right key and model.
    assert_eq!(
        client.generate(MODEL, &ask("x")).await.unwrap().text(),
        "ok"
    );
    assert_eq!(
        fake.recorded().last().unwrap().api_key.as_deref(),
        Some("sk-local-1234")
    );
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried() {
    let fake = FakeOpenAi::start(vec![
        FakeTurn::RateLimited {
            retry_after: Some("0".into()),
            retry_delay: None,
        },
        FakeTurn::RateLimited {
            retry_after: None,
            retry_delay: Some("0.05s".into()),
        },
        FakeTurn::error(503, "loading model"),
        FakeTurn::text("finally"),
    ])
    .await;
    let notices: Arc<Mutex<Vec<RetryNotice>>> = Arc::default();
    let seen = notices.clone();
    let client = OpenAiClient::new(OpenAiOptions {
        on_retry: Some(Arc::new(move |n: &RetryNotice| {
            seen.lock().unwrap().push(n.clone())
        })),
        ..fake.options()
    })
    .unwrap();
    let started = Instant::now();
    let r = client.generate(MODEL, &ask("x")).await.unwrap();
    assert_eq!(r.text(), "finally");
    let notices = notices.lock().unwrap().clone();
    assert_eq!(notices.len(), 3);
    assert_eq!(notices[0].delay, Duration::ZERO, "Retry-After: 0");
    assert_eq!(
        notices[1].delay,
        Duration::from_millis(50),
        "retry-after-ms: 50"
    );
    assert!(notices[1].reason.contains("Rate limit reached"));
    assert!(notices[2].reason.contains("loading model"));
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(fake.requests().len(), 4);

    // Streams are opened with the same retries; a lasting failure gives the last error.
    let fake = FakeOpenAi::start(vec![
        FakeTurn::error(500, "a"),
        FakeTurn::error(502, "b"),
        FakeTurn::error(503, "c"),
        FakeTurn::error(504, "d"),
        FakeTurn::text("never"),
    ])
    .await;
    let client = fake.client().unwrap();
    let err = client.stream(MODEL, &ask("x")).await.err().unwrap();
    assert_eq!(api_parts(&err), (504, String::new(), "d".into()));
    assert_eq!(fake.requests().len(), 4, "1 attempt + 3 retries");

    // A wait longer than max_backoff is not waited for.
    let fake = FakeOpenAi::start(vec![FakeTurn::RateLimited {
        retry_after: Some("3600".into()),
        retry_delay: None,
    }])
    .await;
    let client = fake.client().unwrap();
    let started = Instant::now();
    let err = client.generate(MODEL, &ask("x")).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.status(), Some(429));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn an_unreachable_server_is_named_as_such() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let client = OpenAiClient::new(OpenAiOptions {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        max_retries: 1,
        backoff_base: Duration::from_millis(1),
        ..OpenAiOptions::default()
    })
    .unwrap();
    let err = client.generate(MODEL, &ask("x")).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Http {
                api: ApiKind::OpenAi,
                ..
            }
        ),
        "{err:?}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains("could not reach the OpenAI-compatible API at http://127.0.0.1:"),
        "{shown}"
    );
    assert!(shown.contains("/v1/chat/completions"), "{shown}");
}

#[tokio::test]
async fn translated_requests_the_fake_rejects() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("unused")]).await;
    let client = fake.client().unwrap();
    let expect = |needle: &'static str| {
        move |err: ModelError| {
            let (status, _, message) = api_parts(&err);
            assert_eq!(status, 400, "{message}");
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
    };
    // A function name with a dot (Gemini takes it; OpenAI does not).
    let req = with_tools(ask("x"), &["server.tool"]);
    expect("does not match pattern")(client.generate(MODEL, &req).await.unwrap_err());
    // Parameters that are not an object schema.
    let mut req = ask("x");
    req.tools = Some(vec![Tool::functions(vec![FunctionDeclaration {
        name: "f".into(),
        parameters_json_schema: Some(json!({"type": "string"})),
        ..FunctionDeclaration::default()
    }])]);
    expect("schema must be a JSON Schema of 'type: \"object\"'")(
        client.generate(MODEL, &req).await.unwrap_err(),
    );
    // A function response whose id matches no call.
    let req = GenerateRequest::new(vec![
        Content::user_text("x"),
        Content::model(vec![Part::function_call(
            serde_json::from_value(json!({"id": "call_1", "name": "f", "args": {}})).unwrap(),
        )]),
        Content::user(vec![Part::function_response(FunctionResponse::output(
            Some("call_other".into()),
            "f",
            json!("r"),
        ))]),
    ]);
    expect("not found in 'tool_calls' of previous message")(
        client.generate(MODEL, &req).await.unwrap_err(),
    );
    // A call left unanswered.
    let req = GenerateRequest::new(vec![
        Content::user_text("x"),
        Content::model(vec![Part::function_call(
            serde_json::from_value(json!({"id": "call_1", "name": "f", "args": {}})).unwrap(),
        )]),
        Content::user_text("never mind"),
    ]);
    expect("did not have response messages: call_1")(
        client.generate(MODEL, &req).await.unwrap_err(),
    );
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn raw_requests_the_fake_rejects() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("unused")]).await;
    let user = json!({"role": "user", "content": "hi"});
    let tool = |name: &str, params: Value| json!({"type": "function", "function": {"name": name, "parameters": params}});
    let call = |id: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]})
    };
    let answer = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "ok"});
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"messages": [user]}),
            "you must provide a model parameter",
        ),
        (json!({"model": "m", "messages": []}), "empty array"),
        (
            json!({"model": "m", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
            "Unrecognized request argument supplied: contents",
        ),
        (
            json!({"model": "m", "messages": [{"role": "model", "content": "hi"}]}),
            "Invalid value: 'model'. Supported values are",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "hi", "parts": []}]}),
            "Additional properties are not allowed ('parts' was unexpected)",
        ),
        (
            json!({"model": "m", "messages": [{"role": "assistant", "content": null}]}),
            "expected a string, got null",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}]}]}),
            "base64-encoded data URL",
        ),
        (
            json!({"model": "m", "messages": [user, answer("call_1")]}),
            "must be a response to a preceeding message with 'tool_calls'",
        ),
        (
            json!({"model": "m", "messages": [user, call("call_1"), answer("call_2")]}),
            "'tool_call_id' of 'call_2' not found",
        ),
        (
            json!({"model": "m", "messages": [user, call("call_1"), answer("call_1"), answer("call_1")]}),
            "answered more than once",
        ),
        (
            json!({"model": "m", "messages": [user, call("call_1"), user]}),
            "did not have response messages: call_1",
        ),
        (
            json!({"model": "m", "messages": [user, call("call_1")]}),
            "did not have response messages: call_1",
        ),
        (
            json!({"model": "m", "messages": [user, {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
            ]}, answer("c")]}),
            "expected a string, but got an object",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [tool("bad name", json!({"type": "object"}))]}),
            "does not match pattern",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [tool(&"x".repeat(65), json!({"type": "object"}))]}),
            "string too long",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [tool("f", json!({"properties": {}}))]}),
            "got 'type: \"None\"'",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [tool("f", json!("object"))]}),
            "expected an object, but got a string",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [{"functionDeclarations": []}]}),
            "Missing required parameter: 'tools[0].type'",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": (0..129).map(|i| tool(&format!("f{i}"), json!({"type": "object"}))).collect::<Vec<_>>()}),
            "array too long",
        ),
        (
            json!({"model": "m", "messages": [user], "tool_choice": "auto"}),
            "only allowed when 'tools' are specified",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [tool("f", json!({"type": "object"}))], "tool_choice": {"type": "function", "function": {"name": "g"}}}),
            "'g' is not among the declared tools",
        ),
        (
            json!({"model": "m", "messages": [user], "stream": "yes"}),
            "expected a boolean",
        ),
        (
            json!({"model": "m", "messages": [user], "stream_options": {"include_usage": true}}),
            "only allowed when 'stream' is enabled",
        ),
    ];
    for (body, needle) in cases {
        expect_rejected(&fake, body, needle).await;
    }
    // What is valid passes, and unknown paths get OpenAI's 404.
    let (status, _) = post_raw(
        &fake,
        json!({"model": "m", "messages": [user, call("call_1"), answer("call_1")],
               "tools": [tool("f", json!({"type": "object", "properties": {}}))]}),
    )
    .await;
    assert_eq!(status, 200);
    let r = reqwest::Client::new()
        .post(format!("{}/completions", fake.base_url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["message"], "Invalid URL (POST /v1/completions)");
}

#[tokio::test]
async fn stream_usage_when_asked_for() {
    let fake = FakeOpenAi::start(vec![FakeTurn::text("hi there")]).await;
    let r = reqwest::Client::new()
        .post(format!("{}/chat/completions", fake.base_url))
        .json(
            &json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                      "stream": true, "stream_options": {"include_usage": true}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let body = r.text().await.unwrap();
    let events: Vec<&str> = body
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(*events.last().unwrap(), "[DONE]");
    let usage: Value = serde_json::from_str(events[events.len() - 2]).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 12);
    let first: Value = serde_json::from_str(events[0]).unwrap();
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
}

/// Errors about an OpenAI-compatible server name that API, never Gemini: a stream that
/// breaks off, an answer that cannot be used, a bad base URL.
#[tokio::test]
async fn openai_errors_name_the_openai_compatible_api_not_gemini() {
    let chunk = json!({"id": "x", "object": "chat.completion.chunk", "model": MODEL,
                       "choices": [{"index": 0, "delta": {"content": "cut"}, "finish_reason": null}]});
    let fake = FakeOpenAi::start(vec![FakeTurn::RawSse(vec![format!("data: {chunk}\n\n")])]).await;
    let client = fake.client().unwrap();
    let mut stream = client.stream(MODEL, &ask("x")).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap().text(), "cut");
    let broken = stream.next().await.unwrap().unwrap_err().to_string();
    let undecodable = switchboard_model::openai_api::from_chat_completion(&json!({"choices": []}))
        .unwrap_err()
        .to_string();
    let bad_url = OpenAiClient::new(OpenAiOptions {
        base_url: "ftp://127.0.0.1/v1".into(),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    for message in [broken, undecodable, bad_url] {
        assert!(!message.contains("Gemini"), "{message}");
        assert!(message.contains("OpenAI-compatible"), "{message}");
    }
}
