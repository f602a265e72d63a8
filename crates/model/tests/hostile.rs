//! A model server is not trusted to answer within bounds: one that never ends an SSE
//! event, sends an endless answer, or an endless error body must cost a bounded read and
//! end in a clear error, never a hang or unbounded memory.
//!
//! The server here is a plain axum app on 127.0.0.1 that streams `a` forever.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use switchboard_model::{
    Content, GeminiClient, GeminiOptions, GenerateRequest, ModelClient, ModelError, OpenAiClient,
    OpenAiOptions, Part,
};

const LIMIT: Duration = Duration::from_secs(120);

struct Endless {
    base: String,
    sent: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Serves, for any path: `/sse/…` an event that never ends, `/error/…` a 500 whose body
/// never ends, anything else a 200 JSON-looking body that never ends.
async fn endless() -> Endless {
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    let app = Router::new().fallback(move |uri: Uri| {
        let counter = counter.clone();
        async move {
            let path = uri.path().to_owned();
            let block = Bytes::from(vec![b'a'; 64 * 1024]);
            let head = if path.starts_with("/sse") {
                Bytes::from_static(b"data: {\"candidates\":\"")
            } else {
                Bytes::from_static(b"{\"choices\":\"")
            };
            let body = futures::stream::once(async move { Ok::<_, Infallible>(head) }).chain(
                futures::stream::repeat_with(move || {
                    counter.fetch_add(block.len(), Ordering::Relaxed);
                    Ok::<_, Infallible>(block.clone())
                }),
            );
            let status = if path.starts_with("/error") {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::OK
            };
            let content_type = if path.starts_with("/sse") {
                "text/event-stream"
            } else {
                "application/json"
            };
            Response::builder()
                .status(status)
                .header("content-type", content_type)
                .body(Body::from_stream(body))
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Endless {
        base: format!("http://{addr}"),
        sent,
        _stop: stop,
    }
}

fn ask() -> GenerateRequest {
    GenerateRequest {
        contents: vec![Content::user(vec![Part::text("hi")])],
        ..Default::default()
    }
}

fn gemini(base: String) -> GeminiClient {
    GeminiClient::new(GeminiOptions {
        api_key: "k".into(),
        base_url: base,
        max_retries: 0,
        ..GeminiOptions::default()
    })
    .unwrap()
}

fn openai(base: String) -> OpenAiClient {
    OpenAiClient::new(OpenAiOptions {
        base_url: base,
        max_retries: 0,
        ..OpenAiOptions::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_that_never_ends_is_cut_off() {
    let server = endless().await;
    for client in [
        Box::new(gemini(format!("{}/sse", server.base))) as Box<dyn ModelClient>,
        Box::new(openai(format!("{}/sse/v1", server.base))),
    ] {
        let outcome = tokio::time::timeout(LIMIT, async {
            let mut stream = client.stream("gemini-2.5-flash", &ask()).await.unwrap();
            let mut last = None;
            while let Some(item) = stream.next().await {
                last = Some(item);
            }
            last
        })
        .await
        .expect("the stream must end, not read forever");
        match outcome {
            Some(Err(ModelError::Stream { message, .. })) => {
                assert!(message.contains("32 MiB"), "{message}");
            }
            other => panic!("expected a stream error, got {other:?}"),
        }
    }
    // Both clients stopped reading soon after the limit (the server may run ahead a little).
    assert!(server.sent.load(Ordering::Relaxed) < 2 * 48 * 1024 * 1024);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_never_ends_is_refused() {
    let server = endless().await;
    let client = openai(format!("{}/v1", server.base));
    let err = tokio::time::timeout(LIMIT, client.generate("m", &ask()))
        .await
        .expect("the answer must be refused, not read forever")
        .unwrap_err();
    assert!(matches!(err, ModelError::Decode { .. }), "{err:?}");
    assert!(err.to_string().contains("larger than 64 MiB"), "{err}");
    let client = gemini(server.base.clone());
    let err = tokio::time::timeout(LIMIT, client.generate("gemini-2.5-flash", &ask()))
        .await
        .expect("the answer must be refused, not read forever")
        .unwrap_err();
    assert!(err.to_string().contains("larger than 64 MiB"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_body_that_never_ends_is_read_only_in_part() {
    let server = endless().await;
    for client in [
        Box::new(gemini(format!("{}/error", server.base))) as Box<dyn ModelClient>,
        Box::new(openai(format!("{}/error/v1", server.base))),
    ] {
        let err = tokio::time::timeout(LIMIT, client.generate("gemini-2.5-flash", &ask()))
            .await
            .expect("the error must be reported, not read forever")
            .unwrap_err();
        assert_eq!(err.status(), Some(500), "{err:?}");
    }
}
