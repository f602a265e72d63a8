//! The Gemini client against the fake Gemini API (feature `fake`): both endpoints, SSE
//! framing and chunking, retries, error bodies, the byte-for-byte round trip of model
//! turns, and every request the fake rejects the way the real API does.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use switchboard_model::{
    Content, FunctionCallingConfig, FunctionCallingMode, FunctionDeclaration, FunctionResponse,
    GenerateRequest, GenerateResponse, Part, StreamAccumulator, Tool, ToolConfig,
};
use switchboard_model::{GeminiClient, GeminiOptions, ModelError};
use switchboard_model_fakes::gemini::{FakeGemini, FakeTurn, last_function_responses};

const FLASH: &str = "gemini-2.5-flash";
const G3: &str = "gemini-3-flash-preview";

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

fn with_tools(mut req: GenerateRequest, decls: Vec<FunctionDeclaration>) -> GenerateRequest {
    req.tools = Some(vec![Tool::functions(decls)]);
    req
}

async fn collect(
    client: &GeminiClient,
    model: &str,
    req: &GenerateRequest,
) -> Vec<GenerateResponse> {
    let mut stream = client.stream(model, req).await.unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.push(chunk.unwrap());
    }
    out
}

fn api_parts(err: &ModelError) -> (u16, String, String) {
    match err {
        ModelError::Api {
            status,
            status_text,
            message,
            ..
        } => (*status, status_text.clone(), message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends `req` and expects a 400 INVALID_ARGUMENT whose message contains `needle`.
async fn expect_rejected(fake: &FakeGemini, model: &str, req: &GenerateRequest, needle: &str) {
    let before = fake.remaining();
    let client = fake.client().unwrap();
    let err = client.generate(model, req).await.unwrap_err();
    let (status, status_text, message) = api_parts(&err);
    assert_eq!(status, 400, "{err}");
    assert_eq!(status_text, "INVALID_ARGUMENT", "{err}");
    assert!(
        message.contains(needle),
        "expected {needle:?} in {message:?}"
    );
    assert_eq!(
        fake.remaining(),
        before,
        "a rejected request must not use a turn"
    );
}

// ---------------------------------------------------------------------------------------
// generate and stream

#[tokio::test]
async fn generate_returns_text_and_metadata() {
    let fake = FakeGemini::start(vec![FakeTurn::text("Hello from the fake model.")]).await;
    let client = fake.client().unwrap();
    let resp = client.generate(FLASH, &ask("hi")).await.unwrap();
    assert_eq!(resp.text(), "Hello from the fake model.");
    assert_eq!(resp.finish_reason(), Some("STOP"));
    assert_eq!(resp.model_version.as_deref(), Some(FLASH));
    assert!(resp.response_id.is_some());
    assert!(
        resp.usage_metadata
            .as_ref()
            .unwrap()
            .total_token_count
            .unwrap()
            > 0
    );
    assert!(resp.function_calls().is_empty());

    let recorded = fake.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].model, FLASH);
    assert_eq!(recorded[0].method, "generateContent");
    assert_eq!(
        recorded[0].api_key.as_deref(),
        Some(fake.api_key().as_str())
    );
    assert_eq!(
        fake.requests()[0],
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    );
}

#[tokio::test]
async fn generate_function_calls_have_ids_and_a_signature() {
    let fake = FakeGemini::start(vec![FakeTurn::calls([
        ("get_weather", json!({"city": "Paris"})),
        ("get_time", json!({"tz": "CET"})),
    ])])
    .await;
    let client = fake.client().unwrap();
    let req = with_tools(ask("weather?"), vec![decl("get_weather"), decl("get_time")]);
    let resp = client.generate(FLASH, &req).await.unwrap();
    let calls = resp.function_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].args_value(), json!({"city": "Paris"}));
    assert_eq!(calls[1].name, "get_time");
    assert!(calls[0].id.is_some() && calls[1].id.is_some());
    assert_ne!(calls[0].id, calls[1].id);
    let parts = &resp.content().unwrap().parts;
    assert!(parts[0].thought_signature.is_some());
    assert!(parts[1].thought_signature.is_none());
}

#[tokio::test]
async fn base_url_with_version_suffix_works() {
    let fake = FakeGemini::start(vec![FakeTurn::text("ok")]).await;
    let client = GeminiClient::new(GeminiOptions {
        base_url: format!("{}/v1beta/", fake.base_url),
        ..fake.options()
    })
    .unwrap();
    assert_eq!(client.base_url(), fake.base_url);
    assert_eq!(
        client
            .generate("models/gemini-2.5-flash", &ask("x"))
            .await
            .unwrap()
            .text(),
        "ok"
    );
}

#[tokio::test]
async fn stream_text_arrives_in_increments() {
    let text = "The quick brown fox jumps over the lazy dog, twice.";
    let fake = FakeGemini::start(vec![FakeTurn::text(text)]).await;
    let client = fake.client().unwrap();
    let chunks = collect(&client, FLASH, &ask("fox")).await;
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    assert!(
        chunks[..chunks.len() - 1]
            .iter()
            .all(|c| c.finish_reason().is_none())
    );
    assert_eq!(chunks.last().unwrap().finish_reason(), Some("STOP"));
    let mut acc = StreamAccumulator::new();
    for c in &chunks {
        acc.push(c);
    }
    assert_eq!(acc.response().text(), text);
    assert_eq!(
        acc.content().parts.len(),
        1,
        "increments merge into one part"
    );
    assert!(acc.response().usage_metadata.is_some());
    let recorded = fake.recorded();
    assert_eq!(recorded[0].method, "streamGenerateContent");
    assert!(recorded[0].sse);
}

#[tokio::test]
async fn stream_calls_arrive_whole_and_accumulate() {
    let fake = FakeGemini::start(vec![FakeTurn::calls([
        ("a", json!({"q": "1"})),
        ("b", json!({"q": "2"})),
        ("c", json!({"q": "3"})),
    ])])
    .await;
    let client = fake.client().unwrap();
    let req = with_tools(ask("go"), vec![decl("a"), decl("b"), decl("c")]);
    let chunks = collect(&client, G3, &req).await;
    for chunk in &chunks {
        for call in chunk.function_calls() {
            assert!(
                call.args.is_some() && call.id.is_some(),
                "whole call in one chunk"
            );
        }
    }
    let mut acc = StreamAccumulator::new();
    chunks.iter().for_each(|c| acc.push(c));
    let turn = acc.content();
    assert_eq!(turn.role.as_deref(), Some("model"));
    let names: Vec<_> = turn
        .function_calls()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(turn.parts[0].thought_signature.is_some());

    // The accumulated turn goes back unchanged and the fake (Gemini 3) accepts it.
    fake.push(FakeTurn::text("done"));
    let answers = turn
        .function_calls()
        .iter()
        .map(|c| {
            Part::function_response(FunctionResponse::output(
                c.id.clone(),
                c.name.clone(),
                json!("ok"),
            ))
        })
        .collect();
    let mut next = req.clone();
    next.contents.push(turn.clone());
    next.contents.push(Content::user(answers));
    let chunks = collect(&client, G3, &next).await;
    let mut acc = StreamAccumulator::new();
    chunks.iter().for_each(|c| acc.push(c));
    assert_eq!(acc.response().text(), "done");
}

fn sse_event(text: &str, last: bool) -> String {
    let mut v = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}]});
    if last {
        v["candidates"][0]["finishReason"] = json!("STOP");
    }
    v.to_string()
}

#[tokio::test]
async fn sse_separators_and_chunk_boundaries() {
    let words = ["alpha ", "beta ", "gamma ", "delta"];
    for sep in ["\n\n", "\r\r", "\r\n\r\n"] {
        let body: String = words
            .iter()
            .enumerate()
            .map(|(i, w)| format!("data: {}{sep}", sse_event(w, i == words.len() - 1)))
            .collect();
        // Boundaries: in the middle of the first event's JSON, between the two bytes of
        // a separator (or right after its first half), and inside "data:".
        let first_end = body.find(sep).unwrap();
        let cuts = [
            first_end / 2,
            first_end + 1,
            body[first_end + sep.len()..].find("ta:").unwrap() + first_end + sep.len() + 1,
        ];
        let mut pieces = Vec::new();
        let mut start = 0;
        for cut in cuts {
            pieces.push(body[start..cut].to_owned());
            start = cut;
        }
        pieces.push(body[start..].to_owned());
        let fake = FakeGemini::start(vec![FakeTurn::RawSse(pieces)]).await;
        let client = fake.client().unwrap();
        let chunks = collect(&client, FLASH, &ask("x")).await;
        let texts: Vec<String> = chunks.iter().map(GenerateResponse::text).collect();
        assert_eq!(texts, words, "separator {sep:?}");
        assert_eq!(chunks[3].finish_reason(), Some("STOP"));
    }
}

#[tokio::test]
async fn sse_comments_multiline_data_and_in_stream_error() {
    let error = json!({"error": {"code": 500, "message": "backend hiccup", "status": "INTERNAL"}});
    let fake = FakeGemini::start(vec![FakeTurn::RawSse(vec![
        ": keep-alive\r\n\r\n".into(),
        format!("data: {}\n\n", sse_event("one", false)),
        "data: {\"candidates\":\ndata: [{\"content\":{\"parts\":[{\"text\":\"two\"}]}}]}\n\n"
            .into(),
        format!("data: {error}\n\n"),
    ])])
    .await;
    let client = fake.client().unwrap();
    let mut stream = client.stream(FLASH, &ask("x")).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap().text(), "one");
    assert_eq!(stream.next().await.unwrap().unwrap().text(), "two");
    let err = stream.next().await.unwrap().unwrap_err();
    assert_eq!(api_parts(&err).2, "backend hiccup");
    assert!(stream.next().await.is_none());
}

// ---------------------------------------------------------------------------------------
// retries and errors

#[tokio::test]
async fn retries_429_honouring_retry_after_header() {
    let fake = FakeGemini::start(vec![
        FakeTurn::RateLimited {
            retry_after: Some("1".into()),
            retry_delay: None,
        },
        FakeTurn::text("after the wait"),
    ])
    .await;
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = notices.clone();
    let client = GeminiClient::new(GeminiOptions {
        backoff_base: Duration::from_millis(1),
        on_retry: Some(Arc::new(move |n| seen.lock().unwrap().push(n.clone()))),
        ..fake.options()
    })
    .unwrap();
    let started = Instant::now();
    let resp = client.generate(FLASH, &ask("x")).await.unwrap();
    assert_eq!(resp.text(), "after the wait");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was not honoured"
    );
    assert_eq!(fake.requests().len(), 2);
    let notices = notices.lock().unwrap();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].attempt, 1);
    assert_eq!(notices[0].delay, Duration::from_secs(1));
    assert!(notices[0].reason.contains("429"), "{}", notices[0].reason);
}

#[tokio::test]
async fn retries_429_honouring_retry_info_in_the_body() {
    let fake = FakeGemini::start(vec![
        FakeTurn::RateLimited {
            retry_after: None,
            retry_delay: Some("0.3s".into()),
        },
        FakeTurn::RateLimited {
            retry_after: None,
            retry_delay: Some("0.2s".into()),
        },
        FakeTurn::text("ok"),
    ])
    .await;
    let client = GeminiClient::new(GeminiOptions {
        backoff_base: Duration::from_millis(1),
        ..fake.options()
    })
    .unwrap();
    let started = Instant::now();
    let chunks = collect(&client, FLASH, &ask("x")).await;
    assert_eq!(
        chunks
            .iter()
            .map(GenerateResponse::text)
            .collect::<String>(),
        "ok"
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn retries_5xx_with_backoff_then_gives_up() {
    let fake = FakeGemini::start(vec![
        FakeTurn::error(500, "internal"),
        FakeTurn::error(503, "overloaded"),
        FakeTurn::error(502, "bad gateway"),
        FakeTurn::error(504, "deadline"),
        FakeTurn::text("never reached"),
    ])
    .await;
    let client = fake.client().unwrap(); // max_retries 3, backoff 5 ms
    let err = client.generate(FLASH, &ask("x")).await.unwrap_err();
    let (status, status_text, message) = api_parts(&err);
    assert_eq!(
        (status, status_text.as_str(), message.as_str()),
        (504, "DEADLINE_EXCEEDED", "deadline")
    );
    assert_eq!(fake.requests().len(), 4, "1 attempt + 3 retries");
    // The next call gets the remaining turn.
    assert_eq!(
        client.generate(FLASH, &ask("x")).await.unwrap().text(),
        "never reached"
    );

    let fake = FakeGemini::start(vec![FakeTurn::error(503, "busy"), FakeTurn::text("fine")]).await;
    let client = fake.client().unwrap();
    assert_eq!(
        client.generate(FLASH, &ask("x")).await.unwrap().text(),
        "fine"
    );
}

#[tokio::test]
async fn a_wait_longer_than_max_backoff_is_not_retried() {
    let fake = FakeGemini::start(vec![
        FakeTurn::RateLimited {
            retry_after: Some("3600".into()),
            retry_delay: None,
        },
        FakeTurn::text("no"),
    ])
    .await;
    let client = fake.client().unwrap();
    let started = Instant::now();
    let err = client.generate(FLASH, &ask("x")).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.status(), Some(429));
    assert!(err.hint().unwrap().contains("quota"));
    match err {
        ModelError::Api { retry_after, .. } => {
            assert_eq!(retry_after, Some(Duration::from_secs(3600)))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn client_errors_carry_the_api_message_and_are_not_retried() {
    for (status, status_text, hint) in [
        (400, "INVALID_ARGUMENT", None),
        (401, "UNAUTHENTICATED", Some("check GEMINI_API_KEY")),
        (403, "PERMISSION_DENIED", Some("check GEMINI_API_KEY")),
    ] {
        let message = format!("the API says no ({status})");
        let fake =
            FakeGemini::start(vec![FakeTurn::error(status, &message), FakeTurn::text("x")]).await;
        let client = fake.client().unwrap();
        let err = client.generate(FLASH, &ask("x")).await.unwrap_err();
        assert_eq!(
            api_parts(&err),
            (status, status_text.to_owned(), message.clone())
        );
        assert_eq!(err.hint(), hint);
        assert!(!err.is_retryable());
        let shown = err.to_string();
        assert!(
            shown.contains(&message) && shown.contains(&status.to_string()),
            "{shown}"
        );
        if let Some(hint) = hint {
            assert!(shown.contains(hint), "{shown}");
        }
        assert_eq!(
            fake.requests().len(),
            1,
            "status {status} must not be retried"
        );

        // Streaming opens the same way.
        fake.push(FakeTurn::error(status, &message));
        let client = fake.client().unwrap();
        let _ = client.generate(FLASH, &ask("x")).await.unwrap(); // uses the "x" turn
        let err = client.stream(FLASH, &ask("x")).await.unwrap_err();
        assert_eq!(api_parts(&err).2, message);
        assert_eq!(fake.requests().len(), 3);
    }
}

#[tokio::test]
async fn wrong_and_missing_keys_are_rejected_like_the_api() {
    let fake = FakeGemini::start(vec![FakeTurn::text("x")]).await;
    let client = GeminiClient::new(GeminiOptions {
        api_key: "not-the-key".into(),
        ..fake.options()
    })
    .unwrap();
    let err = client.generate(FLASH, &ask("x")).await.unwrap_err();
    let (status, status_text, message) = api_parts(&err);
    assert_eq!((status, status_text.as_str()), (400, "INVALID_ARGUMENT"));
    assert_eq!(message, "API key not valid. Please pass a valid API key.");
    assert!(matches!(&err, ModelError::Api { reason: Some(r), .. } if r == "API_KEY_INVALID"));
    assert_eq!(err.hint(), Some("check GEMINI_API_KEY"));
    assert!(err.to_string().contains("check GEMINI_API_KEY"));

    // No key at all (the client refuses to send without one, so use plain HTTP).
    let raw = reqwest::Client::new()
        .post(format!(
            "{}/v1beta/models/{FLASH}:generateContent",
            fake.base_url
        ))
        .json(&json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 403);
    let body: Value = raw.json().await.unwrap();
    assert_eq!(body["error"]["status"], "PERMISSION_DENIED");
    assert_eq!(body["error"]["code"], 403);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unregistered callers")
    );
    assert_eq!(fake.remaining(), 1);

    assert!(matches!(
        GeminiClient::new(GeminiOptions::default()),
        Err(ModelError::MissingApiKey)
    ));
}

#[tokio::test]
async fn unknown_model_is_404_with_a_hint() {
    let fake = FakeGemini::start(vec![FakeTurn::text("x")]).await;
    let err = fake
        .client()
        .unwrap()
        .generate("gpt-4o", &ask("x"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert!(
        err.to_string().contains("models/gpt-4o is not found"),
        "{err}"
    );
    assert!(err.hint().unwrap().contains("model"));
    let bad = fake
        .client()
        .unwrap()
        .generate("bad model/..", &ask("x"))
        .await
        .unwrap_err();
    assert!(matches!(bad, ModelError::InvalidModel { .. }));
}

#[tokio::test]
async fn unreachable_server_is_an_http_error_after_retries() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = GeminiClient::new(GeminiOptions {
        api_key: "k".into(),
        base_url: format!("http://127.0.0.1:{port}"),
        max_retries: 2,
        backoff_base: Duration::from_millis(1),
        ..GeminiOptions::default()
    })
    .unwrap();
    let err = client.generate(FLASH, &ask("x")).await.unwrap_err();
    assert!(matches!(err, ModelError::Http { .. }), "{err:?}");
    assert!(err.to_string().contains("could not reach Gemini"), "{err}");
}

// ---------------------------------------------------------------------------------------
// round trips

#[tokio::test]
async fn unknown_fields_and_thought_signatures_round_trip_byte_for_byte() {
    let fake = FakeGemini::start(vec![]).await;
    let call_sig = fake.issue_signature("lookup");
    let thought_sig = fake.issue_signature("thought");
    let content = json!({
        "role": "model",
        "parts": [
            {"text": "Let me look that up.", "thought": true, "thoughtSignature": thought_sig},
            {
                "functionCall": {"id": "call-7", "name": "lookup", "args": {"z": 1, "a": [true, null, "é"]}, "futureCallField": {"x": 1}},
                "thoughtSignature": call_sig,
                "partMetadata": {"k": "v"}
            },
            {"fileData": {"mimeType": "image/png", "fileUri": "https://example.invalid/f"}}
        ],
        "futureContentField": [1, 2]
    });
    let response = json!({
        "candidates": [{
            "content": content,
            "finishReason": "STOP",
            "avgLogprobs": -0.25,
            "safetyRatings": [],
            "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 5, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 3}]},
        "modelVersion": G3,
        "responseId": "r-1",
        "futureTopLevel": "kept"
    });
    fake.push(FakeTurn::Raw(response.clone()));
    let client = fake.client().unwrap();
    let req = with_tools(ask("find it"), vec![decl("lookup")]);
    let resp = client.generate(G3, &req).await.unwrap();

    // Parsed and re-serialized, every object is the same bytes as it came.
    let turn = resp.content().unwrap().clone();
    assert_eq!(serde_json::to_string(&turn).unwrap(), content.to_string());
    assert_eq!(serde_json::to_string(&resp).unwrap(), response.to_string());
    assert_eq!(
        turn.parts[1].thought_signature.as_deref(),
        Some(call_sig.as_str())
    );
    assert_eq!(
        turn.parts[2].extra["fileData"]["fileUri"],
        "https://example.invalid/f"
    );

    // Sent back: the fake (Gemini 3) accepts it, and receives it byte for byte.
    fake.push(FakeTurn::text("found"));
    let mut next = req.clone();
    next.contents.push(turn);
    next.contents
        .push(Content::user(vec![Part::function_response(
            FunctionResponse::output(Some("call-7".into()), "lookup", json!({"hits": 1})),
        )]));
    assert_eq!(client.generate(G3, &next).await.unwrap().text(), "found");
    let sent = &fake.requests()[1]["contents"][1];
    assert_eq!(sent.to_string(), content.to_string());
}

#[tokio::test]
async fn gemini_3_requires_the_thought_signature_back() {
    let fake = FakeGemini::start(vec![FakeTurn::call("lookup", json!({"q": "x"}))]).await;
    let client = fake.client().unwrap();
    let req = with_tools(ask("find"), vec![decl("lookup")]);
    let resp = client.generate(G3, &req).await.unwrap();
    let turn = resp.content().unwrap().clone();
    let call = turn.function_calls()[0].clone();
    let answer = Content::user(vec![Part::function_response(FunctionResponse::output(
        call.id.clone(),
        "lookup",
        json!("r"),
    ))]);

    let mut stripped = turn.clone();
    stripped.parts[0].thought_signature = None;
    let mut bad = req.clone();
    bad.contents.extend([stripped.clone(), answer.clone()]);
    fake.push(FakeTurn::text("ok"));
    expect_rejected(
        &fake,
        G3,
        &bad,
        "Function call is missing a thought_signature",
    )
    .await;

    let mut corrupted = turn.clone();
    corrupted.parts[0].thought_signature = Some("Y29ycnVwdGVk".into());
    let mut bad = req.clone();
    bad.contents.extend([corrupted, answer.clone()]);
    expect_rejected(&fake, G3, &bad, "Corrupted thought signature").await;

    // Models before Gemini 3 accept a missing signature.
    let mut old = req.clone();
    old.contents.extend([stripped, answer.clone()]);
    assert_eq!(client.generate(FLASH, &old).await.unwrap().text(), "ok");

    // And Gemini 3 accepts the turn as it came.
    fake.push(FakeTurn::text("ok again"));
    let mut good = req.clone();
    good.contents.extend([turn, answer]);
    assert_eq!(client.generate(G3, &good).await.unwrap().text(), "ok again");
}

#[tokio::test]
async fn dynamic_turn_fixes_a_failed_call() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("divide", json!({"q": "1/0"})),
        FakeTurn::dynamic(|req| {
            let last = last_function_responses(req);
            if last.iter().any(|r| r["response"].get("error").is_some()) {
                FakeTurn::call("divide", json!({"q": "1/1"}))
            } else {
                FakeTurn::text("no error to fix")
            }
        }),
        FakeTurn::text("1/1 = 1"),
    ])
    .await;
    let client = fake.client().unwrap();
    let mut req = with_tools(ask("divide"), vec![decl("divide")]);
    let mut final_text = String::new();
    for _ in 0..4 {
        let resp = client.generate(FLASH, &req).await.unwrap();
        let calls: Vec<_> = resp.function_calls().into_iter().cloned().collect();
        if calls.is_empty() {
            final_text = resp.text();
            break;
        }
        req.contents.push(resp.content().unwrap().clone());
        let parts = calls
            .iter()
            .map(|c| {
                let q = c.args_value()["q"].as_str().unwrap_or("").to_owned();
                let fr = if q == "1/0" {
                    FunctionResponse::error(c.id.clone(), &c.name, json!("division by zero"))
                } else {
                    FunctionResponse::output(c.id.clone(), &c.name, json!(1))
                };
                Part::function_response(fr)
            })
            .collect();
        req.contents.push(Content::user(parts));
    }
    assert_eq!(final_text, "1/1 = 1");
    let second = &fake.requests()[1];
    assert_eq!(
        second["contents"][2]["parts"][0]["functionResponse"]["response"],
        json!({"error": "division by zero"})
    );
}

// ---------------------------------------------------------------------------------------
// what the fake rejects

#[tokio::test]
async fn fake_rejects_invalid_function_names() {
    let fake = FakeGemini::start(vec![FakeTurn::text("ok")]).await;
    let long = format!("a{}", "b".repeat(64));
    for bad in ["my tool", "1tool", "tool/x", "", "émoji", long.as_str()] {
        let req = with_tools(ask("x"), vec![decl(bad)]);
        expect_rejected(&fake, FLASH, &req, "Invalid function name").await;
    }
    let ok = format!("_a{}", "b".repeat(62));
    let req = with_tools(
        ask("x"),
        vec![decl("mcp_server_tool"), decl("ns.tool:v1-x"), decl(&ok)],
    );
    assert_eq!(
        fake.client()
            .unwrap()
            .generate(FLASH, &req)
            .await
            .unwrap()
            .text(),
        "ok"
    );
}

#[tokio::test]
async fn fake_rejects_bad_declarations() {
    let fake = FakeGemini::start(vec![FakeTurn::text("ok")]).await;

    let mut both = decl("both");
    both.parameters = Some(json!({"type": "OBJECT", "properties": {}}));
    expect_rejected(
        &fake,
        FLASH,
        &with_tools(ask("x"), vec![both]),
        "cannot both be set",
    )
    .await;

    let mut bad_schema = decl("typed");
    bad_schema.parameters_json_schema = Some(json!({
        "type": "object",
        "properties": {"x": {"type": ["string", "null"]}}
    }));
    expect_rejected(
        &fake,
        FLASH,
        &with_tools(ask("x"), vec![bad_schema.clone()]),
        "parameters_json_schema",
    )
    .await;
    let problems =
        switchboard_model::validate_for_gemini(bad_schema.parameters_json_schema.as_ref().unwrap())
            .unwrap_err();
    let err = fake
        .client()
        .unwrap()
        .generate(FLASH, &with_tools(ask("x"), vec![bad_schema]))
        .await
        .unwrap_err();
    assert!(api_parts(&err).2.contains(&problems[0]), "{err}");

    let mut with_ref = decl("reffy");
    with_ref.parameters_json_schema = Some(json!({
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/X"}},
        "$defs": {"X": {"type": "string"}}
    }));
    expect_rejected(
        &fake,
        FLASH,
        &with_tools(ask("x"), vec![with_ref]),
        "parameters_json_schema",
    )
    .await;

    let mut openapi_extra = decl("openapi");
    openapi_extra.parameters_json_schema = None;
    openapi_extra.parameters = Some(json!({"type": "object", "additionalProperties": false}));
    expect_rejected(
        &fake,
        FLASH,
        &with_tools(ask("x"), vec![openapi_extra]),
        "Unknown name \"additionalProperties\"",
    )
    .await;

    let mut unknown_field = decl("unknown");
    unknown_field.extra.insert("strict".into(), json!(true));
    expect_rejected(
        &fake,
        FLASH,
        &with_tools(ask("x"), vec![unknown_field]),
        "Unknown name \"strict\"",
    )
    .await;

    expect_rejected(
        &fake,
        FLASH,
        &with_tools(ask("x"), vec![decl("dup"), decl("dup")]),
        "Duplicate function declaration found: dup",
    )
    .await;

    let many: Vec<_> = (0..513).map(|i| decl(&format!("tool_{i}"))).collect();
    expect_rejected(&fake, FLASH, &with_tools(ask("x"), many), "at most 512").await;

    let mut search = with_tools(ask("x"), vec![decl("f")]);
    search.tools.as_mut().unwrap().push(Tool::google_search());
    expect_rejected(
        &fake,
        FLASH,
        &search,
        "Tool use with function calling is unsupported",
    )
    .await;

    expect_rejected(
        &fake,
        "gemma-3-27b-it",
        &with_tools(ask("x"), vec![decl("f")]),
        "Function calling is not enabled",
    )
    .await;

    // The accepted forms: exactly 512 declarations, an OpenAPI `parameters` schema,
    // search alone, Gemma without tools.
    let client = fake.client().unwrap();
    let many: Vec<_> = (0..512).map(|i| decl(&format!("tool_{i}"))).collect();
    assert_eq!(
        client
            .generate(FLASH, &with_tools(ask("x"), many))
            .await
            .unwrap()
            .text(),
        "ok"
    );
    let mut openapi = decl("openapi");
    openapi.parameters_json_schema = None;
    openapi.parameters = Some(json!({
        "type": "OBJECT",
        "properties": {"q": {"type": "STRING", "nullable": true, "enum": ["a", "b"]}},
        "required": ["q"]
    }));
    fake.push(FakeTurn::text("ok"));
    assert_eq!(
        client
            .generate(FLASH, &with_tools(ask("x"), vec![openapi]))
            .await
            .unwrap()
            .text(),
        "ok"
    );
    let mut search_only = ask("x");
    search_only.tools = Some(vec![Tool::google_search()]);
    fake.push(FakeTurn::text("ok"));
    assert_eq!(
        client.generate(FLASH, &search_only).await.unwrap().text(),
        "ok"
    );
    fake.push(FakeTurn::text("ok"));
    assert_eq!(
        client
            .generate("gemma-3-27b-it", &ask("x"))
            .await
            .unwrap()
            .text(),
        "ok"
    );
}

#[tokio::test]
async fn fake_rejects_allowed_function_names_outside_any() {
    let fake = FakeGemini::start(vec![FakeTurn::call("f", json!({"q": "x"}))]).await;
    let mut req = with_tools(ask("x"), vec![decl("f")]);
    req.tool_config = Some(ToolConfig {
        function_calling_config: Some(FunctionCallingConfig {
            mode: Some(FunctionCallingMode::Auto),
            allowed_function_names: Some(vec!["f".into()]),
        }),
        ..ToolConfig::default()
    });
    expect_rejected(&fake, FLASH, &req, "allowed_function_names").await;
    if let Some(cfg) = req
        .tool_config
        .as_mut()
        .and_then(|t| t.function_calling_config.as_mut())
    {
        cfg.mode = Some(FunctionCallingMode::Any);
    }
    let resp = fake.client().unwrap().generate(FLASH, &req).await.unwrap();
    assert_eq!(resp.function_calls()[0].name, "f");
    assert_eq!(
        fake.requests()[1]["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}})
    );
}

#[tokio::test]
async fn fake_rejects_function_responses_that_do_not_match_the_calls() {
    let fake = FakeGemini::start(vec![FakeTurn::calls([
        ("a", json!({"q": "1"})),
        ("b", json!({"q": "2"})),
    ])])
    .await;
    let client = fake.client().unwrap();
    let req = with_tools(ask("x"), vec![decl("a"), decl("b")]);
    let turn = client
        .generate(FLASH, &req)
        .await
        .unwrap()
        .content()
        .unwrap()
        .clone();
    let calls: Vec<_> = turn.function_calls().into_iter().cloned().collect();
    let respond = |name: &str, id: Option<String>| {
        Part::function_response(FunctionResponse::output(id, name, json!("r")))
    };
    fake.push(FakeTurn::text("ok"));

    let mut too_few = req.clone();
    too_few.contents.extend([
        turn.clone(),
        Content::user(vec![respond("a", calls[0].id.clone())]),
    ]);
    expect_rejected(&fake, FLASH, &too_few, "number of function response parts").await;

    let mut wrong_name = req.clone();
    wrong_name.contents.extend([
        turn.clone(),
        Content::user(vec![
            respond("a", calls[0].id.clone()),
            respond("c", calls[1].id.clone()),
        ]),
    ]);
    expect_rejected(&fake, FLASH, &wrong_name, "answers the calls").await;

    let mut wrong_id = req.clone();
    wrong_id.contents.extend([
        turn.clone(),
        Content::user(vec![
            respond("a", Some("nope".into())),
            respond("b", calls[1].id.clone()),
        ]),
    ]);
    expect_rejected(&fake, FLASH, &wrong_id, "function response id").await;

    let mut orphan = ask("x");
    orphan
        .contents
        .push(Content::user(vec![respond("a", None)]));
    expect_rejected(
        &fake,
        FLASH,
        &orphan,
        "function response turn comes immediately after a function call turn",
    )
    .await;

    let mut call_first = GenerateRequest::new(vec![turn.clone()]);
    call_first
        .contents
        .push(Content::user(vec![respond("a", None), respond("b", None)]));
    expect_rejected(
        &fake,
        FLASH,
        &call_first,
        "function call turn comes immediately after a user turn",
    )
    .await;

    // Both answered, in another order: accepted.
    let mut good = req.clone();
    good.contents.extend([
        turn,
        Content::user(vec![
            respond("b", calls[1].id.clone()),
            respond("a", calls[0].id.clone()),
        ]),
    ]);
    assert_eq!(client.generate(FLASH, &good).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn fake_rejects_audio_in_function_response_parts() {
    let fake = FakeGemini::start(vec![FakeTurn::call("shot", json!({"q": "x"}))]).await;
    let client = fake.client().unwrap();
    let req = with_tools(ask("x"), vec![decl("shot")]);
    let turn = client
        .generate(G3, &req)
        .await
        .unwrap()
        .content()
        .unwrap()
        .clone();
    let id = turn.function_calls()[0].id.clone();
    let with_parts = |mime: &str| {
        let mut fr = FunctionResponse::output(id.clone(), "shot", json!("see attached"));
        fr.parts = Some(vec![switchboard_model::FunctionResponsePart {
            inline_data: Some(switchboard_model::Blob::new(mime, "AAAA")),
            ..Default::default()
        }]);
        let mut r = req.clone();
        r.contents.extend([
            turn.clone(),
            Content::user(vec![Part::function_response(fr)]),
        ]);
        r
    };
    fake.push(FakeTurn::text("ok"));
    expect_rejected(&fake, G3, &with_parts("audio/wav"), "audio/wav").await;
    expect_rejected(&fake, G3, &with_parts("video/mp4"), "video/mp4").await;
    // Images inside the function response: Gemini 3 only.
    expect_rejected(
        &fake,
        FLASH,
        &with_parts("image/png"),
        "not supported by models/gemini-2.5-flash",
    )
    .await;
    assert_eq!(
        client
            .generate(G3, &with_parts("image/png"))
            .await
            .unwrap()
            .text(),
        "ok"
    );

    // Audio as a sibling part is fine.
    let mut sibling = req.clone();
    sibling.contents.extend([
        turn.clone(),
        Content::user(vec![
            Part::function_response(FunctionResponse::output(
                id.clone(),
                "shot",
                json!("audio attached"),
            )),
            Part::inline_data("audio/wav", "AAAA"),
        ]),
    ]);
    fake.push(FakeTurn::text("heard"));
    assert_eq!(client.generate(G3, &sibling).await.unwrap().text(), "heard");

    // A sibling part does not start a new exchange: the signature is still required.
    let mut unsigned = sibling.clone();
    unsigned.contents[1].parts[0].thought_signature = None;
    fake.push(FakeTurn::text("unused"));
    expect_rejected(&fake, G3, &unsigned, "missing a thought_signature").await;
}

#[tokio::test]
async fn fake_rejects_malformed_contents() {
    let fake = FakeGemini::start(vec![FakeTurn::text("ok")]).await;
    expect_rejected(
        &fake,
        FLASH,
        &GenerateRequest::new(vec![]),
        "contents is not specified",
    )
    .await;
    expect_rejected(
        &fake,
        FLASH,
        &GenerateRequest::new(vec![Content::new("assistant", vec![Part::text("x")])]),
        "valid role",
    )
    .await;
    expect_rejected(
        &fake,
        FLASH,
        &GenerateRequest::new(vec![Content::user(vec![])]),
        "must not be empty",
    )
    .await;
    expect_rejected(
        &fake,
        FLASH,
        &GenerateRequest::new(vec![Content::user(vec![Part::default()])]),
        "required oneof field 'data'",
    )
    .await;
    let mut two = Part::text("x");
    two.inline_data = Some(switchboard_model::Blob::new("image/png", "AAAA"));
    expect_rejected(
        &fake,
        FLASH,
        &GenerateRequest::new(vec![Content::user(vec![two])]),
        "already set",
    )
    .await;
    expect_rejected(
        &fake,
        FLASH,
        &GenerateRequest::new(vec![Content::user(vec![Part::inline_data(
            "image/png",
            "not base64!",
        )])]),
        "Base64 decoding failed",
    )
    .await;

    let raw = reqwest::Client::new()
        .post(format!(
            "{}/v1beta/models/{FLASH}:generateContent",
            fake.base_url
        ))
        .header("x-goog-api-key", fake.api_key())
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 400);
    let body: Value = raw.json().await.unwrap();
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid JSON payload")
    );
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn script_exhaustion_is_a_clear_error() {
    let fake = FakeGemini::start(vec![]).await;
    let err = fake
        .client()
        .unwrap()
        .generate(FLASH, &ask("x"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("script has no turn left"), "{err}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}
