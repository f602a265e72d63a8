//! Calls to a server on protocol 2026-07-28 that asks for input (SEP-2322, multi
//! round-trip requests): instead of sending its own requests, such a server answers
//! `tools/call`, `prompts/get` or `resources/read` with an `InputRequiredResult`. The
//! questions in it (elicitation, sampling, roots) are answered by the connection's
//! [`ClientHooks`] — exactly as the same questions sent as requests would be — and the
//! call is sent again with `inputResponses` and the server's `requestState`, until the
//! server answers with its result. A result carrying only a `requestState` (the server
//! is still working) is retried after a backoff of 50 ms, doubling up to 250 ms, and
//! back to 50 ms after a round that asked something.
//!
//! Must not: go on past [`MAX_INPUT_ROUNDS`] rounds (a server that keeps asking gets
//! an error naming it), keep asking after the caller cancelled, or read the
//! `requestState` (it is the server's, echoed back as it came).
#![allow(deprecated)] // sampling and roots: deprecated by SEP-2577, still answered

use std::time::Duration;

use rmcp::model::{InputRequest, InputRequests, InputResponses, ListRootsResult, ServerResult};
use serde_json::Value;

use super::{CallOptions, Connection};
use crate::error::RequestError;

/// At most this many `InputRequiredResult`s are answered for one call (the SDKs' own
/// default).
pub const MAX_INPUT_ROUNDS: usize = 10;
/// The first wait before retrying a result that carries only a `requestState`.
const STATE_ONLY_FIRST: Duration = Duration::from_millis(50);
/// The longest such wait.
const STATE_ONLY_MAX: Duration = Duration::from_millis(250);

impl Connection {
    /// Sends the request `build` makes (given the previous round's `inputResponses`
    /// and `requestState`) until the server answers with something other than an
    /// `InputRequiredResult` (see the module doc).
    pub(super) async fn send_with_input(
        &self,
        method: &str,
        build: impl Fn(
            Option<InputResponses>,
            Option<String>,
        ) -> Result<rmcp::model::ClientRequest, RequestError>,
        opts: &CallOptions,
    ) -> Result<ServerResult, RequestError> {
        let mut responses = None;
        let mut state = None;
        let mut wait = STATE_ONLY_FIRST;
        for _ in 0..=MAX_INPUT_ROUNDS {
            let answer = self
                .send(method, build(responses.take(), state.take())?, opts)
                .await?;
            let ServerResult::InputRequiredResult(asked) = answer else {
                return Ok(answer);
            };
            state = asked.request_state;
            match asked.input_requests.filter(|r| !r.is_empty()) {
                Some(requests) => {
                    let fulfil = self.fulfil(requests);
                    responses = Some(match &opts.cancel {
                        Some(ct) => tokio::select! {
                            r = fulfil => r,
                            () = ct.cancelled() => {
                                return Err(RequestError::Cancelled { method: method.into() });
                            }
                        },
                        None => fulfil.await,
                    });
                    wait = STATE_ONLY_FIRST;
                }
                None => {
                    let pause = tokio::time::sleep(wait);
                    match &opts.cancel {
                        Some(ct) => tokio::select! {
                            () = pause => {}
                            () = ct.cancelled() => {
                                return Err(RequestError::Cancelled { method: method.into() });
                            }
                        },
                        None => pause.await,
                    }
                    wait = (wait * 2).min(STATE_ONLY_MAX);
                }
            }
        }
        Err(RequestError::Server {
            method: method.into(),
            code: rmcp::model::ErrorCode::INVALID_REQUEST.0,
            message: format!(
                "the server asked for input more than {MAX_INPUT_ROUNDS} times for one call; \
                 gave up"
            ),
        })
    }

    /// Each question's answer from the hooks, under its key.
    async fn fulfil(&self, requests: InputRequests) -> InputResponses {
        let mut out = InputResponses::new();
        for (key, request) in requests {
            let answer = match request {
                InputRequest::Elicitation(r) => {
                    json_of(&self.hooks.elicit(self.name(), r.params).await)
                }
                InputRequest::CreateMessage(r) => {
                    match self.hooks.sample(self.name(), r.params).await {
                        Ok(v) => json_of(&v),
                        Err(e) => json_of(&e),
                    }
                }
                InputRequest::ListRoots(_) => match self.hooks.list_roots(self.name()).await {
                    Ok(roots) => json_of(&ListRootsResult::new(roots)),
                    Err(e) => json_of(&e),
                },
                other => {
                    tracing::info!(
                        server = self.name(),
                        "an input request of a kind this client does not know: {:?}",
                        serde_json::to_value(&other)
                            .ok()
                            .and_then(|v| v.get("method").cloned())
                    );
                    json_of(&rmcp::model::ErrorData::method_not_found::<
                        rmcp::model::ElicitationCreateRequestMethod,
                    >())
                }
            };
            out.insert(key, answer);
        }
        out
    }
}

fn json_of<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}
