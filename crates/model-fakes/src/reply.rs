//! What both fakes answer with: a [`Reply`] (a response and the status recorded for
//! it), JSON and SSE bodies, the `Retry-After`-style headers of a rate limit, and the
//! split of a text answer into streamed increments.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// An answer and the status the request log records for it (the response boxed: a
/// rejection travels as the error of a `Result`).
pub struct Reply {
    pub(crate) status: u16,
    pub(crate) response: Box<Response>,
}

impl Reply {
    /// The response to send.
    pub(crate) fn into_response(self) -> Response {
        *self.response
    }
}

impl Reply {
    /// A JSON answer with this status and `Content-Type`.
    pub(crate) fn json(status: u16, body: &Value, content_type: &'static str) -> Reply {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (code, body.to_string()).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        Reply {
            status,
            response: Box::new(response),
        }
    }

    /// A 200 `text/event-stream` answer writing each piece on its own, `delay` apart.
    pub(crate) fn sse(pieces: Vec<Bytes>, delay: Duration) -> Reply {
        let stream = futures::stream::unfold(
            (pieces.into_iter(), true),
            move |(mut it, first)| async move {
                let piece = it.next()?;
                if !first {
                    tokio::time::sleep(delay).await;
                }
                Some((Ok::<Bytes, Infallible>(piece), (it, false)))
            },
        );
        let mut response = Response::new(Body::from_stream(stream));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        Reply {
            status: 200,
            response: Box::new(response),
        }
    }

    /// Sets header `name` to `value` when there is one and it is a valid header value.
    pub(crate) fn with_header(mut self, name: &'static str, value: Option<&str>) -> Reply {
        if let Some(value) = value
            && let Ok(value) = HeaderValue::from_str(value)
        {
            self.response.headers_mut().insert(name, value);
        }
        self
    }
}

/// The SSE pieces of these raw strings, one write each.
pub(crate) fn raw_pieces(pieces: &[String]) -> Vec<Bytes> {
    pieces.iter().map(|p| Bytes::from(p.clone())).collect()
}

/// Splits text into up to three increments at char boundaries (words when possible).
pub(crate) fn split_text(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 3 {
        return vec![text.to_owned()];
    }
    let mut cuts = vec![chars.len() / 3, 2 * chars.len() / 3];
    for cut in &mut cuts {
        if let Some(space) = (*cut..chars.len()).find(|&k| chars[k] == ' ') {
            *cut = space;
        }
    }
    cuts.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts {
        if cut > start && cut < chars.len() {
            out.push(chars[start..cut].iter().collect());
            start = cut;
        }
    }
    out.push(chars[start..].iter().collect());
    out
}
