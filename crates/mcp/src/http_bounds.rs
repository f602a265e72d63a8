//! Streamable HTTP replies that are too large or unreadable fail their request at once.
//!
//! rmcp's Streamable HTTP client already caps one SSE event (at
//! [`ConnectOptions::max_message_bytes`](crate::ConnectOptions)) and one JSON body
//! (16 MiB), but past the cap it ends the stream with a bare error ("the server
//! connection is closed"), and a reply it cannot parse (nested too deep, say) is dropped,
//! so its request waits for the full timeout. [`BoundedHttpClient`] wraps the HTTP client
//! of a connection: it knows which request each POST carries, so it turns those failures
//! into a JSON-RPC error reply to that request, naming the server and the limit.
//!
//! It also checks each SSE event's nesting depth with [`EnvelopeScan`] (one pass over
//! the bytes, no parse) because an event deeper than serde's limit would be dropped.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use serde_json::Value;
use sse_stream::{Error as SseError, Sse};

use crate::framing::{self, EnvelopeScan, MAX_PARSE_DEPTH};
use crate::token::TokenHttpClient;

/// A Streamable HTTP client whose replies are bounded; see the module docs.
#[derive(Clone)]
pub(crate) struct BoundedHttpClient {
    inner: TokenHttpClient,
    server: Arc<str>,
    max: usize,
}

impl BoundedHttpClient {
    pub(crate) fn new(inner: TokenHttpClient, server: &str, max: usize) -> Self {
        Self {
            inner,
            server: Arc::from(server),
            max,
        }
    }
}

/// The id of the request a client message is, if it is one.
fn request_id(message: &ClientJsonRpcMessage) -> Option<Value> {
    match message {
        ClientJsonRpcMessage::Request(r) => serde_json::to_value(&r.id).ok(),
        _ => None,
    }
}

/// An SSE event carrying `message`.
fn event(message: &ServerJsonRpcMessage) -> Sse {
    Sse {
        event: Some("message".into()),
        data: serde_json::to_string(message).ok(),
        id: None,
        retry: None,
    }
}

impl BoundedHttpClient {
    /// Replaces a failed or unreadable reply to `message` by an error reply.
    fn bound(
        &self,
        message: &ClientJsonRpcMessage,
        response: Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        let Some(id) = request_id(message) else {
            return response;
        };
        match response {
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => Ok(
                StreamableHttpPostResponse::Sse(self.bound_stream(stream, Some(id)), session),
            ),
            Err(StreamableHttpError::ResponseBodyTooLarge { max_size }) => {
                let text = framing::oversized_message(&self.server, max_size + 1, max_size);
                tracing::warn!(server = %self.server, "{text}");
                match framing::stand_in::<ServerJsonRpcMessage>(&id, text) {
                    Some(reply) => Ok(StreamableHttpPostResponse::Json(reply, None)),
                    None => Err(StreamableHttpError::ResponseBodyTooLarge { max_size }),
                }
            }
            Err(StreamableHttpError::UnexpectedServerResponse(reason)) => {
                let text = framing::unreadable_message(&self.server, &reason);
                tracing::warn!(server = %self.server, "{text}");
                match framing::stand_in::<ServerJsonRpcMessage>(&id, text) {
                    Some(reply) => Ok(StreamableHttpPostResponse::Json(reply, None)),
                    None => Err(StreamableHttpError::UnexpectedServerResponse(reason)),
                }
            }
            other => other,
        }
    }

    /// Bounds an event stream: an event over the limit ends it with an error reply to
    /// `id` (when the stream answers a request); an event nested too deep to parse is
    /// replaced by an error reply to the request it answers.
    fn bound_stream(
        &self,
        stream: BoxStream<'static, Result<Sse, SseError>>,
        id: Option<Value>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let server = self.server.clone();
        let max = self.max;
        let mut ended = false;
        stream
            .filter_map(move |item| {
                let out = if ended {
                    None
                } else {
                    match item {
                        Ok(sse) => Some(Ok(deep_check(sse, &server))),
                        Err(SseError::Body(e))
                            if e.to_string().contains("exceeded the maximum size") =>
                        {
                            ended = true;
                            let text = framing::oversized_message(&server, max + 1, max);
                            tracing::warn!(server = %server, "{text}");
                            match id
                                .as_ref()
                                .and_then(|id| framing::stand_in::<ServerJsonRpcMessage>(id, text))
                            {
                                Some(reply) => Some(Ok(event(&reply))),
                                None => Some(Err(SseError::Body(e))),
                            }
                        }
                        Err(e) => Some(Err(e)),
                    }
                };
                std::future::ready(out)
            })
            .boxed()
    }
}

/// An event whose data is nested deeper than serde accepts, and which is a reply, is
/// replaced by an error reply to its request; any other event is kept as it is.
fn deep_check(sse: Sse, server: &str) -> Sse {
    let Some(data) = sse.data.as_deref() else {
        return sse;
    };
    // A quick count first (vectorized, no state): with no more openers than the limit
    // the event cannot nest past it, which is every ordinary event.
    let openers = data.bytes().filter(|b| matches!(b, b'[' | b'{')).count();
    if openers <= MAX_PARSE_DEPTH {
        return sse;
    }
    let mut scan = EnvelopeScan::new();
    scan.feed(data.as_bytes());
    if scan.max_depth() <= MAX_PARSE_DEPTH {
        return sse;
    }
    let reason = format!("nested deeper than {MAX_PARSE_DEPTH} levels");
    match scan.envelope().reply_id().and_then(|id| {
        framing::stand_in::<ServerJsonRpcMessage>(id, framing::unreadable_message(server, &reason))
    }) {
        Some(reply) => {
            tracing::warn!(server = %server, "a reply {reason} was replaced by an error");
            event(&reply)
        }
        None => sse,
    }
}

impl StreamableHttpClient for BoundedHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message(
                uri,
                message.clone(),
                session_id,
                auth_header,
                custom_headers,
            )
            .await;
        self.bound(&message, response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message.clone(),
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.bound(&message, response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.bound_stream(stream, None))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.bound_stream(stream, None))
    }
}
