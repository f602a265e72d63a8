//! Bearer tokens for HTTP servers: the [`TokenSource`] a connection asks before each
//! request, and the Streamable HTTP client wrapper that sends the token and reacts to
//! the server's verdict (401: refresh once and retry; 403 `insufficient_scope`: ask
//! for a wider scope and retry, at most [`MAX_AUTHORIZATIONS`] authorizations in all
//! per request, the token it started with included).
//!
//! The source is asked on every request, so a token refreshed in the background (or
//! by another process) is picked up without reconnecting. Nothing here logs a token.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

/// What a token source answers: a bearer token, none (send the request without one),
/// or an error message fit for the user (it never contains a token).
pub type TokenFuture = BoxFuture<'static, Result<Option<String>, String>>;

/// Authorization state of a server, as the token source knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenStatus {
    /// A usable token is stored (or can be obtained without the user).
    Authenticated,
    /// The stored token has expired and cannot be refreshed.
    Expired,
    /// There is no token: the user has to log in.
    NeedsLogin,
}

/// Where HTTP connections get their bearer tokens (OAuth). Implementations must be
/// cheap to call per request (cache) and must never put a token in an error.
pub trait TokenSource: Send + Sync {
    /// The token to send to `server` at `url`, refreshed first when it is about to
    /// expire; `None` to send no `Authorization` header.
    fn bearer(&self, server: &str, url: &str) -> TokenFuture;

    /// The server answered 401 (with this `WWW-Authenticate`, if any) although the
    /// request carried `rejected` (or no token). Return a new token to retry once
    /// with, or `None` to give up.
    fn unauthorized(
        &self,
        server: &str,
        url: &str,
        rejected: Option<String>,
        www_authenticate: Option<String>,
    ) -> TokenFuture;

    /// The server answered 403 `insufficient_scope`: return a token with the wider
    /// scope (step-up authorization) to retry with, or `None` to give up. The source
    /// bounds the number of attempts. Default: give up.
    fn insufficient_scope(&self, server: &str, url: &str, www_authenticate: String) -> TokenFuture {
        let _ = (server, url, www_authenticate);
        Box::pin(async { Ok(None) })
    }

    /// The authorization state of `server` (for status displays), `None` when the
    /// server does not use tokens from this source.
    fn status(&self, server: &str, url: &str) -> Option<TokenStatus> {
        let _ = (server, url);
        None
    }
}

/// How many authorizations one request (one user action) may cost in total while the
/// server keeps answering 403 `insufficient_scope`. The token the request started with
/// (from the login that started it, or saved) counts as the first, so at most
/// `MAX_AUTHORIZATIONS - 1` step-ups follow; then the request fails with an error naming
/// the server and the scope. The token source bounds step-ups too.
pub(crate) const MAX_AUTHORIZATIONS: usize = 3;

/// The value of `param` in a `WWW-Authenticate: Bearer ...` header, control
/// characters dropped and cut to a printable length (it is the server's text).
fn challenge_param(header: &str, param: &str) -> Option<String> {
    let lower = header.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(param) {
        let start = from + at;
        from = start + param.len();
        let before = lower[..start].trim_end();
        let boundary = before.is_empty() || before.ends_with(',') || before.ends_with("bearer");
        let rest = lower[from..].trim_start();
        if !boundary || !rest.starts_with('=') {
            continue;
        }
        let value_at = header.len() - rest.len() + 1;
        let value = header[value_at..].trim_start();
        let value = match value.strip_prefix('"') {
            Some(v) => v.split('"').next().unwrap_or(""),
            None => value.split([',', ' ']).next().unwrap_or(""),
        };
        let clean: String = value
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        return Some(clean);
    }
    None
}

/// The error when step-up gave up: the server, the scope it asks for, what to do.
fn scope_exhausted(server: &str, www_authenticate: &str) -> String {
    let server: String = server.chars().filter(|c| !c.is_control()).collect();
    match challenge_param(www_authenticate, "scope").filter(|s| !s.is_empty()) {
        Some(scope) => format!(
            "`{server}` still answers 403 insufficient_scope (it asks for scope \"{scope}\") after {MAX_AUTHORIZATIONS} authorizations for this request; giving up. Your account may not be allowed that scope: ask the server's administrator, or log in again with `switchboard mcp login {server} --scope \"{scope}\"`"
        ),
        None => format!(
            "`{server}` still answers 403 insufficient_scope (it names no scope) after {MAX_AUTHORIZATIONS} authorizations for this request; giving up. Ask the server's administrator which scope the request needs"
        ),
    }
}

/// The Streamable HTTP client every connection uses: plain reqwest without a token
/// source; with one, the token is fetched per request and 401/403 are acted on.
#[derive(Clone)]
pub(crate) struct TokenHttpClient {
    inner: reqwest::Client,
    auth: Option<TokenAuth>,
    /// The last error the token source gave (shown instead of a generic failure).
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

#[derive(Clone)]
struct TokenAuth {
    source: Arc<dyn TokenSource>,
    server: Arc<str>,
    url: Arc<str>,
}

fn source_error(message: String) -> StreamableHttpError<reqwest::Error> {
    StreamableHttpError::Io(std::io::Error::other(message))
}

impl TokenHttpClient {
    /// `auth` is used only when `headers` has no `Authorization` of its own.
    pub(crate) fn new(
        inner: reqwest::Client,
        source: Option<Arc<dyn TokenSource>>,
        server: &str,
        url: &str,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) -> Self {
        let own_header = headers.contains_key(&http::header::AUTHORIZATION);
        let auth = source.filter(|_| !own_header).map(|source| TokenAuth {
            source,
            server: Arc::from(server),
            url: Arc::from(url),
        });
        Self {
            inner,
            auth,
            failure: Arc::default(),
        }
    }

    /// The token source's last error, if any (taken).
    pub(crate) fn take_failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|mut f| f.take())
    }

    fn fail(&self, message: String) -> StreamableHttpError<reqwest::Error> {
        if let Ok(mut f) = self.failure.lock() {
            *f = Some(message.clone());
        }
        source_error(message)
    }

    /// Runs `call` with the current token; on 401 asks the source once for a new
    /// token and retries; on 403 `insufficient_scope` asks for a step-up and retries.
    async fn with_token<T, F, Fut>(
        &self,
        given: Option<String>,
        call: F,
    ) -> Result<T, StreamableHttpError<reqwest::Error>>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<reqwest::Error>>>,
    {
        let Some(auth) = &self.auth else {
            return call(given).await;
        };
        let mut token = match given {
            Some(t) => Some(t),
            None => auth
                .source
                .bearer(&auth.server, &auth.url)
                .await
                .map_err(|m| self.fail(m))?,
        };
        let mut refreshed = false;
        let mut step_ups = 0usize;
        loop {
            match call(token.clone()).await {
                Err(StreamableHttpError::AuthRequired(challenge)) if !refreshed => {
                    refreshed = true;
                    let fresh = auth
                        .source
                        .unauthorized(
                            &auth.server,
                            &auth.url,
                            token.clone(),
                            Some(challenge.www_authenticate_header.clone()),
                        )
                        .await;
                    match fresh {
                        Ok(Some(t)) if Some(&t) != token.as_ref() => token = Some(t),
                        Ok(_) => return Err(StreamableHttpError::AuthRequired(challenge)),
                        Err(message) => return Err(self.fail(message)),
                    }
                }
                Err(StreamableHttpError::InsufficientScope(e)) => {
                    // The token this request started with was authorization 1.
                    if step_ups + 1 >= MAX_AUTHORIZATIONS {
                        return Err(
                            self.fail(scope_exhausted(&auth.server, &e.www_authenticate_header))
                        );
                    }
                    step_ups += 1;
                    let wider = auth
                        .source
                        .insufficient_scope(
                            &auth.server,
                            &auth.url,
                            e.www_authenticate_header.clone(),
                        )
                        .await;
                    match wider {
                        Ok(Some(t)) => token = Some(t),
                        Ok(None) => return Err(StreamableHttpError::InsufficientScope(e)),
                        Err(message) => return Err(self.fail(message)),
                    }
                }
                other => return other,
            }
        }
    }
}

impl StreamableHttpClient for TokenHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.with_token(auth_header, |token| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
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
        self.with_token(auth_header, |token| {
            self.inner.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.with_token(auth_header, |token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.with_token(auth_header, |token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.with_token(auth_header, |token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_from_the_challenge() {
        let h =
            r#"Bearer error="insufficient_scope", scope="mcp mcp:admin", resource_metadata="x""#;
        assert_eq!(
            challenge_param(h, "scope").as_deref(),
            Some("mcp mcp:admin")
        );
        assert_eq!(
            challenge_param("Bearer scope=a, error=x", "scope").as_deref(),
            Some("a")
        );
        assert_eq!(challenge_param(r#"Bearer xscope="no""#, "scope"), None);
        assert_eq!(
            challenge_param("Bearer scope=\"a\u{1b}[31mb\"", "scope").as_deref(),
            Some("a[31mb")
        );
        let m = scope_exhausted("srv", h);
        assert!(
            m.contains("`srv`") && m.contains("\"mcp mcp:admin\""),
            "{m}"
        );
        assert!(m.contains("switchboard mcp login srv --scope"), "{m}");
    }
}
