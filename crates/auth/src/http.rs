//! Every OAuth HTTP request (metadata, registration, token, Google) goes through the
//! URL guard's [`GuardedClient::send`]: the URL and every redirect hop are checked,
//! and connections go only to checked addresses. Bodies are capped (1 MiB) and every
//! request has a time limit (30 s by default; OpenID sign-in uses 10 s). Errors name the
//! URL without its query (it may hold secrets).

use std::time::Duration;

use base64::Engine as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use serde_json::Value;
use switchboard_net::{GuardedClient, LimitedBody, NetError, read_limited};

use crate::error::AuthError;

/// The time limit of one OAuth request.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response body read.
const MAX_BODY: usize = 1024 * 1024;

/// A URL for messages: without user info, query or fragment (`switchboard-net`'s rule).
pub(crate) use switchboard_net::redacted as shown;

/// A response, fully read.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as a JSON object, or why not (described, not quoted).
    pub fn json_object(&self) -> Result<serde_json::Map<String, Value>, String> {
        match serde_json::from_slice::<Value>(&self.body) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(format!("expected a JSON object, got {}", json_kind(&other))),
            Err(_) => Err(format!(
                "the body is not JSON ({}, {} bytes)",
                self.headers
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(|c| format!("content-type `{c}`"))
                    .unwrap_or_else(|| "no content-type".into()),
                self.body.len()
            )),
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Client authentication by HTTP Basic (RFC 6749 §2.3.1: both parts form-encoded).
pub(crate) fn basic_auth(client_id: &str, secret: &str) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let raw = format!("{}:{}", enc(client_id), enc(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// The guarded client, with OAuth's request shapes.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: GuardedClient,
}

impl Http {
    pub fn new(client: GuardedClient) -> Self {
        Self { client }
    }

    /// Checks a URL against the guard without sending anything (for URLs the browser
    /// will open).
    pub async fn check(&self, what: &'static str, url: &str) -> Result<(), AuthError> {
        self.client
            .preflight(url)
            .await
            .map(|_| ())
            .map_err(|b| AuthError::Blocked {
                what,
                url: shown(url),
                reason: b.to_string(),
            })
    }

    async fn send(
        &self,
        what: &'static str,
        url: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Reply, AuthError> {
        let request = request.timeout(REQUEST_TIMEOUT);
        let response = self.client.send(request).await.map_err(|e| match e {
            NetError::Blocked(b) => AuthError::Blocked {
                what,
                url: shown(url),
                reason: b.to_string(),
            },
            other => match other.blocked() {
                Some(b) => AuthError::Blocked {
                    what,
                    url: shown(url),
                    reason: b.to_string(),
                },
                None => AuthError::Http {
                    what,
                    url: shown(url),
                    detail: net_detail(&other),
                },
            },
        })?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = match read_limited(response, MAX_BODY)
            .await
            .map_err(|e| AuthError::Http {
                what,
                url: shown(url),
                detail: format!("reading the response failed: {}", e.without_url()),
            })? {
            LimitedBody::Whole(body) => body,
            LimitedBody::Cut(_) => {
                return Err(AuthError::InvalidResponse {
                    what,
                    url: shown(url),
                    reason: format!("the response is larger than {MAX_BODY} bytes"),
                });
            }
        };
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// GET `url` accepting JSON.
    pub async fn get(&self, what: &'static str, url: &str) -> Result<Reply, AuthError> {
        let req = self
            .client
            .get(url)
            .header(ACCEPT, "application/json")
            .header("MCP-Protocol-Version", "2025-11-25");
        self.send(what, url, req).await
    }

    /// POST a form (`application/x-www-form-urlencoded`), optionally with a Basic
    /// `Authorization`.
    pub async fn post_form(
        &self,
        what: &'static str,
        url: &str,
        form: &[(String, String)],
        basic: Option<String>,
    ) -> Result<Reply, AuthError> {
        let body = {
            let mut ser = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in form {
                ser.append_pair(k, v);
            }
            ser.finish()
        };
        let mut req = self
            .client
            .post(url)
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body);
        if let Some(b) = basic {
            req = req.header(AUTHORIZATION, b);
        }
        self.send(what, url, req).await
    }

    /// POST a JSON document.
    pub async fn post_json(
        &self,
        what: &'static str,
        url: &str,
        body: &Value,
    ) -> Result<Reply, AuthError> {
        let req = self
            .client
            .post(url)
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.send(what, url, req).await
    }

    /// POST an MCP `initialize` to read the server's answer (401 and its
    /// `WWW-Authenticate`, or not), with `bearer` if given.
    pub async fn probe_mcp(&self, url: &str, bearer: Option<&str>) -> Result<Reply, AuthError> {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "switchboard", "version": env!("CARGO_PKG_VERSION")}
            }
        });
        let mut req = self
            .client
            .post(url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(t) = bearer {
            req = req.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        // Only the status and headers matter; do not wait for a stream to end.
        let request = req.timeout(REQUEST_TIMEOUT);
        let what = "the MCP server";
        let response = self
            .client
            .send(request)
            .await
            .map_err(|e| match e.blocked() {
                Some(b) => AuthError::Blocked {
                    what,
                    url: shown(url),
                    reason: b.to_string(),
                },
                None => AuthError::Http {
                    what,
                    url: shown(url),
                    detail: net_detail(&e),
                },
            })?;
        Ok(Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: Vec::new(),
        })
    }
}

/// The innermost text of a request error ("Connection refused (os error 111)"), or
/// the whole chain when there is no source.
fn net_detail(e: &NetError) -> String {
    let mut last = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        last = Some(s.to_string());
        source = s.source();
    }
    last.unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_form_encodes_both_parts() {
        // RFC 6749 §2.3.1: "client:id" and "s p" are form-encoded before base64.
        let h = basic_auth("client:id", "s p");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.trim_start_matches("Basic "))
            .unwrap();
        assert_eq!(String::from_utf8(raw).unwrap(), "client%3Aid:s+p");
    }

    #[test]
    fn shown_urls_lose_secrets() {
        assert_eq!(
            shown("https://u:p@as.example/token?code=abc#x"),
            "https://as.example/token"
        );
    }
}
