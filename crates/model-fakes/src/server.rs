//! The server every fake shares: [`FakeServer`] binds `127.0.0.1:0`, serves one
//! [`FakeApi`]'s routes with axum until it is dropped (graceful shutdown, then abort),
//! and keeps the state its handlers share: the API's own state, the script of
//! [`FakeTurn`]s and the log of every request received. [`Shared::answer`] is the one
//! way a request is answered: record it, admit it (the API's checks), take the next
//! turn, resolve it, render it (the API's wire format), record the status sent.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::reply::Reply;
use crate::turn::FakeTurn;

/// The largest request body a fake reads.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// What one fake API adds to [`FakeServer`]: its name, routes, options, state and the
/// answer when the script ran out. Implemented by
/// [`GeminiApi`](crate::gemini::GeminiApi) and [`OpenAiApi`](crate::openai::OpenAiApi);
/// the handler state and answers its methods use are this crate's own, so no other
/// crate can implement it.
pub trait FakeApi: Send + Sized + 'static {
    /// The fake's name, as its own messages and panics give it (`FakeGemini`).
    const NAME: &'static str;
    /// What follows the address in the base URL a client is given (`""`, `"/v1"`).
    const BASE_PATH: &'static str;
    /// How the fake is run.
    type Options: Default + Send + 'static;

    /// The API's state, built from its options.
    fn new(options: Self::Options) -> Self;
    /// Its routes and fallback (the server adds the body limit and the state).
    fn routes() -> Router<Shared<Self>>;
    /// The answer to an admitted request when the script has no turn left.
    fn exhausted(message: String) -> Reply;
}

/// What the handlers share: the API's state, the script and the request log.
pub(crate) struct Inner<A: FakeApi> {
    pub(crate) api: A,
    script: VecDeque<FakeTurn>,
    requests: Vec<FakeRequest>,
    served: usize,
}

/// The handlers' handle on [`Inner`], behind one mutex.
pub struct Shared<A: FakeApi>(Arc<Mutex<Inner<A>>>);

impl<A: FakeApi> Clone for Shared<A> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<A: FakeApi> Shared<A> {
    /// The state; a handler that panicked while holding it leaves it usable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner<A>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers one request: logs `record`, runs `admit` on the API state (a rejection
    /// is answered as it is, consuming no turn), takes the next turn (none left:
    /// [`exhausted`](FakeApi::exhausted)), resolves it against the admitted
    /// body and has `render` answer it; the log gets the status sent.
    ///
    /// Everything up to taking the turn happens under the lock, without awaiting.
    pub(crate) fn answer(
        &self,
        record: FakeRequest,
        admit: impl FnOnce(&mut A) -> Result<Value, Reply>,
        render: impl FnOnce(usize, FakeTurn, &Value) -> Reply,
    ) -> Response {
        let (index, request, turn) = {
            let mut st = self.lock();
            let index = st.requests.len();
            st.requests.push(record);
            let taken = admit(&mut st.api).and_then(|request| match st.script.pop_front() {
                Some(turn) => {
                    st.served += 1;
                    Ok((request, turn))
                }
                None => Err(A::exhausted(format!(
                    "{}: the script has no turn left (request #{}, {} served)",
                    A::NAME,
                    index + 1,
                    st.served
                ))),
            });
            match taken {
                Ok((request, turn)) => (index, request, turn),
                Err(reply) => {
                    st.set_status(index, reply.status);
                    return reply.into_response();
                }
            }
        };
        let turn = turn.resolve(&request, A::NAME);
        let reply = render(index, turn, &request);
        self.lock().set_status(index, reply.status);
        reply.into_response()
    }
}

impl<A: FakeApi> Inner<A> {
    fn set_status(&mut self, index: usize, status: u16) {
        if let Some(r) = self.requests.get_mut(index) {
            r.status = status;
        }
    }
}

/// One request a fake received (accepted or not): the request log's entry.
#[derive(Debug, Clone)]
pub struct FakeRequest {
    /// The request path, e.g. `/v1beta/models/gemini-2.5-flash:generateContent` or
    /// `/v1/chat/completions`.
    pub path: String,
    /// The model asked for: Gemini's from the path, OpenAI's `model` from the body
    /// (empty when missing).
    pub model: String,
    /// The operation: Gemini's `generateContent` or `streamGenerateContent` (what
    /// follows the `:` in the path); `chat/completions` on the OpenAI-compatible fake.
    pub method: String,
    /// Whether a streamed answer was asked for (`streamGenerateContent`,
    /// `"stream": true`).
    pub stream: bool,
    /// Whether server-sent events were asked for (Gemini's `alt=sse`; every OpenAI
    /// stream).
    pub sse: bool,
    /// The key sent, if any (`x-goog-api-key` or `key=`; `Authorization: Bearer`).
    pub api_key: Option<String>,
    /// The body (a JSON string holding the raw text when it was not JSON).
    pub body: Value,
    /// The status answered (0 while the answer is being made).
    pub status: u16,
}

/// A body as JSON (or the parse error) and as the log records it: the JSON, or a JSON
/// string holding the raw text when it was not JSON.
pub(crate) fn parse_body(body: &Bytes) -> (Result<Value, String>, Value) {
    let parsed: Result<Value, String> = serde_json::from_slice(body).map_err(|e| e.to_string());
    let recorded = match &parsed {
        Ok(v) => v.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(body).into_owned()),
    };
    (parsed, recorded)
}

/// The array under `key` in a request body's object, or none.
pub(crate) fn items<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A running fake of API `A`; stops when dropped.
pub struct FakeServer<A: FakeApi> {
    /// The base URL to give the client, e.g. `http://127.0.0.1:4321` (Gemini, no
    /// version path) or `http://127.0.0.1:4321/v1` (OpenAI-compatible).
    pub base_url: String,
    pub(crate) state: Shared<A>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl<A: FakeApi> fmt::Debug for FakeServer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(A::NAME)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl<A: FakeApi> FakeServer<A> {
    /// Starts the fake with the default options.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (test fixture).
    pub async fn start(script: Vec<FakeTurn>) -> Self {
        Self::start_with(A::Options::default(), script).await
    }

    /// Starts the fake with these options.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (test fixture).
    pub async fn start_with(options: A::Options, script: Vec<FakeTurn>) -> Self {
        match Self::try_start(options, script).await {
            Ok(fake) => fake,
            Err(e) => panic!("{}: cannot listen on 127.0.0.1: {e}", A::NAME),
        }
    }

    /// Starts the fake, reporting a bind failure.
    pub async fn try_start(options: A::Options, script: Vec<FakeTurn>) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Shared(Arc::new(Mutex::new(Inner {
            api: A::new(options),
            script: script.into(),
            requests: Vec::new(),
            served: 0,
        })));
        let app = A::routes()
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = served.await {
                tracing::debug!(%e, "{} stopped", A::NAME);
            }
        });
        Ok(Self {
            base_url: format!("http://{addr}{}", A::BASE_PATH),
            state,
            shutdown: Some(tx),
            task,
        })
    }

    /// The bodies of every request received so far, in order (rejected ones too).
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .lock()
            .requests
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// Every request received so far, with path, model, method, key and status.
    pub fn recorded(&self) -> Vec<FakeRequest> {
        self.state.lock().requests.clone()
    }

    /// Adds a turn at the end of the script.
    pub fn push(&self, turn: FakeTurn) {
        self.state.lock().script.push_back(turn);
    }

    /// How many scripted turns are left.
    pub fn remaining(&self) -> usize {
        self.state.lock().script.len()
    }
}

impl<A: FakeApi> Drop for FakeServer<A> {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}
